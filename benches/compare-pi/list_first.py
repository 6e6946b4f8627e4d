#!/usr/bin/env python3
"""First listing (no index) and full-read listing, two builds of history-bench and Pi's listAll,
warm and cold, in one run, with CPU time (user + sys). Ad hoc companion of bench.py.

usage: HB_NEW=... HB_OLD=... list_first.py AGENT_DIR RUNS
AGENT_DIR's history.sqlite is deleted: point it at a copy (a dir with a `sessions` symlink).
"""
import os, sys, json
from pathlib import Path
os.environ.setdefault("REPO", str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("OUR_PI", "pi")
os.environ.setdefault("HISTORY_BENCH", os.environ["HB_NEW"])
os.environ.setdefault("PI_NODE", "/tmp/realpi/bin/node")
os.environ.setdefault("PI_PKG_DIR", "/tmp/realpi/pi/node_modules/@earendil-works/pi-coding-agent")
os.environ.setdefault("CORPORA", "x")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench
import subprocess, time as _time
def run_once(cmd, env=None, devnull=False):
    full = ["/usr/bin/time", "-v"] + cmd
    t = _time.perf_counter()
    p = subprocess.run(full, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = (_time.perf_counter() - t) * 1e3
    rss = 0.0; cpu = 0.0
    for line in p.stderr.splitlines():
        if "Maximum resident set size" in line:
            rss = int(line.split(":")[1]) / 1024
        if "User time (seconds)" in line or "System time (seconds)" in line:
            cpu += float(line.split(":")[1]) * 1e3
    if p.returncode not in (0, 1):
        raise RuntimeError(p.stderr[-2000:])
    CPU.append(cpu)
    return wall, rss, (p.stdout or "")
CPU = []
bench.run_once = run_once
agent = Path(sys.argv[1]); runs = int(sys.argv[2])
env = dict(os.environ, PI_CODING_AGENT_DIR=str(agent), PI_PKG_DIR=os.environ["PI_PKG_DIR"])
env.pop("PI_SESSION_STORE", None); env.pop("PI_CODING_AGENT_SESSION_DIR", None)
files = bench.files_of(agent)
index = agent / "history.sqlite"
index_files = [index, Path(str(index) + "-wal"), Path(str(index) + "-shm")]
pi_js = str(Path(__file__).resolve().parent / "pi_bench.mjs")
print(bench.corpus_info(agent), flush=True)
def rm_index():
    for p in index_files:
        if p.exists(): p.unlink()
def first(name, hb, cold):
    walls=[]; rss=[]; out=""
    if not cold:
        rm_index(); bench.run_once([hb, "list", str(agent)], env)  # warm the page cache
    for _ in range(runs):
        rm_index()
        if cold: bench.evict(files)
        w, r, out = bench.run_once([hb, "list", str(agent)], env)
        walls.append(w); rss.append(r)
    import statistics
    res = {"name": name, "ms": statistics.median(walls), "min": min(walls), "max": max(walls), "rss": statistics.median(rss), "out": out.strip().splitlines()[0] if out.strip() else ""}
    print(f"  {name:<50} {res['ms']:>9.1f} ms (min {res['min']:.1f}, max {res['max']:.1f}) rss {res['rss']:.0f} MB -> {res['out'][:70]}", flush=True)
    return res
R = {}
import statistics as _st
_m = bench.measure
def measure(*a, **k):
    CPU.clear(); r = _m(*a, **k); c = CPU[-k.get("runs", 5):]; r["cpu"] = _st.median(c); print(f"      cpu median {r['cpu']:.0f} ms", flush=True); return r
_f = first
def first(*a):
    CPU.clear(); r = _f(*a); c = CPU[-runs:]; r["cpu"] = _st.median(c); print(f"      cpu median {r['cpu']:.0f} ms", flush=True); return r
bench.measure = measure
for cold in (False, True):
    t = "cold" if cold else "warm"
    cp = files if cold else None
    R[f"first_new_{t}"] = first(f"first list (no index), {t}: new", os.environ["HB_NEW"], cold)
    R[f"first_old_{t}"] = first(f"first list (no index), {t}: old (main)", os.environ["HB_OLD"], cold)
    R[f"noindex_new_{t}"] = bench.measure(f"list --no-index, {t}: new", [os.environ["HB_NEW"], "list", str(agent), "--no-index"], env, runs=runs, cold_paths=cp)
    R[f"noindex_old_{t}"] = bench.measure(f"list --no-index, {t}: old (main)", [os.environ["HB_OLD"], "list", str(agent), "--no-index"], env, runs=runs, cold_paths=cp)
    R[f"pi_{t}"] = bench.measure(f"Pi listAll, {t}", [os.environ["PI_NODE"], pi_js, "list"], env, runs=runs, cold_paths=cp)
rm_index()
json.dump(R, sys.stdout, indent=1)
