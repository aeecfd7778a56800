#!/usr/bin/env python3
"""Where a training step's time goes, in mantissa and in PyTorch, phase by phase.

For each model (the MLP 784-1024-1024-10 at batch 256 and the GPT 6x256, context 128, batch 16
of bench/torch_side_by_side.py), it prints one table of milliseconds per step:

  forward     the model and the loss (mantissa: `[TrainModule]training_step`)
  backward    loss.backward() (mantissa: `backward`)
  optimizer   AdamW's update and zero_grad (mantissa: `optimizer_step` less the closure it runs)
  other       the rest of the step (the batch, loss.item(), the accuracy count)

mantissa's side is `mantissa train --profiler simple` (the Trainer's SimpleProfiler, which also
splits the ops by family); PyTorch's is torch.profiler with a record_function per phase, whose
eight costliest operators (self CPU time) are printed under the table. Both sides train the same
shapes with AdamW in fp32 (mantissa also in --precision bf16-mixed when asked), 2 threads each,
after untimed warm-up steps (mantissa's first steps are in its profile: use enough steps).
torch is a point of comparison only, never a dependency of mantissa.

    bench/side_by_side.sh --install-torch      # once: PyPI torch into .venv-torch
    .venv-torch/bin/python bench/phase_profile.py --mantissa build/mantissa
    .venv-torch/bin/python bench/phase_profile.py --mantissa build/mantissa --models gpt \
        --steps gpt=20 --precisions 32-true

Both sides capped to AVX2 on an AVX-512 CPU: put `MANTISSA_DISABLE_SIMD=avx512f
ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2` before the command.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_side_by_side as side  # noqa: E402  (the models, data and corpus of the side-by-side)

import torch  # noqa: E402

PHASES = ("forward", "backward", "optimizer", "other")


def torch_profile(name, args, x, y):
    """PyTorch's ms per step for each phase (record_function totals) and its costliest ops."""
    torch.manual_seed(0)
    model = side.make_mlp(args.hidden) if name == "mlp" else side.MODELS[name][0]()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    g = torch.Generator().manual_seed(0)
    steps = args.model_steps[name]
    batches = list(side.model_batches(name, args, x, y, args.untimed_steps + steps, g))

    def step(xb, yb, record):
        with record("forward"):
            logits = model(xb)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                     yb.reshape(-1))
        loss.item()
        with record("optimizer"):
            opt.zero_grad(set_to_none=True)
        with record("backward"):
            loss.backward()
        with record("optimizer"):
            opt.step()
        int((logits.argmax(-1) == yb).sum())

    plain = lambda _: torch.autograd.profiler.record_function("")  # noqa: E731
    for xb, yb in batches[: args.untimed_steps]:
        step(xb, yb, plain)
    record = torch.profiler.record_function
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for xb, yb in batches[args.untimed_steps:]:
            step(xb, yb, record)
        total = time.perf_counter() - start
    events = prof.key_averages()
    ms = {p: 0.0 for p in PHASES}
    for e in events:
        if e.key in ms:
            ms[e.key] += e.cpu_time_total / 1e3 / steps
    ms["other"] = max(0.0, total * 1e3 / steps - sum(ms[p] for p in PHASES[:3]))
    ops = sorted((e for e in events if e.key.startswith("aten::")),
                 key=lambda e: e.self_cpu_time_total, reverse=True)[:8]
    top = [(e.key, e.self_cpu_time_total / 1e3 / steps) for e in ops]
    return ms, total * 1e3 / steps, top


def mantissa_totals(name, precision, args, text, steps):
    """The seconds of each Trainer action and op family over a run of `steps` steps."""
    cmd = [args.mantissa, "train", "--model", name, "--precision", precision,
           "--max-steps", str(steps), "--batch-size", str(args.batch_sizes[name]),
           "--threads", str(args.threads), "--limit-val-batches", "0",
           "--limit-test-batches", "0", "--profiler", "simple"]
    if name == "mlp":
        cmd += ["--hidden", ",".join(map(str, args.hidden)), "--data-dir", args.data_dir]
    else:
        cmd += ["--layers", "6", "--width", "256", "--heads", "8", "--context", "128",
                "--sample-tokens", "0", "--text", text]
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"mantissa train failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    actions, families = {}, {}
    table = actions
    for line in r.stdout.splitlines():
        if line.startswith("Op families"):
            table = families
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and re.fullmatch(r"[0-9.]+", cells[3]) and "more" not in cells[0]:
            table[cells[0]] = float(cells[3])
    need = ("run_training_batch", "optimizer_step", "backward", "[TrainModule]training_step")
    missing = [k for k in need if k not in actions]
    if missing:
        sys.exit(f"mantissa's profile lacks {', '.join(missing)}:\n{r.stdout}")
    return actions, families


