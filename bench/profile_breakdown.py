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
                    help="timed steps (default: 200 mlp, 30 cnn/vit, 10 gpt)")
    ap.add_argument("--top", type=int, default=12, help="also list the N hottest symbols")
    args = ap.parse_args()
    steps = args.steps or {"mlp": 200, "cnn": 30, "vit": 30, "gpt": 10}[args.model]

    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        cmd = ["perf", "record", "-q", "-F", "999", "-o", data, args.mantissa, "bench",
               "--model", args.model, "--precisions", args.precision, "--steps", str(steps)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"profile_breakdown.py: {' '.join(cmd)} failed:\n{run.stderr[-2000:]}")
        bench_lines = [l for l in run.stdout.splitlines() if l.strip()]
        report = subprocess.run(
            ["perf", "report", "-i", data, "--no-children", "--sort", "dso,symbol", "-g", "none",
             "--stdio", "--percent-limit", "0"], capture_output=True, text=True, check=True).stdout

    totals = {name: 0.0 for name in REPORTED + ["data"]}
    rows = []
    line_re = re.compile(r"^\s*([\d.]+)%\s+(\[JIT\] tid \d+|\S+)\s+\[[.k]\]\s+(.*)$")
    for line in report.splitlines():
        m = line_re.match(line)
        if not m:
            continue
        pct, dso, symbol = float(m.group(1)), m.group(2), m.group(3).strip()
        b = bucket_of(dso, symbol)
        totals[b] += pct
        rows.append((pct, b, dso, symbol))

    timed = sum(totals[n] for n in REPORTED) or 1.0
    print("\n".join(bench_lines[-3:]))
    print(f"\n{args.model} {args.precision}, {steps} steps: share of CPU samples in the timed loop")
    for name in REPORTED:
        print(f"  {name:<13} {100 * totals[name] / timed:5.1f} %")
    print(f"  (data loading before the loop: {totals['data']:.1f} % of all samples, excluded)")
    if args.top:
        print(f"\nhottest {args.top} symbols (% of all samples):")
        for pct, b, dso, symbol in sorted(rows, reverse=True)[: args.top]:
            print(f"  {pct:5.1f} %  {b:<13} {dso:<18} {symbol[:90]}")


if __name__ == "__main__":
    main()
