#!/bin/sh
# bench's header and JSON say when this CPU's AVX-512 BF16 was set aside (an Intel core
# without AMX: bf16 widened to fp32), exactly when info says so, and not when it is forced on.
# Usage: cli_bench_names_a_set_aside_avx512_bf16.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -f cli_bset.json &&
  out=$("$M" bench --hidden 32 --precisions 32-true --steps 1 --untimed-steps 0 --json cli_bset.json 2>&1) &&
  if "$M" info | grep -q '^avx512_bf16: yes, not used'; then
    echo "$out" | grep -q '^SIMD level: avx512, .*(AVX-512 BF16 set aside: an Intel core without AMX' &&
      grep -q '"avx512_bf16_set_aside": true' cli_bset.json
  else
    ! echo "$out" | grep -q 'set aside' &&
      grep -q '"avx512_bf16_set_aside": false' cli_bset.json
  fi &&
  out=$(MANTISSA_USE_AVX512_BF16=1 "$M" bench --hidden 32 --precisions 32-true --steps 1 --untimed-steps 0 --json cli_bset.json 2>&1) &&
  ! echo "$out" | grep -q 'set aside' &&
  grep -q '"avx512_bf16_set_aside": false' cli_bset.json
