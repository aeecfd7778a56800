#!/usr/bin/env python3
"""Reference trajectories for tests/optim/test_adam8bit.cpp.

Two references on one 5000-element fp32 parameter (20 blocks of 256, the last partial) over
five steps, with inputs both sides generate from the same integer recipe (lcg_floats below):
  1. a numpy float32 implementation of mantissa's 8-bit update (the CUDA blockwise kernel of
     bitsandbytes: decay after the step, exact nearest map entry of m * (1 / absmax) with ties
     to the lower index, the sign fix for m), op for op in the kernel's order. The C++ must
     match it bit for bit.
  2. bitsandbytes' own Adam8bit / AdamW8bit on CPU (its CPU backend: decay before the step, a
     65,536-bin table instead of the exact nearest entry, no sign fix). The C++ must stay close.
Writes tests/optim/adam8bit_fixture.h with every 17th element of the parameter and codes after
steps 1 and 5, and all absmax values after step 5.

Usage: /work/venv-ref/bin/python scripts/make_adam8bit_fixture.py
"""
import pathlib

import numpy as np
import torch
import bitsandbytes
import bitsandbytes.functional as F

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests/optim/adam8bit_fixture.h"
N = 5000
STEPS = 5
STRIDE = 17
f32 = np.float32


def lcg_floats(seed, n):
    """n floats in [-1, 1): x = ((s >> 8) * 2^-24) * 2 - 1 with s = s * 1664525 + 1013904223 mod 2^32."""
    out = np.empty(n, f32)
    s = seed & 0xFFFFFFFF
    for i in range(n):
        s = (s * 1664525 + 1013904223) & 0xFFFFFFFF
        out[i] = f32((s >> 8) * 2.0**-24) * f32(2) - f32(1)
    return out


def initial_param():
    return lcg_floats(1, N)


