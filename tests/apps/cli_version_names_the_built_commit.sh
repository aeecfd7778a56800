#!/bin/sh
# The commit named is the one built, not the one CMake last configured at. A binary older
# than HEAD's commit (committed, not rebuilt) is reported as skipped, not failed.
# Usage: cli_version_names_the_built_commit.sh MANTISSA SOURCE_DIR
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
SRC=$2
cd "$dir" || exit 1

rev=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null) || exit 0
"$M" --version | grep -q "(git $rev)" &&
  exit 0
test $(stat -c %Y "$M") -lt $(git -C "$SRC" log -1 --format=%ct) &&
  exit 77
exit 1
