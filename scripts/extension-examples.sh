#!/usr/bin/env bash
# Loads each single-file example extension of Pi 1.6.0 (examples/extensions/*.ts of the npm
# package) with a print-mode prompt against the fake LLM, and counts how many load and
# answer. Real Pi 1.6.0: 68 of 70 (see docs/extensions.md).
#
# usage: scripts/extension-examples.sh [EXAMPLES_DIR] [PI_BINARY]
#   EXAMPLES_DIR defaults to the real Pi install used for comparisons
#   (/tmp/hcli-realpi/pi/node_modules/@earendil-works/pi-coding-agent/examples/extensions).
# Prints one line per example (ok / FAIL and the first error line) and the count.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
examples="${1:-/tmp/hcli-realpi/pi/node_modules/@earendil-works/pi-coding-agent/examples/extensions}"
pi="${2:-$root/target/release/pi}"
fake="$root/target/release/pi-fake-llm"
[ -d "$examples" ] || { echo "no examples directory: $examples" >&2; exit 2; }
[ -x "$pi" ] && [ -x "$fake" ] || { echo "build first: cargo build --release -p pi-cli -p pi-fake-llm" >&2; exit 2; }

work="$(mktemp -d)"
trap 'kill "$fake_pid" 2>/dev/null; rm -rf "$work"' EXIT
echo '{"turns": [], "default_text": "Hello from the fake model."}' > "$work/script.json"
"$fake" --script "$work/script.json" --port-file "$work/port" 2>/dev/null &
fake_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port="$(cat "$work/port")"
mkdir -p "$work/agent" "$work/cwd"
sed "s/127.0.0.1:18765/127.0.0.1:$port/" "$root/fixtures/realpi/tricky/agent/models.json" > "$work/agent/models.json"

total=0
ok=0
for ext in "$examples"/*.ts; do
  total=$((total + 1))
  name="$(basename "$ext")"
  out="$(cd "$work/cwd" && PI_CODING_AGENT_DIR="$work/agent" XDG_CACHE_HOME="$work/cache" \
    timeout 60 "$pi" --no-session --model fakeoai/fake-model -e "$ext" -p "hello" 2>"$work/err")"
  code=$?
  if [ $code -eq 0 ] && [ "$out" = "Hello from the fake model." ]; then
    ok=$((ok + 1))
    echo "ok    $name"
  else
    echo "FAIL  $name (exit $code): $(grep -v '^\s*$' "$work/err" | head -1 | cut -c1-160)"
  fi
done
echo "$ok of $total single-file examples loaded and answered"
