#!/bin/sh
# An output directory that holds an earlier run's files is refused before any work, with status
# 2, naming the directory, what it holds and the ways out, and its files stay byte for byte:
# train's --checkpoint-dir, finetune's --output-dir, --merge-to and --checkpoint-dir. One that
# holds only other files (a README) is refused as not empty. An empty one is fine; a --resume
# of that run and --overwrite-output-dir write into it. A finetune --resume writes only into
# the outputs its checkpoint's run recorded, holding only files a fine-tune writes.
# Usage: cli_output_dir_of_an_earlier_run.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
cd "$dir" || exit 1
sums() { find "$@" -type f | sort | xargs cksum; }
# refused NAME MESSAGE COMMAND...: status 2, MESSAGE in its error, before the run's banner.
refused() {
  name=$1 msg=$2
  shift 2
  "$cli" "$@" >"$name.txt" 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "$name: exit status $rc, expected 2"
  grep -q -F -- "$msg" "$name.txt" || fail "$name: not the expected message '$msg'"
  grep -q '^mantissa train:\|^mantissa finetune:\|^epoch ' "$name.txt" &&
    fail "$name: refused only after the run started"
  return 0
}

# train: an existing empty --checkpoint-dir is fine.
img="train --model mlp --hidden 32 --epochs 1 --train-subset 256 --threads 1 --no-progress-bar"
mkdir ck
"$cli" $img --checkpoint-dir ck >first.txt 2>&1 || fail "a run into an empty --checkpoint-dir failed"
[ -f ck/last.safetensors ] && [ -f ck/config.json ] || fail "the first run wrote no checkpoint"
sums ck >before.sum
step=$(ls ck | sed -n 's/^epoch=0-step=\([0-9]*\)\.safetensors$/\1/p')
[ -n "$step" ] || fail "no epoch checkpoint in ck: $(ls ck)"

refused again "[train] --checkpoint-dir 'ck' holds config.json, epoch=0-step=$step.safetensors and last.safetensors from an earlier run, which this run would overwrite; continue that run with --resume last, give a new or empty --checkpoint-dir, or pass --overwrite-output-dir to write into it anyway" \
  $img --checkpoint-dir ck
cp -r ck other
refused elsewhere "(--resume 'other/last.safetensors' is not one of its checkpoints)" \
  $img --checkpoint-dir ck --resume other/last.safetensors
sums ck | cmp -s - before.sum || fail "a refused run changed the earlier run's files"

# A resume of that run writes into it: the second epoch's checkpoint joins the first's.
"$cli" train --model mlp --hidden 32 --epochs 2 --train-subset 256 --threads 1 --no-progress-bar \
  --checkpoint-dir ck --resume last >resumed.txt 2>&1 || fail "--resume last into its own --checkpoint-dir failed"
grep -q '^resuming from checkpoint' resumed.txt || fail "the run did not resume"
ls ck | grep -q '^epoch=1-step=' || fail "the resumed run wrote no checkpoint of epoch 2"
resumed_last=$(cksum <ck/last.safetensors)
# --overwrite-output-dir: a new run, which replaces last.safetensors; the other files stay.
"$cli" $img --checkpoint-dir ck --overwrite-output-dir >over.txt 2>&1 ||
  fail "--overwrite-output-dir did not write into the --checkpoint-dir"
grep -q '^resuming' over.txt && fail "the overwriting run resumed"
grep -q '^epoch 1/1 ' over.txt || fail "the overwriting run trained no epoch"
[ "$(cksum <ck/last.safetensors)" != "$resumed_last" ] || fail "last.safetensors was not replaced"
ls ck | grep -q '^epoch=1-step=' || fail "--overwrite-output-dir removed a file it did not write"

# finetune: --output-dir first, then --merge-to, then --checkpoint-dir.
ft="finetune --model-dir $fx/llama --data $fx/qa.jsonl --lora-rank 4 --block-size 32 --threads 1
  --no-progress-bar"
"$cli" $ft --max-steps 4 --every-n-train-steps 2 --output-dir ad --checkpoint-dir fck >ft_first.txt 2>&1 ||
  fail "the first finetune failed"
