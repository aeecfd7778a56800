#!/usr/bin/env bash
# Set up, build, and run the whole test suite with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
# The layering check first: it needs no build and fails fast (docs/design.md, "Layers").
scripts/check_layers.sh
scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 600
