#!/bin/bash
# CPU time (user + system) per training step of one precision, in ms: the CPU seconds of
# `mantissa bench --steps S2` less those of `--steps S1` (the same start-up and untimed steps),
# divided by S2 - S1, one thread. On a shared machine other processes change wall time much
# more than this, so ratios of these figures compare the work of two precisions.
#   bench/cpu_time_per_step.sh BINARY MODEL S1 S2 PRECISION-FLAGS...
#   MANTISSA_DISABLE_SIMD=avx512f bench/cpu_time_per_step.sh build/mantissa mlp 5 35 \
#       --precisions transformer-engine --fp8-recipe block
set -euo pipefail
if [ $# -lt 5 ]; then
  sed -n '2,8p' "$0" >&2
  exit 2
fi
bin=$1 model=$2 s1=$3 s2=$4
shift 4
cpu() {
  local t
  t=$({ OMP_NUM_THREADS=1 /usr/bin/time -f "%U %S" "$bin" bench --model "$model" --steps "$1" \
    --rounds 1 --threads 1 "${@:2}" >/dev/null; } 2>&1 | tail -1)
  echo "$t" | awk '{print $1 + $2}'
}
a=$(cpu "$s1" "$@")
b=$(cpu "$s2" "$@")
awk -v a="$a" -v b="$b" -v n="$((s2 - s1))" 'BEGIN { printf "%.2f\n", 1000 * (b - a) / n }'
