#!/usr/bin/env python3
"""Reference codes for LLM.int8's row scale at ties (tests/quant/test_int8.cpp, Int8Rows.ScaleTie*).

bitsandbytes' CPU op multiplies a row by `127.0 / row_stats`, which torch evaluates as
row_stats.reciprocal() * 127: two float32 roundings. Where that factor differs by an ulp from the
correctly rounded 127 / absmax, a product can be exactly k + 0.5 under one factor and not under
the other, and the stored code differs by one. This script writes bitsandbytes' codes for:
  * "linear.*": rows of nn.Linear(784, 257) weights (seeded) on which the two factors give
    different codes;
  * "ties.*": constructed rows [absmax, x, -x, 0...] where x * factor is exactly k + 0.5 in
    float32 (x * 127 / absmax, exactly, is not), once plain and once ("ties6.*", threshold 6)
    with an outlier 7 in column 7 that the absmax skips.

Writes tests/fixtures/quant/int8_scale_ties.safetensors.
Usage: /work/venv-ref/bin/python scripts/make_int8_scale_fixture.py   (torch + bitsandbytes)
"""
import os
from fractions import Fraction

import numpy as np
import torch
import bitsandbytes.functional as F
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "quant",
                   "int8_scale_ties.safetensors")
torch.set_num_threads(1)
f32 = np.float32


def bnb_factor(m):
    return f32(f32(1) / f32(m)) * f32(127)


def direct_factor(m):
    return f32(127) / f32(m)


def linear_rows(limit=12):
    """Rows of seeded Linear(784, 257) weights where the two factors round differently."""
    rows = []
    for seed in range(200):
        torch.manual_seed(seed)
        w = torch.nn.Linear(784, 257).weight.detach().numpy()
        m = np.abs(w).max(axis=1)
        a = np.round(w * (f32(127) / m)[:, None])
        b = np.round(w * ((f32(1) / m) * f32(127))[:, None])
        for i in np.nonzero((a != b).any(axis=1))[0]:
            rows.append(w[i].copy())
            if len(rows) == limit:
                return np.stack(rows)
    return np.stack(rows)


def tie_rows(limit=8):
    """[absmax, x, -x, 0, ...] rows where x * bnb_factor(absmax) is exactly k + 0.5."""
    rng = np.random.default_rng(5)
    rows = []
    while len(rows) < limit:
        m = f32(rng.uniform(0.5, 2.0))
        fa, fb = direct_factor(m), bnb_factor(m)
        if fa == fb:
            continue
        k = int(rng.integers(1, 126))
        x = f32(f32(k + 0.5) / fb)
        if not (abs(x) <= m and f32(x * fb) == f32(k + 0.5)):
            continue
        if np.round(f32(x * fa)) == np.round(f32(x * fb)):
            continue  # the factors agree on this code: not a case that tells them apart
        exact = Fraction(float(x)) * 127 / Fraction(float(m))
        assert exact != Fraction(2 * k + 1, 2), "an exact tie would not tell the orders apart"
        r = np.zeros(8, dtype=np.float32)
        r[0], r[1], r[2] = m, x, -x
        rows.append(r)
    return np.stack(rows)


def quantize(a, threshold):
    codes, absmax, _ = F.int8_vectorwise_quant(torch.from_numpy(a).clone(), threshold=threshold)
    return codes.contiguous(), absmax.contiguous()


t = {}
lin = linear_rows()
t["linear.a"] = torch.from_numpy(lin)
t["linear.codes"], t["linear.absmax"] = quantize(lin, 0.0)
ties = tie_rows()
t["ties.a"] = torch.from_numpy(ties)
t["ties.codes"], t["ties.absmax"] = quantize(ties, 0.0)
ties6 = ties.copy()
ties6[:, 7] = 7.0
t["ties6.a"] = torch.from_numpy(ties6)
t["ties6.codes"], t["ties6.absmax"] = quantize(ties6, 6.0)
save_file(t, OUT)
print(OUT, {k: tuple(v.shape) for k, v in t.items()})
