#!/usr/bin/env python3
"""Reference bytes for FP8 block scaling (tests/fp8/test_fp8_block.cpp).

A direct transcription, in plain Python, of TransformerEngine 2.x's documented block
quantization (Float8BlockScaling; transformer_engine/common/recipe/recipe_common.cuh
compute_scale_from_amax and compute_scale_from_types, as the kernels
quantize_transpose_vector_blockwise.cu (1x128 tiles) and quantize_transpose_square_blockwise.cu
(128x128 blocks) call them). It is not TE's code and needs no GPU; every float32 step is done in
Python floats (doubles) and rounded to float32, which gives the correctly rounded float32 result
of each single multiplication and division:
  amax      = max |x| over the tile, NaN passed over (the kernels' fmaxf from 0), inf kept
  amax      = max(amax, epsilon)
  scale     = 1 if amax is 0, inf or NaN; else f32(fp8_max / amax), replaced by the source
              dtype's largest finite value if that is inf, mantissa bits cleared with power-2
  codes     = E4M3 of f32(x * scale), round to nearest even, saturating to +-448, NaN -> 0x7F
  scale_inv = f32(1.0 / scale) (computed in double, as the kernels' 1.0 / scale)
Tiles and blocks cut by the tensor's edge take the elements that remain (TE pads with zeros,
which leaves every amax unchanged).

With ml_dtypes importable the E4M3 rounding is also checked against it, and with torch and
torchao importable (torchao 0.18's prototype blockwise_fp8_training, CPU reference functions
torch_blockwise_scale_act_quant_lhs and torch_blockwise_scale_weight_quant, which compute the same
unrounded scales for tiles whose amax is above their 1e-12 floor) the transcription's codes and
scale_inv with fp32 scales are checked against torchao's on random 1x128 tiles and 128x128 blocks.

Writes tests/fixtures/fp8/fp8_block_fixtures.safetensors: per case "<case>.input" (F32 or BF16),
"<case>.codes" (U8), "<case>.scale_inv" (F32) and "<case>.params" (F32: tile rows 1 or 128,
power_2 0/1, epsilon).
Usage: python3 scripts/make_fp8_block_fixtures.py   (plain Python 3; a Python with ml_dtypes,
       torch 2.15 and torchao 0.18 also runs the cross-checks above)
"""
import json
import math
import os
import random
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "fp8",
                   "fp8_block_fixtures.safetensors")
E4M3_MAX = 448.0
FLT_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
BF16_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7F0000))[0]
NAN, INF = float("nan"), float("inf")


def f32(x):
    """x rounded to float32 (round to nearest even; overflow to inf)."""
    if math.isnan(x) or math.isinf(x):
        return x
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        # struct refuses values past float32's range; they round to +-inf, except those below
        # FLT_MAX + half an ulp, which round to FLT_MAX.
        half_ulp = 2.0 ** (127 - 24)
        return math.copysign(FLT_MAX if abs(x) < FLT_MAX + half_ulp else INF, x)


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bf16(x):
    """float32 x rounded to bfloat16 (RNE), as a float."""
    b = f32_bits(x)
    if math.isnan(x):
        return x
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return struct.unpack("<f", struct.pack("<I", b << 16))[0]


def e4m3(v):
    """The E4M3 code of float32 v: RNE, saturating to +-448, NaN -> 0x7F."""
    if math.isnan(v):
        return 0x7F
    sign = 0x80 if math.copysign(1.0, v) < 0 else 0
    a = abs(v)
    if a >= E4M3_MAX:
        return sign | 0x7E
    if a < 2.0 ** -6:  # subnormal: multiples of 2^-9
        q = round(a * 2.0 ** 9)  # exact product; round() is half to even
        return sign | q  # q == 8 is 2^-6, code 0x08
    m, e = math.frexp(a)  # a = m * 2^e, m in [0.5, 1)
    e -= 1
    q = round((m * 2.0 - 1.0) * 8.0)
    if q == 8:
        e, q = e + 1, 0
    if e > 8 or (e == 8 and q == 7):
        return sign | 0x7E
    return sign | ((e + 7) << 3) | q


