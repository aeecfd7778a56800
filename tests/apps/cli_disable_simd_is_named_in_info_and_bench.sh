#!/bin/sh
# A feature MANTISSA_DISABLE_SIMD turned off is named as such in info (it read like a CPU
# without it), and bench's header and JSON record the SIMD level and oneDNN ISA it ran at.
# Usage: cli_disable_simd_is_named_in_info_and_bench.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$(MANTISSA_DISABLE_SIMD=all "$M" info) &&
  echo "$out" | grep -q '^avx2: no (disabled by MANTISSA_DISABLE_SIMD)$' &&
  ! env -u MANTISSA_DISABLE_SIMD "$M" info | grep -q 'disabled by' &&
  rm -f cli_bsimd.json &&
  out=$(MANTISSA_DISABLE_SIMD=all "$M" bench --hidden 32 --precisions 32-true --steps 1 --untimed-steps 0 --json cli_bsimd.json 2>&1) &&
  echo "$out" | grep -q '^SIMD level: scalar, oneDNN ISA: .* (capped by MANTISSA_DISABLE_SIMD=all)$' &&
  grep -q '"simd_level": "scalar"' cli_bsimd.json &&
  grep -q '"mantissa_disable_simd": "all"' cli_bsimd.json &&
  grep -q '"onednn_isa": "' cli_bsimd.json
