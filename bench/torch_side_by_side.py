#!/usr/bin/env python3
"""The reference models trained in PyTorch and in mantissa, side by side, on the same machine.

PyTorch trains each reference model with AdamW (lr 1e-3, weight decay 0.01) in fp32 and under
bf16 autocast for a fixed number of steps with the same per-step work as `mantissa train`
(loss.item() and an accuracy count every step):

  mlp  784-1024-1024-10, ReLU, batch 256, Fashion-MNIST
  cnn  conv 3x3 32 + BN + ReLU + pool 2, conv 3x3 64 + BN + ReLU + pool 2, fc 128, fc 10;
       batch 128, Fashion-MNIST as 1x28x28 images
  vit  28x28 images in 16 patches of 7x7, width 128, 4 pre-norm blocks of 4 heads, GELU MLP 2x,
       class token, final LayerNorm and linear head (mantissa/models/vit.h defaults); batch 256
  gpt  6 layers, d 256, 8 heads, context 128, byte vocabulary (256), pre-norm, GELU MLP 4x;
       batch 16 sequences, next-byte prediction on random bytes

Then, given the mantissa binary, it runs `mantissa bench --model M --json` with the same shape
and step count and prints mantissa / PyTorch ratios. A model mantissa's bench does not know
(yet) is reported for PyTorch only. PyTorch is a point of comparison only; nothing here is a
test, and mantissa never depends on it.

    /usr/bin/python3 bench/torch_side_by_side.py --mantissa build-bench/mantissa
    /usr/bin/python3 bench/torch_side_by_side.py --models mlp,cnn,vit,gpt --steps 20  # torch only
    bench/side_by_side.sh --mantissa build/mantissa --models mlp --torch-modes fp32

On a noisy machine (a 2-core VM where one run of either side moves by 15-30 %), each model runs
--rounds N (default 3) interleaved rounds, PyTorch then mantissa's bench (all of its
precisions), and the report gives per precision the median round with the spread over the
rounds (min-max samples/s); the headline is the ratio of mantissa's median to PyTorch fp32's
median, for 32-true and bf16-mixed. --steps auto (the default) times a few steps of PyTorch
fp32 and of mantissa's precisions per model and picks the step count that makes the fastest of
them last about --round-seconds (3 s), the same count on both sides; a round under 2 s is
warned about. --torch-modes picks PyTorch's
precisions (fp32, bf16: bf16 autocast; default both). PyTorch's bf16 autocast is 20-40x slower
than its fp32 on AVX2 CPUs (about 20 s per GPT step), so with --rounds > 1 it runs in the first
round only. --rounds 1 is a single run of each side, without spread.

Data: the Fashion-MNIST gz IDX files (read with gzip + numpy, no torchvision) when present,
else (or with --random-data) random images of the same shape. mantissa's GPT reads --text, by
default the `fortunes` package's files; where those are missing (a bare machine) it gets a
generated file of random lower-case words (the speed does not depend on the text). Peak memory is reported for
mantissa only: PyTorch's CPU allocator keeps no high-water mark to compare against.
"""
import argparse
import gzip
import json
import math
import os
import statistics
import random
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import torch
except ImportError:
    sys.exit("torch_side_by_side.py: PyTorch is not installed for this interpreter "
             f"({sys.executable}). Install a CPU build (pip), or Debian's python3-torch "
             "(apt-get install python3-torch) and run this script with /usr/bin/python3.")

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's pixel statistics (mantissa normalises the same)


def load_idx_images(path, n):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, count, rows, cols = np.frombuffer(data[:16], dtype=">i4")
    assert magic == 2051, f"{path}: not an IDX image file"
    n = min(n, int(count))
    pixels = np.frombuffer(data[16 : 16 + n * rows * cols], dtype=np.uint8)
    return pixels.reshape(n, rows * cols).astype(np.float32) / 255.0


def load_idx_labels(path, n):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, count = np.frombuffer(data[:8], dtype=">i4")
    assert magic == 2049, f"{path}: not an IDX label file"
    return np.frombuffer(data[8 : 8 + min(n, int(count))], dtype=np.uint8).astype(np.int64)


def from_numpy(a, dtype):
    """A torch copy of a numpy array through its bytes: Debian's torch 1.13 is built against
    NumPy 1.x and its torch.from_numpy fails when a NumPy 2 is the one installed."""
    a = np.ascontiguousarray(a)
    return torch.frombuffer(bytearray(a.tobytes()), dtype=dtype).reshape(a.shape).clone()


