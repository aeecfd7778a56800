"""Writes a randomly initialised Llama model directory with transformers (no network).

Shapes (--shape):
  smollm-135m    SmolLM-135M: 30 layers, hidden 576, 9 heads / 3 KV heads, intermediate 1536,
                 vocab 49152, tied embeddings, rope_theta 10000
  tinyllama-1.1b TinyLlama-1.1B: 22 layers, hidden 2048, 32 heads / 4 KV heads, intermediate
                 5632, vocab 32000, untied head
The weights are saved as safetensors in --dtype (bf16 by default: both models ship their
weights in bf16 on the Hub). An existing directory whose bench_shape.json names the same shape
and dtype is kept, so reruns skip the (slow) initialisation.
"""
import argparse
import json
import os
import sys

SHAPES = {
    "smollm-135m": dict(num_hidden_layers=30, hidden_size=576, num_attention_heads=9,
                        num_key_value_heads=3, intermediate_size=1536, vocab_size=49152,
                        tie_word_embeddings=True, rope_theta=10000.0,
                        max_position_embeddings=2048, rms_norm_eps=1e-5),
    "tinyllama-1.1b": dict(num_hidden_layers=22, hidden_size=2048, num_attention_heads=32,
                           num_key_value_heads=4, intermediate_size=5632, vocab_size=32000,
                           tie_word_embeddings=False, rope_theta=10000.0,
                           max_position_embeddings=2048, rms_norm_eps=1e-5),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", choices=sorted(SHAPES), required=True)
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    marker = os.path.join(a.out, "bench_shape.json")
    want = {"shape": a.shape, "dtype": a.dtype}
    if os.path.exists(marker) and json.load(open(marker)) == want:
        print(f"make_model: {a.out} already holds {a.shape} in {a.dtype}", file=sys.stderr)
        return
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    config = LlamaConfig(**SHAPES[a.shape], bos_token_id=1, eos_token_id=2)
    torch.set_default_dtype(dtype)  # initialise in the saved dtype: half the memory for bf16
    model = LlamaForCausalLM(config).eval()
    torch.set_default_dtype(torch.float32)
    os.makedirs(a.out, exist_ok=True)
    model.save_pretrained(a.out, safe_serialization=True, max_shard_size="20GB")
    json.dump(want, open(marker, "w"))
    n = sum(t.numel() for t in model.parameters())
    print(f"make_model: wrote {a.shape} ({n / 1e6:.1f}M parameters, {a.dtype}) to {a.out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
