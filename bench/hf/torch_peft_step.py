#!/usr/bin/env python3
"""The transformers + peft side of bench/hf/run.py: fp32 weights, peft LoRA on the given
targets, torch AdamW, random token batches; times every optimizer step and reports the peak RSS.
Prints one JSON line: {"step_seconds": [...], "peak_rss_bytes": N}."""
import argparse
import json
import resource
import time

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--model-dir", required=True)
p.add_argument("--steps", type=int, default=3)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--block", type=int, default=256)
p.add_argument("--rank", type=int, default=16)
p.add_argument("--targets", default="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")
p.add_argument("--threads", type=int, default=2)
p.add_argument("--vocab", type=int, default=300)  # token ids drawn below the tokenizer's size
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=torch.float32,
                                             attn_implementation="sdpa")
model = get_peft_model(model, LoraConfig(r=a.rank, lora_alpha=2 * a.rank, lora_dropout=0.0,
                                         target_modules=a.targets.split(","), bias="none",
                                         task_type="CAUSAL_LM"))
model.train()
opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=2e-4,
                        weight_decay=0.0)
times = []
for _ in range(a.steps):
    x = torch.randint(0, a.vocab, (a.batch, a.block))
    t = time.perf_counter()
    loss = model(input_ids=x, labels=x).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_([q for q in model.parameters() if q.requires_grad], 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    times.append(time.perf_counter() - t)
print(json.dumps({"step_seconds": times,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
