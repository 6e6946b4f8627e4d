#!/usr/bin/env bash
# Runs every fuzz target for N seconds each (default 30), one after the other,
# and writes a summary table (target, seconds, execs, corpus size, findings).
#
#   fuzz/run-all.sh            # 30 s per target
#   fuzz/run-all.sh 600        # 10 minutes per target
#   fuzz/run-all.sh 60 sse_decoder session_load   # only some targets
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). On a stable toolchain the
# sanitizer flags need RUSTC_BOOTSTRAP=1, which this script sets.
# The committed seeds in fuzz/corpus/<target> are read, never written: what the
# fuzzer finds goes to fuzz/target/corpus/<target> (gitignored) and crashes to
# fuzz/artifacts/<target>. Logs and the summary go to fuzz/target/runs/.
set -u
secs="${1:-30}"
shift || true
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
export RUSTC_BOOTSTRAP=1
if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi
runs="$here/target/runs"
mkdir -p "$runs"
summary="${SUMMARY:-$runs/summary-$(date -u +%Y%m%dT%H%M%SZ).md}"

{
    echo "| target | seconds | execs | execs/s | corpus | peak RSS MB | findings |"
    echo "|---|---:|---:|---:|---:|---:|---|"
} > "$summary"

status=0
for t in "${targets[@]}"; do
    work="$here/target/corpus/$t"
    seeds="$here/corpus/$t"
    mkdir -p "$work" "$seeds" "$here/artifacts/$t"
    log="$runs/$t.log"
    before=$(ls "$here/artifacts/$t" | wc -l)
    start=$(date +%s)
    # -rss_limit_mb: any input that makes a target use more than 2 GB is a finding;
    # -timeout: one input running for more than 10 s is a finding (a hang).
    nice -n 10 cargo fuzz run -O "$t" "$work" "$seeds" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 > "$log" 2>&1
    rc=$?
    elapsed=$(( $(date +%s) - start ))
    # libFuzzer's own clock, without the build: "Done 123 runs in 600 second(s)".
    ran=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' | tail -1)
    elapsed="${ran:-$elapsed}"
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    corpus=$(ls "$work" | wc -l)
    after=$(ls "$here/artifacts/$t" | wc -l)
    findings="none"
    if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ]; then
        findings="exit $rc, $((after - before)) new artifact(s): $(ls -t "$here/artifacts/$t" | head -3 | tr '\n' ' ')"
        status=1
    fi
    rate=$(( ${execs:-0} / (elapsed > 0 ? elapsed : 1) ))
    echo "| $t | $elapsed | ${execs:-?} | $rate | $corpus | ${rss:-?} | $findings |" >> "$summary"
    echo "$t: ${execs:-?} execs in ${elapsed}s, corpus $corpus, $findings"
done
echo "summary: $summary"
exit $status
