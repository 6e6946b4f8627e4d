#!/usr/bin/env bash
# Runs real Pi 1.6.0 and ours through the same virtual-model scenario and prints what differs:
# fixtures/extensions/virtual-router.ts, `--model router/auto:high -p` (a tool call, then an
# answer), `-c -p` (a second routed user request), and `--list-models` with the extension.
# Compared: the requests the router saw, the session entries (selection, router state,
# the physical model on each response), the provider requests, the model list.
#
# usage: scripts/virtual-models-side-by-side.sh [REALPI_DIR] [PI_BINARY]
#   REALPI_DIR: a copy of ../shared/realpi after `./reproduce.sh install` (default /work/realpi);
#   its fake_llm.py must be listening on 127.0.0.1:18765
#   (`python3 fake_llm.py --port 18765 &`).
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
realpi="${1:-/work/realpi}"
ours="${2:-$root/target/release/pi}"
ext="$root/fixtures/extensions/virtual-router.ts"
[ -f "$realpi/env.sh" ] || { echo "no real Pi harness at $realpi" >&2; exit 2; }
# shellcheck disable=SC1091
source "$realpi/env.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
script='{"script":{"turns":[{"text":"Listing.","tool_calls":[{"name":"ls","arguments":{}}]},{"text":"Done."},{"text":"Again."}]},"log":"LOG"}'
for who in real ours; do
  d="$work/$who"
  mkdir -p "$d/agent" "$d/sessions" "$d/cwd"
  cp "$realpi/agent/models.json" "$d/agent/"
  curl -s -XPOST http://127.0.0.1:18765/_control/reset -d "${script/LOG/$d/requests.jsonl}" >/dev/null
  if [ "$who" = real ]; then cmd="$PI"; else cmd="$ours"; fi
  (
    cd "$d/cwd" || exit 1
    export PI_CODING_AGENT_DIR="$d/agent" ROUTE_LOG="$d/routes.jsonl"
    $cmd --session-dir "$d/sessions" -e "$ext" --model router/auto:high -p "list the files" >"$d/out.txt" 2>&1
    $cmd --session-dir "$d/sessions" -e "$ext" -c -p "again" >>"$d/out.txt" 2>&1
    $cmd -e "$ext" --list-models >"$d/list.txt" 2>&1
  )
  python3 - "$d" <<'PY' >"$d/summary.txt"
import json, sys, glob
d = sys.argv[1]
print("routes:", open(f"{d}/routes.jsonl").read())
for line in open(glob.glob(f"{d}/sessions/*.jsonl")[0]):
    e = json.loads(line)
    m = e.get("message", {})
    keep = {k: e[k] for k in ("provider", "modelId", "thinkingLevel", "customType", "data") if k in e}
    keep.update({k: m[k] for k in ("role", "provider", "model", "thinkingLevel", "api") if k in m})
    print(e["type"], json.dumps(keep, sort_keys=True))
for r in (json.loads(l) for l in open(f"{d}/requests.jsonl")):
    b = r["body"]
    print("request", b.get("model"), [m["role"] for m in b["messages"]],
          json.dumps({k: v for k, v in b.items() if k not in ("messages", "tools")}, sort_keys=True))
PY
done
status=0
for f in out.txt summary.txt list.txt; do
  if diff -u "$work/real/$f" "$work/ours/$f"; then echo "same: $f"; else status=1; fi
done
exit $status
