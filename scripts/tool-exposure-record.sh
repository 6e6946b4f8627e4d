#!/usr/bin/env bash
# Records what real Pi 1.6.0 does with extension tools under the tool options and exposures:
# runs fixtures/extensions/tool-exposure.ts in print mode for each case of
# fixtures/extensions/tool-exposure-cases.json and writes, per case, the tool names of every
# provider request, the tool result texts, the declarations of the first request and the
# extension's `tools.json` (`pi.getAllTools()` / `pi.getActiveTools()`) to
# fixtures/extensions/tool-exposure-realpi.json, which cli/tests/extensions_tool_exposure_e2e.rs
# compares ours with.
#
# usage: scripts/tool-exposure-record.sh [REALPI_DIR]
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
cases = json.load(open(f"{root}/fixtures/extensions/tool-exposure-cases.json"))
out = []
for case in cases:
    d = f"{work}/{case['name'].replace('/', '_')}"
    for sub in ("agent", "sessions", "cwd"):
        os.makedirs(f"{d}/{sub}")
    models = open(f"{realpi}/agent/models.json").read().replace("127.0.0.1:18765", f"127.0.0.1:{port}")
    open(f"{d}/agent/models.json", "w").write(models)
    if case.get("settings"):
        json.dump(case["settings"], open(f"{d}/agent/settings.json", "w"))
    body = json.dumps({"script": {"turns": case["turns"]}, "log": f"{d}/requests.jsonl"}).encode()
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/_control/reset", body)).read()
    env = dict(os.environ, PI_CODING_AGENT_DIR=f"{d}/agent", XDG_CACHE_HOME=f"{d}/cache")
    cmd = pi.split() + ["--session-dir", f"{d}/sessions", "--model", "fakeoai/fake-model",
                        "-e", f"{root}/fixtures/extensions/tool-exposure.ts", *case["args"], "-p", "go"]
    subprocess.run(cmd, cwd=f"{d}/cwd", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    requests = [json.loads(l)["body"] for l in open(f"{d}/requests.jsonl")]
    out.append({
        "name": case["name"],
        "requests": [[t["function"]["name"] for t in b.get("tools", [])] for b in requests],
        "toolResults": [m["content"] for m in requests[-1]["messages"] if m["role"] == "tool"],
        "declarations": {t["function"]["name"]: t["function"]["description"] for t in requests[0].get("tools", [])},
        "tools": json.load(open(f"{d}/cwd/tools.json")),
    })
json.dump(out, open(f"{root}/fixtures/extensions/tool-exposure-realpi.json", "w"), indent=1)
print(f"recorded {len(out)} cases")
PY
