#!/bin/sh
# bench/qlora/run.sh without torch or peft in its PYTHON stops before building or running
# anything, with exit status 2, naming the module, the python and the pip command that installs
# what is missing (not a ModuleNotFoundError traceback after mantissa's side has run).
# Usage: qlora_bench_needs_torch.sh <repository root>
set -u
root="$1"
cli=unused
. "$(dirname "$0")/cli_test_lib.sh"
# A python whose torch (then peft) cannot be imported, whatever this machine has installed.
mkdir -p "$dir/stub/torch"
echo 'raise ImportError("stub: no torch here")' >"$dir/stub/torch/__init__.py"
printf '#!/bin/sh\nPYTHONPATH=%s exec python3 "$@"\n' "$dir/stub" >"$dir/python"
chmod +x "$dir/python"

# BUILD does not exist: the check must come before ninja.
BNB=0 PYTHON="$dir/python" BUILD="$dir/no-build" sh "$root/bench/qlora/run.sh" >"$dir/out.txt" 2>&1
[ $? -eq 2 ] || fail "without torch: exit status is not 2"
[ "$(cat "$dir/out.txt")" = "bench/qlora/run.sh: $dir/python cannot import torch; the benchmark compares against PyTorch + peft (and bitsandbytes unless BNB=0). Install them once into a virtual environment: python3 -m venv /work/venv-ref && /work/venv-ref/bin/pip install torch peft (or set PYTHON to a python that has them; docs/qlora.md)" ] ||
  fail "without torch: not the expected message alone"

# torch imports, peft does not; with BNB=1 the install line names bitsandbytes too.
echo '' >"$dir/stub/torch/__init__.py"
mkdir -p "$dir/stub/peft"
echo 'raise ImportError("stub: no peft here")' >"$dir/stub/peft/__init__.py"
BNB=1 PYTHON="$dir/python" BUILD="$dir/no-build" sh "$root/bench/qlora/run.sh" >"$dir/out2.txt" 2>&1
[ $? -eq 2 ] || fail "without peft: exit status is not 2"
grep -q "cannot import peft;.*pip install torch peft bitsandbytes (or set PYTHON" "$dir/out2.txt" ||
  fail "without peft: not the expected message"
! grep -q Traceback "$dir/out2.txt" || fail "without peft: a traceback"
exit 0
