#!/usr/bin/env bash
# Instructions per remote step under callgrind, per process (client, task 0,
# task 1): STEPS and 2*STEPS steps, the difference divided by STEPS. With
# RINGFLOW_SPIN_US=0 no wait spins, so only work is counted; the counts
# repeat to a few instructions where timings swing by tens of percent.
# Plain sockets: valgrind does not know that a thread waiting in
# io_uring_enter is blocked, keeps its one-thread-at-a-time lock, and the
# servers' other threads (accept, shutdown) never run.
#
#   perf/callgrind.sh [STEPS] [trivial|sent]     (default: 2000 trivial)
#
# `callgrind_annotate perf/out/callgrind-<graph>-<steps>.<pid>` shows where
# a process's instructions go.
source "$(dirname "$0")/common.sh"
STEPS="${1:-2000}"
GRAPH="${2:-trivial}"

command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
build_profiling

run_callgrind() {
    rm -f "$OUT/callgrind-$GRAPH-$1".*
    RINGFLOW_SPIN_US=0 RINGFLOW_TRANSPORT=socket valgrind --quiet --tool=callgrind --trace-children=yes \
        --callgrind-out-file="$OUT/callgrind-$GRAPH-$1.%p" -- "$STEP_LOOP" "$BIN" "$1" "$GRAPH" >&2
}

# Prints "role instructions" for each process of one run.
totals() {
    for file in "$OUT/callgrind-$GRAPH-$1".*; do
        local cmd role total
        cmd="$(grep -m1 '^cmd:' "$file")"
        case "$cmd" in
            *"--task 0"*) role="task0" ;;
            *"--task 1"*) role="task1" ;;
            *step_loop*) role="client" ;;
            *) continue ;;
        esac
        total="$(grep -m1 -E '^(totals|summary):' "$file" | awk '{ print $2 }')"
        echo "$role $total"
    done
}

run_callgrind "$STEPS"
run_callgrind "$((2 * STEPS))"
echo "instructions per step ($GRAPH graph; ($((2 * STEPS)) steps - $STEPS steps) / $STEPS):"
join <(totals "$STEPS" | sort) <(totals "$((2 * STEPS))" | sort) |
    awk -v n="$STEPS" '{ printf "  %-7s %10.0f\n", $1, ($3 - $2) / n }'
