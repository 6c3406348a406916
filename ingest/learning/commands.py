"""Which shell commands are *checks*, and when two of them run "the same" check.

A lesson is learned when a check fails, the agent edits files, and the same check then passes
(:mod:`ingest.learning.episodes`). An agent rarely types a command twice alike: ``cd app && pytest
tests/ 2>&1 | tail -30`` and ``python -m pytest tests/test_db.py::test_pool -q`` run the same
tests. A command line becomes a :class:`CommandKey`: the checks it runs, each a
:class:`Check`, with

- the shell's plumbing removed: ``cd``/``export``/``source``/``echo``/``sleep`` steps, variable
  assignments (kept aside: ``PYTEST_ADDOPTS``, ``GOFLAGS`` and a switch such as
  ``SKIP_SLOW=1`` change what runs), redirections (``2>&1``, ``> log``), output filters after
  a pipe (``| tail``, ``| grep``, ``| tee``), fallbacks after ``||`` (``|| true``), and
  wrappers (``sudo``, ``env``, ``time``, ``timeout N``, ``nice``, ``uv run``, ``poetry run``,
  ``npx``, ``python -m``);
- options that change only what is printed (``-q``, ``-v``, ``--tb=short``, ``--color``,
  ``--quiet``) left out;
- what it checks, selects and leaves out read per runner (:mod:`ingest.learning.runner_args`, the
  :class:`Check` of :mod:`ingest.learning.check_targets`); anything else is compared as its
  normalised text (``python3 -c "…"``, ``./run.sh``).

Whether the command line's exit status is its checks' own is kept too
(:attr:`CommandKey.sure`): in ``pytest || true``, ``pytest; exit 0``, ``pytest | tail`` (without
``set -o pipefail``) or ``pytest &`` it is another command's, so exit 0 says nothing. A command
line is read up to :data:`MAX_COMMAND` characters and :data:`MAX_CHECKS` checks.

Commands that inspect, navigate, install or talk to a remote (``ls``, ``cat``, ``grep``,
``git``, ``gh``, ``curl``, ``pip install``, ``apt-get``, ...) are not checks: their failing
and passing says nothing about the code the agent edits, so they never start or end an
episode. ``sed -i``, ``perl -pi``, ``patch``, ``git apply`` and ``cat > FILE`` are edits
(:func:`edited_paths`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from ingest.learning.check_targets import Check
from ingest.learning.runner_args import make_check

# the first word of a step that is plumbing, never the check itself
PLUMBING = frozenset(
    "cd pushd popd export set unset source . alias echo printf true : sleep clear pwd exit "
    "wait trap ulimit umask shopt hash".split()
)
# programs whose outcome says nothing about the code: inspection, navigation, files, version
# control, remotes, package installs, editors, process control
NOT_CHECKS = frozenset(
    "ls ll dir cat head tail less more grep egrep fgrep rg ag ack find fd wc which whereis "
    "type file stat du df ps top htop env printenv tree diff cmp md5sum sha256sum git gh hg "
    "svn mkdir rm rmdir cp mv touch chmod chown chgrp ln kill pkill killall curl wget ssh scp "
    "rsync ping nc apt apt-get aptitude dpkg yum dnf pacman brew port snap conda mamba pipx "
    "rustup gem open xdg-open code vim vi nano emacs man history date whoami id uname hostname "
    "tar zip unzip gzip gunzip xz jq yq sort uniq cut tr awk sed tee column basename dirname "
    "realpath readlink mktemp ssh-keygen docker-compose-logs systemctl service journalctl "
    "lsof netstat ss free uptime nproc lscpu setcap sudoedit".split()
)
# after a pipe: commands that only filter or store the output of the check before them
FILTERS = frozenset("tail head grep egrep fgrep rg less more tee sort uniq wc cut tr awk sed "
                    "column cat jq yq nl fold findstr select-string out-null".split())  # fmt: skip
# installs of a package manager that is also a runner (``pip install``, ``npm ci``)
INSTALLS = {
    "pip": {"install", "uninstall", "download", "freeze", "list", "show"},
    "pip3": {"install", "uninstall", "download", "freeze", "list", "show"},
    "npm": {"install", "i", "ci", "add", "uninstall", "remove", "update", "ls", "view", "init"},
    "yarn": {"install", "add", "remove", "upgrade", "init", "info"},
    "pnpm": {"install", "i", "add", "remove", "update", "init"},
    "bun": {"install", "add", "remove", "init"},
    "cargo": {"install", "add", "remove", "new", "init", "search", "update", "fetch", "tree"},
    "go": {"get", "install", "mod", "env", "version", "doc", "list"},
    "uv": {"pip", "add", "remove", "sync", "lock", "venv", "init", "tool", "python"},
    "poetry": {"install", "add", "remove", "lock", "update", "init", "show", "env"},
    "docker": {"pull", "push", "ps", "images", "logs", "login", "rm", "rmi", "stop", "kill"},
    "python": {"--version", "-V"},
}
# wrappers: the command they run follows (after their own options and arguments)
_WRAPPERS = {"sudo": 0, "time": 0, "command": 0, "exec": 0, "nohup": 0, "xvfb-run": 0,
             "nice": 0, "stdbuf": 0, "timeout": 1, "npx": 0, "bunx": 0, "pnpx": 0}  # fmt: skip
_RUNS = {("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("pdm", "run"), ("hatch", "run"),
         ("rye", "run"), ("pnpm", "exec"), ("yarn", "exec"), ("bundle", "exec"),
         ("conda", "run")}  # fmt: skip
_OPERATORS = frozenset({"&&", "||", ";", "|", "&", "\n", "|&", ";;", "(", ")"})
_REDIRECTS = frozenset({">", ">>", "<", ">&", "<&", "&>", "&>>", ">|", "<<", "<<<", "<>"})
_EDITORS = {"sed": "-i", "perl": "-i", "patch": "", "ed": ""}
MAX_COMMAND = 20_000  # characters of a command line read (a longer one: its start)
MAX_CHECKS = 32  # checks read from one command line


@dataclass(frozen=True)
class CommandKey:
    """The checks a command line runs (in order); ``text``: its normalised form."""

    checks: tuple[Check, ...]
    text: str
    edits: tuple[str, ...] = field(default=(), compare=False)  # files the command writes
    # its exit status is its checks' own: no check is followed by `||`, `;`, `&` or a pipe
    # (without `set -o pipefail`), so exit 0 means every check passed
    sure: bool = field(default=True, compare=False)

    @property
    def label(self) -> str:
        return " && ".join(c.label for c in self.checks)


def tokens(command: str) -> list[str]:
    """Shell words and operators (quotes removed; an unbalanced quote: split on blanks)."""
    command = command[:MAX_COMMAND]
    lex = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()\n")
    lex.whitespace = " \t\r"
    lex.whitespace_split = True
    lex.commenters = ""
    try:
        return list(lex)
    except ValueError:
        return command.replace("\n", " ; ").split()


def steps(command: str) -> list[tuple[str, list[str]]]:
    """(the operator before it, its words) for every simple command, redirections removed
    (a ``cat > FILE`` keeps its target as ``>FILE``, an edit)."""
    out: list[tuple[str, list[str]]] = []
    words: list[str] = []
    op = ""
    toks = tokens(command)
    i = 0
    while i < len(toks):
        t = toks[i]
        if t in _REDIRECTS:
            if words and words[-1].isdigit() and len(words[-1]) == 1:
                words.pop()  # the fd of 2>&1, 2> err.log
            target = toks[i + 1] if i + 1 < len(toks) else ""
            if t in (">", ">>", ">|") and target and not target.startswith("/dev/"):
                words.append(">" + target)
            i += 2
            continue
        if t in _OPERATORS:
            if words:
                out.append((op, words))
            words, op = [], t
        else:
            words.append(t)
        i += 1
    if words:
        out.append((op, words))
    elif op in ("&", "|", "|&", "||", "&&"):  # a command ending in one: `pytest &`
        out.append((op, []))
    return out


def _unwrap(words: list[str]) -> tuple[list[str], dict[str, str]]:
    """The command under assignments and wrappers (``FOO=1 timeout 60 uv run pytest`` ->
    ``pytest``; ``python -m X`` -> ``X``), and the variables the assignments set."""
    w = list(words)
    env: dict[str, str] = {}
    for _ in range(8):
        while (
            w
            and "=" in w[0]
            and not w[0].startswith(("-", "="))
            and w[0].split("=")[0].isidentifier()
        ):
            name, _, value = w[0].partition("=")
            env[name] = value
            w = w[1:]
        if not w:
            return w, env
        prog = program(w[0])
        if prog == "env":
            w = [x for x in w[1:] if not x.startswith("-")]
            continue
        if prog in _WRAPPERS:
            rest = w[1:]
            while rest and rest[0].startswith("-"):  # the wrapper's options (nice -n 10: both)
                rest = rest[2:] if rest[0] in ("-n", "-u", "-s", "-k", "-oL", "-o") else rest[1:]
            w = rest[_WRAPPERS[prog] :]
            continue
        if len(w) > 1 and (prog, w[1]) in _RUNS:
            rest = w[2:]
            while rest and rest[0].startswith("-"):
                rest = rest[2:] if rest[0] in ("--with", "-p", "--python", "-n") else rest[1:]
            w = rest
            continue
        if prog.startswith("python") and len(w) > 2 and w[1] == "-m":
            w = [w[2], *w[3:]]
            continue
        if prog == "coverage" and len(w) > 3 and w[1] == "run" and w[2] == "-m":
            w = [w[3], *w[4:]]
            continue
        break
    return w, env


def program(word: str) -> str:
    """A command's program, without its folder or a version suffix (``python3.12`` ->
    ``python``, ``./gradlew`` -> ``gradlew``)."""
    name = word.replace("\\", "/").rsplit("/", 1)[-1].lower()
    name = name.removesuffix(".exe")
    for base in ("python", "pip"):
        if name.startswith(base) and name[len(base) :].replace(".", "").isdigit():
            return base
    return name


def _is_check(words: list[str]) -> bool:
    if not words:
        return False
    prog = program(words[0])
    if prog in PLUMBING or prog in NOT_CHECKS or prog.startswith(">"):
        return False
    sub = words[1] if len(words) > 1 else ""
    return sub not in INSTALLS.get(prog, ())


def _edit_targets(words: list[str]) -> list[str]:
    """Files a step writes: ``sed -i … FILE``, ``perl -pi -e … FILE``, ``patch FILE``,
    ``cat > FILE`` / ``echo … > FILE`` / ``tee FILE`` (a heredoc writing a file)."""
    prog = program(words[0]) if words else ""
    out: list[str] = []
    if prog in ("cat", "echo", "printf", "tee"):  # a command's output saved to a log is no edit
        out += [w[1:] for w in words if w.startswith(">") and len(w) > 1]
        out += [w for w in words[1:] if prog == "tee" and not w.startswith(("-", ">"))]
        return out
    flag = _EDITORS.get(prog)
    if flag is not None and (not flag or any(w.startswith(flag) or w.startswith("-pi")
                                             for w in words[1:])):  # fmt: skip
        files = [w for w in words[1:] if not w.startswith("-") and "." in w.rsplit("/", 1)[-1]]
        out += files[-1:] if prog in ("sed", "perl") else files
    if prog == "git" and len(words) > 2 and words[1] in ("apply", "checkout", "restore"):
        out += [w for w in words[2:] if not w.startswith("-") and "." in w.rsplit("/", 1)[-1]]
    return [p for p in out if p and not p.startswith("/dev/")]


def command_key(command: str, cwd: str | None = None) -> CommandKey:
    """The checks ``command`` runs (none: it is not a check), the files it edits, and whether
    its exit status is its checks' own."""
    checks: list[Check] = []
    edits: list[str] = []
    texts: list[str] = []
    skip_fallback = False
    piped = False
    pipefail = False
    sure = True
    parts = steps(command)
    breaks = [False] * (len(parts) + 1)  # breaks[i]: a step from i on joined but by `&&`
    for i in range(len(parts) - 1, -1, -1):
        breaks[i] = breaks[i + 1] or parts[i][0] in ("||", ";", "\n", "&")
    for i, (op, words) in enumerate(parts):
        if op == "||":
            skip_fallback = True  # `cmd || true`, `|| echo failed`: never the check
        elif op in ("&&", ";", "\n", "&", "(", ")", ""):
            skip_fallback = False
        if words[:1] == ["set"] and "pipefail" in words:
            pipefail = True
        if skip_fallback:
            continue
        edits += _edit_targets(words)
        piped = op in ("|", "|&")
        w, env = _unwrap([x for x in words if not x.startswith(">")])
        if not w or (piped and program(w[0]) in FILTERS) or not _is_check(w):
            continue
        if len(checks) >= MAX_CHECKS:
            sure = False  # not read: its status is unknown
            break
        check = make_check(program(w[0]), w[1:], cwd, env)
        if check is not None:
            checks.append(check)
            texts.append(check.text)
            sure = sure and _status_is_its_own(parts, i, pipefail, breaks)
    return CommandKey(tuple(checks), " && ".join(texts), tuple(dict.fromkeys(edits)), sure)


