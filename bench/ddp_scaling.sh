#!/usr/bin/env bash
# Data-parallel scaling on this machine (docs/distributed.md, "Measured scaling"): the MLP and
# the GPT trained by 1 rank and by 2 ranks of one thread each, with the same per-rank batch
# (weak scaling: 2 ranks process twice the samples per step). Prints, from this one run:
#   samples/s of 1 and 2 ranks, the scaling efficiency  sps(2) / (2 * sps(1)),
#   the communication time per step (wall time with a gradient bucket in flight), the share of
#   it overlapped with backward, the time the step waited after backward, and the buckets;
# then, on paper, the efficiency expected at 8 and 64 ranks from the measured bucket sizes and
# one-rank step time with the ring all-reduce cost model (docs/distributed.md):
#   t_comm(N) = 2 (N - 1) / N * bytes / bandwidth + 2 (N - 1) * latency * buckets
#   efficiency = t_step / (t_step + exposed),  exposed = t_comm (no overlap) or only the last
#   bucket's share of it (every other bucket hidden behind backward)
#
# and last, per step of the GPT at 2 ranks, each strategy (ddp, zero1, zero2, fsdp, and fsdp
# without its prefetch) against ddp:
# ROUNDS rounds (default 3), each running the four strategies one after the other, so that a
# change of the machine's load falls on all of them; the median over the rounds of the step
# time and of the ratio to the same round's ddp, with the rounds' range.
#
#   bench/ddp_scaling.sh [path/to/mantissa] [ROUNDS]   (defaults: build/mantissa, 3)
set -euo pipefail
M=${1:-build/mantissa}
ROUNDS=${2:-3}
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
echo "machine: $(nproc --all) cores shared with other jobs, $(uptime | sed 's/.*load average: /load average /')"

echo
echo "on paper (ring all-reduce; efficiency without overlap .. with every bucket but the last hidden):"
printf '%-4s %9s %10s %-34s %16s %16s\n' model "step ms" "grad MB" link "8 ranks" "64 ranks"
for name in mlp gpt; do
  s1=$(num "$out/$name-1.json" samples_per_second)
  bs=$(num "$out/$name-1.json" batch_size)
  buckets=$(tr -d '\n ' < "$out/$name-2.json" | grep -o '"bucket_bytes":\[[0-9,]*\]' | sed 's/.*\[//; s/\]//')
  for link in "12.5 5 InfiniBand 100 Gb/s, 5 us" "1.25 30 Ethernet 10 Gb/s, 30 us"; do
    set -- $link
    awk -v n="$name" -v sps="$s1" -v bs="$bs" -v b="$buckets" -v bw="$1" -v lat="$2" -v label="${*:3}" '
      function comm(N, bytes, k) { return 2 * (N - 1) / N * bytes / (bw * 1e9) + 2 * (N - 1) * lat * 1e-6 * k }
      BEGIN {
        k = split(b, sz, ","); total = 0; for (i = 1; i <= k; ++i) total += sz[i]
        last = sz[k]; t = bs / sps
        printf "%-4s %9.1f %10.2f %-34s", n, 1000 * t, total / 1e6, label
        for (j = 0; j < 2; ++j) {
          N = j == 0 ? 8 : 64
          lo = t / (t + comm(N, total, k)); hi = t / (t + comm(N, last, 1))
          printf " %6.1f%% .. %5.1f%%", 100 * lo, 100 * hi
        }
        printf "\n"
      }'
  done
done

echo
echo "strategies, the GPT at 2 ranks ($ROUNDS rounds, interleaved): ms per step (median, range)," \
  "and the ratio to the same round's ddp (median, range)"
# fsdp-blocking: fsdp without the prefetch (--no-fsdp-prefetch), each gather where its unit starts.
STRATEGIES="ddp zero1 zero2 fsdp fsdp-blocking"
for r in $(seq "$ROUNDS"); do
  for s in $STRATEGIES; do
    flags=(--strategy "$s")
    [ "$s" = fsdp-blocking ] && flags=(--strategy fsdp --no-fsdp-prefetch)
    "${MPIRUN[@]}" "$M" "${GPT[@]}" "${flags[@]}" --metrics-json "$out/s-$s-$r.json" >/dev/null
  done
done
printf '%-13s %24s %24s\n' strategy "ms/step (min..max)" "x ddp (min..max)"
bs=$(num "$out/gpt-1.json" batch_size)
for s in $STRATEGIES; do
  ms="" ratios=""
  for r in $(seq "$ROUNDS"); do
    a=$(num "$out/s-$s-$r.json" samples_per_second)
    d=$(num "$out/s-ddp-$r.json" samples_per_second)
    ms="$ms $(awk -v b="$bs" -v a="$a" 'BEGIN { print 1000 * 2 * b / a }')"
    ratios="$ratios $(awk -v a="$a" -v d="$d" 'BEGIN { print d / a }')"
  done
  awk -v s="$s" -v m="$ms" -v q="$ratios" '
    function med(x, n,   i, j, t) { for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j)
        if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
      return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2 }
    BEGIN { n = split(m, a, " "); split(q, b, " ")
      ma = med(a, n); mb = med(b, n)
      printf "%-13s %9.1f (%6.1f..%6.1f) %9.3f (%5.3f..%5.3f)\n", s, ma, a[1], a[n], mb, b[1], b[n] }'
done
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) cores shared with other jobs, $(uptime | sed 's/.*load average: /load average /')"
