#!/bin/sh
# info's precision x accelerator table: bf16-mixed on the CPU, with AVX-512 BF16, and not on a
# GPU this machine lacks, with the reason.
# Usage: cli_info_precision_accelerator_table.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" info 2>&1) &&
  echo "$out" | grep -q 'Precision with accelerators' &&
  echo "$out" | grep -Eq '^  bf16-mixed +(yes|emulated \([0-9]\)) +yes +no \([0-9]\)' &&
  echo "$out" | grep -Eq 'no CUDA backend|no usable NVIDIA GPU'
