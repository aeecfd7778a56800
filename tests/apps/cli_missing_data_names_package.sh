#!/bin/sh
# A missing Fashion-MNIST directory names the package that installs it.
# Usage: cli_missing_data_names_package.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --data-dir /nonexistent 2>&1 | grep -q 'dataset-fashion-mnist'
