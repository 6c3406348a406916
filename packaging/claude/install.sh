#!/bin/sh
# Creates or refreshes the pattern-memory plugin's Python environment, ${CLAUDE_PLUGIN_DATA}/venv,
# with the project's dependencies: uv when it is on PATH (it fetches a Python >= 3.11 if
# needed), else python3's venv and pip. The pyproject.toml it installed is kept beside the
# environment, so serve.sh knows when to run it again. Run by serve.sh; safe to run by hand.
#
# One install at a time: the lock folder install.lock, whose file `owner` names the installer
# holding it (its pid, the boot id and its start time: Linux's /proc, elsewhere ps's start time
# when ps is there). A waiter takes the lock over only once that installer no longer runs (it
# was killed, or the machine rebooted: another boot, or the pid now another process's), never
# because it waited long; so a stale lock delays an MCP server start by a second at most. A
# lock naming no installer (one killed before it wrote its name, or an older install.sh's) is
# taken over once it has named none for OWNERLESS checks, a second apart.
set -u
case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
root=$(cd "$here/../.." && pwd) || exit 1
data=${CLAUDE_PLUGIN_DATA:-$root/.plugin-env}
venv=$data/venv
mkdir -p "$data" || exit 1
lock=$data/install.lock
OWNERLESS=3

boot= # this boot's id (Linux): a pid written in another boot names nobody now
if [ -r /proc/sys/kernel/random/boot_id ]; then
    read -r boot 2>/dev/null </proc/sys/kernel/random/boot_id || boot=
fi

started() { # the start time of process $1 (nothing when unknown)
    st=
    if [ -r "/proc/$1/stat" ]; then # the 22nd field, after the name, which may hold ") "
        read -r st 2>/dev/null <"/proc/$1/stat" || st=
        set -- ${st##*) }
        st=
        [ $# -ge 20 ] && shift 19 && st=$1
    elif command -v ps >/dev/null 2>&1; then
        set -- $(ps -o lstart= -p "$1" 2>/dev/null)
        st=$*
    fi
    echo "$st"
}

runs() { # whether the installer with pid $1, boot id $2 and start time $3 still runs
    case $1 in '' | 0* | *[!0-9]*) return 1 ;; esac
    if [ -n "$2" ] && [ -n "$boot" ] && [ "$2" != "$boot" ]; then
        return 1 # named before a reboot
    fi
    kill -0 "$1" 2>/dev/null || [ -d "/proc/$1" ] || return 1
    [ -n "$3" ] || return 0
    now=$(started "$1")
    [ -z "$now" ] || [ "$now" = "$3" ] # another start time: the pid is another process's now
}

owner() { # o_pid, o_boot, o_start: what the lock file $1 says
    o_pid= o_boot= o_start=
    { read -r o_pid; read -r o_boot; read -r o_start; } 2>/dev/null <"$1"
}

take_over() { # the lock of an installer that no longer runs (o_pid): claimed first by moving
    # its owner file aside (one waiter only gets it), and put back if the lock was taken again
    # meanwhile by a live installer
    mv "$lock/owner" "$lock/dead.$$" 2>/dev/null || return 0
    owner "$lock/dead.$$"
    if runs "$o_pid" "$o_boot" "$o_start"; then
        mv "$lock/dead.$$" "$lock/owner" 2>/dev/null
        return 0
    fi
    echo "$(date) taking over the lock of installer $o_pid, which no longer runs"
    rm -f "$lock/dead.$$"
    rmdir "$lock" 2>/dev/null
}

clear_ownerless() { # a lock that named no installer OWNERLESS times running: what it holds is
    # an empty or unreadable owner file, or the aside copies of waiters killed while taking over
    for f in "$lock"/dead.*; do
        [ -e "$f" ] && ! runs "${f##*.}" "" "" && rm -f "$f"
    done
    if [ -e "$lock/owner" ]; then
        owner "$lock/owner"
        case $o_pid in '' | 0* | *[!0-9]*) rm -f "$lock/owner" ;; esac
    fi
    if rmdir "$lock" 2>/dev/null; then
        echo "$(date) removed the lock $lock, which named no installer"
    elif [ -f "$lock" ]; then
        rm -f "$lock" # a file where the lock goes: no installer's
    fi
}

unnamed=0 failed=0 said=
while :; do
    if mkdir "$lock" 2>/dev/null; then
        # the name is written only where none is (a waiter may have cleared this lock as
        # unnamed meanwhile, and another taken it): else it is not ours, and we wait again
        if (set -C && printf '%s\n%s\n%s\n' "$$" "$boot" "$(started $$)" >"$lock/owner") 2>/dev/null; then
            break
        fi
    elif [ ! -e "$lock" ]; then
        failed=$((failed + 1)) # mkdir failed, and not because of a lock
        if [ "$failed" -gt "$OWNERLESS" ]; then
            echo "$(date) cannot create the lock $lock"
            exit 1
        fi
        continue
    fi
    owner "$lock/owner"
    case $o_pid in
    '' | 0* | *[!0-9]*) # no installer named (yet: one writes its name just after mkdir)
        unnamed=$((unnamed + 1))
        if [ "$unnamed" -ge "$OWNERLESS" ]; then
            clear_ownerless
            unnamed=0
            continue
        fi
        ;;
    *)
        unnamed=0
        if ! runs "$o_pid" "$o_boot" "$o_start"; then
            take_over
            continue
        fi
        if [ "$said" != "$o_pid" ]; then
            echo "$(date) waiting for installer $o_pid to finish"
            said=$o_pid
        fi
        ;;
    esac
    sleep 1
done
trap 'rm -f "$lock/owner"; rmdir "$lock" 2>/dev/null' EXIT
trap 'exit 1' INT TERM HUP
if cmp -s "$root/pyproject.toml" "$data/pyproject.toml" && [ -x "$venv/bin/python" ]; then
    exit 0 # another start installed it meanwhile
fi
rm -f "$data/pyproject.toml"
echo "$(date) installing $root into $venv"
if command -v uv >/dev/null 2>&1; then
    { [ -x "$venv/bin/python" ] || uv venv --python ">=3.11" "$venv"; } &&
        uv pip install --python "$venv/bin/python" "$root"
elif command -v python3 >/dev/null 2>&1; then
    { [ -x "$venv/bin/python" ] || python3 -m venv "$venv"; } &&
        "$venv/bin/python" -m pip install --disable-pip-version-check "$root"
else
    echo "neither uv nor python3 is on PATH: install uv (https://docs.astral.sh/uv/) or Python 3.11+"
    false
fi || {
    echo "$(date) install failed"
    exit 1
}
cp "$root/pyproject.toml" "$data/pyproject.toml"
echo "$(date) installed"
