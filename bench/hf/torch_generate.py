#!/usr/bin/env python3
"""transformers' fp32 greedy generate for bench/hf/run.py: NEW tokens after a prompt of PROMPT
random ids (no early stop), 2 threads. Prints {"tokens_per_second": x}."""
import argparse
import json
import time

import torch
from transformers import AutoModelForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--model-dir", required=True)
p.add_argument("--prompt-tokens", type=int, default=8)
p.add_argument("--new", type=int, default=32)
p.add_argument("--threads", type=int, default=2)
a = p.parse_args()
torch.set_num_threads(a.threads)
model = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=torch.float32).eval()
ids = torch.randint(3, 300, (1, a.prompt_tokens), generator=torch.Generator().manual_seed(0))
with torch.no_grad():
    t = time.perf_counter()
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                         max_new_tokens=a.new, min_new_tokens=a.new, pad_token_id=0)
    s = time.perf_counter() - t
print(json.dumps({"tokens_per_second": (out.shape[1] - ids.shape[1]) / s}))
