#!/bin/sh
# A file that is not a safetensors checkpoint (truncated, a config.json) given to --init-from,
# --resume or eval's --checkpoint: the error starts with the flag, keeps the loader's reason
# ("[load_safetensors] 'f': header length 9400 runs past the end of the 3000-byte file") and
# says what file is meant; nothing runs.
# Usage: cli_unreadable_checkpoint_names_flag.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
mlp="train --model mlp --epochs 1 --train-subset 256 --threads 1 --no-progress-bar"
"$cli" $mlp --checkpoint-dir "$dir/ck" >"$dir/base.txt" 2>&1 || fail "the base run failed"
head -c 3000 "$dir/ck/last.safetensors" >"$dir/cut.safetensors"
size=$(wc -c <"$dir/ck/last.safetensors")
header=$(od -A n -t u8 -N 8 "$dir/ck/last.safetensors" | tr -d ' ')

"$cli" $mlp --precision nf4 --lora-rank 8 --init-from "$dir/cut.safetensors" --metrics-json "$dir/m.json" >"$dir/init.txt" 2>&1
[ $? -eq 2 ] || fail "--init-from a truncated file: not status 2"
grep -q -x -F -- "mantissa: error: [--init-from] $dir/cut.safetensors is not a readable safetensors checkpoint (header length $header runs past the end of the 3000-byte file); pass a run's checkpoint (the last.safetensors of its --checkpoint-dir) or a --save-weights file" "$dir/init.txt" ||
  fail "--init-from a truncated file: not the expected error ($size bytes whole)"
[ ! -e "$dir/m.json" ] || fail "--init-from a truncated file: metrics written"

"$cli" $mlp --precision nf4-dq --resume "$dir/ck/config.json" >"$dir/resume.txt" 2>&1
[ $? -eq 2 ] || fail "--resume config.json: not status 2"
grep -q -F -- "mantissa: error: [--resume] $dir/ck/config.json is not a readable safetensors checkpoint (header length " "$dir/resume.txt" ||
  fail "--resume config.json: not the expected error"
grep -q -F -- "; pass a checkpoint a run wrote to its --checkpoint-dir (such as last.safetensors)" "$dir/resume.txt" ||
  fail "--resume config.json: no fix named"

# eval --checkpoint printed the loader's error alone; it now says it as --init-from does.
"$cli" eval --checkpoint "$dir/cut.safetensors" --threads 1 >"$dir/eval.txt" 2>&1
[ $? -eq 2 ] || fail "eval --checkpoint a truncated file: not status 2"
grep -q -x -F -- "mantissa: error: [--checkpoint] $dir/cut.safetensors is not a readable safetensors checkpoint (header length $header runs past the end of the 3000-byte file); pass a checkpoint a run wrote to its --checkpoint-dir (such as last.safetensors) or a --save-weights file" "$dir/eval.txt" ||
  fail "eval --checkpoint a truncated file: not the expected error"
exit 0
