#!/bin/sh
# QLoRA fine-tuning of a GPT-2-small-shaped model on 2 CPU threads, in one run, three ways:
#   mantissa    : nf4-dq weights (bitsandbytes layout) + LoRA adapters + 8-bit Adam on the adapters
#   PyTorch     : fp32 weights + peft LoRA adapters (same targets, rank, batch, sequence) + Adam
#   bitsandbytes: bnb.nn.Linear4bit nf4-dq + peft LoRA + bnb's 8-bit Adam (bitsandbytes' own CPU
#                 QLoRA), once per compute dtype in BNB_DTYPES
# Prints each side's JSON line, then the three side by side with the step-time ratios and peak
# RSS. mantissa and PyTorch alternate ROUNDS times (default 2) and the medians are compared, so a
# neighbour's load on a shared machine hits both alike. bitsandbytes is slow on the CPU, so it
# runs once, with BNB_STEPS timed steps after one warm-up; a dtype listed in BNB_REDUCED runs
# with BNB_REDUCED_LAYERS blocks only (bf16: minutes per block and step), and then mantissa and
# PyTorch run that reduced shape too, so each ratio compares the same model.
#
#   bench/qlora/run.sh                      # defaults below
#   BNB=0 bench/qlora/run.sh                # skip bitsandbytes
#   MODEL="--layers 2 --width 256 --heads 4" bench/qlora/run.sh    # a quick smoke run
# Environment: BUILD (build dir, default build), PYTHON (torch + peft + bitsandbytes; default
# /work/venv-ref/bin/python, else python3), MODEL, SHAPE (batch, rank, threads), RUN (SHAPE +
# steps), QUANT (mantissa side),
# ROUNDS, BNB (1: run bitsandbytes, 0: skip), BNB_DTYPES (default "fp32 bf16"), BNB_STEPS
# (default 1), BNB_REDUCED (dtypes run at the reduced depth, default "bf16"),
# BNB_REDUCED_LAYERS (default 2).
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/work/venv-ref/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
# 12 layers x 768 wide x 12 heads with GPT-2's 50257-token vocabulary (tied head): GPT-2 small's
# 124M parameters (random token ids; the benchmark measures speed and memory, not text).
MODEL=${MODEL:-"--layers 12 --width 768 --heads 12 --vocab 50257 --context 128"}
SHAPE=${SHAPE:-"--batch 4 --lora-rank 16 --lora-alpha 32 --threads 2"}
RUN=${RUN:-"$SHAPE --steps 5 --warmup 2"}
QUANT=${QUANT:-"--precision nf4-dq --dtype fp32 --optimizer adam8bit"}
ROUNDS=${ROUNDS:-2}
BNB=${BNB:-1}
BNB_DTYPES=${BNB_DTYPES:-"fp32 bf16"}
BNB_STEPS=${BNB_STEPS:-1}
BNB_REDUCED=${BNB_REDUCED-bf16}  # empty: every dtype at full depth
BNB_REDUCED_LAYERS=${BNB_REDUCED_LAYERS:-2}

# The comparison sides are Python: without torch and peft (bitsandbytes too unless BNB=0) the
# run would end in two tracebacks. Say what is missing and how to install it before anything
# is built or run.
modules="torch peft"
[ "$BNB" = 1 ] && modules="$modules bitsandbytes"
for module in $modules; do
  if ! "$PYTHON" -c "import $module" >/dev/null 2>&1; then
    echo "bench/qlora/run.sh: $PYTHON cannot import $module; the benchmark compares against" \
      "PyTorch + peft (and bitsandbytes unless BNB=0). Install them once into a virtual" \
      "environment: python3 -m venv /work/venv-ref && /work/venv-ref/bin/pip install" \
      "$modules (or set PYTHON to a python that has them; docs/qlora.md)" >&2
    exit 2
  fi
done
# Each side writes its JSON line to a file, shown afterwards: through a pipe to tee a failing
# side did not stop the script (sh has no pipefail).
run_side() {
  json="$1"
  shift
  "$@" >"$json"
  cat "$json"
}

