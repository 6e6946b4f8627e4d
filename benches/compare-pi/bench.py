#!/usr/bin/env python3
"""Ours vs real Pi 1.6.0 (and ripgrep) on the same generated corpus; writes docs/performance.md.

Driven by run.sh, which installs Pi, builds our release binaries and generates the corpora.
Every figure is the median of RUNS runs of a whole process (start-up included), with peak RSS
from /usr/bin/time -v. "cold" means the page cache was emptied of the corpus and the index
(posix_fadvise DONTNEED per file after a sync); dentries and inodes stay cached.
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(os.environ["REPO"])
PI = os.environ["OUR_PI"]
HB = os.environ["HISTORY_BENCH"]
NODE = os.environ["PI_NODE"]
PKG = os.environ["PI_PKG_DIR"]
HERE = Path(__file__).resolve().parent
RUNS = int(os.environ.get("RUNS", "5"))
CORPORA = [Path(p) for p in os.environ["CORPORA"].split(":")]  # agent dirs, small to large
OUT_MD = ROOT / "docs" / "performance.md"
OUT_PNG = ROOT / "docs" / "performance.png"


def files_of(agent):
    return sorted((agent / "sessions").rglob("*.jsonl"))


def evict(paths):
    os.sync()
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def run_once(cmd, env=None, devnull=False):
    """Wall ms, peak RSS MB and stdout of one run."""
    full = ["/usr/bin/time", "-v"] + cmd
    t = time.perf_counter()
    p = subprocess.run(full, env=env, stdout=subprocess.DEVNULL if devnull else subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    wall = (time.perf_counter() - t) * 1e3
    rss = 0.0
    for line in p.stderr.splitlines():
        if "Maximum resident set size" in line:
            rss = int(line.split(":")[1]) / 1024
    if p.returncode not in (0, 1):
        raise RuntimeError(f"{cmd} failed ({p.returncode}): {p.stderr[-2000:]}")
    return wall, rss, p.stdout or ""


def measure(name, cmd, env=None, runs=RUNS, cold_paths=None, warmup=True, devnull=False):
    if warmup and cold_paths is None:
        run_once(cmd, env, devnull)
    walls, rsss, out = [], [], ""
    for _ in range(runs):
        if cold_paths is not None:
            evict(cold_paths)
        w, r, out = run_once(cmd, env, devnull)
        walls.append(w)
        rsss.append(r)
    res = {
        "name": name,
        "cmd": " ".join(cmd),
        "ms": statistics.median(walls),
        "min": min(walls),
        "max": max(walls),
        "rss": statistics.median(rsss),
        "out": out.strip().splitlines()[0] if out.strip() else "",
    }
    print(f"  {name:<46} {res['ms']:>10.1f} ms  (min {res['min']:.1f}, max {res['max']:.1f})"
          f"  rss {res['rss']:.0f} MB  -> {res['out'][:60]}", flush=True)
    return res


def corpus_info(agent):
    files = files_of(agent)
    sizes = [f.stat().st_size for f in files]
    return {"sessions": len(files), "bytes": sum(sizes), "largest": max(files, key=lambda f: f.stat().st_size),
            "largest_bytes": max(sizes)}


def bench_corpus(agent, full):
    info = corpus_info(agent)
    print(f"corpus {agent}: {info['sessions']} sessions, {info['bytes'] / 1e6:.0f} MB, "
          f"largest {info['largest_bytes'] / 1e6:.0f} MB", flush=True)
    env = dict(os.environ, PI_CODING_AGENT_DIR=str(agent), PI_PKG_DIR=PKG)
    env.pop("PI_SESSION_STORE", None)
    env.pop("PI_CODING_AGENT_SESSION_DIR", None)
    files = files_of(agent)
    index = agent / "history.sqlite"
    index_files = [index, Path(str(index) + "-wal"), Path(str(index) + "-shm")]
    sessions_dir = str(agent / "sessions")
    pi_js = str(HERE / "pi_bench.mjs")
    r = {"info": info}

    # The first listing ever (no index): summaries only, what `pi sessions list` does first.
    for p in index_files:
        if p.exists():
            p.unlink()
    r["list_first_ours"] = measure("first list, no index yet: ours (summaries only)", [HB, "list", str(agent)],
                                   env, runs=1, warmup=False)
    # Index build from nothing (the first `pi sessions search` ever): once, it takes a while.
    for p in index_files:
        if p.exists():
            p.unlink()
    r["build"] = measure("index build from scratch (first search)", [PI, "sessions", "search", "--json", "quokkaflux"],
                         env, runs=1, warmup=False)
    r["index_mb"] = sum(p.stat().st_size for p in index_files if p.exists()) / 1e6

    r["list_cold_ours"] = measure("list all, cold: ours (index)", [HB, "list", str(agent)], env, cold_paths=files + index_files)
    r["list_cold_pi"] = measure("list all, cold: Pi listAll", [NODE, pi_js, "list"], env, runs=3, cold_paths=files)
    r["list_warm_ours"] = measure("list all, warm: ours (index)", [HB, "list", str(agent)], env)
    r["list_warm_noindex"] = measure("list all, warm: ours without index", [HB, "list", str(agent), "--no-index"], env)
    r["list_warm_pi"] = measure("list all, warm: Pi listAll", [NODE, pi_js, "list"], env, runs=3)

    for key, term, rg_args in [
        ("rare", "quokkaflux", ["-F", "quokkaflux"]),
        ("phrase", '"purple elephant migration"', ["-F", "purple elephant migration"]),
    ]:
        r[f"search_{key}_ours"] = measure(f"search {key}: ours (warm index)", [PI, "sessions", "search", "--json", term], env)
        r[f"search_{key}_rg"] = measure(f"search {key}: rg", ["rg", "-c", *rg_args, sessions_dir], env)
        if key == "rare" or full:
            # Caches are warm from the list rows; Pi's cost is listAll whatever the term.
            r[f"search_{key}_pi"] = measure(f"search {key}: Pi listAll + substring",
                                            [NODE, pi_js, "search", term.strip('"')], env, runs=3, warmup=False)
    r["search_common_ours"] = measure("search common (top 20): ours", [PI, "sessions", "search", "--json", "--limit", "20", "compaction"], env)
    r["search_common_rg"] = measure("search common: rg -c (every file)", ["rg", "-c", "-F", "compaction", sessions_dir], env)
    r["search_common_rg20"] = measure("search common: rg | head -20",
                                      ["sh", "-c", f"rg -F compaction {sessions_dir} | head -20 | wc -l"], env)

    if full:
        big = str(info["largest"])
        # In-process open, medians inside one process: ours (mmap + newline scan floor, cold
        # scan, warm head cache, warm + context) and Pi (open, open + buildSessionContext).
        r["open_inproc_ours"] = measure("open in-process, largest: ours (history-bench open)", [HB, "open", big, str(max(RUNS, 5))], env, runs=1)
        r["open_inproc_pi"] = measure("open in-process, largest: Pi", [NODE, pi_js, "openin", big, "3"], env, runs=1, warmup=False)
        # inspect --json: warm (the head cache in $A/cache, built by the warm-up run) and with
        # no usable cache (the agent dir cannot be created, so every run scans the file).
        r["open_ours"] = measure("open + context, largest: ours (inspect, warm cache)", [PI, "sessions", "inspect", "--json", big], env, devnull=True)
        r["open_cold_ours"] = measure("open + context, largest: ours (inspect, no cache)", [PI, "sessions", "inspect", "--json", big],
                                      dict(env, PI_CODING_AGENT_DIR="/proc/no-such-agent-dir"), devnull=True)
        r["open_pi"] = measure("open + context, largest: Pi", [NODE, pi_js, "open", big], env, runs=3)
        # The last file by name is an ordinary one; appends go there.
        target = str(files[-1])
        r["append"] = measure("incremental refresh after 1 appended entry (in-process median of 21)",
                              [HB, "append", str(agent), target, "21"], env, runs=1)
        r["noop_refresh"] = measure("search when nothing changed (refresh + query), ours",
                                    [PI, "sessions", "search", "--json", "zanzibarite"], env)
    return r


def fmt_ms(ms):
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.1f} ms"


def ratio(a, b):
    return b["ms"] / a["ms"] if a["ms"] > 0 else float("inf")


def machine():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    node = subprocess.run([NODE, "--version"], capture_output=True, text=True).stdout.strip()
    rg = subprocess.run(["rg", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return (f"{platform.system()} {platform.release()}, {os.cpu_count()} vCPU ({cpu}), {mem:.0f} GiB RAM; "
            f"load average at start {os.getloadavg()[0]:.1f} (shared machine, other builds running); "
            f"Node {node}; {rg}; Pi 1.6.0")


def chart(results):
    """PNG via gnuplot when available, and an ASCII chart for the markdown either way."""
    rows = []
    for r in results:
        mb = r["info"]["bytes"] / 1e6
        rows.append((mb, r["list_warm_ours"]["ms"], r["list_warm_pi"]["ms"], r["search_rare_ours"]["ms"],
                     r["search_rare_rg"]["ms"], r["search_rare_pi"]["ms"]))
    dat = HERE / "growth.dat"
    with open(dat, "w") as f:
        f.write("# MB list_ours list_pi search_ours search_rg search_pi\n")
        for row in rows:
            f.write(" ".join(f"{v:.2f}" for v in row) + "\n")
    png = None
    if subprocess.run(["sh", "-c", "command -v gnuplot"], capture_output=True).returncode == 0:
        script = f"""
