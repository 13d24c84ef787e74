#!/usr/bin/env bash
# Instructions per round trip under callgrind, per process: the bench
# client, the ringflow peer and the raw peer, for `ringflow bench pingpong
# --transport T` (64 B calls over TCP; over shm the bench's 40 B one-line
# calls and its 64 B calls, as many of each, so the figure is their
# mean), at ROUNDS and 2*ROUNDS measured round trips, the difference
# divided by the difference in round trips (counted, warm-up included).
# `--spin-us 0`: no wait spins, so only work is counted (a wait goes
# straight to sleep, and the sleep's setup is counted with it). The
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

require_valgrind
build_profiling

run_callgrind() {
    callgrind_run "$OUT/callgrind-pingpong-$TRANSPORT-$1" \
        "$BIN" bench pingpong --transport "$TRANSPORT" --spin-us 0 --iterations "$1" >/dev/null
}

# Names a process of the run by its command line.
role_of() {
    case "$1" in
        *"__net-peer rpc"*) echo ringflow-peer ;;
        *"__net-peer raw"*) echo raw-peer ;;
        *"bench pingpong"*) echo client ;;
    esac
}

# The client's ringflow calls alone: `RpcEcho::round_trip`, inclusive.
extra_of() {
    [ "$1" = client ] || return 0
    local calls
    calls="$(callgrind_annotate --inclusive=yes "$2" 2>/dev/null |
        awk '/RpcEcho::round_trip/ && !seen { gsub(",", "", $1); print $1; seen = 1 }')"
    echo "client-calls ${calls:-0}"
}

# Round trips of a run, warm-up included: the client's calls to
# `RpcEcho::round_trip` (the warm-up lasts a time, so under callgrind it
# takes a different number of blocks from run to run).
round_trips_of() {
    local file
    file="$(grep -l -m1 '^cmd:.*bench pingpong' "$1".*)"
    callgrind_annotate --inclusive=yes "$file" 2>/dev/null |
        sed -n 's/.*RpcEcho::round_trip (\([0-9,]*\)x).*/\1/p' | tr -d , | sort -n | tail -1
}

run_callgrind "$ROUNDS"
run_callgrind "$((2 * ROUNDS))"
prefix="$OUT/callgrind-pingpong-$TRANSPORT"
rounds=$(($(round_trips_of "$prefix-$((2 * ROUNDS))") - $(round_trips_of "$prefix-$ROUNDS")))
echo "instructions per round trip (pingpong over $TRANSPORT; the difference of two runs, $rounds round trips apart):"
callgrind_per_unit "$rounds" "$prefix-$ROUNDS" "$prefix-$((2 * ROUNDS))"
