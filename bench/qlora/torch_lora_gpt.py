"""PyTorch + peft side of the QLoRA benchmark: fp32 LoRA fine-tuning steps of the same GPT.

The model mirrors mantissa's models/gpt.cpp (GPT-2 layout): token + position embeddings,
pre-LayerNorm blocks with a fused (3E, E) qkv projection as a Linear (`in_proj`, as GPT-2's
c_attn), causal scaled-dot-product attention, an out_proj Linear, a 4E MLP with tanh-GELU, a
final LayerNorm and a head tied to the token embedding. peft wraps in_proj, out_proj, fc1 and
fc2 (mantissa's default LoRA targets: every Linear layer); everything else is frozen, as peft
does. Prints one JSON line: median step seconds over the timed steps and the peak RSS.
"""
import argparse
import json
import resource
import statistics
import time

import torch
import torch.nn.functional as F
from peft import LoraConfig, get_peft_model


class Block(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(width)
        self.in_proj = torch.nn.Linear(width, 3 * width)
        self.out_proj = torch.nn.Linear(width, width)
        self.ln2 = torch.nn.LayerNorm(width)
        self.fc1 = torch.nn.Linear(width, 4 * width)
        self.fc2 = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, e = x.shape
        h = self.in_proj(self.ln1(x))
        q, k, v = h.view(b, t, 3, self.heads, e // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out_proj(a.transpose(1, 2).reshape(b, t, e))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(torch.nn.Module):
    def __init__(self, vocab, context, layers, width, heads):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, width)
        self.wpe = torch.nn.Embedding(context, width)
        self.blocks = torch.nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(width)
        # GPT-2's initialisation, as models/gpt.cpp: N(0, 0.02), residual projections scaled by
        # 1/sqrt(2 * layers), biases zero.
        resid = 0.02 / (2 * layers) ** 0.5
        with torch.no_grad():
            for emb in (self.wte, self.wpe):
                emb.weight.normal_(0, 0.02)
            for b in self.blocks:
                inits = ((b.in_proj, 0.02), (b.out_proj, resid), (b.fc1, 0.02), (b.fc2, resid))
                for lin, std in inits:
                    lin.weight.normal_(0, std)
                    lin.bias.zero_()

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.t()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--lora-alpha", type=float, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-4)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT(a.vocab, a.context, a.layers, a.width, a.heads)
    total = sum(t.numel() for t in model.parameters())
    config = LoraConfig(r=a.lora_rank, lora_alpha=a.lora_alpha, lora_dropout=0.0,
                        target_modules=["in_proj", "out_proj", "fc1", "fc2"])
    model = get_peft_model(model, config)
    trainable = [t for t in model.parameters() if t.requires_grad]
    opt = torch.optim.Adam(trainable, lr=a.lr)
    gen = torch.Generator().manual_seed(1)
    times, losses = [], []
    for step in range(a.warmup + a.steps):
        tokens = torch.randint(0, a.vocab, (a.batch, a.context + 1), generator=gen)
        t0 = time.perf_counter()
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        losses.append(loss.item())
        if step >= a.warmup:
            times.append(dt)
    print(json.dumps({
        "framework": f"torch {torch.__version__} fp32 + peft LoRA",
        "parameters": total,
        "trainable_parameters": sum(t.numel() for t in trainable),
        "median_step_seconds": statistics.median(times),
        "step_seconds": times,
        "tokens_per_step": a.batch * a.context,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "first_loss": losses[0],
        "last_loss": losses[-1],
    }))


if __name__ == "__main__":
    main()
