#!/usr/bin/env python3
"""Before/after timing of two builds of the same benchmarks, interleaved on one machine.

    bench/compare_builds.py --before OLD_BUILD_DIR --after build \
        [--bench bench_ops --bench bench_convert ...] [--filter REGEX] [--rounds 3]
        [--model-bench mlp,cnn]

For each Google Benchmark binary present in both directories it runs the benchmarks the two
builds share, alternating before/after for --rounds rounds (so a change in machine load hits
both sides), and prints per benchmark the median real time of each side and after/before.
--counter compares a rate counter instead (its inverse, so ratios still read as time).
--model-bench also times `mantissa bench --model M` (training steps per precision) the same way.
Ratios above 1 are slowdowns. Use it on a quiet machine; the ratios name no CPU, the caller
reports `lscpu`'s model with them.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


def list_tests(binary):
    out = subprocess.run([binary, "--benchmark_list_tests"], capture_output=True, text=True,
                         check=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def run_google_benchmark(binary, pattern, counter=""):
    """Real time per benchmark matching pattern; {} (with a note) when the binary fails."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        done = subprocess.run([binary, f"--benchmark_filter={pattern}", f"--benchmark_out={path}",
                               "--benchmark_out_format=json"], capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
            print(f"  {os.path.basename(binary)} {pattern}: exit {done.returncode}: {tail[0]}",
                  file=sys.stderr)
            return {}
        with open(path) as f:
            data = json.load(f)
    finally:
        os.unlink(path)
    times = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration":
            continue
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
        if counter and counter in b:
            times[b["name"]] = 1.0 / b[counter]  # a rate: its inverse compares like a time
        else:
            times[b["name"]] = b["real_time"] * scale
    return times


def run_model_bench(binary, model, steps):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        done = subprocess.run([binary, "bench", "--model", model, "--steps", str(steps), "--json",
                               path], capture_output=True, text=True)
        if done.returncode != 0:
            print(f"  {binary} bench --model {model}: exit {done.returncode}", file=sys.stderr)
            return {}
        with open(path) as f:
            data = json.load(f)
    finally:
        os.unlink(path)
    rows = data["results"] if isinstance(data, dict) and "results" in data else data
    times = {}
    for r in rows:
        step = r.get("step_seconds") or r.get("seconds_per_step")
        if step is None and r.get("samples_per_second"):
            step = 1.0 / r["samples_per_second"]
        if step is not None:
            times[f"mantissa bench {model} {r['precision']}"] = step
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="directory with the old binaries")
    p.add_argument("--after", required=True, help="directory with the new binaries")
    p.add_argument("--bench", action="append", help="benchmark binary name (repeatable)")
    p.add_argument("--filter", default="", help="only benchmarks whose name matches")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--counter", default="",
                   help="compare this rate counter (e.g. GFLOP/s) instead of real time, where a "
                   "benchmark reports it: bench_matmul's iterations also time oneDNN and the "
                   "packed variants, whose set changed between versions")
    p.add_argument("--model-bench", default="", help="models for `mantissa bench`, comma list")
    p.add_argument("--model-steps", type=int, default=20)
    a = p.parse_args()

    samples = {}  # name -> {"before": [...], "after": [...]}

    def add(side, times):
        for name, t in times.items():
            samples.setdefault(name, {"before": [], "after": []})[side].append(t)

    for bench in a.bench or []:
        before, after = os.path.join(a.before, bench), os.path.join(a.after, bench)
        if not (os.path.exists(before) and os.path.exists(after)):
            print(f"skipping {bench}: not in both directories", file=sys.stderr)
            continue
        shared = sorted(set(list_tests(before)) & set(list_tests(after)))
        shared = [t for t in shared if re.search(a.filter, t)]
        if not shared:
            continue
        # One benchmark at a time, before then after: load changes hit both sides, and a
        # benchmark that fails in one build (an ISA it lacks) loses only itself.
        for r in range(a.rounds):
            print(f"{bench}: round {r + 1}/{a.rounds}", file=sys.stderr)
            for test in shared:
                pattern = "^" + re.escape(test) + "$"
                add("before", run_google_benchmark(before, pattern, a.counter))
                add("after", run_google_benchmark(after, pattern, a.counter))

    for model in filter(None, a.model_bench.split(",")):
        before, after = os.path.join(a.before, "mantissa"), os.path.join(a.after, "mantissa")
        for r in range(a.rounds):
            print(f"mantissa bench {model}: round {r + 1}/{a.rounds}", file=sys.stderr)
            add("before", run_model_bench(before, model, a.model_steps))
            add("after", run_model_bench(after, model, a.model_steps))

    width = max((len(n) for n in samples), default=10)
    print(f"{'benchmark':<{width}}  {'before (ms)':>12}  {'after (ms)':>12}  after/before")
    ratios = []
    for name, s in samples.items():
        if not s["before"] or not s["after"]:
            continue
        b, f = statistics.median(s["before"]), statistics.median(s["after"])
        ratios.append(f / b)
        print(f"{name:<{width}}  {b * 1e3:12.4f}  {f * 1e3:12.4f}  {f / b:12.3f}")
    if ratios:
        geo = statistics.geometric_mean(ratios)
        print(f"geometric mean after/before over {len(ratios)} benchmarks: {geo:.3f}")


if __name__ == "__main__":
    main()
