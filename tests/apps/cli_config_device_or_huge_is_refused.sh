#!/bin/sh
# --config of a device or a huge file is refused, read at most 1 MiB + 4 KiB (/dev/zero and a
# 4 GB file were read whole into memory). Pipes, FIFOs and stdin: cli.config_reads_pipes.
# Usage: cli_config_device_or_huge_is_refused.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -f cli_cbig.json &&
  out=$(timeout 60 "$M" train --config /dev/zero 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'the config file is a device' &&
  truncate -s 4G cli_cbig.json &&
  out=$(ulimit -v 4000000; timeout 60 "$M" train --config cli_cbig.json 2>&1)
rc=$?
rm -f cli_cbig.json
test $rc -eq 2 &&
  echo "$out" | grep -q 'cli_cbig.json: the config file has more than 1048576 bytes'
