#!/usr/bin/env bash
# Data-parallel scaling on this machine (docs/distributed.md, "Measured scaling"): the MLP and
# the GPT trained by 1 rank and by 2 ranks of one thread each, with the same per-rank batch
# (weak scaling: 2 ranks process twice the samples per step). Prints, from this one run:
#   samples/s of 1 and 2 ranks, the scaling efficiency  sps(2) / (2 * sps(1)),
#   the communication time per step (wall time with a gradient bucket in flight), the share of
#   it overlapped with backward, the time the step waited after backward, and the buckets.
#
#   bench/ddp_scaling.sh [path/to/mantissa]      (default: build/mantissa)
set -euo pipefail
M=${1:-build/mantissa}
command -v mpirun >/dev/null || { echo "mpirun not found: install openmpi-bin" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
MPIRUN=(mpirun --oversubscribe --bind-to none -np 2)

MLP=(train --model mlp --hidden 1024,1024 --threads 1 --epochs 1 --train-subset 16384
     --batch-size 64 --no-progress-bar --seed 1)
GPT=(train --model gpt --layers 2 --width 128 --heads 4 --context 64 --threads 1 --max-steps 30
     --batch-size 8 --eval-interval 100000 --sample-tokens 0 --no-progress-bar --seed 1)

num() {  # num FILE KEY: the first number stored under "KEY"
  grep -o "\"$2\": [-0-9.e+]*" "$1" | head -1 | sed 's/.*: //'
}

run() {  # run NAME ARGS...: 1 rank, then 2 ranks
  local name=$1
  shift
  "$M" "$@" --metrics-json "$out/$name-1.json" >/dev/null
  "${MPIRUN[@]}" "$M" "$@" --metrics-json "$out/$name-2.json" >/dev/null
}

run mlp "${MLP[@]}"
run gpt "${GPT[@]}"

printf '%-4s %12s %12s %10s %13s %11s %14s  %s\n' model "1 rank sps" "2 ranks sps" efficiency \
  "comm ms/step" overlapped "exposed ms/step" "buckets (float32 bytes)"
for name in mlp gpt; do
  s1=$(num "$out/$name-1.json" samples_per_second)
  s2=$(num "$out/$name-2.json" samples_per_second)
  comm=$(num "$out/$name-2.json" comm_seconds_per_step)
  share=$(num "$out/$name-2.json" overlapped_share)
  exposed=$(num "$out/$name-2.json" exposed_seconds_per_step)
  buckets=$(tr -d '\n ' < "$out/$name-2.json" | grep -o '"bucket_bytes":\[[0-9,]*\]' | sed 's/.*://')
  awk -v n="$name" -v s1="$s1" -v s2="$s2" -v c="$comm" -v o="$share" -v e="$exposed" -v b="$buckets" \
    'BEGIN { printf "%-4s %12.1f %12.1f %9.1f%% %13.2f %10.1f%% %14.2f  %s\n", n, s1, s2, 100 * s2 / (2 * s1), 1000 * c, 100 * o, 1000 * e, b }'
done
echo "machine: $(nproc) cores, $(uptime | sed 's/.*load average: /load average /')"
