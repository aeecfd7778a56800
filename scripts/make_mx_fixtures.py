#!/usr/bin/env python3
"""Reference bytes for the block formats MXFP8, MXFP4 and NVFP4 (tests/formats/test_mx_fixtures.cpp).

torchao's CPU reference code quantizes fixed inputs; the file holds each input with the codes,
scales and dequantized values torchao gives:
  * MX (torchao.prototype.mx_formats.mx_tensor.to_mx, 1x32 blocks, E8M0 scales): elements
    float8_e4m3fn ("e4m3"), float8_e5m2 ("e5m2") and float4_e2m1fn_x2 ("e2m1"), each with the
    scale modes FLOOR (to_mx's default, the OCP MX spec) and RCEIL (TransformerEngine, cuBLAS);
    dequantized with mx_tensor.to_dtype.
  * NVFP4 (torchao.prototype.mx_formats.nvfp4_tensor.nvfp4_quantize, 1x16 blocks, E4M3 scales)
    with the per-tensor scale per_tensor_amax_to_scale(max |x|) = amax / (448 * 6); dequantized
    with NVFP4Tensor.dequantize. Where every element is zero that formula divides by zero, so the
    script passes 1.0 (what mantissa uses there).
  * NVFP4 with 16x16 tiles sharing a scale (TransformerEngine's 2-D weight quantization, which
    torchao lacks): nvfp4_quantize's float32 steps with each block's amax replaced by its tile's,
    built from torchao's own element cast (f32_to_f4_unpacked) and packing (pack_uint4).
torchao asks for rows that are a whole number of blocks; a row whose last block is short is
quantized padded with zeros and the codes and scales of the real columns are kept.

Inputs: "edge" rows (all zero, NaN, -NaN, +-inf, NaN with inf, subnormal amax, the element
formats' maxima and the powers of two around them, near-float-max and near-min-normal values),
"cut" (rows of 45: a short last block), random normals at 1e-6, 1 and 1e4, and a bfloat16 input.
NVFP4 takes finite inputs (one NaN or inf anywhere makes torchao's per-tensor scale NaN or inf,
so every block is NaN) plus one "nan" and one "inf" tensor that pin that behaviour.

Writes tests/fixtures/formats/mx_fixtures.safetensors.
Usage: /work/venv-ref/bin/python scripts/make_mx_fixtures.py   (torch 2.15, torchao 0.18)
"""
import os
import warnings

import numpy as np
import torch
from safetensors.torch import save_file

warnings.filterwarnings("ignore")
from torchao.prototype.mx_formats.config import ScaleCalculationMode  # noqa: E402
from torchao.prototype.mx_formats.kernels import f32_to_f4_unpacked, pack_uint4  # noqa: E402
from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx  # noqa: E402
from torchao.prototype.mx_formats.nvfp4_tensor import (  # noqa: E402
    NVFP4Tensor,
    nvfp4_quantize,
    per_tensor_amax_to_scale,
)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "formats", "mx_fixtures.safetensors")
torch.set_num_threads(1)
NAN, INF = float("nan"), float("inf")
ELEMENTS = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e2m1": torch.float4_e2m1fn_x2}
MODES = {"floor": ScaleCalculationMode.FLOOR, "rceil": ScaleCalculationMode.RCEIL}


def f32(values):
    return torch.tensor(values, dtype=torch.float32)


def row(values, n=64):
    """values followed by zeros up to n."""
    return list(values) + [0.0] * (n - len(values))


def ramp(n, lo, hi):
    return list(np.linspace(lo, hi, n, dtype=np.float32))


def edge_rows():
    """Rows of 64 (two MX blocks, four NVFP4 blocks), each probing one case."""
    tiny = 2.0 ** -140  # subnormal float32
    rows = [
        row([]),                                                    # all zero
        row([1.0, NAN, -3.0] + ramp(29, -2, 2) + ramp(32, -1, 1)),  # NaN in block 0
        row([1.0, -NAN, 5.0] + ramp(29, -2, 2)),                    # -NaN
        row([INF, 2.0, -INF, 0.5] + ramp(28, -3, 3) + [-INF]),      # +-inf
        row([NAN, INF, -1.0, -INF] + ramp(28, -1, 1)),              # NaN with inf
        row([tiny, -tiny * 3, tiny * 0.5] + [tiny * 7] * 29 + [2.0 ** -149] * 32),  # subnormal amax
        row([448.0, -448.0, 464.0, 57344.0, 6.0, -6.0, 7.0, 5.0] + ramp(24, -448, 448)
            + [57344.0, -61440.0, 6.0, 4.0, 3.0, 2.5, 1.25, 0.25] + ramp(24, -6, 6)),  # maxima
        row([256.0, 255.99998, 512.0, 1.0] + ramp(28, 0, 1)
            + [256.0 * (1 + 2.0 ** -23), 4.0, 4.0000005, 8.0] + ramp(28, -4, 4)),  # powers of two
        row([3.0e38, -3.4e38, 1.0e38] + ramp(29, -1e30, 1e30)
            + [1.2e-38, -1.1754944e-38, 2.0 ** -126] + ramp(29, -1e-38, 1e-38)),  # near float limits
        row([2.0 ** -120 * v for v in ramp(32, -3, 3)] + [2.0 ** 100 * v for v in ramp(32, -7, 7)]),
    ]
    return f32(rows)


def normal(shape, scale, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).float()


def padded(x, block):
    cols = x.shape[-1]
    pad = (-cols) % block
    return torch.nn.functional.pad(x, (0, pad)) if pad else x


