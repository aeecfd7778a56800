#!/bin/sh
# A --text that does not exist is named in the error.
# Usage: cli_gpt_missing_text_names_file.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --model gpt --text /nonexistent/corpus.txt 2>&1 | grep -q '/nonexistent/corpus.txt'
