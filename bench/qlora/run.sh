#!/bin/sh
# QLoRA fine-tuning of a GPT-2-small-shaped model on 2 CPU threads, in one run:
#   mantissa: nf4-dq weights (bitsandbytes layout) + LoRA adapters + 8-bit Adam on the adapters
#   PyTorch : fp32 weights + peft LoRA adapters (same targets, rank, batch, sequence) + Adam
# Prints each side's JSON line, then the step-time ratio and both peak RSS values. The two
# programs alternate ROUNDS times (default 2) and the medians are compared, so a neighbour's
# load on a shared machine hits both alike.
#
#   bench/qlora/run.sh                      # defaults below
#   MODEL="--layers 2 --width 256 --heads 4" bench/qlora/run.sh    # a quick smoke run
# Environment: BUILD (build dir, default build), PYTHON (torch + peft; default
# /work/venv-ref/bin/python, else python3), MODEL, RUN (batch/steps), QUANT (mantissa side),
# ROUNDS.
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/work/venv-ref/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
# 12 layers x 768 wide x 12 heads with GPT-2's 50257-token vocabulary (tied head): GPT-2 small's
# 124M parameters (random token ids; the benchmark measures speed and memory, not text).
MODEL=${MODEL:-"--layers 12 --width 768 --heads 12 --vocab 50257 --context 128"}
RUN=${RUN:-"--batch 4 --steps 5 --warmup 2 --lora-rank 16 --lora-alpha 32 --threads 2"}
QUANT=${QUANT:-"--precision nf4-dq --dtype fp32 --optimizer adam8bit"}
ROUNDS=${ROUNDS:-2}

ninja -C "$BUILD" -j2 qlora_gpt >/dev/null
OUT=$(mktemp -d)
i=1
while [ "$i" -le "$ROUNDS" ]; do
  # shellcheck disable=SC2086
  "$BUILD/qlora_gpt" $MODEL $RUN $QUANT | tee "$OUT/mantissa.$i.json"
  # shellcheck disable=SC2086
  "$PYTHON" bench/qlora/torch_lora_gpt.py $MODEL $RUN | tee "$OUT/torch.$i.json"
  i=$((i + 1))
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, subprocess, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(side):
    return [json.load(open(f"{out}/{side}.{i}.json")) for i in range(1, rounds + 1)]
m, t = load("mantissa"), load("torch")
m_step = statistics.median(s for r in m for s in r["step_seconds"])
t_step = statistics.median(s for r in t for s in r["step_seconds"])
m_rss = max(r["peak_rss_bytes"] for r in m)
t_rss = max(r["peak_rss_bytes"] for r in t)
cpu = [l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines() if l.startswith("Model name")]
print()
print(f"CPU: {cpu[0] if cpu else '?'}; model {m[0]['parameters']/1e6:.1f}M parameters "
      f"(torch counts {t[0]['parameters']/1e6:.1f}M), {m[0]['tokens_per_step']} tokens/step, "
      f"trainable {m[0]['trainable_parameters']} (mantissa) / {t[0]['trainable_parameters']} (torch)")
print(f"{m[0]['framework']:<48} median step {m_step:7.3f} s   peak RSS {m_rss/2**30:6.3f} GiB"
      f"   ({m[0]['quantized_bits_per_parameter']:.3f} bits per quantized weight)")
print(f"{t[0]['framework']:<48} median step {t_step:7.3f} s   peak RSS {t_rss/2**30:6.3f} GiB")
print(f"speed ratio torch_time / mantissa_time = {t_step/m_step:.2f} (target >= 0.70);  "
      f"mantissa peak RSS {m_rss/2**30:.2f} GiB (target <= 1.50)")
PY
rm -rf "$OUT"
