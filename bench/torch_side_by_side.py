#!/usr/bin/env python3
"""The reference MLP trained in PyTorch and in mantissa, side by side, on the same machine.

PyTorch trains 784-1024-1024-10 (ReLU, AdamW lr 1e-3, weight decay 0.01, batch 256) in fp32
and under bf16 autocast for a fixed number of steps with the same per-step work as
`mantissa train` (loss.item() and an accuracy count every step); then, given the mantissa
binary, this script runs `mantissa bench` with the same shape and step count and prints
mantissa / PyTorch ratios. PyTorch is a point of comparison only; nothing here is a test.

    /usr/bin/python3 bench/torch_side_by_side.py --mantissa build-bench/mantissa
    /usr/bin/python3 bench/torch_side_by_side.py --random-data --steps 50   # torch only

Data: the Fashion-MNIST gz IDX files (read with gzip + numpy, no torchvision) when present,
else (or with --random-data) random images of the same shape. Peak memory is reported for
mantissa only: PyTorch's CPU allocator keeps no high-water mark to compare against.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

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


def training_data(args, n):
    images = os.path.join(args.data_dir, "train-images-idx3-ubyte.gz")
    labels = os.path.join(args.data_dir, "train-labels-idx1-ubyte.gz")
    if not args.random_data and os.path.exists(images) and os.path.exists(labels):
        x = (load_idx_images(images, n) - MEAN) / STD
        return torch.from_numpy(x), torch.from_numpy(load_idx_labels(labels, n)), "fashion-mnist"
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 784, generator=g), torch.randint(0, 10, (n,), generator=g), "random"


def make_mlp(hidden):
    layers, width = [], 784
    for h in hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    layers.append(torch.nn.Linear(width, 10))
    return torch.nn.Sequential(*layers)


def train_steps(model, opt, x, y, batch, steps, autocast_bf16, generator):
    """`steps` optimizer steps over a shuffled pass; returns the seconds they took."""
    order = torch.randperm(x.shape[0], generator=generator)
    start = time.perf_counter()
    correct = 0
    for s in range(steps):
        idx = order[s * batch : (s + 1) * batch]
        xb, yb = x[idx], y[idx]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast_bf16):
            logits = model(xb)
            loss = torch.nn.functional.cross_entropy(logits, yb)
        loss.item()  # mantissa's loop reads the loss every step too
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        correct += int((logits.argmax(1) == yb).sum())
    return time.perf_counter() - start


def run_torch(args, x, y, autocast_bf16):
    torch.manual_seed(0)
    model = make_mlp(args.hidden)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    g = torch.Generator().manual_seed(0)
    if args.warmup_steps:
        train_steps(model, opt, x, y, args.batch_size, args.warmup_steps, autocast_bf16, g)
    secs = train_steps(model, opt, x, y, args.batch_size, args.steps, autocast_bf16, g)
    return args.steps * args.batch_size / secs, secs / args.steps


def run_mantissa(args):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        cmd = [args.mantissa, "bench", "--model", "mlp",
               "--precisions", "32-true,bf16-mixed,16-mixed,bf16-true",
               "--steps", str(args.steps), "--warmup-steps", str(args.warmup_steps),
               "--hidden", ",".join(map(str, args.hidden)), "--batch-size", str(args.batch_size),
               "--threads", str(args.threads), "--json", out]
        if not args.random_data:
            cmd += ["--data-dir", args.data_dir]
        print("$ " + " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        with open(out) as f:
            return json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mantissa", help="path of the mantissa binary (omit: PyTorch only)")
    p.add_argument("--steps", type=int, default=30)  # PyTorch fp32 on netlib BLAS: ~0.65 s a step
    p.add_argument("--warmup-steps", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--hidden", default="1024,1024")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--random-data", action="store_true",
                   help="random inputs shaped like Fashion-MNIST on the PyTorch side "
                        "(mantissa always reads Fashion-MNIST)")
    args = p.parse_args()
    args.hidden = [int(h) for h in args.hidden.split(",")]

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
    n = (args.steps + args.warmup_steps) * args.batch_size
    x, y, kind = training_data(args, n)
    print(f"model 784-{'-'.join(map(str, args.hidden))}-10, batch {args.batch_size}, "
          f"{args.steps} timed steps after {args.warmup_steps} warm-up, data: {kind}\n")

    torch_results = {}
    for name, bf16 in (("fp32", False), ("bf16 autocast", True)):
        sps, spstep = run_torch(args, x, y, bf16)
        torch_results[name] = sps
        print(f"PyTorch {name:<14} {sps:9.0f} samples/s  {1e3 * spstep:7.2f} ms/step", flush=True)

    if not args.mantissa:
        return
    print()
    m = run_mantissa(args)
    counterpart = {"32-true": "fp32", "bf16-mixed": "bf16 autocast"}
    print("\nmantissa / PyTorch (samples/s; >1: mantissa faster)")
    for r in m["results"]:
        t = counterpart.get(r["precision"])
        if t is None:
            print(f"  {r['precision']:<12} {r['samples_per_second']:9.0f} samples/s  "
                  f"(no PyTorch counterpart run)")
            continue
        print(f"  {r['precision']:<12} {r['samples_per_second']:9.0f} vs PyTorch {t:<14} "
              f"{torch_results[t]:9.0f}  ratio {r['samples_per_second'] / torch_results[t]:.2f}")


if __name__ == "__main__":
    main()
