#!/bin/sh
# An --optim-bits-32 name no parameter has lists the closest parameter names.
# Usage: cli_optim_bits_32_unknown_name_lists_close_names.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --optimizer adam8bit --optim-bits-32 net.0.wieght --epochs 1 --train-subset 256 2>&1 | grep -q 'closest names: net.0.weight'
