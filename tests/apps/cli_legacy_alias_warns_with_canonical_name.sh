#!/bin/sh
# A legacy precision alias (bf16) trains, with a warning naming the canonical name (bf16-mixed).
# Usage: cli_legacy_alias_warns_with_canonical_name.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --precision bf16 --epochs 1 --train-subset 512 2>&1 | grep -q "use 'bf16-mixed'"
