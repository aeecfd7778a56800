#!/usr/bin/env bash
# Memory per rank under each data-parallel strategy (docs/distributed.md, "Sharded strategies"):
# the reference GPT scaled to about 100M parameters (12 blocks of width 832, byte vocabulary,
# context 64), AdamW, 32-true, batch 2 per rank, 3 optimizer steps, trained under ddp, zero1,
# zero2 and fsdp at NP ranks (default 2) of one thread each. Prints, from each run's metrics JSON,
# each rank's optimizer-state bytes, rank 0's tensor peak (peak_memory_bytes) and each rank's
# peak resident set (getrusage ru_maxrss), and the ratios to ddp. Each run holds about
# 2.1 GB per rank under ddp; run it on a quiet machine.
#
#   bench/strategy_memory.sh [path/to/mantissa] [NP] [STRATEGIES]
#   (defaults: build/mantissa, 2, "ddp zero1 zero2 fsdp"; ddp is the reference and runs first)
set -euo pipefail
M=${1:-build/mantissa}
NP=${2:-2}
STRATEGIES=${3:-ddp zero1 zero2 fsdp}
command -v mpirun >/dev/null || { echo "mpirun not found: install openmpi-bin" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
awk 'BEGIN { for (i = 0; i < 4000; i++) print "the quick brown fox jumps over the lazy dog" }' \
  >"$out/corpus.txt"
GPT=(train --model gpt --layers 12 --width 832 --heads 8 --context 64 --batch-size 2
     --max-steps 3 --eval-interval 100000 --sample-tokens 0 --no-progress-bar --seed 1
     --optimizer adamw --precision 32-true --text "$out/corpus.txt" --threads 1)

list() {  # list FILE KEY: the elements of the JSON list "KEY", space-separated
  tr -d '\n ' <"$1" | grep -o "\"$2\":\[[0-9,]*\]" | sed 's/.*\[//; s/\]//; s/,/ /g'
}
num() {  # num FILE KEY: the first number stored under "KEY"
  grep -o "\"$2\": [-0-9.e+]*" "$1" | head -1 | sed 's/.*: //'
}

for s in $STRATEGIES; do
  start=$(date +%s)
  mpirun --oversubscribe --bind-to none -np "$NP" "$M" "${GPT[@]}" --strategy "$s" \
    --metrics-json "$out/$s.json" >"$out/$s.txt" 2>&1 || { cat "$out/$s.txt"; exit 1; }
  echo "$s: $(( $(date +%s) - start )) s" >&2
done
# AdamW keeps two float32 buffers per parameter: ddp's per-rank state is 8 bytes a parameter.
params=$(( $(list "$out/ddp.json" optimizer_state_bytes_per_rank | awk '{ print $1 }') / 8 ))
echo "GPT of $params parameters, AdamW, 32-true, $NP ranks, batch 2 per rank, 3 steps"
printf '| strategy | optimizer state per rank (B) | x ddp | tensor peak rank 0 (MiB) | x ddp | peak RSS per rank (MiB) | x ddp (max) |\n'
printf '|---|---|---|---|---|---|---|\n'
d_state=$(list "$out/ddp.json" optimizer_state_bytes_per_rank | awk '{ print $1 }')
d_peak=$(num "$out/ddp.json" peak_memory_bytes)
d_rss=$(list "$out/ddp.json" peak_rss_bytes_per_rank | tr ' ' '\n' | sort -n | tail -1)
for s in $STRATEGIES; do
  state=$(list "$out/$s.json" optimizer_state_bytes_per_rank)
  peak=$(num "$out/$s.json" peak_memory_bytes)
  rss=$(list "$out/$s.json" peak_rss_bytes_per_rank)
  awk -v s="$s" -v st="$state" -v p="$peak" -v r="$rss" -v ds="$d_state" -v dp="$d_peak" \
    -v dr="$d_rss" 'BEGIN {
      n = split(st, a, " "); m = split(r, b, " "); maxs = 0; maxr = 0; ss = ""; rs = ""
      for (i = 1; i <= n; i++) { ss = ss (i > 1 ? " / " : "") a[i]; if (a[i] > maxs) maxs = a[i] }
      for (i = 1; i <= m; i++) { rs = rs (i > 1 ? " / " : "") sprintf("%.1f", b[i] / 1048576); if (b[i] > maxr) maxr = b[i] }
      printf "| `%s` | %s | %.3f | %.1f | %.3f | %s | %.3f |\n", s, ss, maxs / ds, p / 1048576, p / dp, rs, maxr / dr }'
done
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) cores, $(uptime | sed 's/.*load average: /load average /')"
