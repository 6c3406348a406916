#!/bin/sh
# The pattern-memory Codex plugin's one entry point: `sh run.sh serve` (the MCP server,
# .mcp.json) and `sh run.sh hook --client codex EVENT` (hooks/hooks.json).
#
# Codex installs a plugin by copying its folder alone into
# $CODEX_HOME/plugins/cache/<marketplace>/<plugin>/<version>/ (codex-rs/core-plugins/src/store.rs),
# so the project itself is found in the repository the marketplace came from: the clone Codex
# keeps of a git marketplace, $CODEX_HOME/.tmp/marketplaces/<marketplace>
# (codex-rs/core-plugins/src/installed_marketplaces.rs), or a local marketplace's folder, the
# `source` of [marketplaces.<marketplace>] in $CODEX_HOME/config.toml; $PATTERN_MEMORY_CHECKOUT,
# when set, wins. From there the Claude Code plugin's launchers do the work: serve.sh creates the
# Python environment on the first start and serves; hook.sh runs the hook client, and prints
# nothing and exits 0 until that environment exists. The environment lives in the plugin's data
# folder, $CODEX_HOME/plugins/data/<plugin>-<marketplace> (Codex's PLUGIN_DATA for hooks).
set -u
case $0 in
*/*) here=$(cd "${0%/*}" && pwd) ;;
*) here=$(pwd) ;;
esac
version_dir=${here%/*}              # …/cache/<marketplace>/<plugin>
market_dir=${version_dir%/*}        # …/cache/<marketplace>
market=${market_dir##*/}
codex_home=${CODEX_HOME:-${market_dir%/plugins/cache/*}}
data=${PLUGIN_DATA:-$codex_home/plugins/data/pattern-memory-$market}

local_source() { # the `source` of [marketplaces.<market>] in config.toml, if any
    [ -f "$codex_home/config.toml" ] || return 0
    awk -v t="[marketplaces.$market]" -v q="[marketplaces.\"$market\"]" '
        /^[ \t]*\[/ { s = $0; sub(/[ \t]*#.*$/, "", s); gsub(/[ \t]/, "", s); on = (s == t || s == q); next }
        on && /^[ \t]*source[ \t]*=/ { v = $0; sub(/^[^=]*=[ \t]*"/, "", v); sub(/".*$/, "", v); print v; exit }
    ' "$codex_home/config.toml"
}

checkout=
for dir in "${PATTERN_MEMORY_CHECKOUT:-}" "$codex_home/.tmp/marketplaces/$market" "$(local_source)"; do
    if [ -n "$dir" ] && [ -f "$dir/server/hooks/hookclient.py" ]; then
        checkout=$dir
        break
    fi
done

what=${1:-}
[ $# -gt 0 ] && shift
CLAUDE_PLUGIN_DATA=$data
export CLAUDE_PLUGIN_DATA
case $what in
hook)
    [ -n "$checkout" ] && sh "$checkout/packaging/claude/hook.sh" "$@"
    exit 0 # a hook never breaks Codex
    ;;
serve)
    if [ -z "$checkout" ]; then
        echo "pattern-memory: the repository of this plugin was not found; set PATTERN_MEMORY_CHECKOUT" >&2
        exit 1
    fi
    exec sh "$checkout/packaging/claude/serve.sh" "$@"
    ;;
*)
    echo "usage: sh run.sh serve | hook --client codex EVENT" >&2
    exit 2
    ;;
esac
