#!/bin/sh
# `mantissa finetune` refuses, with status 2 and before it loads anything, an --output-dir or
# --merge-to that is the --model-dir (however spelt: a trailing separator, "./", a symlink) or
# lies inside it, a --checkpoint-dir that is the --model-dir, and a --merge-to that is the
# --output-dir or lies inside it, or holds it; the same of the --adapter it starts from; a
# --metrics-json in the model or adapter directory, at --data, or at a file the run writes into an
# output directory; --overwrite-output-dir does not allow them. The model's, adapter's and data's
# files, and an earlier run's adapter in the --output-dir, stay byte for byte.
# Usage: cli_finetune_outputs_apart_from_the_model.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
cd "$dir" || exit 1
mkdir m
cp "$fx"/llama/*.json "$fx"/llama/*.safetensors m/
ln -s m link
cksum m/* >before.sum
cp "$fx/qa.jsonl" qa.jsonl
cp -r "$fx/llama/adapter" adapter_in
cksum qa.jsonl adapter_in/* >inputs.sum
ft="finetune --model-dir m --data qa.jsonl --block-size 32 --max-steps 1 --threads 1
  --no-progress-bar"
refused() {  # refused NAME MESSAGE ARGS...
  name=$1 msg=$2
  shift 2
  "$cli" $ft "$@" >"$name.txt" 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "$name: exit status $rc, expected 2"
  grep -q -F -- "$msg" "$name.txt" || fail "$name: not the expected message '$msg'"
  grep -q '^mantissa finetune:\|^loading' "$name.txt" && fail "$name: refused only after loading"
  return 0
}
refused full "[finetune] --output-dir 'm' is or lies inside --model-dir 'm': the run would overwrite the model it fine-tunes; give a --output-dir outside the model directory (--overwrite-output-dir does not allow this)" \
  --output-dir m --overwrite-output-dir
refused slash "--output-dir './m/' is or lies inside --model-dir 'm'" --output-dir ./m/ --overwrite-output-dir
refused symlink "--output-dir 'link' is or lies inside --model-dir 'm'" --output-dir link
refused inside "--output-dir 'm/out' is or lies inside --model-dir 'm'" --output-dir m/out
[ ! -e m/out ] || fail "the refused run made m/out"
refused merge "--merge-to 'm' is or lies inside --model-dir 'm'" --lora-rank 4 --output-dir ad \
  --merge-to m --overwrite-output-dir
refused merge_out "--merge-to 'ad/' is --output-dir 'ad': the adapter and the merged model need a directory each" \
  --lora-rank 4 --output-dir ad --merge-to ad/
refused merge_in_out "[finetune] --merge-to 'ad/merged' lies inside --output-dir 'ad': the merged model's files and the adapter's would mix; give --output-dir and --merge-to a directory each, neither inside the other (--overwrite-output-dir does not allow this)" \
  --lora-rank 4 --output-dir ad --merge-to ad/merged --overwrite-output-dir
refused out_in_merge "[finetune] --output-dir 'mg/./adapter' lies inside --merge-to 'mg'" \
  --lora-rank 4 --output-dir mg/./adapter --merge-to mg
[ ! -e mg ] || fail "a refused run made its --merge-to"
refused ckpt "--checkpoint-dir 'm/.' is --model-dir 'm'" --lora-rank 4 --output-dir ad \
  --checkpoint-dir m/. --overwrite-output-dir
[ ! -e ad ] || fail "a refused run made its --output-dir"
# --metrics-json is written over whatever is at its path: never a file of the model, the adapter
# or the data the run reads, nor one the run writes into its output directories.
refused metrics_weights "[finetune] --metrics-json 'm/model.safetensors' is or lies inside --model-dir 'm': the run would overwrite the model it fine-tunes; give a --metrics-json outside the model directory (--overwrite-output-dir does not allow this)" \
  --lora-rank 4 --output-dir ad --metrics-json m/model.safetensors --overwrite-output-dir
refused metrics_config "--metrics-json 'link/config.json' is or lies inside --model-dir 'm'" \
  --lora-rank 4 --output-dir ad --metrics-json link/config.json --overwrite-output-dir
refused metrics_data "[finetune] --metrics-json './qa.jsonl' is --data 'qa.jsonl': the run would overwrite the data it trains on; give another --metrics-json" \
  --lora-rank 4 --output-dir ad --metrics-json ./qa.jsonl --overwrite-output-dir
refused metrics_adapter "--metrics-json 'adapter_in/adapter_config.json' is or lies inside --adapter 'adapter_in'" \
  --adapter adapter_in --output-dir ad --metrics-json adapter_in/adapter_config.json --overwrite-output-dir
refused metrics_output "[finetune] --metrics-json 'full/model.safetensors' is a file the run writes into --output-dir 'full' (model.safetensors): give a --metrics-json of another name or place (--overwrite-output-dir does not allow this)" \
  --output-dir full --metrics-json full/model.safetensors --overwrite-output-dir
refused metrics_merge "--metrics-json 'mg/config.json' is a file the run writes into --merge-to 'mg'" \
  --lora-rank 4 --output-dir ad --merge-to mg --metrics-json mg/config.json
refused metrics_ckpt "--metrics-json 'ck/last.safetensors' is a file the run writes into --checkpoint-dir 'ck'" \
  --lora-rank 4 --output-dir ad --checkpoint-dir ck --metrics-json ck/last.safetensors
refused metrics_dir "--metrics-json 'ad/' is --output-dir 'ad'" --lora-rank 4 --output-dir ad --metrics-json ad/
# The adapter a run starts from is an input as the model is: no output goes into it.
refused merge_adapter "[finetune] --merge-to 'adapter_in' is or lies inside --adapter 'adapter_in': the run would overwrite the adapter it starts from; give a --merge-to outside the adapter directory (--overwrite-output-dir does not allow this)" \
  --adapter adapter_in --output-dir ad --merge-to adapter_in --overwrite-output-dir
refused out_adapter "--output-dir 'adapter_in/out' is or lies inside --adapter 'adapter_in'" \
  --adapter adapter_in --output-dir adapter_in/out
refused ckpt_adapter "--checkpoint-dir 'adapter_in/' is --adapter 'adapter_in'" --adapter adapter_in \
  --output-dir ad --checkpoint-dir adapter_in/ --overwrite-output-dir
[ ! -e full ] && [ ! -e ck ] || fail "a refused run made its --output-dir or --checkpoint-dir"
cksum qa.jsonl adapter_in/* | cmp -s - inputs.sum || fail "a refused run changed the data or the adapter"
[ "$(ls adapter_in | wc -l)" -eq 2 ] || fail "a refused run added files to the adapter directory"
cksum m/* | cmp -s - before.sum || fail "a refused run changed the model's files"
[ "$(ls m | wc -l)" -eq 7 ] || fail "a refused run added files to the model directory"
# Checkpoints in a directory inside the model's are fine.
"$cli" $ft --lora-rank 4 --output-dir ad --checkpoint-dir m/ck >ok.txt 2>&1 ||
  fail "a run with --checkpoint-dir inside the model directory failed: $(tail -3 ok.txt)"
cksum m/* 2>/dev/null | grep -v '/ck$' | cmp -s - before.sum || fail "the run changed the model's files"
# With an earlier run's adapter in the --output-dir, a --merge-to inside it is refused before the
# adapter's files are touched, whatever --resume and --overwrite-output-dir say.
cksum ad/* >adapter.sum
refused merge_in_adapter "--merge-to 'ad/merged' lies inside --output-dir 'ad'" --lora-rank 4 \
  --output-dir ad --merge-to ad/merged --checkpoint-dir m/ck --resume last --overwrite-output-dir
[ ! -e ad/merged ] || fail "the refused run made ad/merged"
cksum ad/* | cmp -s - adapter.sum || fail "a refused run changed the adapter's files"
echo "finetune: outputs in the model directory refused; the model's files kept"
