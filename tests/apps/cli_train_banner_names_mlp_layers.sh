#!/bin/sh
# The banner writes the MLP's layers as bench does (784-64-32-10), not 784-64,32-10.
# Usage: cli_train_banner_names_mlp_layers.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --hidden 64,32 --epochs 1 --train-subset 256 --no-progress-bar | grep -q '^mantissa train: model mlp 784-64-32-10 '
