#!/bin/sh
# A text too short for --context: the error names the file, the part that is short (the
# validation part, the last 10 %) and the length the file needs (it said "the text has 10
# bytes" of a 100-byte file); train and eval alike.
# Usage: cli_gpt_short_text_names_part_and_length.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

printf '%0100d' 0 > cli_gpt_short.txt &&
  out=$("$M" train --model gpt --layers 1 --width 16 --heads 2 --context 64 --max-steps 1 --text cli_gpt_short.txt 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "'cli_gpt_short.txt' holds 100 bytes; its validation part (the last 10 %) has 10, fewer than one window of --context + 1 = 65 bytes; use a text of at least 650 bytes"