def grad(step):
    """Gradient of step 1..5: per block magnitudes 1, 0.1, ..., 1e-4 so absmax varies."""
    g = lcg_floats(100 + step, N)
    scales = np.array([1.0, 0.1, 0.01, 1e-3, 1e-4], f32)
    block_scale = scales[(np.arange(N) // 256 + step) % 5]
    return (g * block_scale).astype(f32)


def nearest(code, x):
    mid = (f32(0.5) * (code[:-1] + code[1:])).astype(f32)
    return np.searchsorted(mid, x, side="left").astype(np.int64)


def mantissa_reference(lr, betas, eps, wd):
    code1 = F.create_dynamic_map(signed=True).numpy().astype(f32)
    code2 = F.create_dynamic_map(signed=False).numpy().astype(f32)
    p = initial_param()
    nb = (N + 255) // 256
    q1 = np.zeros(N, np.int64)
    q2 = np.zeros(N, np.int64)
    a1 = np.zeros(nb, f32)
    a2 = np.zeros(nb, f32)
    b1, b2 = f32(betas[0]), f32(betas[1])
    omb1, omb2 = f32(1 - betas[0]), f32(1 - betas[1])
    blk = np.arange(N) // 256
    snaps = {}
    for t in range(1, STEPS + 1):
        g = grad(t)
        c1 = 1 - betas[0] ** t
        c2 = np.sqrt(1 - betas[1] ** t)
        step_size = f32(-lr * c2 / c1)
        eps_scaled = f32(eps * c2)
        decay = f32(1 - lr * wd)
        m = (code1[q1] * a1[blk] * b1 + omb1 * g).astype(f32)
        v = (code2[q2] * a2[blk] * b2 + omb2 * g * g).astype(f32)
        p = (p + step_size * (m / (np.sqrt(v) + eps_scaled))).astype(f32)
        if wd > 0:
            p = (p * decay).astype(f32)
        a1 = np.array([np.abs(m[blk == b]).max() for b in range(nb)], f32)
        a2 = np.array([np.abs(v[blk == b]).max() for b in range(nb)], f32)
        with np.errstate(invalid="ignore", divide="ignore"):
            x1 = (m * (f32(1) / a1)[blk]).astype(f32)
            x2 = (v * (f32(1) / a2)[blk]).astype(f32)
        q1 = nearest(code1, x1)
        fix = np.signbit(code1[q1]) != np.signbit(m)
        q1 = np.where(fix, q1 + np.where(m > 0, 1, -1), q1)
        q2 = nearest(code2, x2)
        q1 = np.where(a1[blk] == 0, 127, q1)
        q2 = np.where(a2[blk] == 0, 0, q2)
        snaps[t] = (p.copy(), q1.copy(), q2.copy(), a1.copy(), a2.copy())
    return snaps


def bitsandbytes_reference(cls, lr, betas, eps, wd):
    p = torch.nn.Parameter(torch.from_numpy(initial_param()))
    opt = cls([p], lr=lr, betas=betas, eps=eps, weight_decay=wd)
    snaps = {}
    for t in range(1, STEPS + 1):
        p.grad = torch.from_numpy(grad(t))
        opt.step()
        st = opt.state[p]
        snaps[t] = (p.detach().numpy().copy(), st["state1"].numpy().astype(np.int64).copy(),
                    st["state2"].numpy().astype(np.int64).copy(), st["absmax1"].numpy().copy(),
                    st["absmax2"].numpy().copy())
    return snaps


def bits_rows(a, per_row=8):
    u = np.asarray(a, dtype=f32).view(np.uint32)
    return ",\n".join("    " + ", ".join(f"0x{v:08x}u" for v in u[i : i + per_row]) for i in range(0, len(u), per_row))


def byte_rows(a, per_row=24):
    return ",\n".join("    " + ", ".join(str(int(v)) for v in a[i : i + per_row]) for i in range(0, len(a), per_row))


def emit(name, snaps, lines):
    for t in (1, STEPS):
        p, q1, q2, a1, a2 = snaps[t]
        lines += [
            f"inline constexpr uint32_t {name}Step{t}Param[] = {{\n{bits_rows(p[::STRIDE])}}};",
            f"inline constexpr uint8_t {name}Step{t}State1[] = {{\n{byte_rows(q1[::STRIDE])}}};",
            f"inline constexpr uint8_t {name}Step{t}State2[] = {{\n{byte_rows(q2[::STRIDE])}}};",
        ]
    p, q1, q2, a1, a2 = snaps[STEPS]
    lines += [
        f"inline constexpr uint32_t {name}Step{STEPS}Absmax1[] = {{\n{bits_rows(a1)}}};",
        f"inline constexpr uint32_t {name}Step{STEPS}Absmax2[] = {{\n{bits_rows(a2)}}};",
        "",
    ]


def main():
    cases = [
        ("kAdam", bitsandbytes.optim.Adam8bit, dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, wd=0.0)),
        ("kAdamW", bitsandbytes.optim.AdamW8bit, dict(lr=2e-2, betas=(0.8, 0.99), eps=1e-6, wd=0.1)),
    ]
    lines = [
        "#pragma once",
        "// Generated by scripts/make_adam8bit_fixture.py with bitsandbytes "
        f"{bitsandbytes.__version__} and torch {torch.__version__.split('+')[0]} (CPU); do not edit.",
        "// Every 17th element of a 5000-element parameter; float32 values as bit patterns.",
        "#include <cstdint>",
        "",
        "namespace adam8bit_fixture {",
        "",
        f"inline constexpr int64_t kNumel = {N};",
        f"inline constexpr int64_t kStride = {STRIDE};",
        f"inline constexpr int kSteps = {STEPS};",
        "",
    ]
    for name, cls, kw in cases:
        lines.append(f"// {name}: lr {kw['lr']}, betas {kw['betas']}, eps {kw['eps']}, weight_decay {kw['wd']}")
        emit(name + "Mantissa", mantissa_reference(kw["lr"], kw["betas"], kw["eps"], kw["wd"]), lines)
        emit(name + "Bnb", bitsandbytes_reference(cls, kw["lr"], kw["betas"], kw["eps"], kw["wd"]), lines)
    lines += ["}  // namespace adam8bit_fixture", ""]
    OUT.write_text("\n".join(lines))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
