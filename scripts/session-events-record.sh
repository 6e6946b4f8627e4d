#!/usr/bin/env bash
# Records the session lifecycle events real Pi 1.6.0 gives an extension, over RPC, with
# fixtures/extensions/session-events-log.ts: two prompts, set_session_name, new_session,
# switch_session back to the first session, fork before its second prompt, a prompt in the
# fork, a fork from an entry that does not exist (fails after its gate), a compaction the
# extension cancels, a compaction, tree navigation to the first answer with a branch
# summary and plainly to the second user message (the extension's /ev-nav: RPC has no tree
# command), to the second answer with the extension's branch summary, a compaction with the
# extension's summary, clone, then end of input (quit). The extension's log, with ids, paths, texts
# and numbers replaced by placeholders, is written to
# fixtures/extensions/session-events/realpi.jsonl, which
# cli/tests/extensions_session_events_e2e.rs compares ours with (the same steps).
#
# usage: scripts/session-events-record.sh [REALPI_DIR]
#   REALPI_DIR: a copy of ../shared/realpi after `./reproduce.sh install` (default /work/realpi);
#   its fake_llm.py must be listening on 127.0.0.1:$FAKE_LLM_PORT (default 18765).
#   PI_CMD runs another implementation instead (e.g. target/release/pi) and OUT names the
#   file written instead of the fixture, to compare by hand.
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
realpi="${1:-/work/realpi}"
port="${FAKE_LLM_PORT:-18765}"
# shellcheck disable=SC1091
source "$realpi/env.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="${OUT:-$root/fixtures/extensions/session-events/realpi.jsonl}"
python3 - "$root" "$realpi" "$port" "$work" "${PI_CMD:-$PI}" "$out" <<'PY'
import json, os, queue, subprocess, sys, threading, urllib.request
root, realpi, port, work, pi, out = sys.argv[1:7]
fixtures = f"{root}/fixtures/extensions"
for sub in ("agent", "sessions", "cwd"):
    os.makedirs(f"{work}/{sub}")
models = open(f"{realpi}/agent/models.json").read().replace("127.0.0.1:18765", f"127.0.0.1:{port}")
open(f"{work}/agent/models.json", "w").write(models)
# The same scenario as cli/tests/extensions_session_events_e2e.rs.
json.dump({"compaction": {"keepRecentTokens": 60}}, open(f"{work}/agent/settings.json", "w"))
big = "lorem ipsum dolor sit amet " * 40
turns = [{"text": f"Reply {i}: {big}"} for i in range(3)]
body = json.dumps({"script": {"turns": turns}, "log": f"{work}/requests.jsonl"}).encode()
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
opener.open(urllib.request.Request(f"http://127.0.0.1:{port}/_control/reset", body)).read()
log = f"{work}/events.jsonl"
env = dict(os.environ, PI_CODING_AGENT_DIR=f"{work}/agent", PI_SESSION_EVENTS_LOG=log)
cmd = pi.split() + ["--session-dir", f"{work}/sessions", "--model", "fakeoai/fake-model",
                    "-e", f"{fixtures}/session-events-log.ts", "--mode", "rpc"]
p = subprocess.Popen(cmd, cwd=f"{work}/cwd", env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
records = queue.Queue()
threading.Thread(target=lambda: [records.put(json.loads(l)) for l in p.stdout if l.strip()] and None,
                 daemon=True).start()

def send(rec):
    p.stdin.write((json.dumps(rec) + "\n").encode())
    p.stdin.flush()

seen = []

def until(pred):
    while True:
        rec = records.get(timeout=120)
        seen.append(rec)
        if pred(rec):
            return rec

def command(rec):
    send(rec)
    seen.clear()
    return until(lambda r: r.get("type") == "response" and r.get("id") == rec["id"])

def done(r):
    return (r.get("type") == "extension_ui_request" and r.get("method") == "notify"
            and r.get("message", "").startswith("ev-done"))

def prompt(pid, text):
    command({"id": pid, "type": "prompt", "message": text})
    until(lambda r: r.get("type") == "agent_settled")

def ext_command(pid, text):
    command({"id": pid, "type": "prompt", "message": text})
    if not any(done(r) for r in seen):
        until(done)

prompt("p1", "one")
prompt("p2", "two")
command({"id": "n", "type": "set_session_name", "name": "demo"})
first = command({"id": "s1", "type": "get_state"})["data"]["sessionFile"]
assert command({"id": "new", "type": "new_session"})["data"] == {"cancelled": False}
assert command({"id": "sw", "type": "switch_session", "sessionPath": first})["data"] == {"cancelled": False}
messages = command({"id": "fm", "type": "get_fork_messages"})["data"]["messages"]
entry = next(m["entryId"] for m in messages if m["text"] == "two")
assert command({"id": "fork", "type": "fork", "entryId": entry})["success"]
prompt("p3", "three")
# A fork that fails (no such entry) after its gate: no shutdown, the session stays.
assert not command({"id": "badfork", "type": "fork", "entryId": "nonexistent"})["success"]
ext_command("veto", "/ev-veto-compact")
assert not command({"id": "c1", "type": "compact"})["success"]
assert command({"id": "c2", "type": "compact"})["success"]
ext_command("nav1", "/ev-nav assistant#1 summarize")
ext_command("nav2", "/ev-nav user#2")
ext_command("hooktree", "/ev-hook-tree")
ext_command("nav3", "/ev-nav assistant#2 summarize")
ext_command("hookcompact", "/ev-hook-compact")
assert command({"id": "c3", "type": "compact"})["success"]
assert command({"id": "clone", "type": "clone"})["data"] == {"cancelled": False}
p.stdin.close()
assert p.wait(timeout=60) == 0
lines = open(log).read()
open(out, "w").write(lines)
print(f"recorded {len(lines.splitlines())} events")
PY
