#!/usr/bin/env bash
# `perf stat` counters per remote step: the loop runs STEPS and 2*STEPS
# steps, and the difference divided by STEPS cancels start-up and
# shut-down (cluster start, session creation, registration).
#
#   perf/stat.sh [STEPS] [trivial|sent]          (default: 10000 trivial)
#
# Counts the client and both servers (perf follows child processes).
# Hardware counters (cycles, instructions, ...) print as "not supported"
# where the machine does not expose them (most VMs): there, rely on
# task-clock and on perf/callgrind.sh's instruction counts.
source "$(dirname "$0")/common.sh"
STEPS="${1:-10000}"
GRAPH="${2:-trivial}"
EVENTS="${EVENTS:-task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions,branch-misses,cache-misses}"

command -v perf >/dev/null || { echo "perf is not installed (linux-tools / linux-perf)" >&2; exit 1; }
build_profiling

run_stat() {
    perf stat -x, -e "$EVENTS" -o "$OUT/stat-$GRAPH-$1.csv" -- "$STEP_LOOP" "$BIN" "$1" "$GRAPH" >&2
}
run_stat "$STEPS"
run_stat "$((2 * STEPS))"
echo "per step ($GRAPH graph; ($((2 * STEPS)) steps - $STEPS steps) / $STEPS; client + 2 servers):"
# CSV fields: value, unit, event, ...
awk -F, -v n="$STEPS" '
    /^#/ || NF < 3 { next }
    FNR == NR { once[$3] = $1; unit[$3] = $2; next }
    {
        if ($1 ~ /^[0-9.]+$/ && once[$3] ~ /^[0-9.]+$/)
            printf "  %-18s %14.2f %s\n", $3, ($1 - once[$3]) / n, unit[$3] (unit[$3] == "msec" ? "  (" sprintf("%.2f", ($1 - once[$3]) / n * 1000) " us)" : "")
        else
            printf "  %-18s %14s\n", $3, $1
    }' "$OUT/stat-$GRAPH-$STEPS.csv" "$OUT/stat-$GRAPH-$((2 * STEPS)).csv"
