#!/bin/bash
# Builds the history index of one corpus with two `pi` binaries and checks that searches,
# `pi sessions stats` and the index rows are byte-identical (issue #20: a faster build must
# not change results). Usage: benches/index-identical.sh PI_A PI_B AGENT_DIR
# (AGENT_DIR as written by `gen-corpus`; its history.sqlite is deleted and rebuilt twice).
set -u
[ $# -eq 3 ] || { echo "usage: $0 PI_A PI_B AGENT_DIR" >&2; exit 2; }
dump() {
  local bin=$1 dir=$2
  rm -f "$dir"/history.sqlite "$dir"/history.sqlite-wal "$dir"/history.sqlite-shm
  export PI_CODING_AGENT_DIR=$dir
  for q in quokkaflux '"purple elephant migration"' compaction 'parser index' 'read*' \
           'error OR fail' the; do
    echo "== search $q"
    # The build's own note on stderr carries its duration: left out.
    "$bin" sessions search --json --limit 50 "$q" 2> >(grep -v '^pi: indexed' >&2)
  done
  for by in "" "--by day" "--by model" "--by tool"; do
    echo "== stats $by"
    "$bin" sessions stats --json $by
    "$bin" sessions stats $by
  done
  sqlite3 "$dir/history.sqlite" "SELECT count(*), max(rowid) FROM docs;
    SELECT count(*) FROM entries; SELECT count(*) FROM tool_uses;
    SELECT sid, key, size, offset, text_offset, entry_count, message_count FROM sessions
    ORDER BY sid"
}
a=$(mktemp); b=$(mktemp)
trap 'rm -f "$a" "$b"' EXIT
dump "$1" "$3" > "$a" 2>&1
dump "$2" "$3" > "$b" 2>&1
if cmp -s "$a" "$b"; then echo "identical ($(wc -l < "$a") lines)"; else diff "$a" "$b" | head -40; exit 1; fi