def scale_of(amax, power_2, epsilon, value_for_inf):
    if amax < epsilon:
        amax = epsilon
    if math.isinf(amax) or amax == 0.0 or math.isnan(amax):
        return 1.0
    s = f32(E4M3_MAX / amax)
    if math.isinf(s):
        s = value_for_inf
    if power_2:
        s = struct.unpack("<f", struct.pack("<I", f32_bits(s) & 0xFF800000))[0]
    return s


def tile_amax(values):
    m = 0.0
    for v in values:
        a = abs(v)
        if not math.isnan(a) and a > m:
            m = a
    return m


def quantize(x, rows, cols, tile_rows, power_2, epsilon, value_for_inf):
    """x: row-major list of floats. Returns (codes, scale_inv) as lists."""
    codes = [0] * (rows * cols)
    tiles_r = (rows + tile_rows - 1) // tile_rows
    tiles_c = (cols + 127) // 128
    scale_inv = []
    for bi in range(tiles_r):
        for bj in range(tiles_c):
            r0, r1 = bi * tile_rows, min(rows, (bi + 1) * tile_rows)
            c0, c1 = bj * 128, min(cols, (bj + 1) * 128)
            idx = [r * cols + c for r in range(r0, r1) for c in range(c0, c1)]
            s = scale_of(tile_amax([x[i] for i in idx]), power_2, epsilon, value_for_inf)
            scale_inv.append(f32(1.0 / s))
            for i in idx:
                codes[i] = e4m3(f32(x[i] * s))
    return codes, scale_inv


def edge_matrix(rows, cols, rng):
    """Random normals at several magnitudes with edge tiles written over them."""
    x = [f32(rng.gauss(0.0, 1.0) * 10.0 ** rng.choice([-3, 0, 2])) for _ in range(rows * cols)]

    def put(r, c0, c1, fn):
        for c in range(c0, min(c1, cols)):
            x[r * cols + c] = f32(fn(c))

    # row 0: all zero (every tile of it, the cut one included)
    put(0, 0, cols, lambda c: 0.0)
    # row 1: NaN in tile 0 (amax 0.64 otherwise), +inf in tile 1, -inf and NaN in tile 2
    put(1, 0, 128, lambda c: (c - 64) * 0.01)
    x[1 * cols + 5] = NAN
    x[1 * cols + 130] = INF
    x[1 * cols + 260] = -INF
    x[1 * cols + 261] = NAN
    # row 2: subnormal amax (tile 0), amax 1e-38 whose scale overflows (tile 1), 1e-30 (tile 2)
    put(2, 0, 128, lambda c: (c % 7 - 3) * 1e-41)
    put(2, 128, 256, lambda c: (c % 5 - 2) * 0.5e-38)
    put(2, 256, cols, lambda c: (c % 3 - 1) * 1e-30)
    # row 3: +-448 exactly in tile 0 (scale 1 before rounding), 1000 in tile 1, amax 1 in tile 2
    put(3, 0, 128, lambda c: 448.0 if c == 0 else (-448.0 if c == 1 else (c - 64) * 3.3))
    put(3, 128, 256, lambda c: 1000.0 if c == 200 else (c - 190) * 1.7)
    put(3, 256, cols, lambda c: 1.0 if c == 256 else (c - 280) / 57.0)
    # row 4: values at E4M3 rounding midpoints once scaled by 1 (amax 448): 1.0625 lies halfway
    # between 1 and 1.125, 17 between 16 and 18, 0.0029296875 (1.5 * 2^-9) between subnormals
    put(4, 0, 128, lambda c: [448.0, 1.0625, -17.0, 0.0029296875, 1.1875, 0.0009765625][c % 6])
    return x


