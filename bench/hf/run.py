#!/usr/bin/env python3
"""QLoRA fine-tuning and generation of a random model in SmolLM-135M's shape: mantissa against
transformers + peft on the same CPU, 2 threads, side by side in one run.

  /work/venv-ref/bin/python bench/hf/run.py                 # SmolLM-135M's shape
  /work/venv-ref/bin/python bench/hf/run.py --layers 2 --hidden 64 --heads 4 --kv-heads 2 \
      --intermediate 128 --vocab 320 --steps 2 --rounds 1  # a smoke run

Shape (defaults: SmolLM-135M): 30 layers, hidden 576, 9 heads / 3 KV heads, intermediate 1536,
vocabulary 49152, tied embeddings; random weights saved in bf16 to a temporary model directory
with a small byte-level tokenizer (tests/fixtures/hf/finetune/llama's: the token ids stay
below 300, the head is the full vocabulary).

QLoRA step: mantissa `finetune --precision nf4-dq --lora-rank 16` on the 7 projections with
adamw8bit, batch 4 x 256 tokens, against transformers + peft with fp32 weights, fp32 LoRA r16 on
the same projections and torch AdamW. Each side runs in its own process for --steps optimizer
steps; the sides alternate for --rounds rounds (a neighbour's load hits both alike). Reported:
each side's median seconds per step (mantissa: its training time over its steps; PyTorch: the
median of its timed steps after the first) with min-max, the ratio of medians (PyTorch over
mantissa: above 1 means mantissa is faster), and the peak RSS of each process and their ratio.

Generation: tokens/s of greedy decoding of --new tokens after an 8-token prompt, mantissa in
bf16-true and nf4 against transformers' fp32 generate.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"


def make_model(d, a):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
                      num_hidden_layers=a.layers, num_attention_heads=a.heads,
                      num_key_value_heads=a.kv_heads, max_position_embeddings=2048,
                      tie_word_embeddings=True, rope_theta=10000.0, bos_token_id=0,
                      eos_token_id=0)
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
    fx = ROOT / "tests/fixtures/hf/finetune/llama"
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(fx / f, d)
    # Plain text enough for every step's batches plus the validation blocks.
    corpus = (ROOT / "tests/fixtures/hf/finetune/corpus.txt").read_text()
    need = a.batch * a.block * (a.steps + 4) * 2
    text = corpus
    while len(text) < need:
        text += corpus
    (pathlib.Path(d) / "data.txt").write_text(text)


# Runs argv[1:] as the child of this small process and prints the child's peak RSS in bytes.
# The benchmark's own process holds torch and the model it wrote: a child forked from it
# directly starts with that resident copy, which ru_maxrss then counts as the child's.
MEASURE = """
import os, sys
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss * 1024 if status == 0 else -1)
"""


def run_measured(cmd):
    out = subprocess.run([sys.executable, "-c", MEASURE] + [str(c) for c in cmd],
                         capture_output=True, text=True, check=True)
    rss = int(out.stdout.strip())
    if rss < 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed")
    return rss


def spread(xs):
    return f"{statistics.median(xs):.3f} s (min {min(xs):.3f}, max {max(xs):.3f})"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mantissa", default=str(ROOT / "build/mantissa"))
    p.add_argument("--layers", type=int, default=30)
    p.add_argument("--hidden", type=int, default=576)
    p.add_argument("--heads", type=int, default=9)
    p.add_argument("--kv-heads", type=int, default=3)
    p.add_argument("--intermediate", type=int, default=1536)
    p.add_argument("--vocab", type=int, default=49152)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--new", type=int, default=32)
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="mantissa_hf_bench_")
    try:
        make_model(tmp, a)
        m_step, t_step, m_rss, t_rss = [], [], [], []
        for r in range(a.rounds):
            metrics = os.path.join(tmp, f"m{r}.json")
            cmd = [a.mantissa, "finetune", "--model-dir", tmp, "--data", f"{tmp}/data.txt",
                   "--precision", "nf4-dq", "--lora-rank", "16", "--lora-alpha", "32",
                   "--lora-targets", TARGETS, "--optimizer", "adamw8bit", "--batch-size",
                   str(a.batch), "--block-size", str(a.block), "--max-steps", str(a.steps),
                   "--eval-interval", str(a.steps), "--limit-val-batches", "0",
                   "--limit-test-batches", "0", "--threads", str(a.threads),
                   "--no-progress-bar", "--output-dir", f"{tmp}/out{r}", "--metrics-json",
                   metrics]
            m_rss.append(run_measured(cmd))
            m = json.load(open(metrics))
            m_step.append(sum(m["epoch_seconds"]) / m["steps"])
            out = subprocess.run([sys.executable, str(HERE / "torch_peft_step.py"), "--model-dir",
                                  tmp, "--steps", str(a.steps + 1), "--batch", str(a.batch),
                                  "--block", str(a.block), "--threads", str(a.threads)],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(out.stderr)
            t = json.loads(out.stdout.strip().splitlines()[-1])
            t_step.append(statistics.median(t["step_seconds"][1:]))
            t_rss.append(t["peak_rss_bytes"])
            print(f"round {r + 1}: mantissa {m_step[-1]:.3f} s/step, peak RSS "
                  f"{m_rss[-1] / 2**20:.0f} MiB; transformers+peft {t_step[-1]:.3f} s/step, "
                  f"peak RSS {t_rss[-1] / 2**20:.0f} MiB", flush=True)
        print(f"\nQLoRA step, batch {a.batch} x {a.block}, {a.threads} threads, "
              f"{a.layers} layers x {a.hidden}, vocabulary {a.vocab}:")
        print(f"  mantissa nf4-dq + LoRA r16 + adamw8bit: {spread(m_step)}")
        print(f"  transformers + peft fp32 LoRA + AdamW:  {spread(t_step)}")
        print(f"  speed ratio (PyTorch / mantissa step time, medians): "
              f"{statistics.median(t_step) / statistics.median(m_step):.2f}x "
              f"(per round: {', '.join(f'{t / m:.2f}' for t, m in zip(t_step, m_step))})")
        print(f"  peak RSS: mantissa {statistics.median(m_rss) / 2**20:.0f} MiB, PyTorch "
              f"{statistics.median(t_rss) / 2**20:.0f} MiB, ratio "
              f"{statistics.median(m_rss) / statistics.median(t_rss):.2f}")
        # Generation.
        print(f"\nGreedy generation, {a.new} new tokens, {a.threads} threads:")
        for precision in ("bf16-true", "nf4"):
            p2 = subprocess.run([a.mantissa, "generate", "--model-dir", tmp, "--prompt",
                                 "The little robot", "--max-new-tokens", str(a.new),
                                 "--precision", precision, "--threads", str(a.threads),
                                 "--no-prompt"], capture_output=True, text=True)
            if p2.returncode != 0:
                sys.exit(p2.stderr)
            mt = re.search(r"(\d+) tokens in ([\d.]+) s \(([\d.]+) tokens/s\)", p2.stderr)
            print(f"  mantissa {precision}: {mt.group(3)} tokens/s ({mt.group(1)} tokens)")
        tg = subprocess.run([sys.executable, str(HERE / "torch_generate.py"), "--model-dir", tmp,
                             "--new", str(a.new), "--threads", str(a.threads)],
                            capture_output=True, text=True)
        if tg.returncode != 0:
            sys.exit(tg.stderr)
        print(f"  transformers fp32: "
              f"{json.loads(tg.stdout.strip().splitlines()[-1])['tokens_per_second']:.1f} "
              f"tokens/s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
