#!/bin/sh
# --config reads a pipe, a FIFO and - (stdin) as it reads a file (docs/cli.md): the flags are
# taken, errors name what was typed, more than 1 MiB is refused as for a file, a FIFO nobody
# writes to is an error after 10 seconds (rather than a read that blocks forever), and
# devices (/dev/zero, stdin from /dev/null) stay refused.
# Usage: cli_config_pipes.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
flags='{"max-steps": 1, "train-subset": 64, "no-progress-bar": true, "hidden": "24"}'
banner='mantissa train: model mlp 784-24-10'

# A pipe as stdin.
echo "$flags" | "$cli" train --config - >"$dir/out_stdin.txt" 2>&1 || fail "--config - failed"
grep -q "$banner" "$dir/out_stdin.txt" || fail "--config -: the flags were not taken"
# A pipe by its path (what <(...) gives: /dev/fd/N).
echo "$flags" | "$cli" train --config /dev/stdin >"$dir/out_devstdin.txt" 2>&1 ||
  fail "--config /dev/stdin failed"
grep -q "$banner" "$dir/out_devstdin.txt" || fail "--config /dev/stdin: the flags were not taken"
# A FIFO whose writer comes after the reader.
mkfifo "$dir/fifo"
(sleep 1; echo "$flags" >"$dir/fifo") &
"$cli" train --config "$dir/fifo" >"$dir/out_fifo.txt" 2>&1 || fail "--config FIFO failed"
wait
grep -q "$banner" "$dir/out_fifo.txt" || fail "--config FIFO: the flags were not taken"
# A FIFO without a writer: an error after 10 s, not a hang.
start=$(date +%s)
timeout 60 "$cli" train --config "$dir/fifo" >"$dir/err_nowriter.txt" 2>&1
rc=$?
took=$(($(date +%s) - start))
[ $rc -eq 2 ] || fail "FIFO without a writer: exit status $rc, expected 2"
[ $took -ge 9 ] && [ $took -le 30 ] || fail "FIFO without a writer: gave up after ${took} s"
grep -q "\[config\] $dir/fifo: the config file is a pipe or FIFO that sent nothing for 10 seconds" \
  "$dir/err_nowriter.txt" || fail "FIFO without a writer: not the expected error"
# Errors in a piped config name stdin.
echo '{"max_step": 1}' | "$cli" train --config - >"$dir/err_key.txt" 2>&1
[ $? -eq 2 ] || fail "bad key on stdin: exit status is not 2"
grep -q "\[config\] stdin: unknown key 'max-step'.*did you mean 'max-steps'" "$dir/err_key.txt" ||
  fail "bad key on stdin: not the expected error"
# A switch given a value that is no truth value: the error names the key and the value (it
# named neither, and gave "quiet", a flag train does not have, as its example).
echo '{"no-progress-bar": "maybe"}' >"$dir/switch.json"
"$cli" train --config "$dir/switch.json" >"$dir/err_switch.txt" 2>&1
[ $? -eq 2 ] || fail "switch given maybe: exit status is not 2"
grep -q "\[config\] $dir/switch.json: key 'no-progress-bar' is a switch: give true or false, not 'maybe'" \
  "$dir/err_switch.txt" || fail "switch given maybe: not the expected error"
# The size cap of a file holds for a pipe.
head -c 2000000 /dev/zero | tr '\000' ' ' | "$cli" train --config - >"$dir/err_big.txt" 2>&1
[ $? -eq 2 ] || fail "2 MB pipe: exit status is not 2"
grep -q '\[config\] stdin: the config file has more than 1048576 bytes' "$dir/err_big.txt" ||
  fail "2 MB pipe: not the expected error"
# Devices stay refused, by path and as stdin.
timeout 60 "$cli" train --config /dev/zero >"$dir/err_zero.txt" 2>&1
[ $? -eq 2 ] || fail "/dev/zero: exit status is not 2"
grep -q '\[config\] /dev/zero: the config file is a device' "$dir/err_zero.txt" ||
  fail "/dev/zero: not the expected error"
timeout 60 "$cli" train --config - </dev/zero >"$dir/err_zero_stdin.txt" 2>&1
[ $? -eq 2 ] || fail "stdin from /dev/zero: exit status is not 2"
grep -q '\[config\] stdin: the config file - (stdin) is a device' "$dir/err_zero_stdin.txt" ||
  fail "stdin from /dev/zero: not the expected error"
# --devices restarts the command line, which would read the stream a second time.
echo "$flags" | "$cli" train --config - --devices 2 >"$dir/err_devices.txt" 2>&1
[ $? -eq 2 ] || fail "--devices 2 with a piped config: exit status is not 2"
grep -q -- '--devices 2 restarts this command under mpirun' "$dir/err_devices.txt" ||
  fail "--devices 2 with a piped config: not the expected error"
exit 0
