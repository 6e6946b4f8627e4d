#!/usr/bin/env python3
"""Writes the small seed corpora under fuzz/corpus/<target>/ from fixtures/.

Run from anywhere: `python3 fuzz/seed-corpora.py`. Seeds are capped in size and
number so the committed corpora stay small; libFuzzer grows its own corpus in
fuzz/corpus while it runs (that growth is not committed, see fuzz/README.md).
"""
import hashlib
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
CORPUS = ROOT / "fuzz" / "corpus"
MAX_FILE = 12 * 1024


def put(target, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()[:16]
    (d / name).write_bytes(data)


def session_files():
    files = sorted((FIX / "realpi" / "tricky" / "cli").glob("*.jsonl"))
    files += sorted((FIX / "realpi" / "sessions").glob("*.jsonl"))
    files += sorted((FIX / "expected" / "generated").glob("gen_0[0-3]*.jsonl"))
    files += sorted((FIX / "pi-0.58-generated").glob("*.jsonl"))
    return [f for f in files if f.stat().st_size <= MAX_FILE]


def main():
    files = session_files()
    lines = set()
    for f in files:
        data = f.read_bytes()
        # session_load: first byte is the compaction budget knob.
        put("session_load", b"\x08" + data)
        for line in data.split(b"\n"):
            if 0 < len(line) <= 2048:
                lines.add(line)
        if b'"version":3' not in data.split(b"\n", 1)[0]:
            body = data.split(b"\n", 1)[1] if b"\n" in data else b""
            for pick in (b"\x00", b"\x01", b"\x02"):
                put("session_migrate", pick + body)
    for line in sorted(lines)[:200]:
        put("jsonl_line", line + b"\n")
    # Migration of entries written by current Pi (ids and parents get replaced).
    for f in files[:8]:
        body = f.read_bytes().split(b"\n", 1)[-1]
        put("session_migrate", b"\x01" + body)

    sse = [
        b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":3}}}\n\n"
        b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
        b"data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\r\n\r\ndata: [DONE]\r\n\r\n",
        b"\xef\xbb\xbfid: 7\rretry: 10\r: comment\rdata: a\rdata: b\r\r",
        b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\n\ndata: tail-without-blank-line",
    ]
    for s in sse:
        put("sse_decoder", b"\x02\x05\x11" + s)

    args = [
        b'{"path":"src/main.rs","edits":[{"oldText":"a\\nb","newText":"c"}]}',
        b'{"command":"ls -la","timeout":10}',
        b'{"a":[1,2,{"b":"\\ud83d\\ude00"}],"n":-1.5e3,"t":true,"f":null}',
        b'{"path":"x","content":"line\\u0000',
    ]
    for a in args:
        put("tool_args_json", a)

    models = [
        {"providers": {"local": {"baseUrl": "http://localhost:11434/v1", "api": "openai-completions",
                                 "apiKey": "LOCAL_KEY", "models": [{"id": "llama", "contextWindow": 8192,
                                 "cost": {"input": 0.1, "output": 0.2}, "input": ["text", "image"]}]}}},
        {"providers": {"anthropic": {"baseUrl": "https://proxy.example", "headers": {"x-a": "$HOME"},
                                     "modelOverrides": {"claude-sonnet-4-5": {"maxTokens": 1000}}}}},
        {"providers": {"openai": {"models": [{"id": "gpt-x", "reasoning": True,
                                              "thinkingLevelMap": {"high": "high"}, "compat": {"supportsStore": False}}]}}},
    ]
    for m in models:
        put("models_json", json.dumps(m).encode())

    # rpc_command: the commands Pi's own client sent in the recorded RPC transcripts, as it
    # writes them (JSON.stringify + "\n"), and the examples of Pi's rpc.md; byte 0x00 = as is.
    for f in sorted((FIX / "realpi" / "transcripts").glob("*.rpc.jsonl")):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("dir") == "send":
                sent = json.dumps(rec["rec"], separators=(",", ":"), ensure_ascii=False)
                put("rpc_command", b"\x00" + sent.encode() + b"\n")
    for s in [
        b'{"type":"prompt","message":"What\'s in this image?","images":[{"type":"image","data":"AA==","mimeType":"image/png"}]}',
        b'{"type":"prompt","message":"New instruction","streamingBehavior":"steer"}',
        b'{"type":"set_model","provider":"anthropic","modelId":"claude-sonnet-4-20250514"}',
        b'{"type":"new_session","parentSession":"/path/to/parent-session.jsonl"}',
        b'{"type":"switch_session","sessionPath":"/path/to/session.jsonl"}',
        b'{"type":"get_entries","since":"abc123"}',
        b'{"type":"prompt","message":"a\xe2\x80\xa8b"}\r\n',
        b"not json\n",
    ]:
        put("rpc_command", b"\x00" + s)


if __name__ == "__main__":
    main()
