#!/usr/bin/env python3
"""Per-turn cost on huge sessions, ours vs real Pi 1.6.0 (issue 13); writes a section of
docs/performance.md between the markers <!-- turns:begin --> and <!-- turns:end -->.

Driven by run.sh (TURNS=1 or TURNS=only) or by hand with the variables below. Every figure
is a whole process (start-up included) against a scripted fake LLM on 127.0.0.1, with peak
RSS from /usr/bin/time -v; medians of RUNS runs. Sessions (benches/src/bin/gen-session.rs,
seeded) live under WORK:

* small.jsonl: SMALL_MB, ending in a compaction that keeps its last turns;
* big.jsonl:   BIG_MB, same generator and the same final compaction (so the same context
  size as small.jsonl, give or take a few turns);
* open.jsonl:  BIG_MB without any compaction (the context is the whole branch), for
  inspect, export and get_messages.

Rows:
1. resume + one prompt in print mode (`--session F --model M -p hi`) on big.jsonl;
2. RPC: one process per session, TURNS_PER_RUN prompts, the median time from sending
   `prompt` to `agent_end`, and the process's peak RSS; small.jsonl vs big.jsonl;
3. inspect --json, export jsonl/html/md and RPC get_messages on open.jsonl (peak RSS
   against the file's size);
4. the TUI's first frame on a TUI_MB session (tmux; ours only, when tmux is installed).
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(os.environ["REPO"])
PI = os.environ["OUR_PI"]
FAKE = os.environ["FAKE_LLM"]
GEN = os.environ["GEN_SESSION"]
NODE = os.environ.get("PI_NODE", "")
PKG = os.environ.get("PI_PKG_DIR", "")
WORK = Path(os.environ.get("TURNS_WORK", "/tmp/pi-turns"))
RUNS = int(os.environ.get("RUNS", "3"))
SMALL_MB = float(os.environ.get("SMALL_MB", "1"))
BIG_MB = float(os.environ.get("TURNS_BIG_MB", "100"))
TUI_MB = float(os.environ.get("TUI_MB", "50"))
TURNS_PER_RUN = int(os.environ.get("TURNS_PER_RUN", "5"))
# Goal 5 (memory per message held in a context): one linear branch of this many
# alternating user/assistant messages, nothing compacted, so the whole file is the context.
CHAIN_ENTRIES = int(os.environ.get("CHAIN_ENTRIES", "100000"))
MODEL = "fakeoai/fake-model"
OUT_MD = Path(os.environ.get("TURNS_MD", REPO / "docs" / "performance.md"))
BEGIN, END = "<!-- turns:begin -->", "<!-- turns:end -->"
HAVE_PI = bool(NODE) and Path(NODE).exists() and Path(PKG).exists()


def gen(name, mb, shape):
    path = WORK / name
    stamp = WORK / f".{name}.{mb}.{shape}"
    if not stamp.exists():
        subprocess.run([GEN, str(path), str(mb), shape], check=True)
        stamp.touch()
    return path


def gen_chain(entries):
    """A session that is one linear branch of short alternating user/assistant messages
    with no compaction: every entry is in the context sent with the next prompt."""
    path = WORK / f"chain-{entries}.jsonl"
    if path.exists():
        return path
    with open(path, "w") as out:
        out.write(json.dumps({"type": "session", "version": 3, "id": "chain", "timestamp": "2026-01-01T00:00:00.000Z",
                              "cwd": "/tmp"}, separators=(",", ":")) + "\n")
        parent = None
        for i in range(entries):
            eid = "%08x" % i
            if i % 2 == 0:
                msg = {"role": "user", "content": f"question {i}: please look at the file and tell me what it does",
                       "timestamp": i}
            else:
                msg = {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}: it parses the input"}],
                       "api": "openai-completions", "provider": "fakeoai", "model": "fake-model",
                       "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                                 "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                       "stopReason": "stop", "timestamp": i}
            out.write(json.dumps({"type": "message", "id": eid, "parentId": parent,
                                  "timestamp": "2026-01-01T00:00:00.000Z", "message": msg},
                                 separators=(",", ":")) + "\n")
            parent = eid
    return path


def copy_for(src, name, cwd):
    """A copy of a generated session whose header names `cwd` (Pi and we refuse to
    resume a session whose working directory does not exist), alone in its own
    directory: all generated sessions share one session id, and a program that
    looks a session up by id in the file's directory must not find another copy."""
    d = WORK / "copies" / name
    d.mkdir(parents=True, exist_ok=True)
    dst = d / "session.jsonl"
    with open(src, "rb") as f, open(dst, "wb") as out:
        header = json.loads(f.readline())
        header["cwd"] = str(cwd)
        out.write(json.dumps(header, separators=(",", ":")).encode() + b"\n")
        shutil.copyfileobj(f, out, 1 << 20)
    return dst


