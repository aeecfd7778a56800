#!/usr/bin/env bash
# The GPU check, run on a machine with an NVIDIA GPU over a checkout that carries .devcarry/
# (scripts/gpu/pack.sh): the CUDA tests, the GEMM/MLP benchmark beside PyTorch, and `mantissa
# train --accelerator gpu` in each GPU precision. Logs go to $OUT (or /tmp/gpu-check).
#   scripts/gpu/check.sh [tests|gemm|attn|mlpbench|gptbench|graphs|cligraphs|bench|train|gpt|qlora|fp8|conv|all]...
# (gemm, attn, mlpbench, gptbench: the GEMM, attention, MLP or GPT rows of the benchmark alone;
# fp8: the transformer-engine precision on the GPU, the MLP beside the same run on this machine's
# CPU, and the GPT beside bf16-mixed; qlora: the GPT with LoRA on 4-bit weights; conv: the CNN's
# samples/s on the GPU in bf16-mixed and 32-true, cuDNN's convolutions; graphs: the GPTs'
# steps eager and with forward and backward replayed as a CUDA graph, train::GraphedStep, beside
# PyTorch's; cligraphs: `mantissa train --model gpt` with and without --cuda-graphs.)
set -uo pipefail
cd "$(dirname "$0")/../.."
# A rerun replaces the metrics JSON files in $out (--overwrite-output-dir: mantissa refuses them
# otherwise as an earlier run's).
out=${OUT:-/tmp/gpu-check}; mkdir -p "$out"
m=/tmp/mantissa-gpu
if [ ! -x $m/bin/mantissa ]; then
  mkdir -p $m && tar -C $m -xJf .devcarry/bundle.tar.xz || exit 1
fi
export LD_LIBRARY_PATH=$m/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# cuBLAS: the toolkit's, else the one PyTorch's wheels carry.
if ! ldconfig -p | grep -q 'libcublasLt.so.13'; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           $(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)/nvidia/cu13/lib; do
    [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d && break
  done
fi
# cuDNN (conv2d on a GPU opens it at run time, never packed: hundreds of MB): the toolkit's, else
# the one PyTorch's wheels carry (nvidia/cudnn/lib, or nvidia/cu13/lib), else the first found
# under Python's site-packages.
if ! ldconfig -p | grep -q 'libcudnn.so.9'; then
  wheels=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)
  found=
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           ${wheels:+$wheels/nvidia/cudnn/lib} ${wheels:+$wheels/nvidia/cu13/lib}; do
    [ -e "$d/libcudnn.so.9" ] && found=$d && break
  done
  if [ -z "$found" ]; then
    for site in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
      f=$(find "$site" -name 'libcudnn.so.9' 2>/dev/null | head -1)
      [ -n "$f" ] && found=$(dirname "$f") && break
    done
  fi
  if [ -n "$found" ]; then
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$found
    echo "cuDNN: $found/libcudnn.so.9"
  else
    echo "libcudnn.so.9 not found: GPU convolutions will fail"
  fi
