#!/usr/bin/env bash
# Runs real Pi 1.6.0 and ours through the same command-context scenario and prints what
# differs: fixtures/extensions/context-usage.ts (`ctx.compact()` with nothing to compact,
# `ctx.getContextUsage()` after a response, `ctx.compact()` with instructions and the usage
# right after it, the usage after the next response) and fixtures/extensions/session-control.ts
# (`ctx.newSession({setup})`, `ctx.fork(id, {position: "at"})` at the first answer), and
# fixtures/extensions/local-provider.ts (`pi.registerProvider`: --list-models, a print run
# with --model on the registered provider).
# Compared: print output, every session file (entry types, custom data, message texts,
# parent links, ids by order of appearance), the provider requests' conversations.
#
# usage: scripts/extension-context-side-by-side.sh [REALPI_DIR] [PI_BINARY]
#   REALPI_DIR: a copy of ../shared/realpi after `./reproduce.sh install` (default /work/realpi);
#   its fake_llm.py must be listening on 127.0.0.1:18765
#   (`python3 fake_llm.py --port 18765 &`).
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
realpi="${1:-/work/realpi}"
ours="${2:-$root/target/release/pi}"
usage_ext="$root/fixtures/extensions/context-usage.ts"
session_ext="$root/fixtures/extensions/session-control.ts"
provider_ext="$root/fixtures/extensions/local-provider.ts"
[ -f "$realpi/env.sh" ] || { echo "no real Pi harness at $realpi" >&2; exit 2; }
# shellcheck disable=SC1091
source "$realpi/env.sh"
work="$(mktemp -d)"
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT; [ -n "${KEEP:-}" ] && echo "work: $work"
usage_turns='[{"text":"Hi.","usage":{"prompt_tokens":1200,"completion_tokens":34}},{"text":"More.","usage":{"prompt_tokens":2500,"completion_tokens":66}},{"text":"After.","usage":{"prompt_tokens":900,"completion_tokens":10}}]'
session_turns='[{"text":"First answer."},{"text":"Second answer."},{"text":"Prepared answer."},{"text":"Cloned answer."}]'
for who in real ours; do
  for part in usage session provider; do
    d="$work/$who/$part"
    mkdir -p "$d/agent" "$d/sessions" "$d/cwd"
    cp "$realpi/agent/models.json" "$d/agent/"
    # Keep little when compacting, so a short session has something to summarize.
    echo '{"compaction":{"keepRecentTokens":1}}' >"$d/agent/settings.json"
    case "$part" in
      usage) turns="$usage_turns" ;;
      session) turns="$session_turns" ;;
      *) turns='[{"text":"From the proxy."}]' ;;
    esac
    curl -s -XPOST http://127.0.0.1:18765/_control/reset \
      -d "{\"script\":{\"turns\":$turns,\"summaries\":[{\"text\":\"The summary.\"}]},\"log\":\"$d/requests.jsonl\"}" >/dev/null
    if [ "$who" = real ]; then cmd="$PI"; else cmd="$ours"; fi
    (
      cd "$d/cwd" || exit 1
      export PI_CODING_AGENT_DIR="$d/agent"
      run() { $cmd --session-dir "$d/sessions" --model fakeoai/fake-model "$@" >>"$d/out.txt" 2>&1; }
      if [ "$part" = provider ]; then
        export LOCAL_PROXY_URL=http://127.0.0.1:18765/v1 LOCAL_PROXY_KEY=proxy-secret
        $cmd -e "$provider_ext" --list-models proxy >>"$d/out.txt" 2>&1
        $cmd --session-dir "$d/sessions" -e "$provider_ext" --model local-proxy/proxy-small -p "hi" >>"$d/out.txt" 2>&1
      elif [ "$part" = usage ]; then
        run -e "$usage_ext" -p "/compact-wait" "hello"
        run -e "$usage_ext" -c -p "/usage" "more"
        run -e "$usage_ext" -c -p "/compact-wait Keep it short"
        run -e "$usage_ext" -c -p "after" "/usage"
      else
        run -e "$session_ext" -p "one" "two"
        first="$(ls "$d/sessions"/*.jsonl)"
        run -e "$session_ext" -c -p "/fresh-setup" "three"
        run -e "$session_ext" --session "$first" -p "/clone-at-first-answer" "four"
      fi
    )
  done
  python3 - "$work/$who" <<'PY' >"$work/$who/summary.txt"
import json, sys, glob, os
root = sys.argv[1]
def text(m):
    c = m.get("content")
    if isinstance(c, str):
        return c
    return " ".join(b.get("text", "") for b in c or [] if isinstance(b, dict) and b.get("type") == "text")
for part in ("usage", "session", "provider"):
    d = f"{root}/{part}"
    print("==", part, "output:", open(f"{d}/out.txt").read().strip().replace("\n", " | "))
    files = sorted(glob.glob(f"{d}/sessions/*.jsonl"))
    entries_of = {f: [json.loads(l) for l in open(f)] for f in files}
    # Files in the order their first user message was written.
    def first_user(f):
        for e in entries_of[f]:
            if e.get("type") == "message" and e["message"].get("role") == "user":
                return e["timestamp"]
        return ""
    names, ids = {}, {}
    def name(v):
        if v is None:
            return None
        if v not in ids:
            ids[v] = f"e{len(ids) + 1}"
        return ids[v]
    for n, f in enumerate(sorted(files, key=first_user)):
        names[f] = f"file{n + 1}"
    for f in sorted(files, key=first_user):
        print("--", names[f])
        for e in entries_of[f]:
            t = e["type"]
            if t == "session":
                parent = e.get("parentSession")
                print("session parent:", names.get(parent, parent))
                continue
            line = [t, name(e["id"]), "parent", name(e.get("parentId"))]
            if t == "message":
                m = e["message"]
                line += [m["role"], text(m)]
                if m["role"] == "assistant":
                    line += [m.get("provider"), m.get("model")]
            elif t == "custom":
                data = json.dumps(e.get("data"), sort_keys=True)
                for k, v in ids.items():
                    data = data.replace(k, v)
                line += [e["customType"], data]
            elif t == "compaction":
                line += [e["summary"][-40:].strip(), e["tokensBefore"], name(e.get("firstKeptEntryId"))]
            elif t in ("model_change", "thinking_level_change"):
                line += [e.get("provider") or ""]
                line += [e.get("modelId") or e.get("thinkingLevel")]
            print(*line)
    for r in (json.loads(l) for l in open(f"{d}/requests.jsonl")):
        msgs = r["body"].get("messages", [])
        print("request", r["path"], r["body"].get("model"), [(m["role"], text(m)[:40]) for m in msgs if m["role"] != "system"])
PY
done
if diff -u "$work/real/summary.txt" "$work/ours/summary.txt"; then echo "same: summary"; exit 0; fi
exit 1
