#!/usr/bin/env bash
# Runs real Pi 1.6.0 and ours through the same `ctx.executeTool()` scenario and prints what
# differs: fixtures/extensions/execute-tool.ts (`orchestrate` calls read, a bash command
# fixtures/extensions/nested-calls.ts blocks, an unknown tool, read without arguments, read
# with an aborted signal, and the extension tool `shout`, which reads a file itself) in
# `--mode json`. Compared: the tool result message in the session file (outcomes,
# `ctx.tools`, `usage`, `nestedCalls`; durations and timestamps left out), the set of
# `tool_execution_*` events, and the hook calls nested-calls.ts records (as a set: ours
# delivers notification events asynchronously, so they interleave differently).
#
# usage: scripts/execute-tool-side-by-side.sh [REALPI_DIR] [PI_BINARY]
#   REALPI_DIR: a copy of ../shared/realpi after `./reproduce.sh install` (default /work/realpi);
#   its fake_llm.py must be listening on 127.0.0.1:18765
#   (`python3 fake_llm.py --port 18765 &`).
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
realpi="${1:-/work/realpi}"
ours="${2:-$root/target/release/pi}"
port="${FAKE_LLM_PORT:-18765}"
[ -f "$realpi/env.sh" ] || { echo "no real Pi harness at $realpi" >&2; exit 2; }
# shellcheck disable=SC1091
source "$realpi/env.sh"
work="$(mktemp -d)"
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT; [ -n "${KEEP:-}" ] && echo "work: $work"
turns='[{"tool_calls":[{"name":"orchestrate","id":"call_o","arguments":{}}]},{"text":"done"}]'
for who in real ours; do
  d="$work/$who"
  mkdir -p "$d/agent" "$d/sessions" "$d/cwd"
  sed "s/127.0.0.1:18765/127.0.0.1:$port/" "$realpi/agent/models.json" >"$d/agent/models.json"
  printf 'hello notes\n' >"$d/cwd/notes.txt"
  curl -s -XPOST "http://127.0.0.1:$port/_control/reset" \
    -d "{\"script\":{\"turns\":$turns},\"log\":\"$d/requests.jsonl\"}" >/dev/null
  if [ "$who" = real ]; then cmd="$PI"; else cmd="$ours"; fi
  (
    cd "$d/cwd" || exit 1
    export PI_CODING_AGENT_DIR="$d/agent" XDG_CACHE_HOME="$d/cache"
    # Real Pi's --tools filters extension tools too, so they are named.
    $cmd --session-dir "$d/sessions" --model fakeoai/fake-model \
      -e "$root/fixtures/extensions/execute-tool.ts" -e "$root/fixtures/extensions/nested-calls.ts" \
      --tools read,bash,codemode,orchestrate,shout --mode json -p go >"$d/out.jsonl" 2>"$d/err.txt"
  )
done
python3 - "$work" <<'PY'
import glob, json, sys
work = sys.argv[1]
def events(who):
    out = []
    for line in open(f"{work}/{who}/out.jsonl"):
        e = json.loads(line)
        if e["type"].startswith("tool_execution"):
            r = e.get("result") or e.get("partialResult")
            out.append(json.dumps([e["type"], e["toolCallId"], e.get("parentToolCallId"),
                                   e.get("isError"), "durationMs" in e, r]))
    return sorted(out)
def result(who):
    for line in open(glob.glob(f"{work}/{who}/sessions/*.jsonl")[0]):
        m = json.loads(line).get("message", {})
        if m.get("role") == "toolResult":
            m.pop("timestamp", None); m.pop("durationMs", None)
            for c in m.get("nestedCalls", {}).get("calls", []):
                c.pop("durationMs", None)
            return json.dumps(m, indent=1)
def hooks(who):
    return sorted(open(f"{work}/{who}/cwd/nested-events.jsonl").read().splitlines())
failed = False
for name, f in [("tool result message", result), ("tool_execution_* events", events), ("hook calls", hooks)]:
    a, b = f("real"), f("ours")
    same = a == b
    failed |= not same
    print(f"{name}: {'same' if same else 'DIFFERENT'}")
    if not same:
        print("real:", a, "\nours:", b)
sys.exit(1 if failed else 0)
PY
