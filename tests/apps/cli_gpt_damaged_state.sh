#!/bin/sh
# A GPT checkpoint whose recorded sizes or module state were damaged by hand is refused with an
# error naming the file and the field (recipes/model_hparams.cpp, models/language_model.cpp):
# eval or a resume of a file whose head count is 0 or does not divide the width (the GPT refused it in its
# own words, naming neither), and a resume from a file whose validation history runs backwards
# or holds a negative loss (taken into the run's curves and metrics JSON).
# Usage: cli_gpt_damaged_state.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >"$dir/t.txt"
gpt="--model gpt --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 --no-progress-bar"
gpt="$gpt --text $dir/t.txt --max-steps 4 --eval-interval 2"
"$cli" train $gpt --checkpoint-dir "$dir/ck" >"$dir/out_train.txt" 2>&1 || fail "training failed"
ck="$dir/ck/last.safetensors"
grep -q 'heads\\":2,' "$ck" || fail "the checkpoint does not record heads 2 as expected"
grep -q 'val_steps\\":\[2.0,4.0\]' "$ck" || fail "the checkpoint's val_steps are not [2.0,4.0]"
grep -q 'val_loss\\":\[5\.' "$ck" || fail "the checkpoint's first val_loss is not 5.x"

# damage NAME SED: a copy of the checkpoint with SED applied (same length: the header's size
# stays right).
damage() {
  LC_ALL=C sed "$2" "$ck" >"$dir/$1.safetensors"
  [ "$(wc -c <"$dir/$1.safetensors")" -eq "$(wc -c <"$ck")" ] || fail "$1: the copy changed size"
}
# expect_refused CMD_OUTPUT_FILE MESSAGE: exit status 2 and MESSAGE (a grep pattern).
expect_refused() {
  [ "$2" -eq 2 ] || fail "$1: exit status $2, expected 2"
  grep -q -- "$3" "$dir/$1.txt" || fail "$1: not the expected error"
}

damage heads0 's/heads\\":2,/heads\\":0,/'
"$cli" eval --checkpoint "$dir/heads0.safetensors" >"$dir/err_heads0.txt" 2>&1
expect_refused err_heads0 $? "heads0.safetensors: hyper_parameters.heads is 0, but a GPT has at least 1 attention head; the file is damaged: pass --heads as trained"
damage heads3 's/heads\\":2,/heads\\":3,/'
"$cli" eval --checkpoint "$dir/heads3.safetensors" >"$dir/err_heads3.txt" 2>&1
expect_refused err_heads3 $? "heads3.safetensors: hyper_parameters.heads is 3, which does not divide the width 32"
# A resume refuses the damaged record as eval does (it resumed in silence, the run's --heads
# replacing the record; before that it advised "pass --heads 0").
"$cli" train $gpt --resume "$dir/heads0.safetensors" >"$dir/err_resume_heads0.txt" 2>&1
expect_refused err_resume_heads0 $? "\[--resume\] .*heads0.safetensors: hyper_parameters.heads is 0, but a GPT has at least 1 attention head; the file is damaged: use an earlier checkpoint"
grep -q -- 'pass --heads 0' "$dir/err_resume_heads0.txt" && fail "resume advised --heads 0"

damage backwards 's/val_steps\\":\[2.0,4.0\]/val_steps\\":[4.0,2.0]/'
"$cli" train $gpt --resume "$dir/backwards.safetensors" --metrics-json "$dir/m.json" \
  >"$dir/err_backwards.txt" 2>&1
expect_refused err_backwards $? "backwards.safetensors: .*LanguageModel state: field 'module.val_steps' goes back from step 4 to step 2; the file is damaged"
[ -f "$dir/m.json" ] && fail "a refused resume wrote its metrics"
damage negative 's/val_loss\\":\[5\./val_loss\\":[-5/'
"$cli" train $gpt --resume "$dir/negative.safetensors" >"$dir/err_negative.txt" 2>&1
expect_refused err_negative $? "negative.safetensors: .*LanguageModel state: field 'module.val_loss' holds -5.*, outside \[0, inf\]"
# The undamaged checkpoint resumes (nothing left to train at --max-steps 4).
"$cli" train $gpt --resume "$ck" >"$dir/out_resume.txt" 2>&1 || fail "the undamaged resume failed"
exit 0
