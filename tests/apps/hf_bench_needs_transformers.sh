#!/bin/sh
# bench/hf/run.sh stops before building or running anything, with exit status 2 and one line
# naming what is missing: a PYTHON that does not exist, a module (transformers here) that its
# python cannot import, or an unknown benchmark name.
# Usage: hf_bench_needs_transformers.sh <repository root>
set -u
root="$1"
cli=unused
. "$(dirname "$0")/cli_test_lib.sh"
# A python whose transformers cannot be imported, whatever this machine has installed; torch
# and safetensors are stubs that import.
mkdir -p "$dir/stub/torch" "$dir/stub/transformers"
echo '' >"$dir/stub/torch/__init__.py"
echo 'raise ImportError("stub: no transformers here")' >"$dir/stub/transformers/__init__.py"
printf '#!/bin/sh\nPYTHONPATH=%s exec python3 "$@"\n' "$dir/stub" >"$dir/python"
chmod +x "$dir/python"

# BUILD does not exist: the checks must come before ninja.
PYTHON="$dir/python" BUILD="$dir/no-build" sh "$root/bench/hf/run.sh" qlora >"$dir/out.txt" 2>&1
[ $? -eq 2 ] || fail "without transformers: exit status is not 2"
[ "$(cat "$dir/out.txt")" = "bench/hf/run.sh: $dir/python cannot import transformers; install it with $dir/python -m pip install transformers (or set PYTHON to a python that has it)" ] ||
  fail "without transformers: not the expected message alone"

PYTHON="$dir/nothing-here" BUILD="$dir/no-build" sh "$root/bench/hf/run.sh" >"$dir/out2.txt" 2>&1
[ $? -eq 2 ] || fail "without python: exit status is not 2"
grep -q "^bench/hf/run.sh: no python at $dir/nothing-here; set PYTHON" "$dir/out2.txt" ||
  fail "without python: not the expected message"

PYTHON="$dir/python" BUILD="$dir/no-build" sh "$root/bench/hf/run.sh" speed >"$dir/out3.txt" 2>&1
[ $? -eq 2 ] || fail "unknown benchmark: exit status is not 2"
grep -q "unknown benchmark 'speed' (qlora, generate, load or all)" "$dir/out3.txt" ||
  fail "unknown benchmark: not the expected message"
exit 0
