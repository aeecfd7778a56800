#!/usr/bin/env bash
# Installs the Debian 12 packages mantissa needs, and only those that are missing, so it is
# cheap to run before every build. Needs root (or sudo) only when something is missing.
# Extra package names given as arguments are installed the same way (scripts/fuzz.sh adds clang).
set -euo pipefail

PACKAGES=(
  g++ cmake ninja-build ccache pkgconf  # toolchain (ccache only speeds up rebuilds; pkgconf finds PCRE2)
  libdnnl-dev                           # oneDNN 2.6: f32/bf16 matmul
  ocl-icd-opencl-dev                    # dnnl-config.cmake requires OpenCL (a Recommends only)
  libgtest-dev libgmock-dev             # tests
  libbenchmark-dev                      # bench/
  nlohmann-json3-dev libcli11-dev libfmt-dev zlib1g-dev
  libpcre2-dev libutf8proc-dev          # tokenizers: Unicode regexes, NFC (docs/tokenizers.md)
  dataset-fashion-mnist                 # the default data set (/usr/share/datasets/fashion-mnist)
  fortunes                              # default text corpus of --model gpt (/usr/share/games/fortunes)
  libopenmpi-dev openmpi-bin            # data-parallel training: --devices N, mpirun (docs/distributed.md)
)
PACKAGES+=("$@")

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "mantissa setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
