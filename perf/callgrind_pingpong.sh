#!/usr/bin/env bash
# Instructions per 64 B round trip under callgrind, per process: the bench
# client, the ringflow peer and the raw peer, for `ringflow bench pingpong
# --transport T`, at ROUNDS and 2*ROUNDS round trips, the difference divided
# by ROUNDS. `--spin-us 0`: no wait spins, so only work is counted (a wait
# goes straight to sleep, and the sleep's setup is counted with it). The
# client's whole count also holds its raw round trips, whose client spins
# without end and so varies from run to run; `client-calls` is its ringflow
# calls alone (inclusive count of `RpcEcho::round_trip`), which repeats.
#
#   perf/callgrind_pingpong.sh [ROUNDS] [shm|uring|socket]     (default: 2000 shm)
#
# `callgrind_annotate perf/out/callgrind-pingpong-T-<rounds>.<pid>` shows
# where a process's instructions go.
source "$(dirname "$0")/common.sh"
ROUNDS="${1:-2000}"
TRANSPORT="${2:-shm}"

command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
build_profiling

run_callgrind() {
    rm -f "$OUT/callgrind-pingpong-$TRANSPORT-$1".*
    valgrind --quiet --tool=callgrind --trace-children=yes \
        --callgrind-out-file="$OUT/callgrind-pingpong-$TRANSPORT-$1.%p" -- \
        "$BIN" bench pingpong --transport "$TRANSPORT" --spin-us 0 --iterations "$1" >/dev/null
}

# Prints "role instructions" for each process of one run.
totals() {
    for file in "$OUT/callgrind-pingpong-$TRANSPORT-$1".*; do
        local cmd role total
        cmd="$(grep -m1 '^cmd:' "$file")"
        case "$cmd" in
            *"__net-peer rpc"*) role="ringflow-peer" ;;
            *"__net-peer raw"*) role="raw-peer" ;;
            *"bench pingpong"*) role="client" ;;
            *) continue ;;
        esac
        total="$(grep -m1 -E '^(totals|summary):' "$file" | awk '{ print $2 }')"
        echo "$role $total"
        if [ "$role" = client ]; then
            calls="$(callgrind_annotate --inclusive=yes "$file" 2>/dev/null |
                awk '/RpcEcho::round_trip/ && !seen { gsub(",", "", $1); print $1; seen = 1 }')"
            echo "client-calls ${calls:-0}"
        fi
    done
}

run_callgrind "$ROUNDS"
run_callgrind "$((2 * ROUNDS))"
echo "instructions per round trip (pingpong over $TRANSPORT; ($((2 * ROUNDS)) - $ROUNDS round trips) / $ROUNDS):"
join <(totals "$ROUNDS" | sort) <(totals "$((2 * ROUNDS))" | sort) |
    awk -v n="$ROUNDS" '{ printf "  %-14s %10.0f\n", $1, ($3 - $2) / n }'
