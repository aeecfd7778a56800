# Shared by the command-line test scripts in tests/apps, which source it first:
#   . "$(dirname "$0")/cli_test_lib.sh"
# It makes $dir, a temporary directory removed on exit, and defines fail and the JSON, number
# and checkpoint helpers below.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# fail MESSAGE: says it, shows the run's text outputs under $dir (logs, JSON, CSV; not the
# corpora or checkpoints), and ends the test.
fail() {
  echo "FAIL: $1"
  find "$dir" -maxdepth 3 -type f \( -name '*.txt' -o -name '*.json' -o -name '*.csv' \
    -o -name 'err*' -o -name 'out*' \) | sort | while read -r f; do
    echo "--- $f"
    cat "$f"
  done
  exit 1
}

# json_number FILE KEY: the number after "KEY": in a metrics JSON (a list's first element).
json_number() {
  awk -v key="\"$2\":" '$1 == key { if ($2 == "[") { getline; print $1 } else print $2; exit }' "$1" |
    tr -d ','
}

# json_list FILE KEY: the elements of the list "KEY", one a line.
json_list() {
  awk -v key="\"$2\":" '$1 == key { on = 1; next } on && /\]/ { exit } on { print $1 }' "$1" |
    tr -d ','
}

# finite_and_falling FILE: every step loss in a metrics JSON is finite, and the mean of the last
# three is below the mean of the first three (at least 6 steps). Leaves the losses in FILE.losses.
finite_and_falling() {
  json_list "$1" step_losses >"$1.losses"
  [ "$(wc -l <"$1.losses")" -ge 6 ] || fail "$1 has fewer than 6 step losses"
  grep -qi 'nan\|inf' "$1.losses" && fail "$1 has a non-finite loss: $(cat "$1.losses")"
  awk '{ v[NR] = $1 } END { f = (v[1] + v[2] + v[3]) / 3; l = (v[NR] + v[NR-1] + v[NR-2]) / 3;
         exit !(l < f) }' "$1.losses" || fail "$1's loss did not fall: $(cat "$1.losses")"
}

# scales_of FILE: every "scale" in a metrics JSON (the FP8 statistics), one a line.
scales_of() {
  sed -n 's/.*"scale": \([0-9.e+-]*\).*/\1/p' "$1"
}

# not_powers_of_2 FILE: how many of the numbers in FILE (one a line) are not positive powers of 2.
not_powers_of_2() {
  awk '{ v = $1 + 0; if (v <= 0) { n++; next } while (v >= 2) v /= 2; while (v < 1) v *= 2;
         if (v != 1) n++ } END { print n + 0 }' "$1"
}

# near A B TOL: whether A and B agree within TOL (absolute).
near() {
  awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= t) }'
}

# close A B F: whether A and B (both positive) agree within the factor F.
close() {
  awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN { exit !(a > 0 && b > 0 && a / b <= f && b / a <= f) }'
}

# wait_for_line PATTERN FILE: waits (up to 120 s) until a line of FILE matches the grep PATTERN,
# e.g. until a background run has reached its second epoch and handles signals.
wait_for_line() {
  i=0
  until grep -q -- "$1" "$2" 2>/dev/null || [ $i -ge 1200 ]; do
    sleep 0.1
    i=$((i + 1))
  done
}

# tensor_data FILE: a safetensors file's tensor bytes (after the 8-byte length and the JSON
# header, whose metadata may name the run).
tensor_data() {
  n=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  tail -c +$((9 + n)) "$1"
}