def mantissa_profile(name, precision, args, text):
    """mantissa's ms per step for each phase and its op families, from --profiler simple: a run
    of the untimed steps is subtracted from a run of untimed + timed steps, so the first steps'
    one-time costs (the optimizer's state, the first touch of the buffers) count on neither side."""
    steps = args.model_steps[name]
    long_a, long_f = mantissa_totals(name, precision, args, text, args.untimed_steps + steps)
    short_a, short_f = ({}, {}) if args.untimed_steps == 0 else \
        mantissa_totals(name, precision, args, text, args.untimed_steps)
    totals = {k: (v - short_a.get(k, 0.0)) * 1e3 / steps for k, v in long_a.items()}
    families = sorted(((k, (v - short_f.get(k, 0.0)) * 1e3 / steps) for k, v in long_f.items()),
                      key=lambda kv: kv[1], reverse=True)
    ms = {"forward": totals["[TrainModule]training_step"], "backward": totals["backward"]}
    ms["optimizer"] = (totals["optimizer_step"] - ms["forward"] - ms["backward"]
                       + totals.get("zero_grad", 0.0))
    step = totals["run_training_batch"] + totals.get("get_train_batch", 0.0)
    ms["other"] = max(0.0, step - sum(ms[p] for p in PHASES[:3]))
    return ms, step, families[:8]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mantissa", required=True, help="path of the mantissa binary")
    p.add_argument("--models", default="mlp,gpt")
    p.add_argument("--precisions", default="32-true,bf16-mixed",
                   help="mantissa's precisions (PyTorch runs fp32)")
    p.add_argument("--steps", default="mlp=100,gpt=20", help="timed steps per model")
    p.add_argument("--untimed-steps", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--hidden", default="1024,1024")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--text", help="the GPT's corpus (default: as torch_side_by_side.py)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    models = a.models.split(",")
    for m in models:
        if m not in ("mlp", "gpt"):
            sys.exit(f"--models: '{m}' is not profiled here (mlp, gpt)")
    args = types.SimpleNamespace(
        mantissa=a.mantissa, hidden=[int(h) for h in a.hidden.split(",")], threads=a.threads,
        data_dir=a.data_dir,
        untimed_steps=a.untimed_steps, random_data=not os.path.isdir(a.data_dir),
        batch_sizes={"mlp": 256, "gpt": 16},
        model_steps={k: int(v) for k, v in (kv.split("=") for kv in a.steps.split(","))})
    x, y, _ = side.training_data(args, 60000) if "mlp" in models else (None, None, None)
    with tempfile.TemporaryDirectory() as tmp:
        text = a.text or side.gpt_text(tmp)
        for m in models:
            rows = [("PyTorch fp32",) + torch_profile(m, args, x, y)]
            for prec in a.precisions.split(","):
                rows.append((f"mantissa {prec}",) + mantissa_profile(m, prec, args, text))
            print(f"\n{m}: ms per step, {args.model_steps[m]} steps, {a.threads} threads")
            print("| side | " + " | ".join(PHASES) + " | step |")
            print("|---" * (len(PHASES) + 2) + "|")
            for side_name, ms, step, _ in rows:
                cells = " | ".join(f"{ms[ph]:.2f} ({100 * ms[ph] / step:.0f} %)" for ph in PHASES)
                print(f"| {side_name} | {cells} | {step:.2f} |")
            for side_name, _, _, top in rows:
                what = "self CPU of the costliest aten ops" if side_name.startswith("PyTorch") \
                    else "op families"
                print(f"\n{side_name}, {what} (ms per step): " +
                      ", ".join(f"{k} {v:.2f}" for k, v in top))


if __name__ == "__main__":
    main()
