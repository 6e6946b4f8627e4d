#!/usr/bin/env bash
# Runs real Pi 1.6.0 and ours with Pi's custom-provider-anthropic example
# (fixtures/extensions/custom-provider-anthropic: `pi.registerProvider` with `streamSimple`,
# the real @anthropic-ai/sdk 0.52.0 unpacked from the tarball next to it) against the same
# fake-LLM script: a `read` tool call, then an answer. Compared: the print output, the
# provider requests (path, model, max_tokens, thinking, the system block's shape, tool
# names and parameters, the conversation with its cache markers) and the session's messages (api, provider, content,
# stop reason, usage and cost).
#
# usage: scripts/custom-provider-side-by-side.sh [REALPI_DIR] [PI_BINARY]
#   REALPI_DIR: a copy of ../shared/realpi after `./reproduce.sh install` (default /work/realpi);
#   its fake_llm.py must be listening on 127.0.0.1:18765
#   (`python3 fake_llm.py --port 18765 &`).
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
realpi="${1:-/work/realpi}"
ours="${2:-$root/target/release/pi}"
fixture="$root/fixtures/extensions/custom-provider-anthropic"
[ -f "$realpi/env.sh" ] || { echo "no real Pi harness at $realpi" >&2; exit 2; }
# shellcheck disable=SC1091
source "$realpi/env.sh"
work="$(mktemp -d)"
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT; [ -n "${KEEP:-}" ] && echo "work: $work"
ext="$work/custom-provider-anthropic"
mkdir -p "$ext/node_modules/@anthropic-ai/sdk"
cp "$fixture"/index.ts "$fixture"/package.json "$fixture"/package-lock.json "$ext/"
tar xzf "$fixture/anthropic-ai-sdk-0.52.0.tgz" --strip-components=1 -C "$ext/node_modules/@anthropic-ai/sdk"
turns='[{"tool_calls":[{"name":"read","arguments":{"path":"notes.txt"}}],"usage":{"prompt_tokens":1000,"completion_tokens":20}},{"text":"The notes say hello.","usage":{"prompt_tokens":1100,"completion_tokens":6}}]'
for who in real ours; do
  d="$work/$who"
  mkdir -p "$d/agent" "$d/sessions" "$d/cwd"
  cp "$realpi/agent/models.json" "$d/agent/"
  echo "hello from the notes file" >"$d/cwd/notes.txt"
  curl -s -XPOST http://127.0.0.1:18765/_control/reset \
    -d "{\"script\":{\"turns\":$turns},\"log\":\"$d/requests.jsonl\"}" >/dev/null
  if [ "$who" = real ]; then cmd="$PI"; else cmd="$ours"; fi
  (
    cd "$d/cwd" || exit 1
    PI_CODING_AGENT_DIR="$d/agent" CUSTOM_ANTHROPIC_BASE_URL=http://127.0.0.1:18765 \
      CUSTOM_ANTHROPIC_API_KEY=sk-ant-test-key \
      $cmd --session-dir "$d/sessions" -e "$ext" --model custom-anthropic/claude-sonnet-4-5 \
      -p "What do the notes say?" >"$d/out.txt" 2>&1
  )
  python3 - "$d" <<'PY' >"$d/summary.txt"
import json, sys, glob
d = sys.argv[1]
print("output:", open(f"{d}/out.txt").read().strip())
ids = {}
def name(v):
    if v not in ids:
        ids[v] = f"call{len(ids) + 1}"
    return ids[v]
for r in (json.loads(l) for l in open(f"{d}/requests.jsonl")):
    b = r["body"]
    print("request", r["path"], b.get("model"), "max_tokens", b.get("max_tokens"), "thinking", b.get("thinking"))
    print("  beta", r["headers"].get("anthropic-beta"))
    # The prompt's wording is our own text, not Pi's; its shape is compared.
    print("  system", [(s["type"], "<tools>" in s["text"], s.get("cache_control")) for s in b.get("system", [])])
    print("  tools", [(t["name"], sorted(t["input_schema"]["properties"])) for t in b.get("tools", [])])
    for m in b["messages"]:
        blocks = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        for bl in blocks:
            bl = dict(bl)
            for k in ("id", "tool_use_id"):
                if k in bl:
                    bl[k] = name(bl[k])
            print("  ", m["role"], json.dumps(bl, sort_keys=True))
for f in glob.glob(f"{d}/sessions/*.jsonl"):
    for e in (json.loads(l) for l in open(f)):
        if e.get("type") != "message":
            continue
        m = dict(e["message"])
        if m["role"] == "system":
            continue
        for k in ("timestamp", "durationMs"):
            m.pop(k, None)
        if "toolCallId" in m:
            m["toolCallId"] = name(m["toolCallId"])
        for bl in m.get("content", []) if isinstance(m.get("content"), list) else []:
            if bl.get("type") == "toolCall":
                bl["id"] = name(bl["id"])
        print("session", json.dumps(m, sort_keys=True))
PY
done
if diff -u "$work/real/summary.txt" "$work/ours/summary.txt"; then echo "same: summary"; exit 0; fi
exit 1
