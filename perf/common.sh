# Sourced by the perf/ scripts: builds the profiling binaries once.
#
# The `profiling` profile is release with full debug info; frame pointers
# (RUSTFLAGS below) let `perf record --call-graph fp` walk ringflow's own
# frames cheaply. A separate target directory keeps these RUSTFLAGS from
# invalidating the release build.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/perf/out}"
PROFILING_TARGET="$ROOT/target/profiling"
# RINGFLOW_BIN: servers from another build (e.g. to compare two builds' counts).
BIN="${RINGFLOW_BIN:-$PROFILING_TARGET/profiling/ringflow}"
STEP_LOOP="$PROFILING_TARGET/profiling/examples/step_loop"
mkdir -p "$OUT"

build_profiling() {
    echo "building the profiling profile (frame pointers, full debug info) ..." >&2
    (cd "$ROOT" && RUSTFLAGS="${RUSTFLAGS:-} -C force-frame-pointers=yes" \
        cargo build --quiet --profile profiling --target-dir "$PROFILING_TARGET" --bin ringflow --example step_loop)
}

# Runs the steady loop: STEPS steps of GRAPH (trivial|sent) on a 2-task cluster.
step_loop() {
    "$STEP_LOOP" "$BIN" "$1" "${2:-trivial}"
}