def _status_is_its_own(parts: list[tuple[str, list[str]]], i: int, pipefail: bool,
                       breaks: list[bool]) -> bool:  # fmt: skip
    """Whether the command line's exit status fails when step ``i`` fails: no pipe after it
    (but under ``pipefail``), and nothing later joined otherwise than by ``&&`` (``A && B |
    C`` fails when ``A`` does; ``A; B``, ``A || B``, ``A & B`` take ``B``'s status)."""
    j = i + 1
    if not pipefail and j < len(parts) and parts[j][0] in ("|", "|&"):
        return False
    return not breaks[min(j, len(parts))]


def related(failed: CommandKey, passed: CommandKey, failing_tests: tuple[str, ...] = (),
            ran: str | None = None) -> bool:  # fmt: skip
    """Whether ``passed`` re-runs what ``failed`` checked: every check of the failure is the
    same as, narrower than (on the failing tests) or covered by a check of the pass.
    ``ran``: the runner the passing command's output shows (a task runner's recipe, such as
    ``just check`` running pytest): that pass then covers the runner's every test."""
    if not failed.checks or not passed.checks:
        return False
    return all(
        any(c.reruns(f, failing_tests) for c in passed.checks)
        or (
            ran is not None
            and f.tool == ran
            and any(
                c.wrapper and not c.targets and not c.marks and not c.excludes
                for c in passed.checks
            )
        )  # fmt: skip
        for f in failed.checks
    )
