#!/usr/bin/env bash
# Runs every `ringflow bench` scenario on the lent 16-core machine (device tool) and writes the
# JSON lines and the tables under $OUT. The machine has no Rust toolchain: build here, copy the
# binary to .dev/ringflow (ignored through .git/info/exclude) and name `.dev` in the call's carry.
#   usage (on the device): bash tools/device/bench16.sh [scenario...]
set -u
BIN=${BIN:-.dev/ringflow}
OUT=${OUT:-/tmp/bench16}
mkdir -p "$OUT"
{ nproc; uname -r; grep -m1 'model name' /proc/cpuinfo; } >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
scenarios=("$@")
[ ${#scenarios[@]} -eq 0 ] && scenarios=(step-inproc chain fanout pingpong bulk step-remote transfer-remote scale)
for s in "${scenarios[@]}"; do
  extra=()
  [ "$s" = scale ] && extra=(--max-tasks 16)
  echo "== $s"
  timeout 240 "$BIN" bench "$s" "${extra[@]}" --json 2>>"$OUT/stderr.txt" | tee -a "$OUT/bench.jsonl"
  echo "rc=$?"
done
