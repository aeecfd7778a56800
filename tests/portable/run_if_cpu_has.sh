#!/bin/sh
# Runs a portable.* test (a gtest filter under a capped SIMD level) only where the cap reaches a
# kernel path that this CPU's default dispatch does not take. Elsewhere the capped run repeats the
# default one, which the unit tests already ran, so it reports skipped (exit 77) and says why.
# The CPU is read from `mantissa info` without the test's caps, so the check sees the CPU itself.
# Usage: run_if_cpu_has.sh MANTISSA 'INFO LINE'[,'INFO LINE'...] TEST_BINARY ARGS...
#   INFO LINE: a basic regular expression that a whole line of `mantissa info` must match, such
#   as "avx512f: yes" or "avx512_bf16: yes, not used.*"; several, separated by semicolons, must all
#   match.
set -eu
mantissa=$1
needs=$2
shift 2
info=$(env -u MANTISSA_DISABLE_SIMD -u MANTISSA_USE_AVX512_BF16 -u ONEDNN_MAX_CPU_ISA \
  "$mantissa" info) || {
  echo "run_if_cpu_has.sh: '$mantissa info' failed; cannot tell which paths this CPU takes" >&2
  exit 1
}
old_ifs=$IFS
IFS=";"
for line in $needs; do
  if ! printf '%s\n' "$info" | grep -qx -- "$line"; then
    IFS=$old_ifs
    echo "skipped: \`mantissa info\` has no line matching '$line', so this CPU's default dispatch already" \
      "takes the path this capped run would test"
    exit 77
  fi
done
IFS=$old_ifs
exec "$@"
