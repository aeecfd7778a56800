#!/bin/sh
# eval rebuilds an FP8 checkpoint's precision from what the file records: the recipe (E4M3,
# 16 rows of amax history) and the layers kept out of FP8 (h0, h1.mlp), and prints the
# validation loss the run ended with (its validation split fits the run's 16 validation
# batches). Given --fp8-* flags: the exclusions in another order and another format are
# accepted, another history length is an error naming both; a damaged history length (of the
# wrong type, or one the tensors contradict) is an error naming the key. A default FP8 run's
# checkpoint evaluates too.
# Usage: cli_eval_of_an_fp8_checkpoint_uses_its_recipe.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_evf &&
  mkdir cli_evf &&
  yes 'the quick brown fox jumps over the lazy dog' | head -n 60 > cli_evf/t.txt &&
  a=$("$M" train --model gpt --layers 2 --width 32 --heads 2 --context 16 --sample-tokens 0 --no-progress-bar --max-steps 4 --text cli_evf/t.txt --precision transformer-engine --fp8-exclude h1.mlp,h0 --fp8-amax-history-len 16 --fp8-format E4M3 --checkpoint-dir cli_evf/ck 2>/dev/null | sed -n 's/^final validation loss: \([0-9.]*\) .*/\1/p') &&
  test -n "$a" &&
  "$M" eval --checkpoint cli_evf/ck/last.safetensors 2>/dev/null | grep -q "precision transformer-engine: validation loss $a nats/byte" &&
  "$M" eval --checkpoint cli_evf/ck/last.safetensors --fp8-exclude h0,h1.mlp --fp8-format HYBRID 2>/dev/null | grep -q 'precision transformer-engine: validation loss' &&
  out=$("$M" eval --checkpoint cli_evf/ck/last.safetensors --fp8-amax-history-len 1024 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'was trained with --fp8-amax-history-len 16, but --fp8-amax-history-len is 1024 here' &&
  LC_ALL=C sed 's/\(fp8-amax-history-len..:\)16,/\1[],/' cli_evf/ck/last.safetensors > cli_evf/type.safetensors &&
  out=$("$M" eval --checkpoint cli_evf/type.safetensors 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'cli_evf/type.safetensors: hyper_parameters.fp8-amax-history-len has the wrong type (array); the file is damaged: pass --fp8-amax-history-len as trained' &&
  LC_ALL=C sed 's/\(fp8-amax-history-len..:\)16,/\112,/' cli_evf/ck/last.safetensors > cli_evf/len.safetensors &&
  out=$("$M" eval --checkpoint cli_evf/len.safetensors 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'hyper_parameters.fp8-amax-history-len is 12, but the file.s FP8 layers keep 16 rows of amax history' &&
  "$M" train --model gpt --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 --no-progress-bar --max-steps 2 --text cli_evf/t.txt --precision transformer-engine --checkpoint-dir cli_evf/def >/dev/null 2>&1 &&
  "$M" eval --checkpoint cli_evf/def/last.safetensors 2>/dev/null | grep -q 'precision transformer-engine: validation loss'
