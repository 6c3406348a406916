#!/bin/sh
# Creates or refreshes the pattern-memory plugin's Python environment, ${CLAUDE_PLUGIN_DATA}/venv,
# with the project's dependencies: uv when it is on PATH (it fetches a Python >= 3.11 if
# needed), else python3's venv and pip. One install at a time (a lock folder); the
# pyproject.toml it installed is kept beside the environment, so serve.sh knows when to run it
# again. Run by serve.sh; safe to run by hand.
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
waited=0
until mkdir "$lock" 2>/dev/null; do
    waited=$((waited + 1))
    if [ "$waited" -ge 900 ]; then # an installer that died holding it
        echo "removing the stale lock $lock"
        rmdir "$lock" 2>/dev/null
        waited=0
    fi
    sleep 1
done
trap 'rmdir "$lock" 2>/dev/null' EXIT
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
