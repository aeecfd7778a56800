#!/bin/sh
# mantissa bounds OpenMP's spinning (GOMP_SPINCOUNT 30000, or 0 on a busy machine;
# include/mantissa/core/openmp_wait.h) unless the user
# chose a wait policy; libgomp itself must report the value (OMP_DISPLAY_ENV), since it reads
# its environment before main and a variable set later would be ignored.
# Usage: cli_openmp_wait.sh MANTISSA
set -u
M=$1
fail() { echo "FAIL: $*"; exit 1; }
clean="env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u MANTISSA_SET_GOMP_SPINCOUNT"

# 1. Nothing chosen: the OpenMP runtime that runs the program has mantissa's spin count, 30000
#    when the cores were free at the start and 0 when other tasks were running (read from
#    /proc/loadavg), `info` names the same value in the same process and says which case it
#    saw, and the program's output comes once.
out=$($clean OMP_DISPLAY_ENV=verbose "$M" --version 2>&1) || fail "--version failed: $out"
test "$(echo "$out" | grep -c '^mantissa [0-9]')" -eq 1 || fail "version printed other than once: $out"
out=$($clean OMP_DISPLAY_ENV=verbose "$M" info 2>&1) || fail "info failed: $out"
spin=$(echo "$out" | sed -n "s/.*GOMP_SPINCOUNT = '\([0-9]*\)'.*/\1/p" | tail -n 1)
line=$(echo "$out" | grep "^OpenMP wait: ")
case "$line" in
"OpenMP wait: GOMP_SPINCOUNT=30000 (mantissa's default: the cores were free at the start"*)
  test "$spin" = 30000 || fail "info says 30000, libgomp ran with '$spin'" ;;
"OpenMP wait: GOMP_SPINCOUNT=0 (mantissa's default: "[0-9]*" other task"*" running at the start"*)
  test "$spin" = 0 || fail "info says 0, libgomp ran with '$spin'" ;;
*) fail "info does not name mantissa's choice: $line" ;;
esac

# 2. The user's choice is kept and named (libgomp starts once: one display).
out=$($clean OMP_WAIT_POLICY=active OMP_DISPLAY_ENV=true "$M" --version 2>&1)
test "$(echo "$out" | grep -c "OMP_WAIT_POLICY = ")" -eq 1 || fail "started twice: $out"
echo "$out" | grep -q "OMP_WAIT_POLICY = 'ACTIVE'" || fail "active not kept: $out"
$clean OMP_WAIT_POLICY=active "$M" info | grep -q "^OpenMP wait: OMP_WAIT_POLICY=active (from the environment)$" ||
  fail "info does not name the user's policy"
out=$($clean GOMP_SPINCOUNT=12345 OMP_DISPLAY_ENV=verbose "$M" --version 2>&1)
echo "$out" | grep "GOMP_SPINCOUNT = " | tail -n 1 | grep -q "'12345'" || fail "GOMP_SPINCOUNT not kept: $out"

# 3. The arguments reach the program unchanged (a space inside one, an empty one) and so does
#    standard input.
out=$($clean "$M" train --precision "bf16 mixed" 2>&1)
test $? -eq 2 && echo "$out" | grep -q "'bf16 mixed'" || fail "argument with a space: $out"
out=$(printf 'not json' | $clean "$M" train --config - 2>&1)
test $? -eq 2 && echo "$out" | grep -qi "config" || fail "stdin: $out"
# 4. Started through the dynamic loader by name (/proc/self/exe is the loader then): no restart,
#    which ran the loader with the command's first argument as the program.
loader=$(readelf -l "$M" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
if [ -n "$loader" ] && [ -x "$loader" ]; then
  out=$($clean "$loader" "$M" --version 2>&1)
  echo "$out" | grep -q '^mantissa [0-9]' || fail "through $loader: $out"
fi
echo "ok"
