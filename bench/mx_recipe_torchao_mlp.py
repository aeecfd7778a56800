#!/usr/bin/env python3
"""The MX recipes' accuracy on the reference MLP, measured in PyTorch with torchao's own casts.

mantissa's `--fp8-recipe mxfp4` loses about a point of test accuracy on the MLP against
bf16-mixed (docs/fp8.md, "Accuracy of the recipes"). This script trains the same MLP
(784-256-10, AdamW lr 1e-3 weight decay 0.01, batch 256, 3 epochs, Fashion-MNIST, seeds 0-2, one
thread) in float32 and with every operand of the three products of each Linear quantized by
torchao's `to_mx` / `to_dtype` along that product's K, as mantissa's MX layers do, so that the
gap can be told apart from mantissa's implementation. Each argument names one run as
FORMAT:SCALE_MODE:GRADIENT_SCALE_MODE, FORMAT mxfp4 or mxfp8, the modes torchao's
ScaleCalculationMode values (floor, rceil, ceil, even). Needs torch and torchao (the reference
venv of docs/fp8.md), never mantissa.

    python bench/mx_recipe_torchao_mlp.py mxfp4:floor:floor mxfp8:rceil:rceil

Prints one Markdown row per run: the accuracy of each seed and their mean (float32 first).
Environment: MANTISSA_DATA_DIR (default /usr/share/datasets/fashion-mnist).
"""
import gzip
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx

BLOCK = 32
ELEMENTS = {"mxfp4": torch.float4_e2m1fn_x2, "mxfp8": torch.float8_e4m3fn}


def load(data_dir):
    def images(name):
        raw = gzip.open(os.path.join(data_dir, name)).read()
        return torch.tensor(np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 784) / 255.0,
                            dtype=torch.float32)

    def labels(name):
        raw = gzip.open(os.path.join(data_dir, name)).read()
        return torch.tensor(np.frombuffer(raw, np.uint8, offset=8).astype(np.int64))

    return (images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz"),
            images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz"))


def quantized(t, elem, mode):
    """t's values after an MX round trip in 32-element blocks along its last dimension; a block
    cut at the edge is padded with zeros, which changes no block's amax."""
    k = t.shape[-1]
    padded = F.pad(t.float(), (0, (-k) % BLOCK)).contiguous()
    scale, codes = to_mx(padded, elem, BLOCK, mode)
    return to_dtype(codes, scale, elem, BLOCK, torch.float32)[..., :k]


class MxLinear(torch.autograd.Function):
    """y = x W^T + b, dx = dy W, dW = dy^T x, every operand quantized along its product's K."""

    @staticmethod
    def forward(ctx, x, w, b, elem, mode, grad_mode):
        ctx.save_for_backward(x, w)
        ctx.cfg = (elem, mode, grad_mode)
        return quantized(x, elem, mode) @ quantized(w, elem, mode).t() + b

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        elem, mode, grad_mode = ctx.cfg
        dx = quantized(dy, elem, grad_mode) @ quantized(w.t().contiguous(), elem, mode).t()
        dw = quantized(dy.t().contiguous(), elem, grad_mode) @ quantized(x.t().contiguous(), elem,
                                                                         mode).t()
        return dx, dw, dy.sum(0), None, None, None


def accuracy(seed, cfg, data):
    xtr, ytr, xte, yte = data
    torch.manual_seed(seed)
    l1, l2 = torch.nn.Linear(784, 256), torch.nn.Linear(256, 10)
    opt = torch.optim.AdamW(list(l1.parameters()) + list(l2.parameters()), lr=1e-3,
                            weight_decay=0.01)

    def forward(x):
        if cfg is None:
            return l2(F.relu(l1(x)))
        h = F.relu(MxLinear.apply(x, l1.weight, l1.bias, *cfg))
        return MxLinear.apply(h, l2.weight, l2.bias, *cfg)

    for _ in range(3):
        order = torch.randperm(xtr.shape[0])
        for i in range(0, xtr.shape[0], 256):
            idx = order[i:i + 256]
            loss = F.cross_entropy(forward(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        return (forward(xte).argmax(1) == yte).float().mean().item()


def main():
    torch.set_num_threads(1)
    data = load(os.environ.get("MANTISSA_DATA_DIR", "/usr/share/datasets/fashion-mnist"))
    runs = {"float32": None}
    for arg in sys.argv[1:]:
        fmt, mode, grad_mode = arg.split(":")
        runs[arg] = (ELEMENTS[fmt], ScaleCalculationMode(mode), ScaleCalculationMode(grad_mode))
    print("| run | test accuracy, seeds 0 / 1 / 2 | mean |")
    print("|---|---|---|")
    for name, cfg in runs.items():
        accs = [accuracy(seed, cfg, data) for seed in (0, 1, 2)]
        print(f"| {name} | {' / '.join(f'{a:.4f}' for a in accs)} | {np.mean(accs):.4f} |",
              flush=True)


if __name__ == "__main__":
    main()