def mx_case(out, name, x, elem, mode):
    cols = x.shape[-1]
    xp = padded(x, 32)
    scale, data = to_mx(xp, ELEMENTS[elem], 32, MODES[mode])
    deq = to_dtype(data, scale, ELEMENTS[elem], 32, torch.float32)
    codes = data.view(torch.uint8)
    if elem == "e2m1":
        codes = codes[:, : (cols + 1) // 2]
    else:
        codes = codes[:, :cols]
    key = f"{name}.{elem}.{mode}"
    out[key + ".codes"] = codes.contiguous()
    out[key + ".scales"] = scale.view(torch.uint8)[:, : (cols + 31) // 32].contiguous()
    out[key + ".deq"] = deq[:, :cols].contiguous()


def tensor_scale(x):
    amax = torch.max(torch.abs(x.float()))
    return torch.tensor(1.0) if amax == 0 else per_tensor_amax_to_scale(amax)


def nvfp4_case(out, name, x):
    cols = x.shape[-1]
    xp = padded(x, 16)
    ts = tensor_scale(x)
    scales, codes = nvfp4_quantize(xp, 16, ts)
    t = NVFP4Tensor.to_nvfp4(xp, 16, per_tensor_scale=ts)
    assert torch.equal(t.qdata.view(torch.uint8), codes.view(torch.uint8))
    deq = t.dequantize(torch.float32)
    key = f"{name}.nvfp4"
    out[key + ".codes"] = codes.view(torch.uint8)[:, : (cols + 1) // 2].contiguous()
    out[key + ".scales"] = scales.view(torch.uint8)[:, : (cols + 15) // 16].contiguous()
    out[key + ".tensor_scale"] = ts.reshape(1).float()
    out[key + ".deq"] = deq[:, :cols].contiguous()


def nvfp4_2d_case(out, name, x):
    """nvfp4_quantize's steps (with a per-tensor scale) where a block's amax is its 16x16 tile's."""
    rows, cols = x.shape
    xp = padded(x, 16).float()
    pr = (-rows) % 16
    tiles = torch.nn.functional.pad(xp, (0, 0, 0, pr)) if pr else xp
    tr, tc = tiles.shape[0] // 16, tiles.shape[1] // 16
    tile_amax = torch.amax(torch.abs(tiles).reshape(tr, 16, tc, 16), dim=(1, 3))
    max_abs = tile_amax.repeat_interleave(16, dim=0)[:rows]  # [rows, blocks]
    ts = tensor_scale(x)
    block_scale = max_abs / 6.0
    scaled = torch.clamp(block_scale / ts, min=torch.finfo(torch.float8_e4m3fn).tiny, max=448.0)
    scales = scaled.to(torch.float8_e4m3fn)
    reciprocal = (1.0 / ts) / scales.to(torch.float32)
    data = xp.reshape(rows, -1, 16) * reciprocal.unsqueeze(-1)
    data = torch.clamp(data, -6.0, 6.0).reshape(rows, -1)
    codes = pack_uint4(f32_to_f4_unpacked(data))
    key = f"{name}.nvfp4_2d"
    out[key + ".codes"] = codes.view(torch.uint8)[:, : (cols + 1) // 2].contiguous()
    out[key + ".scales"] = scales.view(torch.uint8)[:, : (cols + 15) // 16].contiguous()
    out[key + ".tensor_scale"] = ts.reshape(1).float()


def main():
    out = {}
    mx_inputs = {
        "edge": edge_rows(),
        "cut": normal((3, 45), 2.0, 1),
        "small": normal((4, 96), 1e-6, 2),
        "unit": normal((8, 96), 1.0, 3),
        "large": normal((4, 96), 1e4, 4),
    }
    for name, x in mx_inputs.items():
        out[name + ".x"] = x.contiguous()
        for elem in ELEMENTS:
            for mode in MODES:
                mx_case(out, name, x, elem, mode)
    xb = normal((4, 64), 3.0, 5).to(torch.bfloat16)
    out["bf16.x"] = xb.contiguous()
    for elem in ELEMENTS:
        for mode in MODES:
            mx_case(out, "bf16", xb, elem, mode)

    finite_edge = edge_rows()[[0, 5, 6, 7, 9]]  # no NaN or inf
    finite_edge[2, 3] = 5.0e4  # the tensor's amax: one block's scale is 448
    nv_inputs = {
        "nv_edge": finite_edge,
        "nv_zero": torch.zeros(2, 32),
        "nv_nan": normal((2, 32), 1.0, 6).index_put_((torch.tensor([1]), torch.tensor([3])), f32(NAN)),
        "nv_inf": normal((2, 32), 1.0, 7).index_put_((torch.tensor([0]), torch.tensor([9])), f32(INF)),
        "nv_cut": normal((3, 45), 2.0, 8),
        "nv_small": normal((4, 64), 1e-6, 9),
        "nv_unit": normal((8, 64), 1.0, 10),
        "nv_large": normal((4, 64), 1e4, 11),
        "nv_spread": normal((16, 64), 1.0, 12) * torch.logspace(-6, 6, 64).float(),
    }
    for name, x in nv_inputs.items():
        out[name + ".x"] = x.contiguous()
        nvfp4_case(out, name, x)
    xb = normal((4, 64), 3.0, 13).to(torch.bfloat16)
    out["nv_bf16.x"] = xb.contiguous()
    nvfp4_case(out, "nv_bf16", xb)
    for name, x in {"w2d": normal((40, 72), 1.0, 14) * torch.logspace(-3, 3, 72).float(),
                    "w2d_cut": normal((19, 45), 1.0, 15)}.items():
        out[name + ".x"] = x.contiguous()
        nvfp4_2d_case(out, name, x)

    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(out, OUT)
    print(f"wrote {os.path.normpath(OUT)}: {len(out)} tensors, {os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
