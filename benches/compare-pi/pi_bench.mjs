// Real Pi's SessionManager on the benchmark corpus (deep imports by file path, as
// /work/shared/realpi/oracle.mjs does: the package exports map exposes only ".").
//   node pi_bench.mjs open FILE      SessionManager.open + buildSessionContext
//   node pi_bench.mjs openin FILE N  in-process medians of N runs: SessionManager.open alone,
//                                    and open + buildSessionContext (JSON, milliseconds)
//   node pi_bench.mjs list           SessionManager.listAll()   (PI_CODING_AGENT_DIR)
//   node pi_bench.mjs search TERM    listAll, then a case-insensitive substring match over
//                                    each session's allMessagesText (what /resume searches)
const PKG = process.env.PI_PKG_DIR;
const { SessionManager } = await import(`${PKG}/dist/core/session-manager.js`);
const [mode, arg] = process.argv.slice(2);
if (mode === "open") {
  const sm = SessionManager.open(arg);
  const ctx = sm.buildSessionContext();
  console.log(ctx.messages.length);
} else if (mode === "openin") {
  const n = Number(process.argv[4] || 3);
  const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const open = [], ctx = [];
  let messages = 0;
  for (let i = 0; i < n; i++) {
    let t = performance.now();
    SessionManager.open(arg);
    open.push(performance.now() - t);
    t = performance.now();
    messages = SessionManager.open(arg).buildSessionContext().messages.length;
    ctx.push(performance.now() - t);
  }
  console.log(JSON.stringify({ runs: n, messages, open_ms: median(open), open_context_ms: median(ctx) }));
} else if (mode === "list") {
  const all = await SessionManager.listAll();
  console.log(all.length);
} else if (mode === "search") {
  const needle = arg.toLowerCase();
  const all = await SessionManager.listAll();
  const hits = all.filter((s) => s.allMessagesText.toLowerCase().includes(needle));
  console.log(hits.length);
} else {
  console.error("usage: pi_bench.mjs open FILE | list | search TERM");
  process.exit(2);
}
