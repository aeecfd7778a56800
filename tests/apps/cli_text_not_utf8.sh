#!/bin/sh
# A binary file given as text is refused, naming the file and the offset and line of its first
# byte that is not UTF-8 text: the GPT's --text (a file, or one file of a directory) and
# finetune's --data (plain text and JSONL). A binary file trained as text without a word.
# Usage: cli_text_not_utf8.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
yes 'the quick brown fox jumps over the lazy dog' | head -n 200 >"$dir/text.in"
refused() {  # refused NAME MESSAGE COMMAND ARGS...
  name=$1 msg=$2
  shift 2
  "$cli" "$@" >"$dir/$name.out" 2>"$dir/$name.err"
  rc=$?
  [ $rc -eq 2 ] || fail "$name: exit status $rc, expected 2"
  grep -q -- "$msg" "$dir/$name.err" || fail "$name: not the expected message '$msg'"
}
gpt="train --model gpt --layers 1 --width 32 --heads 2 --context 16 --max-steps 2 --sample-tokens 0 --no-progress-bar --threads 1"
# The start of an ELF file (a program), NUL at offset 7, then text.
{ printf '\177ELF\002\001\001\000\000\000'; cat "$dir/text.in"; } >"$dir/prog.bin"
refused elf "\[train\] --text: '$dir/prog.bin' is not UTF-8 text: the byte at offset 7 (line 1) is NUL (0x00), which text does not hold" \
  $gpt --text "$dir/prog.bin"
# Latin-1 text inside a corpus directory: the file and its line are named.
mkdir "$dir/corpus"
cp "$dir/text.in" "$dir/corpus/a.txt"
{ head -n 100 "$dir/text.in"; printf 'na\357ve caf\351\n'; } >"$dir/corpus/b.txt"
refused latin1 "corpus/b.txt' is not UTF-8 text: the byte at offset 4402 (line 101) is 0xef, which begins no UTF-8 character" \
  $gpt --text "$dir/corpus"
# The same text in UTF-8 trains.
{ head -n 100 "$dir/text.in"; printf 'na\303\257ve caf\303\251\n'; } >"$dir/corpus/b.txt"
"$cli" $gpt --text "$dir/corpus" >"$dir/ok.out" 2>"$dir/ok.err" || fail "UTF-8 text was refused"
# finetune's data: plain text and JSONL.
cp "$dir/prog.bin" "$dir/data.txt"
refused ft_plain "\[finetune\] --data: the data file '$dir/data.txt' is not UTF-8 text: the byte at offset 7 (line 1) is NUL" \
  finetune --model-dir "$fx/llama" --data "$dir/data.txt" --lora-rank 4 --output-dir "$dir/ft1" --threads 1
{ head -n 2 "$fx/qa.jsonl"; printf '{"prompt": "a", "completion": "\377"}\n'; } >"$dir/bad.jsonl"
refused ft_jsonl "bad.jsonl' is not UTF-8 text: the byte at offset [0-9]* (line 3) is 0xff" \
  finetune --model-dir "$fx/llama" --data "$dir/bad.jsonl" --lora-rank 4 --output-dir "$dir/ft2" --threads 1
echo "bytes that are not UTF-8 text refused with their offset"
