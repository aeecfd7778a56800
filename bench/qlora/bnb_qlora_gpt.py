"""bitsandbytes side of the QLoRA benchmark: bitsandbytes' own CPU QLoRA on the same GPT.

The model is torch_lora_gpt.py's GPT (same shape, initialisation, batch and random tokens). Its
Linear layers (in_proj, out_proj, fc1, fc2 in every block) are replaced by bnb.nn.Linear4bit with NF4
codes and double quantization (compress_statistics=True), quantized on the CPU when the model is
moved there; peft wraps them in LoRA adapters of the same rank, alpha and targets as the other two
sides. The tied token embedding stays fp32, as on the other sides. The adapters train with bitsandbytes' 8-bit Adam when
it runs on the CPU (`--optimizer adam8bit`, the default), else the script says so in the JSON and
uses torch's Adam. Prints one JSON line like the other two sides.

bitsandbytes on the CPU is slow, so run it with few steps (`--warmup 1 --steps 1`) and, for a
quick look at the per-step cost, fewer layers (`--layers 2`): the cost per layer is what the
ratio compares.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_lora_gpt import GPT  # noqa: E402  the same model as the PyTorch side

import bitsandbytes as bnb  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def to_linear4bit(lin, compute_dtype):
    """bnb.nn.Linear4bit (NF4, double quant) holding `lin`'s weight; quantized by .to("cpu")."""
    q = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=lin.bias is not None,
                          compute_dtype=compute_dtype, compress_statistics=True,
                          quant_type="nf4", device="meta")
    q.weight = bnb.nn.Params4bit(lin.weight.data.clone(), requires_grad=False,
                                 compress_statistics=True, quant_type="nf4")
    if lin.bias is not None:
        q.bias = torch.nn.Parameter(lin.bias.data.clone())
    return q


def adam8bit_problem_on_cpu():
    """None when bnb's 8-bit Adam takes a step on a CPU tensor (8-bit state: >= 4096 elements),
    else what went wrong."""
    probe = torch.nn.Parameter(torch.randn(64, 128))
    probe.grad = torch.randn(64, 128)
    try:
        opt = bnb.optim.Adam8bit([probe], lr=1e-3)
        opt.step()
        state = opt.state[probe]
        if state["state1"].dtype != torch.uint8:
            return "its state is not 8-bit"
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {str(e)[:100]}"
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--lora-alpha", type=float, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16",
                   help="compute dtype of the 4-bit layers")
    p.add_argument("--optimizer", choices=["adam8bit", "adam"], default="adam8bit")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT(a.vocab, a.context, a.layers, a.width, a.heads)
    total = sum(t.numel() for t in model.parameters())
    for b in model.blocks:
        for name in ("in_proj", "out_proj", "fc1", "fc2"):
            setattr(b, name, to_linear4bit(getattr(b, name), DTYPES[a.dtype]))
    model = model.to("cpu")  # Params4bit quantizes here
    quantized = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert quantized and all(m.weight.bnb_quantized for m in quantized), "not quantized"
    q_numel = sum(m.in_features * m.out_features for m in quantized)
    q_bytes = 0
    for m in quantized:
        s = m.weight.quant_state
        q_bytes += m.weight.numel() * m.weight.element_size() + s.absmax.numel() * s.absmax.element_size()
        if s.nested:
            q_bytes += s.state2.absmax.numel() * 4 + 4
    rss_after_build = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    config = LoraConfig(r=a.lora_rank, lora_alpha=a.lora_alpha, lora_dropout=0.0,
                        target_modules=["in_proj", "out_proj", "fc1", "fc2"])
    model = get_peft_model(model, config)
    trainable = [t for t in model.parameters() if t.requires_grad]
    optimizer_note = "torch Adam"
    opt = None
    if a.optimizer == "adam8bit":
        problem = adam8bit_problem_on_cpu()
        if problem is None:
            opt = bnb.optim.Adam8bit(trainable, lr=a.lr)
            optimizer_note = "bnb Adam8bit"
        else:
            optimizer_note = f"torch Adam (bnb Adam8bit does not run on this CPU: {problem})"
    if opt is None:
        opt = torch.optim.Adam(trainable, lr=a.lr)

    gen = torch.Generator().manual_seed(1)
    times, losses = [], []
    for step in range(a.warmup + a.steps):
        tokens = torch.randint(0, a.vocab, (a.batch, a.context + 1), generator=gen)
        t0 = time.perf_counter()
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, a.vocab).float(), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        losses.append(loss.item())
        print(f"bnb step {step}: {dt:.2f} s, loss {loss.item():.4f}", file=sys.stderr, flush=True)
        if step >= a.warmup:
            times.append(dt)
    print(json.dumps({
        "framework": f"bitsandbytes {bnb.__version__} nf4-dq ({a.dtype} compute) + peft LoRA, "
                     f"{optimizer_note}",
        "layers": a.layers,
        "parameters": total,
        "quantized_bits_per_parameter": 8 * q_bytes / q_numel,
        "trainable_parameters": sum(t.numel() for t in trainable),
        "median_step_seconds": statistics.median(times),
        "step_seconds": times,
        "tokens_per_step": a.batch * a.context,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "peak_rss_after_build_bytes": rss_after_build,
        "first_loss": losses[0],
        "last_loss": losses[-1],
    }))


if __name__ == "__main__":
    main()