def cases():
    rng = random.Random(20261128)
    out = []
    m1 = edge_matrix(8, 300, rng)
    out.append(("tiles_f32", "F32", 8, 300, 1, True, 0.0, m1))
    out.append(("tiles_f32_fp32_scales", "F32", 8, 300, 1, False, 0.0, m1))
    out.append(("tiles_f32_epsilon", "F32", 8, 300, 1, True, 1e-3, m1))
    mb = [bf16(v) for v in m1]
    out.append(("tiles_bf16_fp32_scales", "BF16", 8, 300, 1, False, 0.0, mb))
    # 128x128 blocks over 130 x 140: blocks of 128 x 128, 128 x 12, 2 x 128 and 2 x 12.
    rows, cols = 130, 140
    m2 = [f32(rng.gauss(0.0, 1.0)) for _ in range(rows * cols)]
    m2[5 * cols + 7] = 448.0  # block (0, 0): amax 448
    for r in range(128):  # block (0, 1): subnormal amax
        for c in range(128, cols):
            m2[r * cols + c] = f32(((r + c) % 9 - 4) * 1e-41)
    m2[129 * cols + 3] = NAN  # block (1, 0): NaN and -inf
    m2[128 * cols + 100] = -INF
    for r in range(128, rows):  # block (1, 1): all zero
        for c in range(128, cols):
            m2[r * cols + c] = 0.0
    out.append(("blocks_f32", "F32", rows, cols, 128, True, 0.0, m2))
    out.append(("blocks_f32_fp32_scales", "F32", rows, cols, 128, False, 0.0, m2))
    return out


def pack(dtype, values):
    if dtype == "F32":
        return b"".join(struct.pack("<f", v) for v in values)
    if dtype == "BF16":
        return b"".join(struct.pack("<H", f32_bits(v) >> 16) for v in values)
    return bytes(values)


def check_against_ml_dtypes():
    try:
        import ml_dtypes
        import numpy as np
    except ImportError:
        return
    vals = np.array([struct.unpack("<f", struct.pack("<I", b))[0]
                     for b in range(0, 0x43E80000, 4099)], dtype=np.float32)
    vals = vals[np.abs(vals) < E4M3_MAX]  # ml_dtypes does not saturate
    ref = vals.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert all(e4m3(float(v)) == int(c) for v, c in zip(vals, ref)), "E4M3 rounding differs"
    print("E4M3 rounding agrees with ml_dtypes on", len(vals), "values")


def check_against_torchao():
    try:
        import torch
        from torchao.prototype.blockwise_fp8_training.kernels import (
            torch_blockwise_scale_act_quant_lhs, torch_blockwise_scale_weight_quant)
    except ImportError:
        return
    rng = random.Random(7)
    rows, cols = 256, 384
    x = [f32(rng.gauss(0.0, 1.0) * 10.0 ** rng.choice([-4, -1, 0, 3])) for _ in range(rows * cols)]
    t = torch.tensor(x, dtype=torch.float32).reshape(rows, cols)
    for fn, tile_rows in ((torch_blockwise_scale_act_quant_lhs, 1),
                          (torch_blockwise_scale_weight_quant, 128)):
        q, inv = fn(t.contiguous(), 128)
        codes, scale_inv = quantize(x, rows, cols, tile_rows, False, 0.0, FLT_MAX)
        assert q.view(torch.uint8).flatten().tolist() == codes, "codes differ from torchao's"
        assert [f32_bits(v) for v in inv.flatten().tolist()] == [f32_bits(v) for v in scale_inv], \
            "scale_inv differs from torchao's"
    print("codes and scale_inv agree with torchao's blockwise references (fp32 scales)")


def main():
    check_against_ml_dtypes()
    check_against_torchao()
    tensors = {}
    for name, dtype, rows, cols, tile_rows, power_2, eps, x in cases():
        for_inf = BF16_MAX if dtype == "BF16" else FLT_MAX
        codes, scale_inv = quantize(x, rows, cols, tile_rows, power_2, eps, for_inf)
        tensors[name + ".input"] = (dtype, [rows, cols], pack(dtype, x))
        tensors[name + ".codes"] = ("U8", [rows, cols], pack("U8", codes))
        tensors[name + ".scale_inv"] = ("F32", [len(scale_inv)], pack("F32", scale_inv))
        params = [float(tile_rows), 1.0 if power_2 else 0.0, eps]
        tensors[name + ".params"] = ("F32", [3], pack("F32", [f32(p) for p in params]))
    header, blob = {"__metadata__": {"script": "scripts/make_fp8_block_fixtures.py"}}, b""
    for key in sorted(tensors):
        dtype, shape, data = tensors[key]
        header[key] = {"dtype": dtype, "shape": shape,
                       "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)
    print("wrote", os.path.normpath(OUT), len(tensors), "tensors")


if __name__ == "__main__":
    main()
