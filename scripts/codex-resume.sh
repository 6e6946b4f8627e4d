#!/usr/bin/env bash
# Resumes Pi sessions in the real Codex CLI: exports each with
# `pi sessions export --format codex -o $CODEX_HOME/sessions`, runs
# `codex exec resume ID "Continue [[s90]]"` offline against fixtures/import/codex/fake_openai.py
# (Codex's own `openai` provider pointed at it), and checks that the request Codex sent carries
# every exported item (user and assistant texts, images, reasoning with its encrypted content,
# tool calls paired with their outputs), in order, before the new prompt.
#
# usage: scripts/codex-resume.sh [SESSION.jsonl…]
#   default sessions: written by real Pi 1.6.0 under fixtures/realpi/sessions (tools with a
#   failure, thinking, compactions, errors) and one the real Codex recorded, imported into Pi.
#   CODEX=path/to/codex uses that CLI; otherwise
#   @openai/codex@0.171.0 (the version the import fixtures were recorded with) is installed
#   from npm into /var/tmp/codex-npm. KEEP=1 keeps the work folder.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pi="$root/target/release/pi"
codex="${CODEX:-}"
if [ -z "$codex" ]; then
  npm install --silent --prefix /var/tmp/codex-npm @openai/codex@0.171.0 >/dev/null
  codex=/var/tmp/codex-npm/node_modules/.bin/codex
fi
work="$(mktemp -d /var/tmp/codex-resume.XXXXXX)"
trap 'kill "${server:-}" 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
if [ "$#" -eq 0 ]; then
  set -- "$root"/fixtures/realpi/sessions/{anthropic_tools_thinking,json_tools,rpc_main,rpc_compact_twice,rpc_autocompact,rpc_errors,print_multi_continue}.jsonl
  # And a session Codex itself recorded, imported into Pi (its first two turns: an image,
  # OpenAI reasoning, a failed command, a compaction, apply_patch): its reasoning items go back.
  recorded="$root/fixtures/import/codex/sessions/2026/12/02/rollout-2026-12-02T17-10-48-01a237bc-c8f2-74e3-a621-ecee6134b3c6.jsonl"
  mkdir -p "$work/recorded" "$work/pi-agent"
  head -57 "$recorded" > "$work/recorded/$(basename "$recorded")"
  PI_CODING_AGENT_DIR="$work/pi-agent" "$pi" sessions import --from codex "$work/recorded" >/dev/null
  set -- "$@" "$(find "$work/pi-agent/sessions" -name '*.jsonl' | head -1)"
fi
resumed=0
for session in "$@"; do
  name="$(basename "$session" .jsonl)"
  w="$work/$name"
  mkdir -p "$w/home" "$w/codex/sessions" "$w/project"
  port=$((20000 + RANDOM % 20000))
  cat > "$w/codex/config.toml" <<EOF
model = "gpt-5.5"
openai_base_url = "http://127.0.0.1:$port/v1"
check_for_update_on_startup = false

[analytics]
enabled = false
EOF
  # The export prints where it placed the rollout under the sessions folder.
  rollout=$("$pi" sessions export "$session" --format codex -o "$w/codex/sessions")
  id=$(basename "$rollout" .jsonl | grep -oE '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')
  cp "$rollout" "$w/exported.jsonl"
  # The fake answers prompts marked [[sN]] from its script.
  echo '{"s90": [{"text": "Resumed from Pi."}]}' > "$w/script.json"
  python3 "$root/fixtures/import/codex/fake_openai.py" "$port" "$w/script.json" "$w/requests.jsonl" &
  server=$!
  sleep 1
  # The sandbox needs user namespaces a container may not have; the project is a temp dir.
  out=$(cd "$w/project" && HOME="$w/home" CODEX_HOME="$w/codex" OPENAI_API_KEY=sk-fake-key \
    timeout 120 "$codex" exec resume --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox \
    "$id" "Continue [[s90]]" </dev/null 2>"$w/stderr.txt" | tail -1) || true
  kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true
  if [ "$out" != "Resumed from Pi." ]; then
    echo "$name: codex did not resume (answered: $out); see $w/stderr.txt" >&2
    tail -5 "$w/stderr.txt" >&2
    continue
  fi
  if python3 - "$w/requests.jsonl" "$w/exported.jsonl" "$name" <<'PY'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
bodies = [json.loads(r["body"]) for r in reqs if "body" in r]
req = next(b for b in bodies if "[[s90]]" in json.dumps(b.get("input", [])))
exported = [json.loads(l) for l in open(sys.argv[2])]

def parts(items):
    """What the model is sent: texts by role, reasoning ids, calls with arguments, outputs."""
    out = []
    for i in items:
        t = i.get("type", "message")
        if t == "message" and i.get("role") in ("user", "assistant"):
            c = i["content"]
            for b in ([{"text": c}] if isinstance(c, str) else c):
                if "text" in b:
                    out.append(("text", i["role"], b["text"]))
                elif b.get("type") == "input_image":
                    out.append(("image", i["role"], b["image_url"][:60]))
        elif t == "reasoning":
            out.append(("reasoning", i.get("id"), i.get("encrypted_content")))
        elif t == "function_call":
            out.append(("call", i["call_id"], i["name"], json.loads(i["arguments"])))
        elif t == "function_call_output":
            out.append(("output", i["call_id"], json.dumps(i["output"], sort_keys=True)))
    return out

want = parts(r["payload"] for r in exported if r["type"] == "response_item")
sent = parts(req["input"])
prompt = next(k for k, s in enumerate(sent) if s[0] == "text" and "[[s90]]" in s[2])
it = iter(sent[:prompt])
missing = [w for w in want if not any(w == s for s in it)]
assert not missing, f"not sent in order: {missing[:3]}"
print(f"{sys.argv[3]}: resumed; {len(want)} exported items sent in order before the new prompt "
      f"({len(req['input'])} items in Codex's request)")
PY
  then resumed=$((resumed + 1)); fi
done
echo "$resumed of $# sessions resumed by $("$codex" --version)"
[ "$resumed" -eq "$#" ]
