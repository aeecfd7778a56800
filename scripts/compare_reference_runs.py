#!/usr/bin/env python3
"""Compare two folders written by scripts/reference_runs.sh.

Every field must be identical (floats compared exactly, as written) except those that measure
time or memory, which vary from run to run. Exit status 1 and one line per difference otherwise.
"""
import json
import pathlib
import re
import sys

VOLATILE = re.compile(r"seconds|per_second|memory|bytes")


def diff(a, b, where, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if VOLATILE.search(key):
                continue
            if key not in a or key not in b:
                out.append(f"{where}.{key}: present on one side only")
            else:
                diff(a[key], b[key], f"{where}.{key}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: length {len(a)} vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{where}[{i}]", out)
    elif a != b or type(a) is not type(b):
        out.append(f"{where}: {a!r} vs {b!r}")


def main():
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} <before-dir> <after-dir>")
    before, after = map(pathlib.Path, sys.argv[1:])
    names = sorted(p.name for p in before.glob("*.json"))
    if not names:
        sys.exit(f"no metrics JSON in {before}")
    problems = []
    for name in names:
        other = after / name
        if not other.exists():
            problems.append(f"{name}: missing in {after}")
            continue
        diff(json.loads((before / name).read_text()), json.loads(other.read_text()), name,
             problems)
    for p in problems:
        print(p)
    print(f"{len(names)} runs compared, {len(problems)} differences")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
