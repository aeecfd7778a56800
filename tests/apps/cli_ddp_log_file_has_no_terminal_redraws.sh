#!/bin/sh
# mpirun gives the ranks a pseudo-terminal: redirected to a file, --devices 2 wrote the
# progress bar's redraws (carriage returns) and the GPT's escape codes into it.
# Usage: cli_ddp_log_file_has_no_terminal_redraws.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

yes 'the quick brown fox jumps over the lazy dog' | head -n 200 > cli_ddp_tty.txt &&
  "$M" train --devices 2 --epochs 1 --train-subset 2048 --batch-size 16 > cli_ddp_tty_mlp.log 2>&1 &&
  "$M" train --devices 2 --model gpt --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 --text cli_ddp_tty.txt --max-steps 4 --eval-interval 2 > cli_ddp_tty_gpt.log 2>&1 &&
  grep -q '^Epoch 1/1 .* loss (epoch mean) ' cli_ddp_tty_mlp.log &&
  grep -q '^step 4/4 ' cli_ddp_tty_gpt.log &&
  ! grep -q "$(printf '\r')" cli_ddp_tty_mlp.log cli_ddp_tty_gpt.log &&
  ! grep -q "$(printf '\033')" cli_ddp_tty_mlp.log cli_ddp_tty_gpt.log
