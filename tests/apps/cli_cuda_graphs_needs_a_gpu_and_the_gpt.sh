#!/bin/sh
# --cuda-graphs: the GPT on the CPU is refused with the reason (exit 2); an image model warns
# that it ignores the flag and trains.
# Usage: cli_cuda_graphs_needs_a_gpu_and_the_gpt.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

yes 'the quick brown fox jumps over the lazy dog' | head -c 20000 > cli_cgtext.txt &&
  out=$("$M" train --model gpt --accelerator cpu --cuda-graphs --max-steps 1 --text cli_cgtext.txt --no-progress-bar 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'cuda_graphs (--cuda-graphs) needs a GPU (--accelerator gpu); this fit runs on cpu' &&
  out=$("$M" train --model mlp --cuda-graphs --max-steps 1 --epochs 1 --train-subset 64 --no-progress-bar 2>&1) &&
  echo "$out" | grep -q 'warning: --cuda-graphs applies to --model gpt only: --model mlp ignores it'
