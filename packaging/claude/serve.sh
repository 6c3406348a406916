#!/bin/sh
# The MCP server of the pattern-memory Claude Code plugin (.claude-plugin/plugin.json).
#
# Makes sure the plugin's Python environment exists (install.sh: on the first start, and again
# when the project's pyproject.toml changed), then runs `pattern-memory serve` from this plugin's
# own source (PYTHONPATH=the plugin root: the environment provides the dependencies). No prior
# install is needed: uv (or python3 with venv and pip) and the network on the first start.
set -u
case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
root=$(cd "$here/../.." && pwd) || exit 1
data=${CLAUDE_PLUGIN_DATA:-$root/.plugin-env}
if ! cmp -s "$root/pyproject.toml" "$data/pyproject.toml" || [ ! -x "$data/venv/bin/python" ]; then
    mkdir -p "$data" || exit 1
    echo "pattern-memory: preparing its Python environment in $data/venv (log: $data/install.log)" >&2
    # its own process, so an install the client stopped waiting for still completes
    nohup sh "$here/install.sh" </dev/null >>"$data/install.log" 2>&1 &
    if ! wait $!; then
        echo "pattern-memory: the install failed; see $data/install.log" >&2
        exit 1
    fi
fi
PYTHONPATH=$root${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH
exec "$data/venv/bin/python" -P -m server.cli serve "$@"
