#!/bin/sh
# A corpus whose name is not UTF-8 (Latin-1 "caf\xe9.txt"): the run records it in
# config.json and the checkpoint metadata with U+FFFD for the bad byte; writing that JSON threw
# nlohmann's type_error 316 and the run ended "internal error" (exit 3) with no checkpoint.
# Usage: cli_gpt_non_utf8_text_name_checkpoints.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_latin1 &&
  n=$(printf 'cli_caf\351.txt') &&
  yes 'the quick brown fox jumps over the lazy dog' | head -n 60 > "$n" &&
  "$M" train --model gpt --layers 1 --width 16 --heads 2 --context 8 --max-steps 1 --sample-tokens 0 --no-progress-bar --text "$n" --checkpoint-dir cli_latin1 >/dev/null 2>&1 &&
  test -f cli_latin1/last.safetensors &&
  grep -q "cli_caf$(printf '\357\277\275').txt" cli_latin1/config.json
