#!/usr/bin/env python3
"""Reference bytes for the 4-bit and 8-bit quantization tests (tests/quant/), written by
bitsandbytes' CPU code paths.

Writes tests/fixtures/quant/*.safetensors. Each file holds the inputs and what bitsandbytes
produced for them, so the C++ tests compare byte for byte without Python at test time.

Usage: /work/venv-ref/bin/python scripts/make_quant_fixtures.py   (torch + bitsandbytes)
"""
import json
import os
import sys

import numpy as np
import torch
import bitsandbytes as bnb
import bitsandbytes.functional as F
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "quant")
os.makedirs(OUT, exist_ok=True)
torch.set_num_threads(1)


def hash_floats(n, seed):
    """Deterministic float32 values in [0.5, 1.5) the C++ test regenerates exactly."""
    i = np.arange(n, dtype=np.uint64)
    h = ((i * np.uint64(2654435761) + np.uint64(seed)) % np.uint64(2**32)).astype(np.uint64)
    return (((h >> np.uint64(8)).astype(np.float32)) * np.float32(2.0**-24) + np.float32(0.5)).astype(np.float32)


def edge_weights():
    """A [5, 64] weight whose rows exercise the corner cases of the 4-bit trees."""
    nf4 = F.get_4bit_type("nf4", device="cpu")
    mids = ((nf4[:-1] + nf4[1:]) / 2).float()
    rows = []
    # row 0: every NF4 midpoint exactly, its float neighbours, and +-1 so absmax is 1
    r = torch.zeros(64)
    r[0], r[1] = 1.0, -1.0
    r[2:17] = mids
    r[17:32] = torch.nextafter(mids, torch.full_like(mids, 2.0))
    r[32:47] = torch.nextafter(mids, torch.full_like(mids, -2.0))
    rows.append(r)
    # row 1: the FP4 thresholds (midpoints / 12 in float32) and tiny values of both signs
    fp4 = F.get_4bit_type("fp4", device="cpu")
    s = torch.sort(fp4).values
    fm = ((s[:-1] + s[1:]) / 2).float()
    r = torch.zeros(64)
    r[0] = 1.0
    r[1:16] = fm
    r[16:31] = torch.nextafter(fm, torch.full_like(fm, 2.0))
    r[31:46] = torch.nextafter(fm, torch.full_like(fm, -2.0))
    r[46:52] = torch.tensor([1e-3, -1e-3, 0.0, -0.0, 1e-30, -1e-30])
    rows.append(r)
    # row 2: all zeros (absmax 0)
    rows.append(torch.zeros(64))
    # row 3: k/32 - 1 ramp (the worked example) times 3
    rows.append(((torch.arange(64, dtype=torch.float32) - 32) / 32) * 3)
    # row 4: a subnormal-scale block and one large value
    r = torch.randn(64, generator=torch.Generator().manual_seed(7)) * 1e-39
    r[5] = 3e38
    rows.append(r)
    return torch.stack(rows)


def quant4(w, qt, dq=False, with_deq=True):
    q, st = F.quantize_4bit(w, blocksize=64, quant_type=qt, compress_statistics=dq)
    out = {"packed": q.contiguous()}
    if dq:
        out["qabsmax"] = st.absmax.contiguous()
        out["absmax2"] = st.state2.absmax.contiguous()
        out["offset"] = st.offset.reshape(1).float().contiguous()
        out["code2"] = st.state2.code.contiguous()
    else:
        out["absmax"] = st.absmax.contiguous()
    if with_deq:
        out["deq_f32"] = F.dequantize_4bit(q, st, quant_type=qt).float().contiguous()
        out["deq_bf16"] = F.dequantize_4bit(q, st, quant_type=qt).float().to(torch.bfloat16).contiguous()
    return out


def write(name, tensors):
    path = os.path.join(OUT, name)
    save_file({k: v.contiguous() for k, v in tensors.items()}, path)
    print(name, os.path.getsize(path), "bytes")


