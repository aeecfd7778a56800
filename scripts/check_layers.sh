#!/usr/bin/env bash
# Checks that every #include "..." in src/, include/, models/, recipes/ and apps/ points down the layer
# order (docs/design.md, "Layers"): a file may include headers of its own layer and of the
# layers below it, never of a layer above. Prints one line per violation (file, line, both
# layers) and exits 1; exits 0 when the tree is clean.
#
#   scripts/check_layers.sh [--root DIR]   check the tree at DIR (default: this repository)
#   scripts/check_layers.sh --self-test    prove the checker fails on a violating tree
set -euo pipefail

# The layer order, lowest first, written once: a name and the paths (relative to the repository
# root) whose files belong to it. A file belongs to the layer of its longest matching path.
# autograd shares core's layer: Tensor's views and casts record graph nodes, and the graph holds
# Tensors. amp here is autocast (below ops, which call it); the GradScaler lives in optim.
# report is a folder of train (namespace mantissa::train) below the rest of it: the loggers,
# the profiler, the progress bar's text and the SVG/HTML report know nothing of the Trainer,
# whose callbacks feed them.
LAYERS=(
  "core     src/core include/mantissa/core include/mantissa/version.h include/mantissa/autograd"
  "io       src/io include/mantissa/io"
  "data     src/data include/mantissa/data"
  "text     src/text include/mantissa/text"
  "kernels  src/kernels include/mantissa/kernels"
  "formats  src/formats include/mantissa/formats"
  "gemm     src/gemm include/mantissa/gemm"
  "amp      src/amp include/mantissa/amp"
  "ops      src/ops include/mantissa/ops"
  "nn       src/nn include/mantissa/nn"
  "quant    src/quant include/mantissa/quant"
  "fp8      src/fp8 include/mantissa/fp8"
  "optim    src/optim include/mantissa/optim"
  "dist     src/dist include/mantissa/dist"
  "report   src/train/report include/mantissa/train/report"
  "train    src/train include/mantissa/train"
  "umbrella include/mantissa/mantissa.h"
  "models   models include/mantissa/models"
  "recipes  recipes include/mantissa/recipes"
  "apps     apps"
)
SCANNED=(src include models recipes apps)

root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
  --root)
    root=$(cd "$2" && pwd)
    ;;
  --self-test)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/src/core" "$tmp/src/ops" "$tmp/include/mantissa/ops" "$tmp/include/mantissa/core"
    echo '#pragma once' > "$tmp/include/mantissa/core/tensor.h"
    echo '#pragma once' > "$tmp/include/mantissa/ops/matmul.h"
    printf '#include "mantissa/core/tensor.h"\n' > "$tmp/src/ops/matmul.cpp"
    printf '#include "mantissa/core/tensor.h"\n' > "$tmp/src/core/tensor.cpp"
    if ! "$0" --root "$tmp" > "$tmp/out" 2>&1; then
      echo "self-test: the checker rejected a clean tree:"; cat "$tmp/out"; exit 1
    fi
    # core including an ops header: must fail and name file, line and both layers.
    printf '// a comment\n#include "mantissa/ops/matmul.h"\n' >> "$tmp/src/core/tensor.cpp"
    if "$0" --root "$tmp" > "$tmp/out" 2>&1; then
      echo "self-test: the checker accepted core including ops"; exit 1
    fi
    if ! grep -q 'src/core/tensor.cpp:3: .*core.*ops' "$tmp/out"; then
      echo "self-test: unexpected report:"; cat "$tmp/out"; exit 1
    fi
    echo "check_layers self-test passed"
    exit 0
    ;;
  "") ;;
  *)
    echo "usage: $0 [--root DIR | --self-test]" >&2
    exit 2
    ;;
esac
cd "$root"

declare -A rank_of_name
layer_names=()
for i in "${!LAYERS[@]}"; do
  read -r name _ <<< "${LAYERS[$i]}"
  layer_names+=("$name")
  rank_of_name[$name]=$i
done

# Prints the layer name of a repository path, or nothing when no layer claims it.
layer_of() {
  local path=$1 best="" best_len=0 entry name prefix
  for entry in "${LAYERS[@]}"; do
    read -r name rest <<< "$entry"
    for prefix in $rest; do
      if [[ $path == "$prefix" || $path == "$prefix"/* ]] && (( ${#prefix} > best_len )); then
        best=$name
        best_len=${#prefix}
      fi
    done
  done
  echo "$best"
}

# Resolves an include as the compiler would with the include paths of CMakeLists.txt: the
# including file's folder, include/, src/, apps/.
resolve() {
  local from_dir=$1 inc=$2 cand
  for cand in "$from_dir/$inc" "include/$inc" "src/$inc" "apps/$inc"; do
    if [[ -f $cand ]]; then
      realpath -m --relative-to=. "$cand"
      return
    fi
  done
}

violations=0
while IFS= read -r file; do
  file_layer=$(layer_of "$file")
  if [[ -z $file_layer ]]; then
    echo "$file: belongs to no layer; add its folder to LAYERS in scripts/check_layers.sh"
    violations=$((violations + 1))
    continue
  fi
  while IFS=: read -r line inc; do
    # Headers the build writes (cmake/*.cmake into the build folder) belong to no layer.
    [[ $inc == mantissa_git_revision.h ]] && continue
    target=$(resolve "$(dirname "$file")" "$inc")
    if [[ -z $target ]]; then
      echo "$file:$line: cannot find \"$inc\" in the folder, include/, src/ or apps/"
      violations=$((violations + 1))
      continue
    fi
    target_layer=$(layer_of "$target")
    if [[ -z $target_layer ]]; then
      echo "$file:$line: \"$inc\" ($target) belongs to no layer"
      violations=$((violations + 1))
    elif (( ${rank_of_name[$target_layer]} > ${rank_of_name[$file_layer]} )); then
      echo "$file:$line: $file_layer includes \"$inc\" from $target_layer, a higher layer"
      violations=$((violations + 1))
    fi
  done < <(grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
           sed -E 's/^([0-9]+):[^"]*"([^"]+)".*/\1:\2/')
done < <(for d in "${SCANNED[@]}"; do
           [[ -d $d ]] && find "$d" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cc' \)
         done | sort)

if (( violations > 0 )); then
  echo "check_layers: $violations violation(s); the order, lowest first: ${layer_names[*]}"
  exit 1
fi
echo "check_layers: every include points down (${layer_names[*]})"
