#!/bin/sh
# `mantissa info` prints what this build and this machine are, and each part is checked against
# a second source:
#  * its first line is `mantissa --version`'s;
#  * the CPU line names the vendor, family and model /proc/cpuinfo gives;
#  * the CPU feature lines are the eleven features mantissa dispatches on, in order, each yes
#    or no as /proc/cpuinfo's flags say (a feature the CPU has but mantissa sets aside reads
#    "yes, not used (...)");
#  * threads follow OMP_NUM_THREADS, and the OpenMP wait policy is mantissa's default unless the
#    environment chose one;
#  * the oneDNN ISA fits the features (an AVX-512 CPU gets an avx512_core ISA);
#  * the kernel paths cover the six dtypes, each with its matmul, conversion and elementwise path;
#  * the precisions listed are the ones `--precision` accepts (the list its error gives) and the
#    rows of the precision x accelerator table, where 32-true runs on every CPU.
# Usage: cli_info.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1

env -u MANTISSA_DISABLE_SIMD -u MANTISSA_USE_AVX512_BF16 -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT \
  OMP_NUM_THREADS=3 "$M" info >"$dir/info.txt" 2>"$dir/err.txt" || fail "info failed"
info="$dir/info.txt"

"$M" --version >"$dir/version.txt" || fail "--version failed"
[ "$(head -n 1 "$info")" = "$(cat "$dir/version.txt")" ] || fail "the first line is not --version's"

# The section of info between the line "$1" and the next empty line.
section() {
  awk -v head="$1" '$0 == head { on = 1; next } on && $0 == "" { exit } on { print }' "$info"
}

# CPU: "<brand> (<vendor> family <f> model <m>[: <microarchitecture>])", as /proc/cpuinfo says.
cpu=$(grep '^CPU: ' "$info") || fail "no CPU line"
vendor=$(awk -F': *' '$1 ~ /^vendor_id/ { print $2; exit }' /proc/cpuinfo)
if [ -n "$vendor" ]; then
  family=$(awk -F': *' '$1 ~ /^cpu family/ { print $2; exit }' /proc/cpuinfo)
  model=$(awk -F': *' '$1 ~ /^model[[:space:]]*$/ { print $2; exit }' /proc/cpuinfo)
  brand=$(awk -F': *' '$1 ~ /^model name/ { print $2; exit }' /proc/cpuinfo | sed 's/ *$//')
  echo "$cpu" | grep -qF "($vendor family $family model $model" ||
    fail "CPU line '$cpu' is not vendor $vendor, family $family, model $model"
  echo "$cpu" | grep -qF "CPU: $brand (" || fail "CPU line '$cpu' does not start with '$brand'"
fi

# The feature lines, in order, each checked against the kernel's flag for it.
section "CPU features:" >"$dir/features.txt"
[ "$(cut -d: -f1 "$dir/features.txt" | tr '\n' ' ')" = \
  "avx2 fma f16c avx512f avx512bw avx512vl avx512_bf16 avx512_fp16 avx512_vnni avx512_vbmi amx_bf16 " ] ||
  fail "the CPU feature lines are not the eleven features, in order"
flags=" $(awk -F': *' '$1 ~ /^flags/ { print $2; exit }' /proc/cpuinfo) "
if [ "$flags" != "  " ]; then
  while IFS=: read -r feature answer; do
    case $feature in
      avx512_vbmi) flag=avx512vbmi ;;
      *) flag=$feature ;;
    esac
    case $flags in
      *" $flag "*) expected=yes ;;
      *) expected=no ;;
    esac
    case $answer in
      " $expected" | " $expected, not used ("*) ;;
      *) fail "$feature:$answer, but /proc/cpuinfo says $expected" ;;
    esac
  done <"$dir/features.txt"
fi

grep -qx 'threads: 3 (OpenMP)' "$info" || fail "threads do not follow OMP_NUM_THREADS=3"
grep -Eq '^OpenMP wait: GOMP_SPINCOUNT=(30000|0) \(mantissa.s default: (the cores were free|[0-9]+ other tasks? (was|were) running) at the start' "$info" ||
  fail "the OpenMP wait is not mantissa's default"
env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active "$M" info | grep -qx 'OpenMP wait: OMP_WAIT_POLICY=active (from the environment)' ||
  fail "the OpenMP wait policy of the environment is not named"

isa=$(sed -n 's/^oneDNN ISA: //p' "$info")
if grep -qx 'avx512f: yes' "$dir/features.txt"; then
  case $isa in avx512_core*) ;; *) fail "an AVX-512 CPU with oneDNN ISA '$isa'" ;; esac
else
  [ -n "$isa" ] || fail "no oneDNN ISA"
fi
grep -Eq '^GPUs: none usable \(.+\)$|^GPUs \(CUDA backend, --accelerator gpu\):$' "$info" ||
  fail "no GPU line"

# Kernel paths: the six dtypes, each with its three paths.
section "Kernel paths:" >"$dir/paths.txt"
[ "$(sed -n 's/^  \([a-z0-9_]*\):$/\1/p' "$dir/paths.txt" | tr '\n' ' ')" = \
  "float64 float32 bfloat16 float16 float8_e4m3fn float8_e5m2 " ] ||
  fail "the kernel paths are not those of the six dtypes"
for path in matmul conversion elementwise; do
  [ "$(grep -Ec "^    $path: +[^ ]" "$dir/paths.txt")" -eq 6 ] || fail "not six $path paths"
done

# Precisions: info's list, --precision's list and the accelerator table's rows are one list.
section "Precisions (--precision):" | awk '$1 ~ /^Recognised/ { exit } { print $1 }' \
  >"$dir/precisions.txt"
[ "$(wc -l <"$dir/precisions.txt")" -ge 8 ] || fail "fewer than 8 precisions listed"
for p in 32-true bf16-mixed transformer-engine nf4-dq int8; do
  grep -qx -- "$p" "$dir/precisions.txt" || fail "$p is not listed"
done
"$M" train --precision no-such-precision >/dev/null 2>"$dir/err_precision.txt"
accepted=$(sed -n 's/.*; valid values are: \(.*\) (legacy aliases: .*/\1/p' "$dir/err_precision.txt")
[ "$accepted" = "$(paste -sd, "$dir/precisions.txt" | sed 's/,/, /g')" ] ||
  fail "info lists other precisions than --precision accepts ($accepted)"
section "Precision with accelerators (this build, this machine):" |
  awk '$1 == "precision" { on = 1; next } on && /^  [0-9a-z]/ { print $1 }' >"$dir/table_rows.txt"
cmp -s "$dir/precisions.txt" "$dir/table_rows.txt" ||
  fail "the accelerator table's rows are not the precisions listed"
grep -Eq '^  32-true +yes +yes +(yes|no \([0-9]\))$' "$info" ||
  fail "32-true does not run on every CPU in the accelerator table"
exit 0
