#!/bin/sh
# A transformer-engine run says what its FP8 scaling did: one line at the end naming the
# tensor with the largest peak max|x| * scale / fp8_max of the last interval (here below 1:
# nothing saturated beyond the scales' rounding) with its scale and amax, and the metrics
# JSON's "fp8" object holds, beside each scale, the amax it was computed from. The console said only "emulated", and amax was
# nowhere outside the checkpoint. Checked: the line's form and that its numbers are the JSON's;
# every role's amax > 0 and scale * amax = fp8_max / 2^margin (E4M3 448 for input and weight,
# E5M2 57344 for grad_output under HYBRID; margin 1 here).
# Usage: cli_fp8_summary.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
"$cli" train --model mlp --hidden 32 --train-subset 256 --batch-size 64 --max-steps 3 \
  --precision transformer-engine --fp8-margin 1 --threads 1 --no-progress-bar \
  --metrics-json "$dir/m.json" >"$dir/out.txt" 2>&1 || fail "the transformer-engine run failed"

line=$(grep '^FP8: ' "$dir/out.txt")
[ "$(grep -c '^FP8: ' "$dir/out.txt")" -eq 1 ] || fail "not one FP8 summary line"
# (With --fp8-margin 1 the largest peak is about 0.5: nothing saturated.)
echo "$line" | grep -Eq "^FP8: no tensor saturated beyond the scales' rounding; largest peak net\.[0-9]+ (input|weight|grad_output): [0-9]+\.[0-9]{3} of the format's max; scale [0-9.e+-]+, amax [0-9.e+-]+$" ||
  fail "the FP8 summary line is not of the documented form: $line"

# layer role key value, one a line, from the "fp8" object (dump(2): layers at indent 4, roles
# at 6, values at 8).
awk '
  /^  "fp8": \{/ { on = 1; next }
  on && /^  [}]/ { on = 0 }
  on && /^    "/ { layer = $1; gsub(/[":]/, "", layer) }
  on && /^      "/ { role = $1; gsub(/[":]/, "", role) }
  on && /^        "/ { k = $1; gsub(/[":]/, "", k); v = $2; gsub(/,/, "", v); print layer, role, k, v }
' "$dir/m.json" >"$dir/fp8.txt"
value() { awk -v l="$1" -v r="$2" -v k="$3" '$1 == l && $2 == r && $3 == k { print $4 }' "$dir/fp8.txt"; }

roles=0
for layer in $(awk '{ print $1 }' "$dir/fp8.txt" | sort -u); do
  for role in input weight grad_output; do
    scale=$(value "$layer" "$role" scale)
    amax=$(value "$layer" "$role" amax)
    [ -n "$scale" ] && [ -n "$amax" ] || fail "$layer $role: no scale or amax in the metrics JSON"
    max=448
    [ "$role" = grad_output ] && max=57344
    awk -v s="$scale" -v a="$amax" -v m="$max" 'BEGIN {
      want = m / 2; got = s * a; d = got - want; if (d < 0) d = -d
      exit !(a > 0 && d <= want * 1e-6) }' ||
      fail "$layer $role: scale $scale x amax $amax is not $max / 2^1"
    roles=$((roles + 1))
  done
done
[ "$roles" -eq 6 ] || fail "expected the 3 roles of 2 FP8 layers, found $roles"

# The line's tensor and numbers are the JSON's.
layer=$(echo "$line" | sed 's/^FP8: .* largest peak \([^ ]*\) .*/\1/')
role=$(echo "$line" | sed 's/^FP8: .* largest peak [^ ]* \([a-z_]*\):.*/\1/')
for k in scale amax; do
  shown=$(echo "$line" | sed "s/.* $k \\([0-9.e+-]*\\).*/\\1/")
  close "$shown" "$(value "$layer" "$role" "$k")" 1.00001 || fail "the line's $k $shown is not the JSON's"
done
# It is the largest peak of all.
top=$(awk '$3 == "peak" { print $4 }' "$dir/fp8.txt" | sort -g | tail -n 1)
[ "$(value "$layer" "$role" peak)" = "$top" ] || fail "$layer $role is not the largest peak ($top)"
exit 0
