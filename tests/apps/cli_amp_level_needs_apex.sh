#!/bin/sh
# --amp-level without --amp-backend apex is refused.
# Usage: cli_amp_level_needs_apex.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --precision 16-mixed --amp-level O2 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--amp-level .O2. applies to --amp-backend apex'
