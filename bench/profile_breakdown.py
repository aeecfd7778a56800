#!/usr/bin/env python3
"""What limits a reference model's training step: a perf profile of `mantissa bench`, bucketed.

Runs `perf record` on `mantissa bench --model M --precisions P` and sorts every sample into
one of these buckets by the shared object and symbol it hit:

  compute       GEMM and convolution kernels (oneDNN's JIT code, mantissa's native GEMM,
                the fused attention kernel): bounded by the FMA / dot-product peak
  memory-bound  element-wise ops, conversions, reductions, normalisation, pooling, softmax,
                losses, copies and the optimizer: bounded by memory bandwidth
  threading     OpenMP fork/join and barrier waits (libgomp): idle or spinning cores
  os/alloc      the kernel (page faults on fresh allocations, scheduling) and malloc/free
  framework     the rest of mantissa: autograd bookkeeping, tensor and shape handling, autocast
  data          reading the data set (before the timed loop; excluded from the percentages)

    python3 bench/profile_breakdown.py --mantissa build/mantissa --model mlp --precision bf16-mixed
    python3 bench/profile_breakdown.py --model gpt --precision 32-true --steps 10 --top 15

The bench runs twice under perf, with --steps S and with 2 S, and the breakdown is the
difference of the two profiles, symbol by symbol: what S training steps cost, with the model's
construction and initialisation, the warm-up steps, data loading and exit cancelled out (in a
single profile they weigh: the GPT's initialisation of its second model alone was ~6 % of a
10-step run, during which the idle worker thread's spinning read as "threading").

Needs `perf` (Debian's linux-perf) with permission to sample (root, or
kernel.perf_event_paranoid <= 1). The buckets are heuristics over symbol names: read the
--top list to check them. Percentages are of CPU samples on all threads, so with 2 threads a
kernel that keeps both cores busy and one that leaves the second spinning in libgomp differ.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

BUCKETS = [
    ("data", re.compile(r"libz\.so|FashionMNIST|TextCorpus|read_idx|inflate|crc32")),
    ("compute", re.compile(r"\[JIT\]|libdnnl|gemm|flash_attention|for_each_head|micro<|"
                           r"conv(?!ert)")),
    ("threading", re.compile(r"libgomp")),
    ("os/alloc", re.compile(r"\[kernel|malloc|cfree|free@|_int_free|unlink_chunk|aligned_alloc|"
                            r"posix_memalign")),
    ("memory-bound", re.compile(
        r"pointwise|run_span|elementwise|convert|bf16_to_f32|f32_to_bf16|f16_to_f32|f32_to_f16|"
        r"softmax|layer_norm|ln_forward|ln_backward|batch_norm|normalize|pool|max_forward|"
        r"avg_forward|adam|for_blocks|sgd|sum_rows|sum_to|reduce|cross_entropy|nll|gelu|"
        r"map_array|grad_array|exp_shift|max_nan|copy|memmove|memcpy|memset|where|dropout|"
        r"embedding|add_gradients|relu|mul|add_impl|unscale|for_each|"
        r"max_backward|avg_backward|forward_bf16|backward_bf16|forward_f32|backward_f32|row_|"
        r"lane_sum|load_rows|transpos")),
]
REPORTED = ["compute", "memory-bound", "threading", "os/alloc", "framework"]


def bucket_of(dso, symbol):
    text = f"{dso} {symbol}"
    for name, pattern in BUCKETS:
        if pattern.search(text):
            return name
    return "framework"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mantissa", default="build/mantissa", help="the mantissa binary")
    ap.add_argument("--model", default="mlp", choices=["mlp", "cnn", "vit", "gpt"])
    ap.add_argument("--precision", default="bf16-mixed")
    ap.add_argument("--steps", type=int, default=None,
                    help="S: the breakdown is of S steps, from runs of S and 2 S steps "
                         "(default: 100 mlp, 30 cnn/vit, 10 gpt)")
    ap.add_argument("--top", type=int, default=12, help="also list the N hottest symbols")
    args = ap.parse_args()
    steps = args.steps or {"mlp": 100, "cnn": 30, "vit": 30, "gpt": 10}[args.model]

    counts = []
    for run_steps in (steps, 2 * steps):
        run_counts, bench_lines = profile_counts(args, run_steps)
        counts.append(run_counts)
    # What the extra `steps` steps cost, symbol by symbol (noise can make a rare symbol's
    # difference negative: such rows are dropped).
    diff = {key: counts[1].get(key, 0) - counts[0].get(key, 0) for key in counts[1]}
    diff = {key: n for key, n in diff.items() if n > 0}
    total = sum(diff.values()) or 1

    totals = {name: 0 for name in REPORTED + ["data"]}
    rows = []
    for (dso, symbol), n in diff.items():
        b = bucket_of(dso, symbol)
        totals[b] += n
        rows.append((100.0 * n / total, b, dso, symbol))

    timed = sum(totals[n] for n in REPORTED) or 1
    print("\n".join(bench_lines[-3:]))
    print(f"\n{args.model} {args.precision}: share of the CPU samples of {steps} training steps "
          f"(a {2 * steps}-step run less a {steps}-step run, {total} samples)")
    for name in REPORTED:
        print(f"  {name:<13} {100 * totals[name] / timed:5.1f} %")
    print(f"  (data loading left in the difference: {100 * totals['data'] / total:.1f} %, excluded)")
    if args.top:
        print(f"\nhottest {args.top} symbols (% of those samples):")
        for pct, b, dso, symbol in sorted(rows, reverse=True)[: args.top]:
            print(f"  {pct:5.1f} %  {b:<13} {dso:<18} {symbol[:90]}")


def profile_counts(args, steps):
    """Samples per (shared object, symbol) of one `mantissa bench` run under perf, and the
    bench's output lines. oneDNN's JIT code is one entry: its dso names the thread and its
    symbols are addresses, which differ from run to run."""
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        cmd = ["perf", "record", "-q", "-F", "999", "-o", data, args.mantissa, "bench",
               "--model", args.model, "--precisions", args.precision, "--steps", str(steps)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"profile_breakdown.py: {' '.join(cmd)} failed:\n{run.stderr[-2000:]}")
        bench_lines = [l for l in run.stdout.splitlines() if l.strip()]
        report = subprocess.run(
            ["perf", "report", "-i", data, "--no-children", "-n", "--sort", "dso,symbol", "-g",
             "none", "--stdio", "--percent-limit", "0"], capture_output=True, text=True,
            check=True).stdout
    line_re = re.compile(r"^\s*[\d.]+%\s+(\d+)\s+(\[JIT\] tid \d+|\S+)\s+\[[.k]\]\s+(.*)$")
    counts = {}
    for line in report.splitlines():
        m = line_re.match(line)
        if not m:
            continue
        n, dso, symbol = int(m.group(1)), m.group(2), m.group(3).strip()
        if dso.startswith("[JIT]"):
            dso, symbol = "[JIT]", "oneDNN JIT code"
        counts[(dso, symbol)] = counts.get((dso, symbol), 0) + n
    return counts, bench_lines


if __name__ == "__main__":
    main()
