#!/usr/bin/env python3
"""Reads the event file written by build/example_logger_demo with TensorBoard's own loader and
checks every scalar (tags, steps, float32 values). Needs `pip install tensorboard`.
Run from the repository root after a build: python3 scripts/tensorboard_check.py
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError as e:
    print(f"SKIP: {e}; pip install tensorboard")
    sys.exit(0)


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/example_logger_demo"
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([binary, tmp], check=True, capture_output=True, text=True)
        csv_dir, event_file = out.stdout.split()
        acc = EventAccumulator(os.path.dirname(event_file))
        acc.Reload()
        tags = sorted(acc.Tags()["scalars"])
        failures = 0
        if tags != ["train_loss", "val_acc"]:
            print(f"FAIL tags {tags}")
            return 1
        loss = acc.Scalars("train_loss")
        want = [(s, float(np.float32(1.0 / (s + 1)))) for s in range(20)]
        got = [(e.step, e.value) for e in loss]
        if got != want:
            print(f"FAIL train_loss {got[:3]}..., want {want[:3]}...")
            failures += 1
        val = [(e.step, e.value) for e in acc.Scalars("val_acc")]
        want_val = [(s, float(np.float32(0.5 + s / 100.0))) for s in range(4, 20, 5)]
        if val != want_val:
            print(f"FAIL val_acc {val}, want {want_val}")
            failures += 1
        with open(os.path.join(csv_dir, "metrics.csv")) as f:
            lines = f.read().splitlines()
        if lines[0] != "train_loss,val_acc,step" or len(lines) != 21:
            print(f"FAIL metrics.csv header/rows: {lines[:2]} ({len(lines)} lines)")
            failures += 1
        print(f"tensorboard read {len(loss)} + {len(val)} scalars; {failures} failures")
        print("OK" if failures == 0 else "FAILED")
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
