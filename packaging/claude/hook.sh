#!/bin/sh
# A Claude Code hook of the pattern-memory plugin: `sh hook.sh EVENT` (see hooks.json).
#
# Runs the hook client (server/hooks/hookclient.py, standard library only, with `python -S`)
# with the plugin's Python environment, which serve.sh creates on the MCP server's first start
# in ${CLAUDE_PLUGIN_DATA}/venv (the plugin's persistent data folder, documented at
# https://code.claude.com/docs/en/plugins-reference, "Environment variables"; a folder inside the
# plugin when the variable is not set). Until that environment exists (a cold first start, no
# Python, nothing installed) this prints nothing and exits 0 at once: a hook never breaks or
# delays Claude Code. Shell built-ins only until the hook client runs.
case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
root=$here/../..
py=${CLAUDE_PLUGIN_DATA:-$root/.plugin-env}/venv/bin/python
if [ -x "$py" ]; then
    "$py" -S "$root/server/hooks/hookclient.py" "$@" 2>/dev/null
fi
exit 0
