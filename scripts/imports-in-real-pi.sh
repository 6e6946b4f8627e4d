#!/usr/bin/env bash
# Imports every committed fixture of the four agents (Claude Code, Codex, Gemini CLI, OpenCode)
# with our `pi sessions import`, loads each resulting session with real Pi 1.6.0's
# SessionManager (../shared/realpi/oracle.mjs) and compares tree, branch, context and LLM
# messages with our `pi sessions inspect --json` (../shared/tools/check-conformance).
#
# usage: scripts/imports-in-real-pi.sh [REALPI_DIR] [PI_BINARY]
#   REALPI_DIR: a copy of ../shared/realpi with real Pi installed (`./reproduce.sh install`),
#   default /work/realpi.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
realpi="${1:-/work/realpi}"
pi="${2:-$root/target/release/pi}"
check="$root/../shared/tools/check-conformance"
[ -x "$realpi/bin/node" ] || { echo "no real Pi at $realpi (run its reproduce.sh install)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/agent" "$work/cases"
export HOME="$work" PI_CODING_AGENT_DIR="$work/agent"
"$pi" sessions import --from claude-code "$root/fixtures/import/claude-code"
"$pi" sessions import --from codex "$root/fixtures/import/codex/sessions"
"$pi" sessions import --from gemini "$root/fixtures/import/gemini/sessions"
"$pi" sessions import --from opencode "$root/fixtures/import/opencode/opencode.db"
n=0
while IFS= read -r f; do
  n=$((n + 1))
  cp "$f" "$work/cases/import$n.jsonl"
  "$realpi/bin/node" "$realpi/oracle.mjs" "$work/cases/import$n.jsonl" > "$work/cases/import$n.oracle.json"
done < <(find "$work/agent/sessions" -name '*.jsonl' | sort)
python3 "$check" "$pi" "$work/cases"
