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

require_valgrind
build_profiling

run_callgrind() {
    RINGFLOW_SPIN_US=0 RINGFLOW_TRANSPORT=socket \
        callgrind_run "$OUT/callgrind-$GRAPH-$1" "$STEP_LOOP" "$BIN" "$1" "$GRAPH" >&2
}

# Names a process of the run by its command line.
role_of() {
    case "$1" in
        *"--task 0"*) echo task0 ;;
        *"--task 1"*) echo task1 ;;
        *step_loop*) echo client ;;
    esac
}

run_callgrind "$STEPS"
run_callgrind "$((2 * STEPS))"
echo "instructions per step ($GRAPH graph; ($((2 * STEPS)) steps - $STEPS steps) / $STEPS):"
callgrind_per_unit "$STEPS" "$OUT/callgrind-$GRAPH-$STEPS" "$OUT/callgrind-$GRAPH-$((2 * STEPS))"
