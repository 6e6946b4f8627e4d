#!/usr/bin/env bash
# Records what real Pi 1.6.0 does with fixtures/extensions/tool-metadata.ts (namespaces,
# annotations, defaultActive, reachesTools, prepareLoadout): runs it in print mode for each
# case of fixtures/extensions/tool-metadata-cases.json and writes, per case, the tool names of
# every provider request, the declarations and system prompt of the first request, the tool
# result texts of the last request and the extension's `tools.json` and `calls.jsonl` to
# fixtures/extensions/tool-metadata-realpi.json, which
# cli/tests/extensions_tool_metadata_e2e.rs compares ours with.
#
# usage: scripts/tool-metadata-record.sh [REALPI_DIR]
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
python3 - "$root" "$realpi" "$port" "$work" "$PI" <<'PY'
import json, os, subprocess, sys, urllib.request
root, realpi, port, work, pi = sys.argv[1:6]
cases = json.load(open(f"{root}/fixtures/extensions/tool-metadata-cases.json"))
out = []
for case in cases:
    d = f"{work}/{case['name']}"
    for sub in ("agent", "sessions", "cwd"):
        os.makedirs(f"{d}/{sub}")
    models = open(f"{realpi}/agent/models.json").read().replace("127.0.0.1:18765", f"127.0.0.1:{port}")
    open(f"{d}/agent/models.json", "w").write(models)
    body = json.dumps({"script": {"turns": case["turns"]}, "log": f"{d}/requests.jsonl"}).encode()
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/_control/reset", body)).read()
    env = dict(os.environ, PI_CODING_AGENT_DIR=f"{d}/agent", XDG_CACHE_HOME=f"{d}/cache", **case["env"])
    cmd = pi.split() + ["--session-dir", f"{d}/sessions", "--model", "fakeoai/fake-model",
                        "-e", f"{root}/fixtures/extensions/tool-metadata.ts", *case["args"], "-p", "go"]
    subprocess.run(cmd, cwd=f"{d}/cwd", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    requests = [json.loads(l)["body"] for l in open(f"{d}/requests.jsonl")]
    calls = f"{d}/cwd/calls.jsonl"
    out.append({
        "name": case["name"],
        "requests": [[t["function"]["name"] for t in b.get("tools", [])] for b in requests],
        "toolResults": [m["content"] for m in requests[-1]["messages"] if m["role"] == "tool"],
        "declarations": {t["function"]["name"]: t["function"]["description"] for t in requests[0].get("tools", [])},
        "systemPrompt": requests[0]["messages"][0]["content"],
        "tools": json.load(open(f"{d}/cwd/tools.json")),
        "calls": [json.loads(l) for l in open(calls)] if os.path.exists(calls) else [],
        "files": sorted(os.listdir(f"{d}/cwd")),
    })
json.dump(out, open(f"{root}/fixtures/extensions/tool-metadata-realpi.json", "w"), indent=1)
print(f"recorded {len(out)} cases")
PY
