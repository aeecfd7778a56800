#!/bin/sh
# A data file cut short (an incomplete download) says "truncated" with the sizes expected and
# found (it said "truncated gzip data (the compressed stream ends before its end-of-stream
# marker)", no size at all).
# Usage: cli_truncated_data_file_names_the_sizes.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_trunc &&
  mkdir cli_trunc &&
  cp ${MANTISSA_DATA_DIR:-/usr/share/datasets/fashion-mnist}/*-idx?-ubyte.gz cli_trunc/ &&
  head -c 1000000 cli_trunc/train-images-idx3-ubyte.gz > cli_trunc/cut &&
  mv cli_trunc/cut cli_trunc/train-images-idx3-ubyte.gz &&
  out=$("$M" train --data-dir cli_trunc --max-steps 1 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "train-images-idx3-ubyte.gz': truncated: the header describes \[60000, 28, 28\] = 47040000 bytes of data but the decompressed data holds only [0-9]* (the 1000000-byte gzip file ends before its end-of-stream marker"
