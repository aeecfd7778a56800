#!/bin/sh
# The optimizer-state bytes per parameter count the parameters it updates: AdamW keeps 8 bytes
# for each adapter and bias of a QLoRA run, none for the frozen 4-bit weights.
# Usage: cli_optimizer_state_per_trainable_parameter.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --precision nf4 --lora-rank 4 --max-steps 1 --train-subset 256 --no-progress-bar --metrics-json cli_qstate.json >/dev/null 2>&1 &&
  grep -q '"optimizer_state_bytes_per_parameter": 8\.0,' cli_qstate.json