def main():
    g = torch.Generator().manual_seed(1234)
    cases = {
        "rand": torch.randn(32, 96, generator=g),           # 48 blocks, exact multiple
        "tail": torch.randn(4, 37, generator=g) * 0.02,      # 148 = 2*64 + 20: partial block
        "odd": torch.randn(3, 43, generator=g),              # 129: odd count, padded nibble
        "edge": edge_weights(),
    }
    for qt in ("nf4", "fp4"):
        t = {}
        for name, w in cases.items():
            t[f"{name}.input"] = w
            for k, v in quant4(w, qt).items():
                t[f"{name}.{k}"] = v
        wb = cases["rand"].to(torch.bfloat16)
        t["rand_bf16.input"] = wb
        for k, v in quant4(wb, qt).items():
            t[f"rand_bf16.{k}"] = v
        write(f"{qt}_quantize.safetensors", t)

    # Double quantization: absmax from weights the C++ side regenerates (hash_floats), plus a
    # random weight stored in full.
    t = {}
    w = torch.randn(16, 160, generator=g)
    t["dq_rand.input"] = w
    for k, v in quant4(w, "nf4", dq=True).items():
        t[f"dq_rand.{k}"] = v
    # 600 blocks (three nested blocks of 256, the last partial) from regenerated weights
    w = torch.from_numpy(hash_floats(600 * 64, 99) - np.float32(1.0)).reshape(300, 128)
    w = w * torch.from_numpy(hash_floats(300, 5)).reshape(300, 1)
    for k, v in quant4(w, "fp4", dq=True, with_deq=False).items():
        t[f"dq_hash.{k}"] = v
    write("nf4_dq.safetensors", t)

    # torch's float32 mean (the DQ offset) on hash_floats arrays of several lengths.
    t = {}
    for n in (1, 3, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100, 255, 256, 257, 1000, 1024, 4097, 12288, 36864, 70000):
        x = torch.from_numpy(hash_floats(n, n))
        t[f"mean.{n}"] = x.mean().reshape(1)
    write("torch_mean.safetensors", t)


if __name__ == "__main__":
    main()


def linear4bit_files():
    """bitsandbytes Linear4bit state dicts saved with safetensors, for weights and a bias the
    C++ test regenerates with hash_floats (fp32 weight [48, 80], bias [48])."""
    out_f, in_f = 48, 80
    w = torch.from_numpy(hash_floats(out_f * in_f, 11) - np.float32(1.0)).reshape(out_f, in_f)
    b = torch.from_numpy(hash_floats(out_f, 12) - np.float32(1.0))
    for qt, dq in (("nf4", False), ("nf4", True), ("fp4", True)):
        lin = bnb.nn.Linear4bit(in_f, out_f, bias=True, compute_dtype=torch.float32,
                                compress_statistics=dq, quant_type=qt)
        lin.weight = bnb.nn.Params4bit(w.clone(), requires_grad=False, compress_statistics=dq,
                                       quant_type=qt)
        lin.bias = torch.nn.Parameter(b.clone())
        lin = lin.to("cpu")
        assert lin.weight.bnb_quantized
        sd = {"fc." + k: v.contiguous() for k, v in lin.state_dict().items()}
        name = f"linear4bit_{qt}{'_dq' if dq else ''}.safetensors"
        save_file(sd, os.path.join(OUT, name))
        # the forward output for x = hash inputs, for the layer test
        x = torch.from_numpy(hash_floats(5 * in_f, 13) - np.float32(1.0)).reshape(5, in_f)
        with torch.no_grad():
            y = lin(x)
        save_file({"x": x, "y": y.float().contiguous()},
                  os.path.join(OUT, name.replace(".safetensors", "_forward.safetensors")))
        print(name, list(sd.keys()))


linear4bit_files()


def int8_files():
    """LLM.int8 row-wise quantization of an fp16 activation with outliers (threshold 6) and
    without (threshold 0), and Linear8bitLt's saved keys for a weight."""
    g = torch.Generator().manual_seed(77)
    a = (torch.randn(6, 40, generator=g) * 2).half()
    a[1, 7] = 9.5
    a[4, 30] = -7.25
    t = {"a": a}
    for thr in (0.0, 6.0):
        c, s, cols = F.int8_vectorwise_quant(a.clone(), threshold=thr)
        t[f"t{int(thr)}.codes"] = c.contiguous()
        t[f"t{int(thr)}.absmax"] = s.contiguous()
        if cols is not None and cols.numel():
            t[f"t{int(thr)}.cols"] = cols.to(torch.int64).contiguous()
    write("int8_rowwise.safetensors", t)


int8_files()
