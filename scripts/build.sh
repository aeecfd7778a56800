#!/usr/bin/env bash
# Configures and builds mantissa (Release) into build/.
#   scripts/build.sh [--command] [CMake arguments...]
# --command builds the library and the command (build/mantissa) only, what `scripts/train.sh`
# needs; without it everything is built: the command, the tests, the examples (`scripts/test.sh`).
# Other arguments go to CMake.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=()
what="everything: the mantissa library, command, tests and examples"
estimate="~15 min"
if [ "${1:-}" = "--command" ]; then
  shift
  targets=(mantissa_cli)
  what="the mantissa library and command"
  estimate="6-9 min"
fi

scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMANTISSA_FAST_BUILD=ON "$@" >/dev/null
echo "mantissa: building ${what} (${estimate} on 2 cores the first time; later builds" \
     "compile only what changed, and ccache reuses what another checkout compiled)"
ninja -C build "${targets[@]}"
