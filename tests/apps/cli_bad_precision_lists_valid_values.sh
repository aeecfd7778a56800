#!/bin/sh
# An unknown --precision is refused with exit status 2 and the valid values: every precision
# `mantissa info` lists (the precision registry), in its order, and every legacy alias info
# names. Each value listed is accepted (the run gets past the precision, to the missing data
# set), so the list holds no name that --precision refuses.
# Usage: cli_bad_precision_lists_valid_values.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1

"$M" info >"$dir/info.txt" 2>&1 || fail "info failed"
awk '$0 == "Precisions (--precision):" { on = 1; next } on && !/^  / { exit } on { print }' \
  "$dir/info.txt" >"$dir/registry.txt"
awk '{ print $1 }' "$dir/registry.txt" >"$dir/precisions.txt"
[ "$(wc -l <"$dir/precisions.txt")" -ge 8 ] || fail "info lists fewer than 8 precisions"
sed -n 's/.*(alias \(.*\))$/\1/p' "$dir/registry.txt" | sed 's/, /\n/g' | sort >"$dir/aliases.txt"
[ -s "$dir/aliases.txt" ] || fail "info names no alias"

"$M" train --precision fp7 >"$dir/out.txt" 2>"$dir/err.txt"
[ $? -eq 2 ] || fail "--precision fp7: exit status is not 2"
grep -q "^mantissa: error: \[train\] --precision: unknown precision 'fp7'" "$dir/err.txt" ||
  fail "--precision fp7: the error does not name the flag and the value"
listed=$(sed -n 's/.*; valid values are: \(.*\) (legacy aliases: .*/\1/p' "$dir/err.txt")
[ "$listed" = "$(paste -sd, "$dir/precisions.txt" | sed 's/,/, /g')" ] ||
  fail "the valid values '$listed' are not info's precisions, in order"
sed -n 's/.*(legacy aliases: \([^;)]*\).*/\1/p' "$dir/err.txt" | sed 's/, /\n/g' | sort \
  >"$dir/listed_aliases.txt"
cmp -s "$dir/aliases.txt" "$dir/listed_aliases.txt" ||
  fail "the legacy aliases listed are not info's"

for p in $(cat "$dir/precisions.txt" "$dir/aliases.txt"); do
  "$M" train --precision "$p" --data-dir "$dir/none" >/dev/null 2>"$dir/err_$p.txt"
  grep -q "unknown precision\|not implemented yet" "$dir/err_$p.txt" && fail "'$p' is listed but refused"
  grep -q "Fashion-MNIST is not installed there" "$dir/err_$p.txt" ||
    fail "'$p' did not get past the precision to the data set"
done
exit 0
