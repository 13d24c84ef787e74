#!/usr/bin/env bash
# Wake-ups of an idle two-task cluster: starts two servers on loopback, runs
# one step of a graph that spans both (so task 0 holds a connection to task
# 1, shared memory when on), waits, then counts every thread's voluntary
# context switches in both servers over 10 s of idleness.
#
# usage: perf/idle_wakeups.sh [RINGFLOW_BINARY]   (default target/release/ringflow)
set -euo pipefail
BIN=${1:-target/release/ringflow}
CASE=tests/fixtures/tf-graphs/cond_v2_two_tasks
DIR=$(mktemp -d)
P0=$((20000 + RANDOM % 20000)); P1=$((P0 + 1))
printf '[cluster]\nworker = ["127.0.0.1:%s", "127.0.0.1:%s"]\n' "$P0" "$P1" > "$DIR/cluster.toml"
"$BIN" server --cluster "$DIR/cluster.toml" --job worker --task 0 2>"$DIR/s0.log" & S0=$!
"$BIN" server --cluster "$DIR/cluster.toml" --job worker --task 1 2>"$DIR/s1.log" & S1=$!
trap 'kill $S0 $S1 2>/dev/null; rm -rf "$DIR"' EXIT
sleep 1
"$BIN" run --graph $CASE/graph.pb --target "ringflow://127.0.0.1:$P0" \
  --feed pred:0=$CASE/step0_feed_pred_0.npy --feed x:0=$CASE/step0_feed_x_0.npy --fetch z:0 >/dev/null
sleep 2
per_thread() { for t in /proc/"$1"/task/*; do
  printf '%s %s %s\n' "${t##*/}" "$(cat "$t/comm")" "$(awk '/^voluntary_ctxt_switches/{print $2}' "$t/status")"; done; }
per_thread $S0 > "$DIR/a0"; per_thread $S1 > "$DIR/a1"
sleep 10
per_thread $S0 > "$DIR/b0"; per_thread $S1 > "$DIR/b1"
for task in 0 1; do
  echo "task $task: wake-ups per thread over 10 s idle"
  join <(sort "$DIR/a$task") <(sort "$DIR/b$task") | awk '{printf "  %-18s %d\n", $2, $5 - $3; s += $5 - $3} END {printf "  %-18s %d\n", "total", s}'
done
