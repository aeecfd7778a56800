#!/usr/bin/env bash
# The fastest of several rounds of `mantissa bench`, per precision: on a shared or noisy
# machine a single run moves by 10-20 %, while the fastest of a few back-to-back rounds is
# repeatable to a few percent, and the precisions of one round see the same machine state.
#
#   bench/min_of_rounds.sh BINARY MODEL PRECISIONS ROUNDS STEPS
#   bench/min_of_rounds.sh build/mantissa cnn 32-true,bf16-mixed,16-mixed,bf16-true 5 20
#
# Prints "precision ms/step" for each precision, the minimum over ROUNDS rounds of STEPS timed
# steps (2 untimed steps each): `mantissa bench --rounds ROUNDS` runs the rounds (every
# precision in turn, round after round) and its table's last column is the fastest round's
# ms/step.
set -euo pipefail
if [[ $# -ne 5 ]]; then
  echo "usage: $0 BINARY MODEL PRECISIONS ROUNDS STEPS" >&2
  exit 2
fi
bin=$1 model=$2 precisions=$3 rounds=$4 steps=$5
"$bin" bench --model "$model" --precisions "$precisions" --steps "$steps" --untimed-steps 2 \
  --rounds "$rounds" 2>/dev/null | awk 'NR > 1 && $NF ~ /^[0-9.]+$/ {print $1, $NF}' | sort
