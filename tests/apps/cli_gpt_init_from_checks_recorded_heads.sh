#!/bin/sh
# --init-from checks what the file records beyond its shapes, as eval does: a GPT of another
# --heads would load and compute something else, so it is an error naming the flag and both
# values (--width, which the shapes show too, is named the same way).
# Usage: cli_gpt_init_from_checks_recorded_heads.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -f cli_gih.* &&
  yes 'the quick brown fox jumps over the lazy dog' | head -n 60 > cli_gih.txt &&
  G='--model gpt --layers 1 --width 32 --context 16 --max-steps 1 --sample-tokens 0 --no-progress-bar --text cli_gih.txt' &&
  "$M" train $G --heads 4 --save-weights cli_gih.safetensors >/dev/null 2>&1 &&
  ! out=$("$M" train $G --heads 2 --init-from cli_gih.safetensors 2>&1) &&
  echo "$out" | grep -q -- '\[--init-from\] cli_gih.safetensors was trained with --heads 4, but --heads is 2 here: pass --heads 4' &&
  ! out=$("$M" train --model gpt --layers 1 --width 64 --context 16 --heads 4 --max-steps 1 --text cli_gih.txt --init-from cli_gih.safetensors 2>&1) &&
  echo "$out" | grep -q -- 'was trained with --width 32, but --width is 64 here' &&
  "$M" train $G --heads 4 --init-from cli_gih.safetensors >/dev/null 2>&1
