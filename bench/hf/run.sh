#!/bin/sh
# mantissa against transformers on Hugging Face Llama models made locally with random weights
# (bench/hf/make_model.py; no network), 2 CPU threads per side:
#   qlora    QLoRA steps on SmolLM-135M's shape, batch 4 x 256 random tokens: mantissa nf4-dq +
#            LoRA r16/alpha32 on q,k,v,o,gate,up,down + 8-bit AdamW (compute dtype per
#            QLORA_DTYPES) against transformers fp32 + peft LoRA (same layers) + torch AdamW
#   generate greedy KV-cache generation on the same model, 32-token prompt, 64 new tokens:
#            mantissa with the weights GENERATE_WEIGHTS lists (bf16 and nf4, i.e. nf4-dq, by
#            default; also fp4, fp4-dq, int8), loaded as `mantissa generate --precision` loads
#            them, against transformers fp32 generate()
#   load     peak RSS of an nf4-dq load of TinyLlama-1.1B's shape (bf16 safetensors, as
#            TinyLlama ships) against "model size + largest tensor in fp32 + 10 %"
# The sides alternate ROUNDS times (a neighbour's load hits all alike); each round runs
# WARMUP untimed repetitions, then repeats until STEPS repetitions and MIN_SECONDS have
# passed. Medians and min-max spreads over every timed repetition per side are compared.
# With AVX2=1 (default) the qlora and generate runs add mantissa sides capped to AVX2
# (MANTISSA_DISABLE_SIMD=avx512f, which caps oneDNN too); TORCH_AVX2=1 adds a transformers
# side capped alike (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS).
#
#   bench/hf/run.sh [qlora|generate|load|all]      # all by default
# Environment: BUILD (default build), PYTHON (default /work/venv-ref/bin/python), MODELS (model
# directories, default /tmp/hfbench), ROUNDS (3), THREADS (2), STEPS (1), WARMUP (1),
# MIN_SECONDS (2), QLORA_DTYPES (mantissa compute dtypes, default "bf16"; "bf16 fp32" for
# both), GENERATE_WEIGHTS ("bf16 nf4"), AVX2 (1), TORCH_AVX2 (0), SAVE (1: also write
# bench/results/<date>-hf-<what>.md),
# CHECKPOINTING (1: qlora recomputes each decoder layer in backward on both sides, mantissa's
# activation checkpointing and transformers' gradient checkpointing; default 0),
# OMP_WAIT_POLICY (passive by default for both sides, as docs/performance.md advises on a
# shared machine; both sides use GNU OpenMP).
set -eu
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
cd "$(dirname "$0")/../.."
WHAT=${1:-all}
case "$WHAT" in qlora | generate | load | all) ;; *)
  echo "bench/hf/run.sh: unknown benchmark '$WHAT' (qlora, generate, load or all)" >&2
  exit 2
  ;;
esac
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/work/venv-ref/bin/python}
MODELS=${MODELS:-/tmp/hfbench}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
STEPS=${STEPS:-1}
WARMUP=${WARMUP:-1}
MIN_SECONDS=${MIN_SECONDS:-2}
QLORA_DTYPES=${QLORA_DTYPES:-bf16}
GENERATE_WEIGHTS=${GENERATE_WEIGHTS:-bf16 nf4}
AVX2=${AVX2:-1}
TORCH_AVX2=${TORCH_AVX2:-0}
SAVE=${SAVE:-1}
CHECKPOINTING=${CHECKPOINTING:-0}
MANTISSA_AVX2_ENV="MANTISSA_DISABLE_SIMD=avx512f"
TORCH_AVX2_ENV="ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2"

# The model files and the comparison sides need transformers (and peft for qlora): say what is
# missing and how to install it before anything is built or run.
if [ ! -x "$PYTHON" ]; then
  echo "bench/hf/run.sh: no python at $PYTHON; set PYTHON to one with torch, transformers," \
    "peft and safetensors (python3 -m venv /work/venv-ref && /work/venv-ref/bin/pip install" \
    "torch transformers peft safetensors)" >&2
  exit 2
fi
for module in torch transformers safetensors peft; do
  if ! "$PYTHON" -c "import $module" >/dev/null 2>&1; then
    echo "bench/hf/run.sh: $PYTHON cannot import $module; install it with" \
      "$PYTHON -m pip install $module (or set PYTHON to a python that has it)" >&2
    exit 2
  fi
done

ninja -C "$BUILD" -j2 hf_bench >/dev/null
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
TIMING="--threads $THREADS --steps $STEPS --warmup $WARMUP --min-seconds $MIN_SECONDS"
MANTISSA_CKPT="--activation-checkpointing $CHECKPOINTING"
TORCH_CKPT="--gradient-checkpointing $CHECKPOINTING"