def start_fake():
    port_file = WORK / "fake.port"
    port_file.unlink(missing_ok=True)
    script = WORK / "script.json"
    script.write_text(json.dumps({"turns": [], "default_text": "ok"}))
    proc = subprocess.Popen([FAKE, "--port", "0", "--script", str(script), "--port-file", str(port_file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if port_file.exists() and port_file.read_text().strip():
            return proc, int(port_file.read_text().strip())
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the fake LLM did not start")


def agent_dir(port):
    agent = WORK / "agent"
    agent.mkdir(parents=True, exist_ok=True)
    models = json.loads((REPO / "fixtures/realpi/tricky/agent/models.json").read_text())
    for p in models["providers"].values():
        p["baseUrl"] = p["baseUrl"].replace("18765", str(port))
    (agent / "models.json").write_text(json.dumps(models, indent=1))
    return agent


def envs(agent):
    env = dict(os.environ, PI_CODING_AGENT_DIR=str(agent), PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1",
               PI_TELEMETRY="0", NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    for k in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PI_SESSION_STORE", "PI_CODING_AGENT_SESSION_DIR"]:
        env.pop(k, None)
    return env


def pi_cmd():
    return [NODE, str(Path(PKG) / "dist/bundle/cli.js")]


def rss_of(stderr):
    for line in stderr.splitlines():
        if "Maximum resident set size" in line:
            return int(line.split(":")[1]) / 1024
    return 0.0


def run_once(cmd, env, cwd):
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    wall = (time.perf_counter() - t) * 1e3
    if p.returncode != 0:
        raise RuntimeError(f"{cmd} failed ({p.returncode}): {p.stderr[-2000:]}")
    return wall, rss_of(p.stderr), p.stdout


def measure(name, cmd, env, cwd, runs=RUNS, warmup=True):
    if warmup:
        run_once(cmd, env, cwd)
    walls, rsss, out = [], [], ""
    for _ in range(runs):
        w, r, out = run_once(cmd, env, cwd)
        walls.append(w)
        rsss.append(r)
    res = {"name": name, "cmd": " ".join(cmd), "ms": statistics.median(walls), "min": min(walls),
           "max": max(walls), "rss": statistics.median(rsss), "out": out.strip()[:80]}
    print(f"  {name:<52} {res['ms']:>9.1f} ms  rss {res['rss']:>6.0f} MB  -> {res['out'][:40]!r}", flush=True)
    return res


class Rpc:
    """One RPC process under /usr/bin/time -v."""

    def __init__(self, cmd, env, cwd):
        self.p = subprocess.Popen(["/usr/bin/time", "-v"] + cmd, env=env, cwd=cwd, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)

    def send(self, obj):
        self.p.stdin.write(json.dumps(obj) + "\n")
        self.p.stdin.flush()

    def until(self, pred):
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("RPC process ended: " + self.p.stderr.read()[-2000:])
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if pred(rec):
                return rec

    def turn(self, text):
        """ms from sending `prompt` until the run has settled (`agent_settled`: the
        session written, auto-compaction checked; both programs emit it)."""
        t = time.perf_counter()
        self.send({"type": "prompt", "message": text})
        rec = self.until(lambda r: r.get("type") == "response" and r.get("command") == "prompt")
        if not rec.get("success"):
            raise RuntimeError(f"prompt refused: {rec}")
        self.until(lambda r: r.get("type") == "agent_settled")
        return (time.perf_counter() - t) * 1e3

    def command(self, obj):
        t = time.perf_counter()
        self.send(obj)
        rec = self.until(lambda r: r.get("type") == "response" and r.get("command") == obj["type"])
        return (time.perf_counter() - t) * 1e3, rec

    def close(self):
        self.p.stdin.close()
        self.p.stdout.read()
        err = self.p.stderr.read()
        self.p.wait()
        return rss_of(err)


def rpc_turns(name, cmd, env, cwd):
    """Median per-turn ms over RUNS processes of TURNS_PER_RUN turns; median peak RSS."""
    turns, rsss = [], []
    for run in range(RUNS):
        rpc = Rpc(cmd, env, cwd)
        for n in range(TURNS_PER_RUN):
            turns.append(rpc.turn(f"turn {run}.{n}"))
        rsss.append(rpc.close())
    res = {"name": name, "cmd": " ".join(cmd), "ms": statistics.median(turns), "min": min(turns),
           "max": max(turns), "rss": statistics.median(rsss)}
    print(f"  {name:<52} {res['ms']:>9.1f} ms/turn  rss {res['rss']:>6.0f} MB", flush=True)
    return res


def rpc_get_messages(name, cmd, env, cwd):
    walls, rsss, count = [], [], 0
    for _ in range(RUNS):
        rpc = Rpc(cmd, env, cwd)
        ms, rec = rpc.command({"type": "get_messages"})
        count = len(rec.get("data", {}).get("messages", []))
        walls.append(ms)
        rsss.append(rpc.close())
    res = {"name": name, "cmd": " ".join(cmd), "ms": statistics.median(walls), "min": min(walls),
           "max": max(walls), "rss": statistics.median(rsss), "out": f"{count} messages"}
    print(f"  {name:<52} {res['ms']:>9.1f} ms  rss {res['rss']:>6.0f} MB  ({count} messages)", flush=True)
    return res


def tui_first_frame(file, env, cwd):
    """ms from starting the TUI in tmux until the last user prompt of the session shows."""
    if shutil.which("tmux") is None:
        return None
    last_prompt = None
    with open(file, "rb") as f:
        f.seek(max(0, file.stat().st_size - (1 << 20)))
        for line in f.read().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            m = e.get("message") or {}
            if m.get("role") == "user":
                c = m.get("content")
                text = c if isinstance(c, str) else " ".join(b.get("text", "") for b in c or [] if isinstance(b, dict))
                last_prompt = text.split("\n")[0][:24]
    if not last_prompt:
        return None
    walls = []
    for run in range(RUNS):
        sock = f"pi-turns-{os.getpid()}-{run}"
        cmd = " ".join([PI, "--session", str(file), "--model", MODEL])
        t = time.perf_counter()
        subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-x", "160", "-y", "48", cmd], env=env, cwd=cwd,
                       check=True)
        seen = None
        deadline = t + 30
        while time.perf_counter() < deadline:
            pane = subprocess.run(["tmux", "-L", sock, "capture-pane", "-p"], capture_output=True, text=True).stdout
            if last_prompt in pane:
                seen = (time.perf_counter() - t) * 1e3
                break
            time.sleep(0.01)
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
        if seen is not None:
            walls.append(seen)
    if not walls:
        return None
    res = {"name": "TUI first frame with the latest messages (tmux)", "ms": statistics.median(walls),
           "min": min(walls), "max": max(walls), "rss": 0.0}
    print(f"  {res['name']:<52} {res['ms']:>9.1f} ms", flush=True)
    return res


def fmt(ms):
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.1f} ms"


def verdict(ok):
    return "met" if ok else "**missed**"


def main():
    started = time.time()
    WORK.mkdir(parents=True, exist_ok=True)
    small = gen("small.jsonl", SMALL_MB, "compacted")
    big = gen("big.jsonl", BIG_MB, "compacted")
    opened = gen("open.jsonl", BIG_MB, "open")
    tui = gen("tui.jsonl", TUI_MB, "compacted")
    chain = gen_chain(CHAIN_ENTRIES)
    fake, port = start_fake()
    try:
        agent = agent_dir(port)
        env = envs(agent)
        cwd = WORK / "cwd"
        cwd.mkdir(exist_ok=True)
        # Each program resumes its own copies: both append to the session they resume.
        copies = {}
        for who in ["ours", "pi"]:
            for src in [small, big, chain]:
                copies[(who, src.name)] = copy_for(src, f"{who}-{src.stem}", cwd)
        opened = copy_for(opened, "ours-open", cwd)
        tui = copy_for(tui, "ours-tui", cwd)
        r = {"small_bytes": small.stat().st_size, "big_bytes": big.stat().st_size,
             "open_bytes": opened.stat().st_size}
        print(f"sessions: small {r['small_bytes'] / 1e6:.1f} MB, big {r['big_bytes'] / 1e6:.1f} MB, "
              f"open {r['open_bytes'] / 1e6:.1f} MB", flush=True)
        ob = copies[("ours", "big.jsonl")]
        r["resume_ours"] = measure("resume big + one prompt, print mode: ours",
                                   [PI, "--session", str(ob), "--model", MODEL, "-p", "hi"], env, cwd)
        if HAVE_PI:
            pb = copies[("pi", "big.jsonl")]
            r["resume_pi"] = measure("resume big + one prompt, print mode: Pi",
                                     pi_cmd() + ["--session", str(pb), "--model", MODEL, "-p", "hi"], env, cwd)
        # Each run resumes a fresh copy: the prompt compacts the chain (it is far over the window).
        r["chain_bytes"] = chain.stat().st_size
        def fresh_chain(who, program):
            """The prompt appends (and compacts): each run starts from a fresh copy, alone in
            its directory; the copy is made inside the timed process (~35 MB `cp`)."""
            src = copies[(who, chain.name)]
            run = src.parent / "run" / "session.jsonl"
            run.parent.mkdir(exist_ok=True)
            return ["sh", "-c", f'cp {src} {run} && exec "$@"', "sh"] + program + [
                "--session", str(run), "--model", MODEL, "-p", "hi"]
        r["chain_ours"] = measure("resume whole-context chain + one prompt: ours",
                                  fresh_chain("ours", [PI]), env, cwd)
        if HAVE_PI:
            r["chain_pi"] = measure("resume whole-context chain + one prompt: Pi",
                                    fresh_chain("pi", pi_cmd()), env, cwd)
        for size in ["small", "big"]:
            f = copies[("ours", f"{size}.jsonl")]
            r[f"rpc_{size}_ours"] = rpc_turns(f"RPC per turn, {size}: ours",
                                              [PI, "--mode", "rpc", "--session", str(f), "--model", MODEL], env, cwd)
            if HAVE_PI:
                f = copies[("pi", f"{size}.jsonl")]
                r[f"rpc_{size}_pi"] = rpc_turns(f"RPC per turn, {size}: Pi",
                                                pi_cmd() + ["--mode", "rpc", "--session", str(f), "--model", MODEL],
                                                env, cwd)
        r["inspect_ours"] = measure("inspect --json, open session: ours",
                                    ["sh", "-c", f"{PI} sessions inspect --json {opened} | wc -c"], env, cwd)
        for fmt_ in ["jsonl", "html", "md"]:
            r[f"export_{fmt_}_ours"] = measure(f"export --format {fmt_}, open session: ours",
                                               ["sh", "-c", f"{PI} sessions export --format {fmt_} {opened} | wc -c"],
                                               env, cwd)
        r["get_messages_ours"] = rpc_get_messages("RPC get_messages, open session: ours",
                                                  [PI, "--mode", "rpc", "--session", str(opened), "--model", MODEL],
                                                  env, cwd)
        r["tui_ours"] = tui_first_frame(tui, env, cwd)
        r["tui_bytes"] = tui.stat().st_size
    finally:
        fake.kill()
        fake.wait()
    (Path(__file__).resolve().parent / "turns-results.json").write_text(json.dumps(r, indent=1))
    write_md(r, started)


def write_md(r, started):
    mb = lambda b: b / 1e6  # noqa: E731
    out = [BEGIN, "## Per-turn cost on huge sessions (issue 13)\n"]
    out.append(f"Generated by `benches/compare-pi/turns.py` (run by `run.sh`) on "
               f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}; load average at start "
               f"{os.getloadavg()[0]:.1f} on a shared machine. Whole processes against the scripted fake LLM "
               f"(`pi-fake-llm`, OpenAI chat-completions SSE on 127.0.0.1), medians of {RUNS} runs after a warm-up "
               f"run, peak RSS from `/usr/bin/time -v`. Sessions from `gen-session` (seeded): *small* "
               f"{mb(r['small_bytes']):.1f} MB and *big* {mb(r['big_bytes']):.1f} MB both end in a compaction keeping "
               f"their last turns (same context size); *open* {mb(r['open_bytes']):.1f} MB has no compaction.\n")
    out.append("| operation | median | peak RSS | goal |")
    out.append("|---|---|---|---|")

    def row(label, res, goal=""):
        rss = f"{res['rss']:.0f} MB" if res.get("rss") else ""
        out.append(f"| {label} | {fmt(res['ms'])} | {rss} | {goal} |")

    ro = r["resume_ours"]
    if "resume_pi" in r:
        rp = r["resume_pi"]
        sp, mem = rp["ms"] / ro["ms"], ro["rss"] / rp["rss"]
        row("resume big + one prompt (`-p`): ours", ro,
            f"{sp:.1f}x faster than Pi (≥10x: {verdict(sp >= 10)}); RSS {mem:.2f}x Pi's (≤0.25x: {verdict(mem <= 0.25)})")
        row("resume big + one prompt (`-p`): Pi", rp)
    else:
        row("resume big + one prompt (`-p`): ours", ro, "Pi not installed: no ratio")
    so, bo = r["rpc_small_ours"], r["rpc_big_ours"]
    q = bo["ms"] / so["ms"]
    row("RPC per turn, small: ours", so)
    row("RPC per turn, big: ours", bo,
        f"{q:.2f}x the small one (≤1.5x: {verdict(q <= 1.5)}); RSS ≤150 MB: {verdict(bo['rss'] <= 150)}")
    for size in ["small", "big"]:
        if f"rpc_{size}_pi" in r:
            row(f"RPC per turn, {size}: Pi", r[f"rpc_{size}_pi"])
    ob = r["open_bytes"]
    for key, label in [("inspect_ours", "`sessions inspect --json`"), ("export_jsonl_ours", "`sessions export --format jsonl`"),
                       ("export_html_ours", "`sessions export --format html`"),
                       ("export_md_ours", "`sessions export --format md`"), ("get_messages_ours", "RPC `get_messages` (open + one command)")]:
        res = r[key]
        x = res["rss"] * 2**20 / ob
        row(f"{label}, open session: ours", res, f"RSS {x:.2f}x the file (≤2.5x: {verdict(x <= 2.5)})")
    if r.get("tui_ours"):
        t = r["tui_ours"]
        row(f"TUI first frame with the latest messages, {mb(r['tui_bytes']):.0f} MB compacted session: ours", t,
            f"≤300 ms: {verdict(t['ms'] <= 300)}")
    if r.get("chain_ours"):
        co, cb = r["chain_ours"], r["chain_bytes"]
        x = co["rss"] * 2**20 / cb
        goal = f"RSS {x:.1f}x the file (goal 5, ≤3x per message held: {verdict(x <= 3)})"
        if r.get("chain_pi"):
            cp = r["chain_pi"]
            goal += f"; {cp['ms'] / co['ms']:.1f}x faster than Pi, RSS {co['rss'] / cp['rss']:.2f}x Pi's"
        row(f"resume a {mb(cb):.0f} MB whole-context chain ({CHAIN_ENTRIES:,} messages) + one prompt: ours", co, goal)
        if r.get("chain_pi"):
            row(f"resume the same chain + one prompt: Pi", r["chain_pi"],
                f"RSS {r['chain_pi']['rss'] * 2**20 / cb:.1f}x the file")
    out.append("\nRaw: `benches/compare-pi/turns-results.json`.\n")
    out.append(END)
    section = "\n".join(out)
    text = OUT_MD.read_text() if OUT_MD.exists() else "# Performance\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    elif "## Notes on this run" in text:
        i = text.index("## Notes on this run")
        text = text[:i] + section + "\n\n" + text[i:]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    OUT_MD.write_text(text)
    print(f"wrote {OUT_MD}")


if __name__ == "__main__":
    sys.exit(main())
