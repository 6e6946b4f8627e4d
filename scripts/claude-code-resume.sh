#!/usr/bin/env bash
# Resumes a Pi session in the real Claude Code: exports it with
# `pi sessions export --format claude-code` into Claude Code's project folder, runs
# `claude -p --resume ID` offline against fixtures/import/claude-code/fake_anthropic.py, and
# checks that the request Claude Code sent carries the Pi conversation (user texts, tool
# calls paired with their results) before the new prompt.
#
# usage: scripts/claude-code-resume.sh [SESSION.jsonl] [CLAUDE_BIN]
#   default session: fixtures/realpi/sessions/anthropic_tools_thinking.jsonl (written by
#   real Pi 1.6.0); default CLI: @anthropic-ai/claude-code@2.1.332 installed from npm into
#   a temporary folder. KEEP=1 keeps the work folder (requests Claude Code sent, its files).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
session="${1:-$root/fixtures/realpi/sessions/anthropic_tools_thinking.jsonl}"
claude="${2:-}"
pi="$root/target/release/pi"
work="$(mktemp -d)"
trap 'kill "${server:-}" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
if [ -z "$claude" ]; then
  (cd "$work" && npm init -y >/dev/null && npm install --silent @anthropic-ai/claude-code@2.1.332)
  claude="$work/node_modules/.bin/claude"
fi
id=$(head -1 "$session" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
cwd=$(head -1 "$session" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cwd"])')
# Claude Code finds a session under the folder named after the working directory.
project="$work/home/.claude/projects/$(printf '%s' "$cwd" | sed 's#[^A-Za-z0-9]#-#g')"
mkdir -p "$project" "$cwd"
"$pi" sessions export "$session" --format claude-code -o "$project/$id.jsonl"
cp "$project/$id.jsonl" "$work/exported.jsonl"
# The fake answers prompts marked [[sN]] from its script.
echo '{"s90": [{"text": "Resumed from Pi."}]}' > "$work/script.json"
port=$((20000 + RANDOM % 20000))
python3 "$root/fixtures/import/claude-code/fake_anthropic.py" "$port" "$work/script.json" "$work/requests.jsonl" &
server=$!
sleep 1
out=$(cd "$cwd" && HOME="$work/home" ANTHROPIC_BASE_URL="http://127.0.0.1:$port" ANTHROPIC_API_KEY=sk-ant-fake \
  DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 \
  timeout 120 "$claude" -p --resume "$id" "Continue [[s90]]" </dev/null)
echo "claude answered: $out (work dir $work)"
[ "$out" = "Resumed from Pi." ] || { echo "unexpected answer" >&2; exit 1; }
python3 - "$work/requests.jsonl" "$work/exported.jsonl" <<'PY'
import json, sys
def body(line):
    b = json.loads(line)["body"]
    return json.loads(b) if isinstance(b, str) else b
reqs = [body(l) for l in open(sys.argv[1])]
exported = [json.loads(l) for l in open(sys.argv[2])]
def marked(r):
    return "[[s90]]" in json.dumps(r.get("messages", []))
req = next(r for r in reqs if marked(r))
def flat(messages):
    out = []
    for m in messages:
        c = m["content"]
        for b in ([{"type": "text", "text": c}] if isinstance(c, str) else c):
            t = b["type"]
            if t == "text" and m["role"] != "system" and not b["text"].startswith("<system-reminder>"):
                out.append(("text", m["role"], b["text"]))
            elif t == "tool_use":
                out.append(("tool_use", b["id"], json.dumps(b["input"], sort_keys=True)))
            elif t == "tool_result":
                out.append(("tool_result", b["tool_use_id"]))
    return out
sent = flat(req["messages"])
want = flat([r["message"] for r in exported])
# Every exported message part reaches the model, in order (Claude Code may add reminders).
it = iter(sent)
missing = [w for w in want if not any(w == s or (w[0] == "text" and s[0] == "text" and w[2] in s[2]) for s in it)]
assert not missing, f"not sent: {missing}"
print(f"resumed: {len(want)} exported parts sent in order before the new prompt "
      f"({len(req['messages'])} messages in Claude Code's request)")
PY
