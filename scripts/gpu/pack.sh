#!/usr/bin/env bash
# Packs what a GPU check needs into .devcarry/ (ignored by git): the stripped test program,
# command and GPU benchmark from build/, the shared libraries they load that a bare CUDA machine
# may lack (oneDNN, fmt, Open MPI, ...; never glibc or libstdc++, nor cuBLAS or cuDNN, which
# are opened at run time from the machine's toolkit or PyTorch's wheels), and a 10,000-image
# Fashion-MNIST (the test images stand in for the training set). scripts/gpu/check.sh runs it
# there. For machines lent without network access (docs/cuda.md, "Checking on a GPU").
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.devcarry
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib" "$out/data"
exclude=$(git rev-parse --git-path info/exclude)  # a worktree's .git is a file
grep -qx '/.devcarry/' "$exclude" 2>/dev/null || echo '/.devcarry/' >> "$exclude"
ninja -C build mantissa_tests mantissa_cli cuda_bench
for b in mantissa_tests mantissa cuda_bench; do strip -o "$out/bin/$b" "build/$b"; done
ldd build/mantissa_tests build/mantissa | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux|libcublas|libcublasLt|libcudnn[a-z_]*|libcudart|libcuda)[.-]' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
src=/usr/share/datasets/fashion-mnist
cp "$src/t10k-images-idx3-ubyte.gz" "$out/data/train-images-idx3-ubyte.gz"
cp "$src/t10k-labels-idx1-ubyte.gz" "$out/data/train-labels-idx1-ubyte.gz"
cp "$src"/t10k-*.gz "$out/data/"
tar -C "$out" -cf - bin lib data | xz -T0 -6 > "$out.tar.xz"
rm -rf "$out" && mkdir -p "$out" && mv "$out.tar.xz" "$out/bundle.tar.xz"
ls -la "$out"