fi
steps=("$@"); [ ${#steps[@]} -eq 0 ] && steps=(all)
has() { for s in "${steps[@]}"; do [ "$s" = "$1" ] || [ "$s" = all ] && return 0; done; return 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader
$m/bin/mantissa info 2>&1 | sed -n '/^GPUs/,/^$/p;/^Precision with/,$p' | tee "$out/info.log"
if has tests; then
  timeout 120 $m/bin/mantissa_tests --gtest_filter='Cuda*:*Cuda*:Cudnn*:ConvFullFp32*:GraphedStep*:LanguageModel.Graphed*' --gtest_brief=1 \
    > "$out/tests.log" 2>&1
  echo "tests rc=$?"; grep -E '^\[  (FAILED|PASSED|SKIPPED) |tests ran|FAILED TEST' "$out/tests.log" | tail -40
fi
# One part of the benchmark beside PyTorch: gemm, attn, mlp (step mlpbench) or gpt (step gptbench).
for part in gemm attn mlp gpt; do
  step=$part; [ $part = gemm ] || [ $part = attn ] || step=${part}bench
  if has $step && ! has bench; then
    timeout 240 bench/cuda/run.sh --mantissa-bench $m/bin/cuda_bench $part > "$out/$step.log" 2>&1
    echo "$step rc=$?"; grep -E "^$part|^speedup|x\$" "$out/$step.log"
  fi
done
if has graphs; then
  timeout 300 bench/cuda/run.sh --mantissa-bench $m/bin/cuda_bench graphs > "$out/graphs.log" 2>&1
  echo "graphs rc=$?"; grep -E "graph nodes|eagerly|^gpt[0-9]+_|^mantissa speedup|^pytorch" "$out/graphs.log"
fi
if has cligraphs; then
  cat README.md docs/*.md > /tmp/gpu-corpus.txt
  for p in 32-true 16-mixed bf16-mixed; do
    for g in "" --cuda-graphs; do
      timeout 60 $m/bin/mantissa train --model gpt --accelerator gpu --precision $p $g \
        --text /tmp/gpu-corpus.txt --max-steps 300 --overwrite-output-dir \
        --metrics-json "$out/cli_$p$g.json" \
        > "$out/cli_$p$g.log" 2>&1
      echo "gpt $p $g rc=$?"; grep -Ei 'final validation|error|warning' "$out/cli_$p$g.log" | tail -2
    done
  done
fi
if has bench; then
  timeout 180 bench/cuda/run.sh --mantissa-bench $m/bin/cuda_bench > "$out/bench.log" 2>&1
  echo "bench rc=$?"; tail -12 "$out/bench.log"
fi
if has train; then
  for p in 32-true 16-mixed bf16-mixed transformer-engine; do
    timeout 40 $m/bin/mantissa train --model mlp --accelerator gpu --precision $p --epochs 2 \
      --data-dir $m/data --batch-size 128 --overwrite-output-dir \
      --metrics-json "$out/train_$p.json" > "$out/train_$p.log" 2>&1
    echo "train $p rc=$?"; grep -Ei 'epoch 2|test acc|error' "$out/train_$p.log" | tail -3
  done
  for model in cnn vit; do
    timeout 60 $m/bin/mantissa train --model $model --accelerator gpu --precision bf16-mixed \
      --epochs 2 --data-dir $m/data --overwrite-output-dir \
      --metrics-json "$out/train_$model.json" \
      > "$out/train_$model.log" 2>&1
    echo "train $model bf16-mixed rc=$?"; grep -Ei 'final test|error' "$out/train_$model.log" | tail -2
  done
  timeout 60 $m/bin/mantissa compare --model mlp --accelerator gpu --data-dir $m/data \
    --precisions 32-true,16-mixed,bf16-mixed --epochs 1 --rounds 1 > "$out/compare.log" 2>&1
  echo "compare rc=$?"; tail -6 "$out/compare.log"
fi
if has conv; then
  # The CNN on the GPU (cuDNN's convolutions): samples/s per epoch of the 10,000 images (the
  # first epoch pays cuDNN's start and its algorithm choices, the second is the steady rate).
  for p in bf16-mixed 32-true; do
    timeout 25 $m/bin/mantissa train --model cnn --accelerator gpu --precision $p --epochs 2 \
      --data-dir $m/data --overwrite-output-dir \
      --metrics-json "$out/conv_$p.json" > "$out/conv_$p.log" 2>&1
    echo "conv cnn $p rc=$?"; grep -Ei '^epoch [12]/2|final test|error' "$out/conv_$p.log" | tail -4
  done
fi
if has gpt; then
  cat README.md docs/*.md > /tmp/gpu-corpus.txt  # ~0.5 MB of text that travels with the tree
  for p in 32-true bf16-mixed 16-mixed transformer-engine; do
    timeout 40 $m/bin/mantissa train --model gpt --accelerator gpu --precision $p \
      --text /tmp/gpu-corpus.txt --max-steps 300 --overwrite-output-dir \
      --metrics-json "$out/gpt_$p.json" \
      > "$out/gpt_$p.log" 2>&1
    echo "gpt $p rc=$?"; grep -Ei 'val|error|step/s|samples' "$out/gpt_$p.log" | tail -3
  done
fi
if has qlora; then
  # The 4-bit precisions on the GPU: the reference GPT with LoRA adapters (rank 8) on frozen
  # 4-bit weights, beside the same run in bf16-mixed; then an 8-bit optimizer's refusal there.
  cat README.md docs/*.md > /tmp/gpu-corpus.txt
  for p in nf4-dq nf4 fp4 bf16-mixed; do
    timeout 60 $m/bin/mantissa train --model gpt --accelerator gpu --precision $p --lora-rank 8 \
      --text /tmp/gpu-corpus.txt --max-steps 300 --overwrite-output-dir \
      --metrics-json "$out/qlora_$p.json" \
      > "$out/qlora_$p.log" 2>&1
    echo "qlora $p rc=$?"; grep -Ei 'val|error|tokens/s' "$out/qlora_$p.log" | tail -3
  done
  timeout 60 $m/bin/mantissa train --model gpt --accelerator gpu --precision nf4-dq --lora-rank 8 \
    --optimizer adamw8bit --text /tmp/gpu-corpus.txt --max-steps 300 \
 --overwrite-output-dir \
    --metrics-json "$out/qlora_8bit.json" > "$out/qlora_8bit.log" 2>&1
  echo "qlora nf4-dq adamw8bit rc=$?"; grep -Ei 'val|error|tokens/s' "$out/qlora_8bit.log" | tail -3
fi
if has fp8; then
  for acc in gpu cpu; do
    timeout 60 $m/bin/mantissa train --model mlp --accelerator $acc --precision transformer-engine \
      --epochs 2 --data-dir $m/data --batch-size 128 --overwrite-output-dir \
      --metrics-json "$out/fp8_mlp_$acc.json" \
      > "$out/fp8_mlp_$acc.log" 2>&1
    echo "fp8 mlp $acc rc=$?"; grep -Ei 'final test|samples/s|error' "$out/fp8_mlp_$acc.log" | tail -3
  done
  # Interrupted after epoch 1 and resumed: the same final accuracy as the straight run above.
  rm -rf /tmp/te-ck
  timeout 60 $m/bin/mantissa train --model mlp --accelerator gpu --precision transformer-engine \
    --epochs 1 --data-dir $m/data --batch-size 128 --checkpoint-dir /tmp/te-ck > /dev/null 2>&1
  timeout 60 $m/bin/mantissa train --model mlp --accelerator gpu --precision transformer-engine \
    --epochs 2 --data-dir $m/data --batch-size 128 --checkpoint-dir /tmp/te-ck --resume last \
    > "$out/fp8_mlp_resumed.log" 2>&1
  echo "fp8 mlp gpu resumed rc=$?"; grep -Ei 'final test|error' "$out/fp8_mlp_resumed.log" | tail -2
  # eval of that checkpoint on the GPU: the run's final test accuracy again.
  timeout 60 $m/bin/mantissa eval --checkpoint /tmp/te-ck/last.safetensors --accelerator gpu \
    --data-dir $m/data > "$out/fp8_eval.log" 2>&1
  echo "fp8 eval gpu rc=$?"; tail -2 "$out/fp8_eval.log"
  cat README.md docs/*.md > /tmp/gpu-corpus.txt
  for p in transformer-engine transformer-engine-float16 bf16-mixed; do
    timeout 60 $m/bin/mantissa train --model gpt --accelerator gpu --precision $p \
      --text /tmp/gpu-corpus.txt --max-steps 300 --overwrite-output-dir \
      --metrics-json "$out/fp8_gpt_$p.json" \
      > "$out/fp8_gpt_$p.log" 2>&1
    echo "gpt $p rc=$?"; grep -Ei 'val|error|tokens/s' "$out/fp8_gpt_$p.log" | tail -3
  done
fi
