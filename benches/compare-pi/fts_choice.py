#!/usr/bin/env python3
"""Why FTS5 with unicode61 and external content: a quick comparison on one corpus.

    python3 fts_choice.py AGENT_DIR [MAX_MB]

Extracts the searchable text as the index does (user/assistant text, thinking, tool-call
argument values, tool results, bash, summaries), then builds, in Python's SQLite:
  A. FTS5 unicode61, external content (what storage::history uses)
  B. FTS5 unicode61, contentless (no snippets without re-reading the session files)
  C. FTS5 trigram (substring search, like rg)
and times a rare word, a phrase and a common word (top 20 by bm25), plus a brute-force
substring scan over the extracted text held in memory. Prints a markdown table.
"""

import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path


def texts(agent, max_bytes):
    seen = 0
    for f in sorted((Path(agent) / "sessions").rglob("*.jsonl")):
        if seen > max_bytes:
            break
        seen += f.stat().st_size
        for line in open(f, encoding="utf-8", errors="replace"):
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if not isinstance(e, dict):
                continue
            m = e.get("message") if isinstance(e.get("message"), dict) else None
            if e.get("type") in ("compaction", "branch_summary") and isinstance(e.get("summary"), str):
                yield e["summary"]
            if not m:
                continue
            c = m.get("content")
            if isinstance(c, str):
                yield c
            elif isinstance(c, list):
                for b in c:
                    if not isinstance(b, dict):
                        continue
                    if b.get("type") == "text":
                        yield b.get("text", "")
                    elif b.get("type") == "thinking":
                        yield b.get("thinking", "")
                    elif b.get("type") == "toolCall":
                        yield "\n".join(str(v) for v in (b.get("arguments") or {}).values())
            if m.get("role") == "bashExecution":
                yield f"{m.get('command', '')}\n{m.get('output', '')}"


def timed(f, n=5):
    ts = []
    out = None
    for _ in range(n):
        t = time.perf_counter()
        out = f()
        ts.append((time.perf_counter() - t) * 1e3)
    ts.sort()
    return ts[len(ts) // 2], out


def main():
    agent = sys.argv[1]
    max_mb = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    t = time.perf_counter()
    docs = [s for s in texts(agent, max_mb << 20) if s]
    text_mb = sum(len(s.encode()) for s in docs) / 1e6
    print(f"{len(docs)} rows, {text_mb:.0f} MB of text, extracted in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    rows = []
    variants = {
        "A. unicode61, external content (chosen)": (
            "CREATE TABLE docs(rowid INTEGER PRIMARY KEY, text TEXT);"
            "CREATE VIRTUAL TABLE fts USING fts5(text, content='docs', content_rowid='rowid',"
            " tokenize='unicode61 remove_diacritics 2')", True),
        "B. unicode61, contentless": (
            "CREATE VIRTUAL TABLE fts USING fts5(text, content='', tokenize='unicode61 remove_diacritics 2')", False),
        "C. trigram (substring)": (
            "CREATE TABLE docs(rowid INTEGER PRIMARY KEY, text TEXT);"
            "CREATE VIRTUAL TABLE fts USING fts5(text, content='docs', content_rowid='rowid', tokenize='trigram')", True),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, (schema, with_docs) in variants.items():
            path = os.path.join(tmp, "x.sqlite")
            if os.path.exists(path):
                os.unlink(path)
            c = sqlite3.connect(path)
            c.execute("PRAGMA journal_mode=WAL")
            c.execute("PRAGMA synchronous=OFF")
            c.executescript(schema)
            t = time.perf_counter()
            with c:
                for i, s in enumerate(docs, 1):
                    if with_docs:
                        c.execute("INSERT INTO docs(rowid, text) VALUES (?, ?)", (i, s))
                    c.execute("INSERT INTO fts(rowid, text) VALUES (?, ?)", (i, s))
            build = time.perf_counter() - t
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            size = os.path.getsize(path) / 1e6
            snip = "snippet(fts, 0, '[', ']', '…', 24)" if with_docs else "rowid"
            q = lambda m: lambda: c.execute(
                f"SELECT rowid, {snip} FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT 20", (m,)).fetchall()
            rare, _ = timed(q('"quokkaflux"'))
            phrase, _ = timed(q('"purple elephant migration"'))
            common, _ = timed(q('"compaction"'), 3)
            rows.append((name, f"{build:.1f} s ({text_mb / build:.0f} MB/s)", f"{size:.0f} MB ({size / text_mb:.2f}x text)",
                         f"{rare:.2f} ms", f"{phrase:.2f} ms", f"{common:.0f} ms"))
            c.close()
    rare, _ = timed(lambda: [s for s in docs if "quokkaflux" in s], 3)
    common, _ = timed(lambda: [s for s in docs if "compaction" in s][:20], 3)
    rows.append(("D. brute force over the text in memory (no index)", "-", f"{text_mb:.0f} MB RAM", f"{rare:.0f} ms", "-",
                 f"{common:.0f} ms (first 20, unranked)"))
    print(f"Text: {len(docs)} rows, {text_mb:.0f} MB (from the first {max_mb} MB of sessions), SQLite {sqlite3.sqlite_version} (Python).\n")
    print("| variant | build | size | rare word, top 20 | phrase, top 20 | common word, top 20 |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
