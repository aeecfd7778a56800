#!/bin/sh
# A CUDA build opens cuBLAS(Lt) at its first GPU product (src/kernels/cuda/gemm/cublas_api.h):
# linked, they cost every process ~210 MiB of memory from its start, CPU-only runs included.
# Usage: cli_cublas_is_not_linked.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

! ldd "$M" | grep -q libcublas
