#!/bin/sh
# A --metrics-json file that exists and is not empty (an earlier run's numbers) is refused before
# any work by train, finetune and eval, as a non-empty output directory is: exit status 2, one
# error line naming the file, its size and the ways out, the file byte for byte as it was, no
# training (no epoch line, no --checkpoint-dir or --output-dir made). --overwrite-output-dir
# replaces it, a --resume of the run rewrites it, and an empty file (mktemp's) is written.
# Usage: cli_metrics_json_of_an_earlier_run.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
cd "$dir" || exit 1
mlp="train --model mlp --hidden 32 --train-subset 256 --batch-size 128 --threads 1
  --no-progress-bar"

"$cli" $mlp --epochs 1 --seed 1 --metrics-json m.json >first.txt 2>&1 || fail "the first run failed"
before=$(cksum m.json)
bytes=$(wc -c <m.json | tr -d ' ')
"$cli" $mlp --epochs 1 --seed 1 --metrics-json m.json --checkpoint-dir ck_refused >again.txt 2>&1
rc=$?
[ $rc -eq 2 ] || fail "a second run into m.json: exit status $rc, expected 2"
[ "$(cat again.txt)" = "mantissa: error: [train] --metrics-json 'm.json' already exists ($bytes bytes), and this run would replace it; give a new file, continue the run that wrote it with --resume, or pass --overwrite-output-dir to replace it" ] ||
  fail "not the one expected error line: $(cat again.txt)"
[ "$(cksum m.json)" = "$before" ] || fail "the refused run changed m.json"
[ ! -e ck_refused ] || fail "the refused run made its --checkpoint-dir"

# --overwrite-output-dir replaces it: another seed's losses are in the file.
"$cli" $mlp --epochs 1 --seed 2 --metrics-json m.json --overwrite-output-dir >over.txt 2>&1 ||
  fail "--overwrite-output-dir was refused: $(cat over.txt)"
[ "$(cksum m.json)" != "$before" ] || fail "--overwrite-output-dir left m.json as it was"
grep -q '"seed": 2' m.json || fail "m.json is not the seed-2 run's"

# An empty file is no earlier run's.
: >empty.json
"$cli" $mlp --epochs 1 --metrics-json empty.json --max-steps 1 >empty.txt 2>&1 || fail "an empty file was refused"
[ -s empty.json ] || fail "the metrics were not written into the empty file"

# A run continued with --resume rewrites its metrics file with the whole run's numbers.
"$cli" $mlp --epochs 1 --checkpoint-dir ck --metrics-json r.json >r1.txt 2>&1 || fail "the 1-epoch run failed"
"$cli" $mlp --epochs 2 --checkpoint-dir ck --resume last --metrics-json r.json >r2.txt 2>&1 ||
  fail "the resumed run was refused: $(cat r2.txt)"
[ "$(json_list r.json epoch_seconds | wc -l)" -eq 2 ] || fail "r.json is not the 2-epoch run's"

# eval has no --resume: the message leaves that way out; --overwrite-output-dir replaces it.
before=$(cksum r.json)
bytes=$(wc -c <r.json | tr -d ' ')
"$cli" eval --checkpoint ck/last.safetensors --threads 1 --metrics-json r.json >e.txt 2>&1
rc=$?
[ $rc -eq 2 ] || fail "eval into r.json: exit status $rc, expected 2"
[ "$(cat e.txt)" = "mantissa: error: [eval] --metrics-json 'r.json' already exists ($bytes bytes), and this run would replace it; give a new file, or pass --overwrite-output-dir to replace it" ] ||
  fail "eval: not the one expected error line: $(cat e.txt)"
[ "$(cksum r.json)" = "$before" ] || fail "the refused eval changed r.json"
"$cli" eval --checkpoint ck/last.safetensors --threads 1 --metrics-json r.json \
  --overwrite-output-dir >e2.txt 2>&1 || fail "eval --overwrite-output-dir failed: $(cat e2.txt)"
grep -q '"evaluated_checkpoint"' r.json || fail "eval --overwrite-output-dir did not write r.json"

# finetune: refused before the model loads (no --output-dir made).
ft="finetune --model-dir $fx/llama --data $fx/qa.jsonl --lora-rank 4 --block-size 32
  --batch-size 2 --max-steps 1 --threads 1 --no-progress-bar"
bytes=$(wc -c <m.json | tr -d ' ')
"$cli" $ft --output-dir ft_out --metrics-json m.json >ft.txt 2>&1
rc=$?
[ $rc -eq 2 ] || fail "finetune into m.json: exit status $rc, expected 2"
[ "$(cat ft.txt)" = "mantissa: error: [finetune] --metrics-json 'm.json' already exists ($bytes bytes), and this run would replace it; give a new file, continue the run that wrote it with --resume, or pass --overwrite-output-dir to replace it" ] ||
  fail "finetune: not the one expected error line: $(cat ft.txt)"
[ ! -e ft_out ] || fail "the refused finetune made its --output-dir"
"$cli" $ft --output-dir ft_out --metrics-json m.json --overwrite-output-dir >ft2.txt 2>&1 ||
  fail "finetune --overwrite-output-dir failed: $(cat ft2.txt)"
grep -q '"val_loss_unit": "nats/token"' m.json || fail "m.json is not the fine-tune's"
echo "an existing --metrics-json: refused by train, eval and finetune; replaced when told to"
exit 0