def training_data(args, n):
    images = os.path.join(args.data_dir, "train-images-idx3-ubyte.gz")
    labels = os.path.join(args.data_dir, "train-labels-idx1-ubyte.gz")
    if not args.random_data and os.path.exists(images) and os.path.exists(labels):
        x = ((load_idx_images(images, n) - MEAN) / STD).astype(np.float32)
        labels = load_idx_labels(labels, n)
        return from_numpy(x, torch.float32), from_numpy(labels, torch.int64), "fashion-mnist"
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 784, generator=g), torch.randint(0, 10, (n,), generator=g), "random"


def make_mlp(hidden):
    layers, width = [], 784
    for h in hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    layers.append(torch.nn.Linear(width, 10))
    return torch.nn.Sequential(*layers)


def make_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64 * 7 * 7, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10))


class Block(torch.nn.Module):
    """Pre-norm transformer block: self-attention (causal for the GPT, not for the ViT) and a
    GELU MLP of `hidden` units (4x for the GPT, 2x for the ViT)."""

    def __init__(self, d, heads, hidden=None, causal=True):
        super().__init__()
        self.heads, self.causal = heads, causal
        hidden = hidden or 4 * d
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, hidden), torch.nn.Linear(hidden, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        shape = (b, t, self.heads, d // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        # Written out (not scaled_dot_product_attention) so torch 1.13 runs it too.
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)
        if self.causal:
            mask = torch.ones(t, t, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf"))
        att = att.softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))


class Gpt(torch.nn.Module):
    def __init__(self, layers=6, d=256, heads=8, context=128, vocab=256):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(context, d)
        self.blocks = torch.nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln, self.head = torch.nn.LayerNorm(d), torch.nn.Linear(d, vocab)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1])
        return self.head(self.ln(self.blocks(self.tok(idx) + self.pos(pos))))


class Vit(torch.nn.Module):
    """mantissa/models/vit.h with its defaults: non-overlapping patches embedded by a Linear layer, a
    class token and learned position embedding (N(0, 0.02)), pre-norm blocks, a final
    LayerNorm and a linear head on the class token."""

    def __init__(self, image=28, patch=7, width=128, depth=4, heads=4, mlp_ratio=2.0,
                 classes=10):
        super().__init__()
        self.patch, self.grid = patch, image // patch
        self.embed = torch.nn.Linear(patch * patch, width)
        self.cls = torch.nn.Parameter(0.02 * torch.randn(1, 1, width))
        self.pos = torch.nn.Parameter(0.02 * torch.randn(1, self.grid * self.grid + 1, width))
        hidden = int(round(mlp_ratio * width))
        self.blocks = torch.nn.Sequential(
            *[Block(width, heads, hidden, causal=False) for _ in range(depth)])
        self.ln, self.head = torch.nn.LayerNorm(width), torch.nn.Linear(width, classes)

    def forward(self, images):
        n, g, p = images.shape[0], self.grid, self.patch
        # (N, 1, G, P, G, P) -> (N, G, G, 1, P, P) -> (N, G*G, P*P), as ViT::patchify
        patches = images.reshape(n, 1, g, p, g, p).permute(0, 2, 4, 1, 3, 5).reshape(
            n, g * g, p * p)
        x = torch.cat([self.cls.expand(n, 1, -1), self.embed(patches)], dim=1) + self.pos
        return self.head(self.ln(self.blocks(x))[:, 0])


# name -> (builder, batch size, unit of a sample)
MODELS = {
    "mlp": (None, 256, "images"),
    "cnn": (make_cnn, 128, "images"),
    "vit": (Vit, 256, "images"),
    "gpt": (Gpt, 16, "sequences of 128 bytes"),
}


def model_batches(name, args, x, y, steps, generator):
    """Yields `steps` (input, target) batches for the model."""
    batch = args.batch_sizes[name]
    if name == "gpt":
        data = torch.randint(0, 256, (steps * batch, 129), generator=generator)
        for s in range(steps):
            seq = data[s * batch : (s + 1) * batch]
            yield seq[:, :-1], seq[:, 1:]
        return
    order = torch.randperm(x.shape[0], generator=generator)
    for s in range(steps):
        # Cycles through the data when a run has more steps than the data has batches.
        idx = order[(s * batch + torch.arange(batch)) % x.shape[0]]
        xb = x[idx] if name in ("mlp", "vit") else x[idx].view(-1, 1, 28, 28)
        yield xb, y[idx]