# run_side FILE ENV... -- COMMAND...: runs COMMAND with the ENV assignments, its JSON line to
# FILE (shown afterwards); a failing side stops the script.
run_side() {
  json="$1"
  shift
  envs=""
  while [ "$1" != "--" ]; do
    envs="$envs $1"
    shift
  done
  shift
  # shellcheck disable=SC2086
  env $envs "$@" >"$json"
  cat "$json"
}

make_model() {
  nice -n 5 "$PYTHON" bench/hf/make_model.py --shape "$1" --out "$MODELS/$1"
}

summarize() {
  python3 bench/hf/summarize.py "$1" "$OUT" "$ROUNDS" "$(date -u +%Y-%m-%dT%H:%MZ)" \
    "$(uptime | sed 's/.*load average: //')" "WHAT=$1 ROUNDS=$ROUNDS STEPS=$STEPS WARMUP=$WARMUP MIN_SECONDS=$MIN_SECONDS OMP_WAIT_POLICY=$OMP_WAIT_POLICY QLORA_DTYPES='$QLORA_DTYPES' GENERATE_WEIGHTS='$GENERATE_WEIGHTS' AVX2=$AVX2 TORCH_AVX2=$TORCH_AVX2 CHECKPOINTING=$CHECKPOINTING bench/hf/run.sh $1" \
    >"$OUT/$1.md"
  cat "$OUT/$1.md"
  if [ "$SAVE" = 1 ]; then
    mkdir -p bench/results
    cp "$OUT/$1.md" "bench/results/$(date -u +%Y-%m-%d-%H%M)-hf-$1.md"
  fi
}

if [ "$WHAT" = qlora ] || [ "$WHAT" = all ]; then
  make_model smollm-135m
  dir="$MODELS/smollm-135m"
  i=1
  while [ "$i" -le "$ROUNDS" ]; do
    for dtype in $QLORA_DTYPES; do
      run_side "$OUT/qlora.mantissa-$dtype.$i.json" -- \
        "$BUILD/hf_bench" qlora "$dir" $TIMING $MANTISSA_CKPT --dtype "$dtype"
      if [ "$AVX2" = 1 ]; then
        # shellcheck disable=SC2086
        run_side "$OUT/qlora.mantissa-$dtype-avx2.$i.json" $MANTISSA_AVX2_ENV -- \
          "$BUILD/hf_bench" qlora "$dir" $TIMING $MANTISSA_CKPT --dtype "$dtype"
      fi
    done
    # shellcheck disable=SC2086
    run_side "$OUT/qlora.torch.$i.json" -- "$PYTHON" bench/hf/torch_hf.py qlora "$dir" $TIMING $TORCH_CKPT
    if [ "$TORCH_AVX2" = 1 ]; then
      # shellcheck disable=SC2086
      run_side "$OUT/qlora.torch-avx2.$i.json" $TORCH_AVX2_ENV -- \
        "$PYTHON" bench/hf/torch_hf.py qlora "$dir" $TIMING $TORCH_CKPT
    fi
    i=$((i + 1))
  done
  summarize qlora
fi

if [ "$WHAT" = generate ] || [ "$WHAT" = all ]; then
  make_model smollm-135m
  dir="$MODELS/smollm-135m"
  i=1
  while [ "$i" -le "$ROUNDS" ]; do
    for weights in $GENERATE_WEIGHTS; do
      run_side "$OUT/generate.mantissa-$weights.$i.json" -- \
        "$BUILD/hf_bench" generate "$dir" $TIMING --weights "$weights"
      if [ "$AVX2" = 1 ]; then
        # shellcheck disable=SC2086
        run_side "$OUT/generate.mantissa-$weights-avx2.$i.json" $MANTISSA_AVX2_ENV -- \
          "$BUILD/hf_bench" generate "$dir" $TIMING --weights "$weights"
      fi
    done
    # shellcheck disable=SC2086
    run_side "$OUT/generate.torch.$i.json" -- "$PYTHON" bench/hf/torch_hf.py generate "$dir" $TIMING
    if [ "$TORCH_AVX2" = 1 ]; then
      # shellcheck disable=SC2086
      run_side "$OUT/generate.torch-avx2.$i.json" $TORCH_AVX2_ENV -- \
        "$PYTHON" bench/hf/torch_hf.py generate "$dir" $TIMING
    fi
    i=$((i + 1))
  done
  summarize generate
fi

if [ "$WHAT" = load ] || [ "$WHAT" = all ]; then
  make_model tinyllama-1.1b
  for rest in fp32 bf16; do
    run_side "$OUT/load.mantissa-rest-$rest.1.json" -- \
      "$BUILD/hf_bench" load "$MODELS/tinyllama-1.1b" --threads "$THREADS" --rest-dtype "$rest"
  done
  summarize load
fi
