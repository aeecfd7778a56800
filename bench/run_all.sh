#!/usr/bin/env bash
# Every measurement behind docs/performance.md, in one go, into one log:
#   bench/run_all.sh [OUT_DIR]        (default out/bench-<date>; ~10 minutes)
# Builds the Release benchmark tree (build-bench/), then runs the matmul, op, conversion and
# end-to-end benchmarks, the side-by-side comparison with PyTorch (bench/side_by_side.sh: PyPI
# torch from .venv-torch when installed, else Debian's) and the perf breakdowns. Run it on a
# quiet machine: with 2 cores, any neighbour halves OpenMP kernels (see bench/README.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/out/bench-$(date +%Y%m%d-%H%M)}"
mkdir -p "$out"
cd "$root"
scripts/setup.sh
cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DMANTISSA_BUILD_BENCH=ON >/dev/null
ninja -C build-bench bench_matmul bench_ops bench_convert mantissa_cli >/dev/null
# OpenMP's default wait policy (spin a while, then sleep) is the fastest on a quiet machine;
# on a shared one, OMP_WAIT_POLICY=passive stops idle threads spinning on a busy core.

run() {  # run NAME COMMAND...: prints and logs the command and its output
  local name="$1"
  shift
  echo "== $name: $*" | tee "$out/$name.txt"
  "$@" 2>&1 | tee -a "$out/$name.txt"
}

run uptime_before uptime
run info build-bench/mantissa info
run matmul_square build-bench/bench_matmul --benchmark_filter='Square/.*/n:(256|1024|2048|4096)/'
run matmul_models build-bench/bench_matmul --benchmark_filter='(MLP|GPT)'
run ops build-bench/bench_ops
run convert build-bench/bench_convert
run e2e_mlp build-bench/mantissa bench --model mlp --steps 100 \
  --precisions 32-true,bf16-mixed,16-mixed,bf16-true --json "$out/e2e_mlp.json"
run e2e_cnn build-bench/mantissa bench --model cnn --steps 30 \
  --precisions 32-true,bf16-mixed,16-mixed,bf16-true --json "$out/e2e_cnn.json"
run e2e_gpt build-bench/mantissa bench --model gpt --steps 10 \
  --precisions 32-true,bf16-mixed,16-mixed,bf16-true --json "$out/e2e_gpt.json"
run side_by_side bench/side_by_side.sh --mantissa build-bench/mantissa --steps 20
if command -v perf >/dev/null; then
  for model in mlp cnn gpt; do
    for p in 32-true bf16-mixed; do
      run "profile_${model}_${p}" python3 bench/profile_breakdown.py \
        --mantissa build-bench/mantissa --model "$model" --precision "$p"
    done
  done
fi
run uptime_after uptime
echo "results in $out"
