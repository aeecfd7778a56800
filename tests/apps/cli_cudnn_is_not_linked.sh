#!/bin/sh
# cuDNN likewise, at its first GPU convolution (src/kernels/cuda/conv/cudnn_api.h).
# Usage: cli_cudnn_is_not_linked.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

ldd "$M" > /dev/null &&
  ! ldd "$M" | grep -q libcudnn