[ -f ad/adapter_model.safetensors ] || fail "the first finetune wrote no adapter"
half=$(ls fck | grep 'step=2\.safetensors$')
[ -n "$half" ] || fail "no checkpoint at step 2 in fck: $(ls fck)"
mkdir mg && echo old >mg/model.safetensors
sums ad fck mg >ft_before.sum
refused ft_again "[finetune] --output-dir 'ad' holds adapter_config.json and adapter_model.safetensors from an earlier run, which this run would overwrite; continue the run that wrote them with --resume (a checkpoint of its --checkpoint-dir), give a new or empty --output-dir, or pass --overwrite-output-dir to write into it anyway" \
  $ft --max-steps 2 --output-dir ad --checkpoint-dir fck
refused ft_merge "[finetune] --merge-to 'mg' holds model.safetensors from an earlier run" \
  $ft --max-steps 2 --output-dir ad_new --merge-to mg
[ ! -e ad_new ] || fail "the refused finetune made its --output-dir"
refused ft_ck "[finetune] --checkpoint-dir 'fck' holds " $ft --max-steps 2 --output-dir ad_new \
  --checkpoint-dir fck
# Files no run writes: refused as not empty, not as an earlier run's.
mkdir rd && echo notes >rd/README.txt
refused ft_readme "[finetune] --output-dir 'rd' is not empty: it holds README.txt; give a new or empty --output-dir, or pass --overwrite-output-dir to write into it anyway" \
  $ft --max-steps 2 --output-dir rd
grep -q "earlier run" ft_readme.txt && fail "a directory holding only README.txt was called an earlier run's"
[ "$(cat rd/README.txt)" = notes ] && [ "$(ls rd)" = README.txt ] || fail "the refused run changed rd"
# A --resume writes only into its own run's outputs: not another run's adapter (its record names
# the run's own --output-dir), not a directory of files no fine-tune writes, not a --merge-to
# the resumed run did not have.
"$cli" $ft --max-steps 2 --output-dir ad_other >ft_other.txt 2>&1 || fail "the other finetune failed"
sums ad_other >other.sum
here=$(pwd -P)
resume="$ft --max-steps 4 --every-n-train-steps 2 --checkpoint-dir fck --resume fck/$half"
refused ft_resume_other "[finetune] --output-dir 'ad_other' holds adapter_config.json and adapter_model.safetensors from another run: the run --resume 'fck/$half' continues wrote its --output-dir to '$here/ad'; give --output-dir '$here/ad', a new or empty --output-dir, or pass --overwrite-output-dir to write into it anyway" \
  $resume --output-dir ad_other
refused ft_resume_readme "[finetune] --output-dir 'rd' holds README.txt, which \`mantissa finetune\` does not write there: it is not the output of the run --resume 'fck/$half' continues; give a new or empty --output-dir, or pass --overwrite-output-dir to write into it anyway" \
  $resume --output-dir rd
refused ft_resume_merge "[finetune] --merge-to 'mg' holds model.safetensors from another run: the run --resume 'fck/$half' continues had no --merge-to; give a new or empty --merge-to, or pass --overwrite-output-dir to write into it anyway" \
  $resume --output-dir ad --merge-to mg
sums ad_other | cmp -s - other.sum || fail "a refused resume changed another run's adapter"
[ "$(cat rd/README.txt)" = notes ] && [ "$(ls rd)" = README.txt ] || fail "a refused resume changed rd"
sums ad fck mg | cmp -s - ft_before.sum || fail "a refused finetune changed the earlier run's files"
# ad keeps adapter_config.json, so it is an earlier run's still; the resumed run writes the file
# again, as the unbroken run did.
adapter=$(cksum <ad/adapter_model.safetensors)
rm ad/adapter_model.safetensors
"$cli" $ft --max-steps 4 --every-n-train-steps 2 --output-dir ad --checkpoint-dir fck \
  --resume "fck/$half" >ft_resumed.txt 2>&1 || fail "a finetune resumed into its own directories failed"
grep -q '^resuming from checkpoint' ft_resumed.txt || fail "the finetune did not resume"
[ -f ad/adapter_model.safetensors ] && [ "$(cksum <ad/adapter_model.safetensors)" = "$adapter" ] ||
  fail "the resumed finetune's adapter differs from the unbroken run's"
"$cli" $ft --max-steps 2 --output-dir ad --checkpoint-dir fck --merge-to mg --overwrite-output-dir >ft_over.txt 2>&1 ||
  fail "--overwrite-output-dir did not write the finetune's directories"
[ -f mg/config.json ] || fail "--overwrite-output-dir wrote no merged model into --merge-to"
echo "earlier runs' directories refused and kept; --resume and --overwrite-output-dir write into them"
