#!/usr/bin/env bash
# The main job: set up, build, and train the default MLP on Fashion-MNIST in fp32.
# Extra arguments are passed to `mantissa train` (e.g. --precision 64-true --epochs 1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --command
exec build/mantissa train --model mlp --precision 32-true --epochs 2 --batch-size 256 \
  --lr 1e-3 --seed 0 "$@"
