#!/usr/bin/env bash
# Records what real Pi 1.6.0 does with an extension's tools, case by case:
#   tool-exposure  fixtures/extensions/tool-exposure.ts under the tool options and exposures
#                  (cli/tests/extensions_tool_exposure_e2e.rs);
#   tool-metadata  fixtures/extensions/tool-metadata.ts: namespaces, annotations,
#                  defaultActive, reachesTools, prepareLoadout
#                  (cli/tests/extensions_tool_metadata_e2e.rs).
# Each case of fixtures/extensions/<NAME>-cases.json runs in print mode in a fresh agent dir;
# per case the recording has the tool names of every provider request, the tool result texts
# of the last request, the declarations of the first and the extension's `tools.json`
# (`pi.getAllTools()` / `pi.getActiveTools()`); tool-metadata also keeps the first request's
# system prompt, the extension's `calls.jsonl` and the files the run left in its cwd. It is
# written to fixtures/extensions/<NAME>-realpi.json, which the test compares ours with.
#
# usage: scripts/tool-cases-record.sh NAME [REALPI_DIR]
#   REALPI_DIR: a copy of ../shared/realpi after `./reproduce.sh install` (default /work/realpi);
#   its fake_llm.py must be listening on 127.0.0.1:$FAKE_LLM_PORT (default 18765).
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
name="${1:?usage: $0 tool-exposure|tool-metadata [REALPI_DIR]}"
realpi="${2:-/work/realpi}"
port="${FAKE_LLM_PORT:-18765}"
# shellcheck disable=SC1091
source "$realpi/env.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 - "$root" "$realpi" "$port" "$work" "$PI" "$name" <<'PY'
import json, os, subprocess, sys, urllib.request
root, realpi, port, work, pi, name = sys.argv[1:7]
fixtures = f"{root}/fixtures/extensions"
cases = json.load(open(f"{fixtures}/{name}-cases.json"))
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
    env = dict(os.environ, PI_CODING_AGENT_DIR=f"{d}/agent", XDG_CACHE_HOME=f"{d}/cache", **case.get("env", {}))
    cmd = pi.split() + ["--session-dir", f"{d}/sessions", "--model", "fakeoai/fake-model",
                        "-e", f"{fixtures}/{name}.ts", *case["args"], "-p", "go"]
    subprocess.run(cmd, cwd=f"{d}/cwd", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    requests = [json.loads(l)["body"] for l in open(f"{d}/requests.jsonl")]
    record = {
        "name": case["name"],
        "requests": [[t["function"]["name"] for t in b.get("tools", [])] for b in requests],
        "toolResults": [m["content"] for m in requests[-1]["messages"] if m["role"] == "tool"],
        "declarations": {t["function"]["name"]: t["function"]["description"] for t in requests[0].get("tools", [])},
    }
    if name == "tool-metadata":
        calls = f"{d}/cwd/calls.jsonl"
        record["systemPrompt"] = requests[0]["messages"][0]["content"]
        record["tools"] = json.load(open(f"{d}/cwd/tools.json"))
        record["calls"] = [json.loads(l) for l in open(calls)] if os.path.exists(calls) else []
        record["files"] = sorted(os.listdir(f"{d}/cwd"))
    else:
        record["tools"] = json.load(open(f"{d}/cwd/tools.json"))
    out.append(record)
json.dump(out, open(f"{fixtures}/{name}-realpi.json", "w"), indent=1)
print(f"recorded {len(out)} cases")
PY
