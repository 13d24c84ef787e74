#!/usr/bin/env bash
# TensorFlow's own Python client against a local ringflow cluster over gRPC:
# every golden case in tests/fixtures/tf-graphs, then make_callable,
# partial_run, list_devices, Session.reset, a step timeout and an error.
# Prints PASS/FAIL per case and exits 0 only if all pass.
#
#   tools/tf-client/run.sh [CASE_DIR...]
#
# TF_VENV: a venv with tensorflow (default /root/tfvenv if it has one, else
# ~/.cache/ringflow-tf-venv, made with tensorflow-cpu==2.21.0 if missing).
# RINGFLOW: the binary (default target/release/ringflow, built if missing).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"

venv="${TF_VENV:-}"
if [[ -z "$venv" ]]; then
  if [[ -x /root/tfvenv/bin/python ]]; then venv=/root/tfvenv; else venv="$HOME/.cache/ringflow-tf-venv"; fi
fi
if ! "$venv/bin/python" -c "import tensorflow" 2>/dev/null; then
  echo "installing tensorflow-cpu==2.21.0 into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "tensorflow-cpu==2.21.0"
fi

bin="${RINGFLOW:-$repo/target/release/ringflow}"
[[ -x "$bin" ]] || cargo build --release

# One ps and four workers on free loopback ports.
ports=($("$venv/bin/python" - <<'PY'
import socket
socks = [socket.socket() for _ in range(5)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks: s.close()
PY
))
work="$(mktemp -d)"
cat > "$work/cluster.toml" <<TOML
[cluster]
ps = ["127.0.0.1:${ports[0]}"]
worker = ["127.0.0.1:${ports[1]}", "127.0.0.1:${ports[2]}", "127.0.0.1:${ports[3]}", "127.0.0.1:${ports[4]}"]
TOML
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
"$bin" server --cluster "$work/cluster.toml" --job ps --task 0 >"$work/ps0.log" 2>&1 & pids+=($!)
for t in 0 1 2 3; do
  "$bin" server --cluster "$work/cluster.toml" --job worker --task "$t" >"$work/worker$t.log" 2>&1 & pids+=($!)
done

for p in "${ports[@]}"; do
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && break; sleep 0.1; done
done

cases=("$@")
[[ ${#cases[@]} -gt 0 ]] || cases=("$repo"/tests/fixtures/tf-graphs/*/)
TF_CPP_MIN_LOG_LEVEL=2 "$venv/bin/python" "$repo/tools/tf-client/tf_cases.py" \
  --target "grpc://127.0.0.1:${ports[1]}" --expect-devices 5 "${cases[@]}"