def train_steps(name, model, opt, args, x, y, steps, autocast_bf16, generator):
    """`steps` optimizer steps; returns the seconds they took."""
    batches = list(model_batches(name, args, x, y, steps, generator))
    start = time.perf_counter()
    correct = 0
    for xb, yb in batches:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast_bf16):
            logits = model(xb)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                     yb.reshape(-1))
        loss.item()  # mantissa's loop reads the loss every step too
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        correct += int((logits.argmax(-1) == yb).sum())
    return time.perf_counter() - start


def run_torch(name, args, x, y, autocast_bf16):
    torch.manual_seed(0)
    builder = MODELS[name][0]
    model = make_mlp(args.hidden) if name == "mlp" else builder()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    g = torch.Generator().manual_seed(0)
    if args.untimed_steps:
        train_steps(name, model, opt, args, x, y, args.untimed_steps, autocast_bf16, g)
    steps = args.model_steps[name]
    secs = train_steps(name, model, opt, args, x, y, steps, autocast_bf16, g)
    return steps * args.batch_sizes[name] / secs, secs / steps


def auto_steps(name, args, x, y):
    """The timed steps that make every round last at least about --round-seconds: a few steps of
    PyTorch fp32 and of each of mantissa's precisions are timed, and the count is scaled up from
    the fastest of them (at least 10)."""
    torch.manual_seed(0)
    builder = MODELS[name][0]
    model = make_mlp(args.hidden) if name == "mlp" else builder()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    g = torch.Generator().manual_seed(0)
    train_steps(name, model, opt, args, x, y, max(args.untimed_steps, 1), False, g)
    probe = 3
    fastest = train_steps(name, model, opt, args, x, y, probe, False, g) / probe
    if args.mantissa:
        m = run_mantissa(name, args, steps=probe, quiet=True)
        if m is not None:
            batch = args.batch_sizes[name]
            fastest = min([fastest] + [batch / r["samples_per_second"] for r in m["results"]])
    return max(10, math.ceil(args.round_seconds / fastest))


DEFAULT_CORPUS = "/usr/share/games/fortunes"


def gpt_text(tmp):
    """The default corpus where installed, else a file of 1 MB of random lower-case words."""
    if os.path.isdir(DEFAULT_CORPUS):
        return DEFAULT_CORPUS
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 9)))
             for _ in range(120_000)]
    path = os.path.join(tmp, "words.txt")
    with open(path, "w") as f:
        f.write(" ".join(words))
    return path


