#!/bin/sh
# compare's console table and HTML report agree:
#  * a speed-up the console marks "?" (timing rounds far apart) is marked "?" in the HTML, with
#    the console's explanation; an unmarked one is unmarked in both;
#  * the HTML names the CPU (as `mantissa info` does) and the SIMD level;
#  * axis ticks read "100,000", never printf's "1e+05";
#  * the console prints the model summary once, not once per precision.
# One timed step after none untimed, in three rounds, mostly gives rounds far apart (the first
# round pays one-time costs): up to three tries look for a marked one.
# Usage: cli_compare_report.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1

marked=0
for try in 1 2 3; do
  "$M" compare --model mlp --hidden 32 --precisions 32-true,bf16-true,16-true --epochs 1 \
    --train-subset 256 --rounds 3 --untimed-steps 0 --timed-steps 1 --threads 1 \
    --html "$dir/c.html" >"$dir/out.txt" 2>"$dir/err.txt" || fail "compare failed"
  # Each row's speed-up cell, as the console shows it: "precision 1.23x?" or "precision 1.23x".
  awk '$1 ~ /^(32-true|bf16-true|16-true)$/ && NF >= 8 {
         s = $5; if (substr($0, index($0, s) + length(s), 1) == "?") s = s "?"; print $1, s }' \
    "$dir/out.txt" >"$dir/console_speedups.txt"
  [ "$(wc -l <"$dir/console_speedups.txt")" = 3 ] || fail "the table has no three rows"
  while read -r p s; do
    case "$s" in
      *\?) grep -q "<td>$p</td>.*<td class=\"unreliable\" title=\"?: its timing rounds[^\"]*\">$s</td>" \
        "$dir/c.html" || fail "$p: the console's $s is not marked in the HTML" ;;
      *) grep -q "<td>$p</td>.*<td>$s</td>" "$dir/c.html" || fail "$p: the HTML's speed-up is not $s" ;;
    esac
  done <"$dir/console_speedups.txt"
  if grep -q '?$' "$dir/console_speedups.txt"; then
    grep -q '^?: its timing rounds, or 32-true.s, differ by more than 1.5x' "$dir/out.txt" ||
      fail "no explanation of ? under the console table"
    grep -q '<p class="note unreliable">?: its timing rounds, or 32-true&#39;s, differ by more than 1.5x' \
      "$dir/c.html" || fail "no explanation of ? under the HTML table"
    marked=1
    break
  fi
  grep -q 'x?' "$dir/c.html" && fail "the HTML marks a speed-up the console does not"
done
[ "$marked" = 1 ] || echo "note: no run gave an unreliable speed-up; only unmarked rows were compared"

cpu=$("$M" info | sed -n 's/^CPU: //p')
[ -n "$cpu" ] || fail "mantissa info names no CPU"
grep -qF "<dt>CPU</dt><dd>$cpu; SIMD level " "$dir/c.html" || fail "the HTML does not name the CPU '$cpu'"
grep -qF "CPU: $cpu" "$dir/c.html" || fail "the machine section does not name the CPU"
grep -Eq 'SIMD level: (scalar|avx2|avx512|avx512_bf16) ' "$dir/c.html" || fail "no SIMD level"

grep -Eq '[0-9]e[+-]?0' "$dir/c.html" && fail "an axis label in printf's exponent form"
grep -Eq 'class="tick"[^>]*>[0-9]{1,3}(,[0-9]{3})+</text>' "$dir/c.html" ||
  fail "no grouped tick label on the throughput axis"

[ "$(grep -c 'Total params' "$dir/out.txt")" = 1 ] || fail "the model summary is not printed once"
[ "$(grep -c '^ *| Name' "$dir/out.txt")" = 1 ] || fail "the summary table header is not printed once"
grep -q '^\[3/3\] 16-true' "$dir/out.txt" || fail "the third run is not announced"
echo ok
