"""Markdown summary of one bench/hf/run.sh benchmark from the sides' JSON lines.

usage: summarize.py qlora|generate|load OUT_DIR ROUNDS DATE LOAD_AVERAGE COMMAND
OUT_DIR holds <what>.<side>.<round>.json files. Every timed repetition of a side, over all its
rounds, enters its median and its min-max spread; ratios are of medians against the
transformers side ("torch"; "torch-avx2" for the AVX2 sides when it ran).
"""
import glob
import json
import os
import statistics
import subprocess
import sys

GIB = 2**30


def cpu_model():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    names = [l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")]
    return names[0] if names else "?"


def sides(out, what):
    found = {}
    for f in sorted(glob.glob(os.path.join(out, f"{what}.*.json"))):
        side = os.path.basename(f)[len(what) + 1:].rsplit(".", 2)[0]
        found.setdefault(side, []).append(json.load(open(f)))
    return found


def header(what, rounds, date, load, command):
    return [f"# bench/hf {what}, {date}", "",
            f"- command: `{command}`",
            f"- CPU: {cpu_model()} (`lscpu` model name); 2 threads per side",
            f"- load average at the end: {load} (other jobs share the machine: see the spreads)",
            (f"- {rounds} interleaved rounds per side; median and min-max over every timed "
             "repetition of all rounds" if what != "load" else
             "- one load per side, each in a fresh process (peak RSS is the process's)"), ""]


def reference(side, found):
    return "torch-avx2" if side.endswith("avx2") and "torch-avx2" in found else "torch"


def qlora(found):
    rows = ["| side | framework | median step s | min-max s | timed steps | tokens/s | "
            "peak RSS GiB | speed vs torch | RSS vs torch |", "|---|---|---|---|---|---|---|---|---|"]
    for side, runs in found.items():
        times = [t for r in runs for t in r["step_seconds"]]
        ref = found[reference(side, found)]
        ref_times = [t for r in ref for t in r["step_seconds"]]
        med, ref_med = statistics.median(times), statistics.median(ref_times)
        rss = max(r["peak_rss_bytes"] for r in runs)
        ref_rss = max(r["peak_rss_bytes"] for r in ref)
        simd = f" [{runs[0]['simd']}]" if "simd" in runs[0] else ""
        rows.append(f"| {side} | {runs[0]['framework']}{simd} | {med:.2f} | "
                    f"{min(times):.2f}-{max(times):.2f} | {len(times)} | "
                    f"{runs[0]['tokens_per_step'] / med:.0f} | {rss / GIB:.2f} | "
                    f"{ref_med / med:.2f}x | {rss / ref_rss:.2f}x |")
    first = next(iter(found.values()))[0]
    rows += ["", f"Trainable parameters: " + ", ".join(
        f"{s} {r[0]['trainable_parameters']}" for s, r in found.items()) +
        f". Losses (first/last): " + ", ".join(
        f"{s} {r[0]['first_loss']:.3f}/{r[0]['last_loss']:.3f}" for s, r in found.items()) +
        f". {first['tokens_per_step']} tokens per step."]
    return rows


def generate(found):
    rows = ["| side | framework | median tokens/s | min-max tokens/s | timed calls | "
            "peak RSS GiB | speed vs torch |", "|---|---|---|---|---|---|---|"]
    for side, runs in found.items():
        rates = [t for r in runs for t in r["tokens_per_second"]]
        ref = found[reference(side, found)]
        ref_med = statistics.median(t for r in ref for t in r["tokens_per_second"])
        med = statistics.median(rates)
        simd = f" [{runs[0]['simd']}]" if "simd" in runs[0] else ""
        rows.append(f"| {side} | {runs[0]['framework']}{simd} | {med:.1f} | "
                    f"{min(rates):.1f}-{max(rates):.1f} | {len(rates)} | "
                    f"{max(r['peak_rss_bytes'] for r in runs) / GIB:.2f} | {med / ref_med:.2f}x |")
    first = next(iter(found.values()))[0]
    rows += ["", f"{first['prompt_tokens']}-token prompt, {first['new_tokens']} new tokens per "
             "call (tokens/s = new tokens / whole call, prefill included). First greedy tokens: " +
             ", ".join(f"{s} {r[0]['first_tokens']}" for s, r in found.items())]
    return rows


def load(found):
    rows = ["| side | load s | model MiB | largest tensor fp32 MiB | bound MiB | peak RSS MiB | "
            "within bound | < 1.2 GiB |", "|---|---|---|---|---|---|---|---|"]
    mib = 2**20
    for side, runs in found.items():
        r = runs[0]
        rows.append(f"| {r['framework']} | {r['load_seconds']:.1f} | {r['model_bytes'] / mib:.0f} | "
                    f"{r['largest_tensor_fp32_bytes'] / mib:.0f} | {r['bound_bytes'] / mib:.0f} | "
                    f"{r['peak_rss_bytes'] / mib:.0f} | "
                    f"{'yes' if r['peak_rss_bytes'] <= r['bound_bytes'] else 'NO'} | "
                    f"{'yes' if r['peak_rss_bytes'] < 1.2 * GIB else 'NO'} |")
    r = next(iter(found.values()))[0]
    rows += ["", f"{r['quantized_layers']} quantized layers at "
             f"{r['quantized_bits_per_parameter']:.3f} bits per weight; the head stays unquantized "
             "(quant_ignore lm_head, as transformers' bitsandbytes integration)."]
    return rows


def main():
    what, out, rounds, date, load_avg, command = sys.argv[1:7]
    found = sides(out, what)
    if not found:
        sys.exit(f"summarize.py: no {what}.*.json results in {out}")
    body = {"qlora": qlora, "generate": generate, "load": load}[what](found)
    print("\n".join(header(what, rounds, date, load_avg, command) + body))


if __name__ == "__main__":
    main()
