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

# Prints "role instructions" for each callgrind output file of one run
# (`$1`, a file prefix), naming each process with the script's
# `role_of CMDLINE` (no output: the file is skipped) and adding the lines
# its optional `extra_of ROLE FILE` prints.
callgrind_totals() {
    local file cmd role
    for file in "$1".*; do
        cmd="$(grep -m1 '^cmd:' "$file")"
        role="$(role_of "$cmd")"
        [ -n "$role" ] || continue
        echo "$role $(grep -m1 -E '^(totals|summary):' "$file" | awk '{ print $2 }')"
        if declare -F extra_of >/dev/null; then extra_of "$role" "$file"; fi
    done
}

# Prints each role's instructions per unit between a run of N units (file
# prefix `$2`) and one of 2N (`$3`): (2N total - N total) / N.
callgrind_per_unit() {
    join <(callgrind_totals "$2" | sort) <(callgrind_totals "$3" | sort) |
        awk -v n="$1" '{ printf "  %-14s %10.0f\n", $1, ($3 - $2) / n }'
}

require_valgrind() {
    command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
}

# Runs CMD... under callgrind, its children traced, into PREFIX.<pid>
# (earlier files of PREFIX removed): `callgrind_run PREFIX CMD...`.
callgrind_run() {
    local prefix="$1"
    shift
    rm -f "$prefix".*
    valgrind --quiet --tool=callgrind --trace-children=yes --callgrind-out-file="$prefix.%p" -- "$@"
}
