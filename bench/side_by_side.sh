#!/usr/bin/env bash
# Runs bench/torch_side_by_side.py under the newest PyTorch at hand, as the speed issue asks:
#   1. $MANTISSA_TORCH_PYTHON, when set (any interpreter with torch, e.g. an existing
#      virtual environment's: MANTISSA_TORCH_PYTHON=/work/venv-ref/bin/python);
#   2. .venv-torch/bin/python, the PyPI build (MKL + oneDNN), made by --install-torch;
#   3. /usr/bin/python3 with Debian's python3-torch 1.13 (generic reference BLAS for fp32).
# The script prints which torch it used. Other arguments go to torch_side_by_side.py, e.g.
#   bench/side_by_side.sh --install-torch            # once: PyPI torch into .venv-torch
#   bench/side_by_side.sh --mantissa build/mantissa  # mlp, cnn, vit, gpt; 3 rounds each
#   bench/side_by_side.sh --mantissa build/mantissa --models mlp --torch-modes fp32
#   bench/side_by_side.sh --mantissa build/mantissa --rounds 5 --round-seconds 4
# Per model, --rounds N (default 3) interleaved rounds, PyTorch then mantissa's bench (all its
# precisions); --steps auto (the default) times a few steps of each side and picks per model
# the steps that make the fastest round last about --round-seconds (3 s), the same on both sides. The summary gives each
# precision's median round, the spread over the rounds (min-max samples/s) and the round's
# length, and as the headline the ratio of mantissa's median to PyTorch fp32's median. On a
# noisy VM one run of either side moves by 15-30 %; the median of interleaved rounds of 2 s or
# more is the steadier figure. --torch-modes fp32,bf16 (the default) picks PyTorch's precisions;
# its bf16 autocast is 20-40x slower than fp32 on AVX2 CPUs (about 20 s per GPT step), so with
# --rounds > 1 it runs in the first round only.
# PyPI's Linux torch wheel pulls its CUDA libraries too (about 4 GB on disk); they are never
# loaded on a CPU run. PyTorch is a point of comparison only, never a dependency of mantissa.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv-torch"

if [[ "${1:-}" == "--install-torch" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet torch numpy
  "$venv/bin/python" -c 'import torch; print("installed torch", torch.__version__, "in", "'"$venv"'")'
  exit 0
fi

if [[ -n "${MANTISSA_TORCH_PYTHON:-}" ]]; then
  py="$MANTISSA_TORCH_PYTHON"
elif [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  py="$venv/bin/python"
else
  py=/usr/bin/python3
  echo "side_by_side.sh: no PyPI torch in $venv (run with --install-torch); using $py" >&2
fi
exec "$py" "$root/bench/torch_side_by_side.py" "$@"
