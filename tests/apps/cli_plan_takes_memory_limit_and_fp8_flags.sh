#!/bin/sh
# plan takes train's --memory-limit spelling and the --fp8-* recipe of its transformer-engine
# dry runs (it refused --fp8-exclude as an unknown option); an --fp8-* flag with no FP8
# precision listed is refused, as in bench and compare.
# Usage: cli_plan_takes_memory_limit_and_fp8_flags.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" plan --model mlp --memory-limit 16MiB --precisions transformer-engine --fp8-exclude net.2 --fp8-amax-history-len 16 --max-batch 64 --threads 1 2>/dev/null | grep -q '^transformer-engine ' &&
  out=$("$M" plan --model mlp --memory 16MiB --precisions 32-true --fp8-margin 1 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--fp8-margin applies to the transformer-engine precisions'