set terminal pngcairo size 900,520 noenhanced
set output '{OUT_PNG}'
set logscale y
set xlabel 'corpus size (MB)'
set ylabel 'median wall time (ms, log scale)'
set title 'History at scale: ours vs real Pi 1.6.0 and ripgrep (warm)'
set key left top
set grid
plot '{dat}' u 1:2 w lp lw 2 t 'list: ours (index)', \
     '{dat}' u 1:3 w lp lw 2 t 'list: Pi listAll', \
     '{dat}' u 1:4 w lp lw 2 t 'search rare: ours', \
     '{dat}' u 1:5 w lp lw 2 t 'search rare: rg', \
     '{dat}' u 1:6 w lp lw 2 t 'search rare: Pi'
"""
        p = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
        if p.returncode == 0:
            png = OUT_PNG
        else:
            print("gnuplot failed:", p.stderr, file=sys.stderr)
    # ASCII: log-scaled bars of the largest corpus.
    r = results[-1]
    items = [("list: ours (index)", r["list_warm_ours"]), ("list: ours (no index)", r["list_warm_noindex"]),
             ("list: Pi listAll", r["list_warm_pi"]), ("search rare: ours", r["search_rare_ours"]),
             ("search rare: rg", r["search_rare_rg"]), ("search rare: Pi", r["search_rare_pi"]),
             ("search common: ours", r["search_common_ours"]), ("search common: rg -c", r["search_common_rg"])]
    import math
    top = max(math.log10(max(i[1]["ms"], 1)) for i in items)
    lines = []
    for name, res in items:
        n = int(round(40 * math.log10(max(res["ms"], 1)) / top)) if top > 0 else 0
        lines.append(f"{name:<24} {'#' * max(n, 1):<40} {fmt_ms(res['ms'])}")
    return png, "\n".join(lines)


def faster(a, b, what):
    """'3.2x faster than what' or '1.5x slower than what' for a (ours) against b."""
    r = ratio(a, b)
    return f"{r:.1f}x faster than {what}" if r >= 1 else f"{1 / r:.1f}x slower than {what}"


def verdict(ok):
    return "met" if ok else "**missed**"


def write_md(results, started):
    full = results[-1]
    png, ascii_chart = chart(results)
    i = full["info"]
    out = []
    out.append("# Performance: history at scale, ours vs real Pi 1.6.0\n")
    out.append(f"Generated by `benches/compare-pi/run.sh` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}. "
               "The tables are generated; the section *Notes on this run* is written by hand and kept "
               "when the script rewrites the file.\n")
    out.append(f"**Machine.** {machine()}.\n")
    out.append(f"**Corpus** (`benches/src/bin/gen-corpus.rs`, seeded, Pi's per-cwd layout): {i['sessions']} sessions, "
               f"{i['bytes'] / 1e6:,.0f} MB, largest {i['largest_bytes'] / 1e6:.0f} MB; every session has branches, "
               "most have compactions; 3 sessions carry the rare word `quokkaflux` and the phrase "
               "`purple elephant migration`. The generator's vocabulary is 30 words, so common words are *very* "
               "common (every entry), the worst case for ranked search.\n")
    out.append(f"**Method.** Median of {RUNS} runs (Pi's slow rows: 3) of a whole process, start-up included; peak RSS from "
               "`/usr/bin/time -v`. Warm rows run once before measuring; cold rows empty the page cache of the corpus "
               "files (and our index) with `posix_fadvise(DONTNEED)` before each run. The machine is shared with other "
               "builds, so absolute numbers are noisy; ratios within one run are the figures to read.\n")
    out.append("Commands (`$A` = the agent dir, `$S` = `$A/sessions`):\n")
    out.append("* ours: `pi sessions search --json TERM`, `pi sessions inspect --json FILE`, `history-bench list $A` "
               "(opens the index, refreshes its summary rows and lists every session, what `pi sessions list` does; "
               "`--no-index` lists with `JsonlStore::list_sessions`, reading every file), `history-bench append $A FILE 21`, `history-bench open FILE 5` (in-process: mmap + newline scan, cold open, warm open through the head cache, warm + context); `inspect` without a cache runs with `PI_CODING_AGENT_DIR=/proc/no-such-agent-dir`;\n"
               "* Pi: `node pi_bench.mjs list|open FILE|openin FILE 3|search TERM` (`SessionManager.listAll()`, "
               "`SessionManager.open(FILE).buildSessionContext()`, in-process medians of `open` and `open` + `buildSessionContext`, listAll + substring over `allMessagesText`);\n"
               "* ripgrep: `rg -c -F TERM $S` (count per file: scans all bytes), and `rg -F TERM $S | head -20`.\n")

    def row(name, res, note=""):
        return f"| {name} | {fmt_ms(res['ms'])} | {res['rss']:.0f} MB | {note} |"

    out.append(f"\n## Largest corpus ({i['sessions']} sessions, {i['bytes'] / 1e6:,.0f} MB)\n")
    out.append("| operation | median | peak RSS | vs. |")
    out.append("|---|---|---|---|")
    f = full
    oi, pi_ = json.loads(f["open_inproc_ours"]["out"]), json.loads(f["open_inproc_pi"]["out"])
    big_mb = oi["file_bytes"] / 1e6
    out.append(f"| open {big_mb:.0f} MB, ready to interact (in-process): ours, warm head cache | {fmt_ms(oi['warm_ms'])} | | "
               f"{pi_['open_ms'] / oi['warm_ms']:.1f}x faster than Pi's open (target ≥20x: {verdict(pi_['open_ms'] / oi['warm_ms'] >= 20)}); "
               f"{oi['warm_ms'] / oi['scan_ms']:.2f}x the mmap + newline scan (target ≤3x: {verdict(oi['warm_ms'] / oi['scan_ms'] <= 3)}) |")
    out.append(f"| open, in-process: ours, cold (no cache: every line validated) | {fmt_ms(oi['cold_ms'])} | | "
               f"{pi_['open_ms'] / oi['cold_ms']:.1f}x faster than Pi's open |")
    out.append(f"| open, in-process: mmap + newline scan of the file | {fmt_ms(oi['scan_ms'])} | | the physical floor |")
    out.append(f"| open, in-process: Pi `SessionManager.open` | {fmt_ms(pi_['open_ms'])} | | |")
    out.append(f"| open + full context (in-process): ours, warm | {fmt_ms(oi['warm_context_ms'])} | | "
               f"{pi_['open_context_ms'] / oi['warm_context_ms']:.1f}x faster than Pi's open + buildSessionContext |")
    out.append(f"| open + full context (in-process): Pi | {fmt_ms(pi_['open_context_ms'])} | | |")
    oc = f["open_ours"]
    out.append(row("open + context, `pi sessions inspect --json` (process): ours, warm", oc,
                   faster(oc, f['open_pi'], "Pi") + f" (target ≥10x: {verdict(ratio(oc, f['open_pi']) >= 10)}); "
                   f"RSS {oc['rss'] / f['open_pi']['rss']:.2f}x Pi's (target ≤0.5x: {verdict(oc['rss'] <= f['open_pi']['rss'] / 2)})"))
    out.append(row("open + context (process): ours, no cache (cold scan)", f["open_cold_ours"],
                   faster(f['open_cold_ours'], f['open_pi'], "Pi") + f"; RSS {f['open_cold_ours']['rss'] / f['open_pi']['rss']:.2f}x Pi's"))
    out.append(row("open + context of the largest session: Pi (`pi_bench.mjs open`)", f["open_pi"]))
    out.append(row("list all, first ever (no index; summary rows only): ours", f["list_first_ours"],
                   faster(f['list_first_ours'], f['list_warm_noindex'], "reading every file without the index") + "; "
                   + faster(f['list_first_ours'], f['list_cold_pi'], "Pi cold")))
    out.append(row("list all, cold: ours (index)", f["list_cold_ours"], faster(f['list_cold_ours'], f['list_cold_pi'], "Pi") + f" (target ≥5x: {verdict(ratio(f['list_cold_ours'], f['list_cold_pi']) >= 5)})"))
    out.append(row("list all, cold: Pi listAll", f["list_cold_pi"]))
    out.append(row("list all, warm: ours (index)", f["list_warm_ours"], faster(f['list_warm_ours'], f['list_warm_pi'], "Pi") + f" (target ≥50x: {verdict(ratio(f['list_warm_ours'], f['list_warm_pi']) >= 50)})"))
    out.append(row("list all, warm: ours without index", f["list_warm_noindex"]))
    out.append(row("list all, warm: Pi listAll", f["list_warm_pi"]))
    for key, label in [("rare", "rare word `quokkaflux`"), ("phrase", "phrase `\"purple elephant migration\"`")]:
        o, g, p = f[f"search_{key}_ours"], f[f"search_{key}_rg"], f[f"search_{key}_pi"]
        out.append(row(f"search {label}: ours (warm index)", o,
                       faster(o, g, "rg") + f" (target ≥10x: {verdict(ratio(o, g) >= 10)}), " + faster(o, p, "Pi")))
        out.append(row(f"search {label}: rg", g))
        out.append(row(f"search {label}: Pi (listAll + substring)", p))
    o, g, g20 = f["search_common_ours"], f["search_common_rg"], f["search_common_rg20"]
    out.append(row("search common word `compaction`, top 20 ranked: ours", o,
                   faster(o, g, "rg -c") + f" (target: no slower: {verdict(o['ms'] <= g['ms'])}); " + faster(o, g20, "rg | head -20")))
    out.append(row("search common word: rg -c", g))
    out.append(row("search common word: rg \\| head -20 (unranked)", g20))
    out.append(row("incremental refresh after one appended entry (in-process)", {"ms": float(f["append"]["out"].split()[1]), "rss": f["append"]["rss"]},
                   f"target < 5 ms: {verdict(float(f['append']['out'].split()[1]) < 5)}"))
    out.append(row("search when nothing changed (process, refresh + query)", f["noop_refresh"]))
    out.append(row("index build from scratch (first search)", f["build"], f"index {f['index_mb']:,.0f} MB for {i['bytes'] / 1e6:,.0f} MB of sessions; "
                   f"{i['bytes'] / 1e6 / (f['build']['ms'] / 1e3):.0f} MB/s"))

    out.append("\n## Growth\n")
    out.append("| corpus | sessions | index build | index size | list warm: ours / Pi | list cold: ours / Pi | search rare: ours / rg / Pi | search common top 20: ours / rg -c |")
    out.append("|---|---|---|---|---|---|---|---|")
    for r in results:
        ii = r["info"]
        out.append(f"| {ii['bytes'] / 1e6:,.0f} MB | {ii['sessions']} | {fmt_ms(r['build']['ms'])} | {r['index_mb']:,.0f} MB | "
                   f"{fmt_ms(r['list_warm_ours']['ms'])} / {fmt_ms(r['list_warm_pi']['ms'])} | "
                   f"{fmt_ms(r['list_cold_ours']['ms'])} / {fmt_ms(r['list_cold_pi']['ms'])} | "
                   f"{fmt_ms(r['search_rare_ours']['ms'])} / {fmt_ms(r['search_rare_rg']['ms'])} / {fmt_ms(r['search_rare_pi']['ms'])} | "
                   f"{fmt_ms(r['search_common_ours']['ms'])} / {fmt_ms(r['search_common_rg']['ms'])} |")
    out.append("\n## Chart\n")
    if png:
        out.append(f"![growth]({png.name})\n")
    out.append("Largest corpus, median wall time (log scale):\n")
    out.append("```\n" + ascii_chart + "\n```\n")
    out.append("\n## Raw results\n")
    out.append("```json\n" + json.dumps(results, indent=1, default=str) + "\n```\n")
    notes = ""
    if OUT_MD.exists():
        old = OUT_MD.read_text()
        if "## Notes on this run" in old:
            notes = old[old.index("## Notes on this run"):old.index("## Raw results") if "## Raw results" in old else None]
    body = "\n".join(out)
    # turns.py's section (per-turn cost) is its own; keep it where it was.
    if OUT_MD.exists() and "<!-- turns:begin -->" in old and "<!-- turns:end -->" in old:
        turns = old[old.index("<!-- turns:begin -->"):old.index("<!-- turns:end -->") + len("<!-- turns:end -->")]
        body = body.replace("\n## Raw results\n", "\n" + turns + "\n\n## Raw results\n")
    if notes:
        body = body.replace("\n## Raw results\n", "\n" + notes.rstrip() + "\n\n## Raw results\n")
    OUT_MD.write_text(body)
    print(f"wrote {OUT_MD}")


def main():
    started = time.time()
    results = []
    for n, agent in enumerate(CORPORA):
        results.append(bench_corpus(agent, full=(n == len(CORPORA) - 1)))
        (HERE / "results.json").write_text(json.dumps(results, indent=1, default=str))
    write_md(results, started)


if __name__ == "__main__":
    main()
