#!/usr/bin/env bash
# Runs `ringflow bench` scenarios on the lent 16-core machine (device tool) and writes the
# JSON lines and the tables under $OUT. The machine has no Rust toolchain: build here, copy the
# binary to .dev/ringflow (ignored through .git/info/exclude) and name `.dev` in the call's carry.
#   usage (on the device): bash tools/device/bench16.sh [scenario...]
#     no scenario: every scenario over TCP;
#     `shm`: the four shared-memory rows (pingpong, bulk, step-remote, transfer-remote with
#     `--transport shm`), each unpinned and with `--pin-threads`, which fit one device call;
#     `shm-pingpong`: pingpong over shared memory alone, three times each way.
set -u
BIN=${BIN:-.dev/ringflow}
OUT=${OUT:-/tmp/bench16}
mkdir -p "$OUT"
{ nproc; uname -r; grep -m1 'model name' /proc/cpuinfo; cat /sys/kernel/mm/transparent_hugepage/shmem_enabled; } \
  >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

run() { # NAME ARGS...: one bench call, its JSON lines appended to bench.jsonl
  local name=$1
  shift
  echo "== $name"
  timeout 240 "$BIN" bench "$@" --json 2>>"$OUT/stderr.txt" | tee -a "$OUT/bench.jsonl"
  echo "rc=$?"
}

scenarios=("$@")
[ ${#scenarios[@]} -eq 0 ] && scenarios=(step-inproc chain fanout pingpong bulk step-remote transfer-remote scale)
for s in "${scenarios[@]}"; do
  case "$s" in
    scale) run scale scale --max-tasks 16 ;;
    shm)
      for t in pingpong bulk step-remote transfer-remote; do
        run "$t shm" "$t" --transport shm
        run "$t shm pinned" "$t" --transport shm --pin-threads
      done
      ;;
    shm-pingpong)
      for _ in 1 2 3; do
        run "pingpong shm" pingpong --transport shm
        run "pingpong shm pinned" pingpong --transport shm --pin-threads
      done
      ;;
    *) run "$s" "$s" ;;
  esac
done
