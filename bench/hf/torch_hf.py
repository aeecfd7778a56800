"""transformers side of the Hugging Face benchmark (bench/hf/run.sh), one JSON line on stdout:

  torch_hf.py qlora DIR     fp32 LoRA steps: the model in fp32, peft LoRA (r, alpha) on the
                            seven Llama projections, torch AdamW on the adapters
  torch_hf.py generate DIR  greedy generate(): fp32 weights, KV cache, no end token

Timed work repeats until at least --steps repetitions and --min-seconds have passed, after
--warmup untimed ones, as bench/hf/hf_bench.cpp does. Peak RSS is ru_maxrss.
"""
import argparse
import json
import resource
import statistics
import time
import warnings

import torch
import transformers
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def timed_runs(a, work):
    for _ in range(a.warmup):
        work()
    times, start = [], time.perf_counter()
    while len(times) < a.steps or time.perf_counter() - start < a.min_seconds:
        t0 = time.perf_counter()
        work()
        times.append(time.perf_counter() - t0)
    return times


def peak_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_qlora(a):
    from peft import LoraConfig, get_peft_model

    model = AutoModelForCausalLM.from_pretrained(a.dir, dtype=torch.float32)
    rss_after_load = peak_rss()
    if a.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = get_peft_model(model, LoraConfig(r=a.lora_rank, lora_alpha=a.lora_alpha,
                                             lora_dropout=0.0, target_modules=TARGETS))
    model.train()
    trainable = [t for t in model.parameters() if t.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=a.lr)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(1)
    losses = []

    def step():
        tokens = torch.randint(0, vocab, (a.batch, a.seq + 1), generator=gen)
        logits = model(input_ids=tokens[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, vocab).float(), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())

    times = timed_runs(a, step)
    return {
        "framework": f"transformers {transformers.__version__} fp32 + peft LoRA, "
                     f"torch {torch.__version__} AdamW"
                     + (", gradient checkpointing" if a.gradient_checkpointing else ""),
        "trainable_parameters": sum(t.numel() for t in trainable),
        "step_seconds": times,
        "median_step_seconds": statistics.median(times),
        "tokens_per_step": a.batch * a.seq,
        "peak_rss_bytes": peak_rss(),
        "peak_rss_after_load_bytes": rss_after_load,
        "first_loss": losses[0],
        "last_loss": losses[-1],
    }


def run_generate(a):
    model = AutoModelForCausalLM.from_pretrained(a.dir, dtype=torch.float32).eval()
    gen = torch.Generator().manual_seed(2)
    prompt = torch.randint(0, model.config.vocab_size, (1, a.prompt), generator=gen)
    out = {}

    def call():
        with torch.inference_mode():
            out["ids"] = model.generate(prompt, do_sample=False, max_new_tokens=a.new_tokens,
                                        min_new_tokens=a.new_tokens, eos_token_id=None,
                                        pad_token_id=0, attention_mask=torch.ones_like(prompt))
    times = timed_runs(a, call)
    new = out["ids"].shape[1] - a.prompt
    rates = [new / t for t in times]
    return {
        "framework": f"transformers {transformers.__version__} generate, fp32 "
                     f"weights (torch {torch.__version__})",
        "prompt_tokens": a.prompt,
        "new_tokens": new,
        "call_seconds": times,
        "tokens_per_second": rates,
        "median_tokens_per_second": statistics.median(rates),
        "first_tokens": out["ids"][0, a.prompt:a.prompt + 8].tolist(),
        "peak_rss_bytes": peak_rss(),
    }


def main():
    # Keep stderr to errors: no loading progress bar, no deprecation notes from inside peft.
    transformers.utils.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning)
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["qlora", "generate"])
    p.add_argument("dir")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--min-seconds", type=float, default=2.0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--lora-alpha", type=float, default=32)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--gradient-checkpointing", type=int, default=0,
                   help="qlora: 1 recomputes each decoder layer in backward (transformers')")
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=64)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    result = run_qlora(a) if a.mode == "qlora" else run_generate(a)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