def run_mantissa(name, args, steps=None, quiet=False):
    """mantissa bench's JSON for the model, or None when its bench does not know the model.
    steps: the timed steps (default: the model's); quiet: print nothing but failures."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        # One bench round per call, as PyTorch gets one run: --rounds here interleaves the
        # rounds of both sides itself.
        cmd = [args.mantissa, "bench", "--model", name,
               "--precisions", "32-true,bf16-mixed,16-mixed,bf16-true",
               "--steps", str(steps or args.model_steps[name]), "--untimed-steps", str(args.untimed_steps),
               "--rounds", "1",
               "--batch-size", str(args.batch_sizes[name]),
               "--threads", str(args.threads), "--json", out]
        if name == "mlp":
            cmd += ["--hidden", ",".join(map(str, args.hidden))]
        if not args.random_data and name != "gpt":  # the GPT reads its text corpus
            cmd += ["--data-dir", args.data_dir]
        if name == "gpt":
            cmd += ["--text", args.text or gpt_text(tmp)]
        if not quiet:
            print("$ " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if not quiet or r.returncode != 0:
            print(r.stdout + r.stderr, end="", flush=True)
        if r.returncode != 0:
            if "unknown model" in r.stderr + r.stdout:
                return None
            sys.exit(f"mantissa bench failed with exit code {r.returncode}")
        with open(out) as f:
            return json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mantissa", help="path of the mantissa binary (omit: PyTorch only)")
    p.add_argument("--models", default="mlp,cnn,vit,gpt",
                   help="comma separated: mlp, cnn, vit, gpt")
    p.add_argument("--steps", default="auto",
                   help="timed steps per round, the same on both sides; auto (the default): "
                        "per model, enough that the fastest round lasts --round-seconds")
    p.add_argument("--round-seconds", type=float, default=3.0,
                   help="with --steps auto, the shortest round's length (default 3 s; a round "
                        "should last 2 s or more for a steady figure)")
    # --warmup-steps: the old name, as `mantissa bench` still takes it (deprecated there).
    p.add_argument("--untimed-steps", "--warmup-steps", dest="untimed_steps", type=int, default=3,
                   help="untimed steps before the timed ones, on both sides")
    p.add_argument("--batch-size", type=int, default=0,
                   help="override every model's batch (default: mlp/vit 256, cnn 128, gpt 16)")
    p.add_argument("--hidden", default="1024,1024")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--text", help="mantissa's GPT corpus (default: the fortunes package's "
                                  "files, else generated random words)")
    p.add_argument("--random-data", action="store_true",
                   help="random inputs shaped like Fashion-MNIST on the PyTorch side "
                        "(mantissa always reads Fashion-MNIST)")
    p.add_argument("--rounds", type=int, default=3,
                   help="per model, N interleaved rounds of PyTorch then mantissa; report each "
                        "side's median round and the spread (default 3; 1: one run, no spread)")
    p.add_argument("--torch-modes", default="fp32,bf16",
                   help="PyTorch's precisions, comma separated: fp32, bf16 (bf16 autocast; "
                        "with --rounds > 1 in the first round only)")
    args = p.parse_args()
    args.hidden = [int(h) for h in args.hidden.split(",")]
    if args.steps != "auto":
        try:
            args.steps = int(args.steps)
        except ValueError:
            sys.exit(f"--steps must be a whole number or auto, got '{args.steps}'")
        if args.steps < 1:
            sys.exit(f"--steps must be at least 1, got {args.steps}")
    if args.rounds < 1:
        sys.exit(f"--rounds must be at least 1, got {args.rounds}")
    args.torch_modes = [t for t in args.torch_modes.split(",") if t]
    for t in args.torch_modes:
        if t not in TORCH_MODES:
            sys.exit(f"unknown --torch-modes value '{t}'; valid values are: "
                     f"{', '.join(TORCH_MODES)}")
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            sys.exit(f"unknown model '{m}'; valid values are: {', '.join(MODELS)}")
    args.batch_sizes = {m: args.batch_size or MODELS[m][1] for m in MODELS}

    torch.set_num_threads(args.threads)
    source = ("Debian package python3-torch" if torch.__file__.startswith("/usr/lib/python3/")
              else "pip/other")
    print(f"PyTorch {torch.__version__} from {os.path.dirname(torch.__file__)} ({source}), "
          f"python {sys.version.split()[0]}, {torch.get_num_threads()} threads, "
          f"oneDNN (mkldnn) {'on' if torch.backends.mkldnn.is_available() else 'off'}")
    blas = next((kv.split("=", 1)[1] for kv in torch.__config__.show().replace(",", " ").split()
                 if kv.startswith("BLAS_INFO=")), "unknown")
    print(f"PyTorch BLAS: {blas}" + (" -- fp32 matmul runs on the reference (netlib) BLAS, so "
                                     "PyTorch fp32 is far below this CPU's speed; bf16 goes "
                                     "through oneDNN" if blas == "generic" else ""))
    # The whole training set (60,000 images): batches cycle through it when a run is longer.
    x, y, kind = training_data(args, 60000)
    if args.steps == "auto":
        args.model_steps = {m: auto_steps(m, args, x, y) for m in models}
        chosen = ", ".join(f"{m} {args.model_steps[m]}" for m in models)
        print(f"timed steps per round (auto, for rounds of at least about {args.round_seconds:g} s "
              f"on both sides): "
              f"{chosen}; {args.untimed_steps} untimed before them; image data: {kind}\n")
    else:
        args.model_steps = {m: args.steps for m in models}
        print(f"{args.steps} timed steps after {args.untimed_steps} untimed, image data: "
              f"{kind}\n")

    torch_modes = [TORCH_MODES[m] for m in args.torch_modes]
    if args.rounds == 1:
        single_run(models, args, x, y, torch_modes)
    else:
        rounds_run(models, args, x, y, torch_modes)


# --torch-modes value -> (label, bf16 autocast on)
TORCH_MODES = {"fp32": ("fp32", False), "bf16": ("bf16 autocast", True)}
# mantissa precision -> the PyTorch mode it is compared with in a single run
COUNTERPART = {"32-true": "fp32", "bf16-mixed": "bf16 autocast"}


def single_run(models, args, x, y, torch_modes):
    """One run per model, PyTorch then mantissa (--rounds 1, the output of old)."""
    summary = []
    for name in models:
        print(f"== {name}: batch {args.batch_sizes[name]} {MODELS[name][2]}")
        torch_results = {}
        for prec, bf16 in torch_modes:
            sps, spstep = run_torch(name, args, x, y, bf16)
            torch_results[prec] = sps
            print(f"PyTorch {prec:<14} {sps:9.1f} samples/s  {1e3 * spstep:8.2f} ms/step",
                  flush=True)
        if not args.mantissa:
            continue
        m = run_mantissa(name, args)
        if m is None:
            print(f"mantissa bench has no model '{name}' yet: PyTorch numbers only\n")
            continue
        for r in m["results"]:
            t = COUNTERPART.get(r["precision"])
            if t is not None and t in torch_results:
                summary.append((name, r["precision"], r["samples_per_second"], t,
                                torch_results[t]))
        print()

    if summary:
        print("mantissa / PyTorch (samples/s; >1: mantissa faster)")
        for name, prec, ours, t, theirs in summary:
            print(f"  {name:<4} {prec:<12} {ours:9.1f} vs PyTorch {t:<14} {theirs:9.1f}"
                  f"  ratio {ours / theirs:.2f}")


def rounds_run(models, args, x, y, torch_modes):
    """--rounds N > 1: per model, N rounds of PyTorch then mantissa, interleaved, so both sides
    sample the same stretches of a noisy machine; each side's median round counts, and the
    headline is the ratio of the medians."""
    n = args.rounds
    if any(bf16 for _, bf16 in torch_modes):
        print(f"PyTorch bf16 autocast runs in round 1 only (it is 20-40x slower than fp32 on "
              f"AVX2 CPUs); fp32 and mantissa run in all {n} rounds\n")
    # model -> {(side, precision): [samples/s of each round]}; PyTorch first, then mantissa's
    # precisions in its bench's order
    results = {}
    for name in models:
        print(f"== {name}: batch {args.batch_sizes[name]} {MODELS[name][2]}, {n} rounds of "
              f"{args.model_steps[name]} steps")
        rows = {}
        mantissa_known = bool(args.mantissa)
        for r in range(n):
            print(f"-- {name} round {r + 1}/{n}", flush=True)
            for prec, bf16 in torch_modes:
                if bf16 and r > 0:
                    continue
                sps, spstep = run_torch(name, args, x, y, bf16)
                rows.setdefault(("PyTorch", prec), []).append(sps)
                print(f"PyTorch {prec:<14} {sps:9.1f} samples/s  {1e3 * spstep:8.2f} ms/step",
                      flush=True)
            if not mantissa_known:
                continue
            m = run_mantissa(name, args)
            if m is None:
                print(f"mantissa bench has no model '{name}' yet: PyTorch numbers only")
                mantissa_known = False
                continue
            for res in m["results"]:
                rows.setdefault(("mantissa", res["precision"]), []).append(
                    res["samples_per_second"])
        print()
        results[name] = rows

    print(f"Median of {n} interleaved rounds (samples/s), the spread as the slowest-fastest "
          f"round, and the round's length at the median; ratio: the median over PyTorch "
          f"fp32's median (>1: mantissa faster)")
    short = []
    headline = []
    for name, rows in results.items():
        torch_fp32 = rows.get(("PyTorch", "fp32"))
        base = statistics.median(torch_fp32) if torch_fp32 else None
        samples = args.model_steps[name] * args.batch_sizes[name]
        for (side, prec), runs in rows.items():
            med, lo, hi = statistics.median(runs), min(runs), max(runs)
            seconds = samples / med
            if seconds < 2.0:
                short.append(f"{name} {side} {prec} ({seconds:.1f} s)")
            label = f"{side} {prec}" if side == "PyTorch" else prec
            if len(runs) == 1:
                spread = "(round 1 only)" if n > 1 else ""
            else:
                spread = f"({lo:.1f}-{hi:.1f}, +{100 * (hi / lo - 1):.0f}%)"
            ratio = ""
            if side == "mantissa" and base:
                ratio = f"  ratio {med / base:.2f}"
                if prec in ("32-true", "bf16-mixed"):
                    headline.append((name, prec, med / base, med, lo, hi, base, min(torch_fp32),
                                     max(torch_fp32)))
            print(f"  {name:<4} {label:<22} {med:9.1f}  {spread:<26} {seconds:5.1f} s{ratio}")
    if short:
        print(f"warning: rounds shorter than 2 s, noisier figures: {', '.join(short)} "
              f"(raise --steps or --round-seconds)")
    if headline:
        print(f"\nmantissa / PyTorch fp32, ratio of the medians of {n} rounds "
              f"(samples/s, min-max in brackets)")
        for name, prec, ratio, med, lo, hi, base, tlo, thi in headline:
            print(f"  {name:<4} {prec:<11} {ratio:5.2f}   mantissa {med:9.1f} [{lo:.1f}-{hi:.1f}]"
                  f"   PyTorch {base:9.1f} [{tlo:.1f}-{thi:.1f}]")


if __name__ == "__main__":
    main()
