#!/usr/bin/env bash
# mantissa against PyTorch eager on one CUDA GPU: GEMM TFLOP/s at 4096^3, attention passes, MLP and GPT training steps,
# each side in its own process, one after the other, and the ratios (docs/cuda.md).
#   bench/cuda/run.sh [--mantissa-bench PATH] [--python PYTHON] [gemm|attn|mlp|gpt|graphs|all]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bench="$here/../../build/cuda_bench"
python=python3
what=all
while [ $# -gt 0 ]; do
  case "$1" in
    --mantissa-bench) bench="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    gemm|attn|mlp|gpt|graphs|all) what="$1"; shift ;;
    *) echo "usage: $0 [--mantissa-bench PATH] [--python PYTHON] [gemm|attn|mlp|gpt|graphs|all]" >&2; exit 2 ;;
  esac
done
m=$(mktemp); t=$(mktemp); trap 'rm -f "$m" "$t"' EXIT
"$bench" "$what" | tee "$m"
"$python" "$here/torch_cuda_bench.py" "$what" | tee "$t"
echo
printf '%-20s %14s %14s %10s\n' case mantissa pytorch ratio
# gemm lines: higher is better (TFLOP/s); attn, mlp and gpt lines: lower is better (ms).
# (Only "<what> <case> <number> ..." lines: not "gpt6 16-mixed+graphs: 355 graph nodes".)
rows='/^(gemm|attn|mlp|gpt[0-9]+) / && $2 !~ /:$/ && $3 ~ /^[0-9.]+$/ {print $1"_"$2, $3}'
join <(awk "$rows" "$m" | sort) <(awk "$rows" "$t" | sort) |
  awk '{r = ($1 ~ /^gemm/) ? $2 / $3 : $3 / $2;
        printf "%-20s %14s %14s %9.2fx\n", $1, $2, $3, r}'
echo "(ratio: mantissa's speed over PyTorch's; above 1 is faster)"
{ grep -h "^speedup" "$m" | sed "s/^/mantissa /"; grep -h "^speedup" "$t" | sed "s/^/pytorch  /"; } || true  # none for gemm and mlp
