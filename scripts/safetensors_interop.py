#!/usr/bin/env python3
"""Checks mantissa's safetensors files against the reference Python implementation.

1. build/example_safetensors_check writes a file; the `safetensors` package must load it with
   the same names, dtypes, shapes and values (bf16 only when torch is importable).
2. Python writes a file with numpy (and torch for bf16 when available); mantissa must read the
   same values.

Needs `pip install safetensors numpy` (torch optional). Run from the repository root after a
build: python3 scripts/safetensors_interop.py [--bin build/example_safetensors_check]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file
except ImportError as e:  # not part of the C++ suite: say what is missing and stop
    print(f"SKIP: {e}; pip install safetensors numpy")
    sys.exit(0)

try:
    import torch  # noqa: F401
    from safetensors.torch import load_file as torch_load, save_file as torch_save
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def ramp(n):
    return [(i - 3) * 0.75 for i in range(n)]


# What example_safetensors_check write produces (name -> dtype, shape, values).
EXPECTED = {
    "f64": ("F64", [2, 3], ramp(6)), "f32": ("F32", [3, 2], ramp(6)),
    "f16": ("F16", [4], ramp(4)), "bf16": ("BF16", [2, 2], ramp(4)),
    "i64": ("I64", [3], [-5, 0, 7]), "i32": ("I32", [2], [1, -2]),
    "i8": ("I8", [2], [-128, 127]), "u8": ("U8", [2], [0, 255]),
    "bool": ("BOOL", [3], [True, False, True]), "scalar": ("F32", [], [2.5]),
    "empty": ("F32", [0, 3], []),
}
NP_DTYPE = {"F64": "float64", "F32": "float32", "F16": "float16", "I64": "int64",
            "I32": "int32", "I8": "int8", "U8": "uint8", "BOOL": "bool"}


def check_mantissa_written(binary, tmp):
    path = os.path.join(tmp, "from_mantissa.safetensors")
    subprocess.run([binary, "write", path], check=True)
    failures = 0
    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
        assert meta == {"written_by": "mantissa"}, meta
        names = set(f.keys())
    assert names == set(EXPECTED), names
    torch_tensors = torch_load(path) if HAVE_TORCH else None
    with safe_open(path, framework="numpy") as f:
        for name, (dtype, shape, values) in EXPECTED.items():
            if dtype == "BF16":
                if torch_tensors is None:
                    print(f"  {name}: bf16 skipped (numpy has no bfloat16; torch not installed)")
                    continue
                got = torch_tensors[name].float().numpy()
            else:
                got = f.get_tensor(name)
                if str(got.dtype) != NP_DTYPE[dtype]:
                    print(f"  FAIL {name}: dtype {got.dtype}, want {NP_DTYPE[dtype]}")
                    failures += 1
            if list(got.shape) != shape or got.reshape(-1).tolist() != values:
                print(f"  FAIL {name}: {got.shape} {got.reshape(-1).tolist()}, want {shape} {values}")
                failures += 1
    print(f"mantissa -> python: {len(EXPECTED)} tensors checked, {failures} failures")
    return failures


def check_python_written(binary, tmp):
    path = os.path.join(tmp, "from_python.safetensors")
    rng = np.random.default_rng(0)
    arrays = {
        "f64": rng.standard_normal((3, 4)),
        "f32": rng.standard_normal((5,)).astype(np.float32),
        "f16": np.array([[0.5, -0.0], [65504.0, 6e-8]], dtype=np.float16),
        "i64": np.array([-(2**62), 3], dtype=np.int64),
        "i32": np.arange(6, dtype=np.int32).reshape(2, 3),
        "i8": np.array([-7, 7], dtype=np.int8),
        "u8": np.array([[200]], dtype=np.uint8),
        "bool": np.array([False, True]),
        "scalar": np.array(1.25, dtype=np.float64),
        "empty": np.zeros((2, 0), dtype=np.float32),
        "model.layer.0.weight": rng.standard_normal((4, 2)).astype(np.float32),
    }
    save_file(arrays, path, metadata={"format": "np", "epoch": "3"})
    out = subprocess.run([binary, "read", path], check=True, capture_output=True, text=True)
    got = json.loads(out.stdout)
    failures = 0
    if got["metadata"] != {"format": "np", "epoch": "3"}:
        print(f"  FAIL metadata {got['metadata']}")
        failures += 1
    for name, a in arrays.items():
        t = got["tensors"].get(name)
        want = [float(x) for x in a.reshape(-1).tolist()]
        if t is None or t["shape"] != list(a.shape) or t["values"] != want:
            print(f"  FAIL {name}: {t}, want {list(a.shape)} {want}")
            failures += 1
    if HAVE_TORCH:
        tpath = os.path.join(tmp, "from_torch.safetensors")
        torch_save({"w": torch.tensor([1.5, -2.0, 3.0e38], dtype=torch.bfloat16)}, tpath)
        out = subprocess.run([binary, "read", tpath], check=True, capture_output=True, text=True)
        t = json.loads(out.stdout)["tensors"]["w"]
        want = torch.tensor([1.5, -2.0, 3.0e38], dtype=torch.bfloat16).float().tolist()
        if t["dtype"] != "BF16" or t["values"] != want:
            print(f"  FAIL torch bf16: {t}, want {want}")
            failures += 1
    print(f"python -> mantissa: {len(arrays) + HAVE_TORCH} tensors checked, {failures} failures")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/example_safetensors_check")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        failures = check_mantissa_written(args.bin, tmp) + check_python_written(args.bin, tmp)
    print("OK" if failures == 0 else f"FAILED ({failures})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
