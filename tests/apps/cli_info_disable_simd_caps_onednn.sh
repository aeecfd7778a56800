#!/bin/sh
# MANTISSA_DISABLE_SIMD models the smaller CPU for oneDNN too (its ISA capped to match, AMX
# off with AVX-512), unless ONEDNN_MAX_CPU_ISA says otherwise.
# Usage: cli_info_disable_simd_caps_onednn.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$(MANTISSA_DISABLE_SIMD=avx512f "$M" info) &&
  echo "$out" | grep -q 'oneDNN ISA: avx2$' &&
  echo "$out" | grep -q 'amx_bf16: no' &&
  MANTISSA_DISABLE_SIMD=avx512f ONEDNN_MAX_CPU_ISA=SSE41 "$M" info | grep -q 'oneDNN ISA: sse41$'
