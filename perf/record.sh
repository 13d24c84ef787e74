#!/usr/bin/env bash
# Records a steady loop of remote steps (client + two server processes) with
# `perf record -g` and draws a flame graph with inferno.
#
#   perf/record.sh [STEPS] [trivial|sent]       (default: 20000 trivial)
#
# Writes perf/out/step-<graph>.perf.data, .folded, .svg and prints the top
# frames (self time). CALL_GRAPH=dwarf unwinds through code without frame
# pointers too (std, libc), at ~50x the data; FREQ sets samples per second.
source "$(dirname "$0")/common.sh"
STEPS="${1:-20000}"
GRAPH="${2:-trivial}"
CALL_GRAPH="${CALL_GRAPH:-fp}"
FREQ="${FREQ:-2999}"

command -v perf >/dev/null || { echo "perf is not installed (linux-tools / linux-perf)" >&2; exit 1; }
if ! command -v inferno-flamegraph >/dev/null || ! command -v inferno-collapse-perf >/dev/null; then
    echo "installing inferno (cargo install inferno) ..." >&2
    cargo install --quiet --locked inferno
fi
build_profiling

DATA="$OUT/step-$GRAPH.perf.data"
# cpu-clock: a software event, so this works where hardware counters are
# not exposed (VMs); perf follows the cluster's child processes.
perf record --quiet -e cpu-clock -F "$FREQ" --call-graph "$CALL_GRAPH" -o "$DATA" -- \
    "$STEP_LOOP" "$BIN" "$STEPS" "$GRAPH"
perf script -i "$DATA" 2>/dev/null | inferno-collapse-perf > "$OUT/step-$GRAPH.folded"
inferno-flamegraph --title "ringflow: $STEPS $GRAPH remote steps (client + 2 servers)" \
    < "$OUT/step-$GRAPH.folded" > "$OUT/step-$GRAPH.svg"
echo "flame graph: $OUT/step-$GRAPH.svg"
echo
echo "samples by process and thread:"
perf report -i "$DATA" --no-children -g none --sort pid,comm --stdio 2>/dev/null | grep '%' | head -8
echo
echo "top frames (self time, all processes, kernel included):"
perf report -i "$DATA" --no-children -g none --sort dso,symbol --stdio 2>/dev/null | grep '%' | head -20 | cut -c1-110
echo
echo "top frames in ringflow's own code (self time, share of all samples):"
perf report -i "$DATA" --no-children -g none --dsos ringflow,step_loop --sort symbol --stdio 2>/dev/null |
    grep '%' | head -20 | cut -c1-130