ninja -C "$BUILD" -j2 qlora_gpt >/dev/null
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
i=1
while [ "$i" -le "$ROUNDS" ]; do
  # shellcheck disable=SC2086
  run_side "$OUT/mantissa.full.$i.json" "$BUILD/qlora_gpt" $MODEL $RUN $QUANT
  # shellcheck disable=SC2086
  run_side "$OUT/torch.full.$i.json" "$PYTHON" bench/qlora/torch_lora_gpt.py $MODEL $RUN
  i=$((i + 1))
done
if [ "$BNB" = 1 ]; then
  reduced_done=0
  for dtype in $BNB_DTYPES; do
    depth=full
    LAYERS=""
    case " $BNB_REDUCED " in *" $dtype "*)
      depth=reduced
      LAYERS="--layers $BNB_REDUCED_LAYERS"  # the last --layers wins on all three sides
      if [ "$reduced_done" = 0 ]; then
        # shellcheck disable=SC2086
        run_side "$OUT/mantissa.reduced.1.json" "$BUILD/qlora_gpt" $MODEL $LAYERS $RUN $QUANT
        # shellcheck disable=SC2086
        run_side "$OUT/torch.reduced.1.json" "$PYTHON" bench/qlora/torch_lora_gpt.py $MODEL $LAYERS $RUN
        reduced_done=1
      fi
      ;;
    esac
    # shellcheck disable=SC2086
    run_side "$OUT/bnb.$depth.$dtype.json" "$PYTHON" bench/qlora/bnb_qlora_gpt.py $MODEL $LAYERS \
      $SHAPE --warmup 1 --steps "$BNB_STEPS" --dtype "$dtype"
  done
fi
python3 - "$OUT" "$ROUNDS" <<'PY'
import glob, json, statistics, subprocess, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(side, depth):
    return [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{side}.{depth}.*.json"))]
def median(runs):
    return statistics.median(s for r in runs for s in r["step_seconds"])
def rss(runs):
    return max(r["peak_rss_bytes"] for r in runs) / 2**30
m, t = load("mantissa", "full"), load("torch", "full")
cpu = [l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines() if l.startswith("Model name")]
print()
print(f"CPU: {cpu[0] if cpu else '?'}; model {m[0]['parameters']/1e6:.1f}M parameters "
      f"(torch counts {t[0]['parameters']/1e6:.1f}M), {m[0]['tokens_per_step']} tokens/step, "
      f"trainable {m[0]['trainable_parameters']} (mantissa) / {t[0]['trainable_parameters']} (torch)")
m_step, t_step = median(m), median(t)
print(f"{m[0]['framework']:<70} median step {m_step:8.3f} s   peak RSS {rss(m):6.3f} GiB"
      f"   ({m[0]['quantized_bits_per_parameter']:.3f} bits per quantized weight)")
print(f"{t[0]['framework']:<70} median step {t_step:8.3f} s   peak RSS {rss(t):6.3f} GiB")
print(f"speed ratio torch_time / mantissa_time = {t_step/m_step:.2f} (target >= 0.70);  "
      f"mantissa peak RSS {rss(m):.2f} GiB (target <= 1.50)")
for depth in ("full", "reduced"):
    for f in sorted(glob.glob(f"{out}/bnb.{depth}.*.json")):
        b = json.load(open(f))
        bm, bt = (m, t) if depth == "full" else (load("mantissa", depth), load("torch", depth))
        b_step, bm_step, bt_step = median([b]), median(bm), median(bt)
        layers = f"{b['layers']} layers" + ("" if depth == "full" else
                                             " (REDUCED depth: mantissa and torch rerun at it)")
        print(f"-- bitsandbytes, {layers}, {len(b['step_seconds'])} timed step(s) after 1 warm-up")
        if depth == "reduced":
            print(f"{bm[0]['framework']:<70} median step {bm_step:8.3f} s   peak RSS {rss(bm):6.3f} GiB")
            print(f"{bt[0]['framework']:<70} median step {bt_step:8.3f} s   peak RSS {rss(bt):6.3f} GiB")
        print(f"{b['framework']:<70} median step {b_step:8.3f} s   peak RSS {rss([b]):6.3f} GiB"
              f"   ({b['quantized_bits_per_parameter']:.3f} bits per quantized weight)")
        print(f"   bitsandbytes runs at 1/{b_step/bt_step:.1f} of torch fp32 LoRA speed; "
              f"mantissa is {b_step/bm_step:.1f}x faster than bitsandbytes")
PY
