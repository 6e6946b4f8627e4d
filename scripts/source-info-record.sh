#!/usr/bin/env bash
# Records where real Pi 1.6.0 says tools, commands, prompt templates and skills come from
# (`sourceInfo`) in the layout of fixtures/extensions/source-info/layout (auto-discovered,
# settings-named, package, `-e` file and directory, `--skill`, `--prompt-template`
# resources): `pi.getAllTools()` / `pi.getCommands()` at session_start (recorder.ts) in print
# mode, and RPC's `get_commands`. The run's directory becomes "W" in the recording,
# fixtures/extensions/source-info/realpi.json, which cli/tests/extensions_source_info_e2e.rs
# compares ours with.
#
# usage: scripts/source-info-record.sh [REALPI_DIR]
#   REALPI_DIR: a copy of ../shared/realpi after `./reproduce.sh install` (default /work/realpi);
#   its fake_llm.py must be listening on 127.0.0.1:$FAKE_LLM_PORT (default 18765).
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
realpi="${1:-/work/realpi}"
port="${FAKE_LLM_PORT:-18765}"
# shellcheck disable=SC1091
source "$realpi/env.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fixture="$root/fixtures/extensions/source-info"
cp -a "$fixture/layout/." "$work/"
sed "s/127.0.0.1:18765/127.0.0.1:$port/" "$realpi/agent/models.json" > "$work/agent/models.json"
cd "$work/cwd"
export PI_CODING_AGENT_DIR="$work/agent"
args=(--session-dir "$work/sessions" --model fakeoai/fake-model --approve
      -e "$fixture/recorder.ts" -e ./../pkg2 --skill ./cli-skill --prompt-template ./cli-prompt.md)
# shellcheck disable=SC2086
$PI "${args[@]}" -p hi > /dev/null 2>&1
# shellcheck disable=SC2086
(echo '{"type":"get_commands","id":"1"}'; sleep 5) | $PI "${args[@]}" --mode rpc > rpc.jsonl 2> /dev/null || true
python3 - "$work" "$fixture" <<'PY'
import json, sys
work, fixture = sys.argv[1:3]
printed = json.load(open(f"{work}/cwd/source-info.json"))
rpc = next(json.loads(l) for l in open(f"{work}/cwd/rpc.jsonl") if '"get_commands"' in l)
text = json.dumps({"print": printed, "rpc": rpc["data"]["commands"]}, indent=1)
text = text.replace(work, "W").replace(fixture, "FIXTURE")
open(f"{fixture}/realpi.json", "w").write(text + "\n")
print("recorded")
PY
