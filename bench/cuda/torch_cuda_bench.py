"""PyTorch eager on the same GPU, the same cases as bench/cuda/cuda_bench.cpp, the same lines.

Not a dependency of mantissa: the side-by-side of bench/cuda/run.sh (docs/cuda.md).
"""
import sys
import time

import torch


def bench_gemm(name, dtype, n, reps):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(n, n, generator=g).to(dtype).cuda()
    b = torch.randn(n, n, generator=g).to(dtype).cuda()
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize()
    t = (time.perf_counter() - t0) / reps
    print(f"gemm {name} {2 * n ** 3 / t / 1e12:.1f} TFLOP/s")


def bench_gemm_fp8(n, reps):
    """torch._scaled_mm on E4M3 codes with per-tensor scales, bf16 out: cuBLASLt's FP8 GEMM."""
    g = torch.Generator().manual_seed(1)
    a = (torch.randn(n, n, generator=g) * 64).cuda().to(torch.float8_e4m3fn)
    b = (torch.randn(n, n, generator=g) * 64).cuda().to(torch.float8_e4m3fn)
    s = torch.tensor(1 / 64, device="cuda")
    run = lambda: torch._scaled_mm(a, b.t(), scale_a=s, scale_b=s, out_dtype=torch.bfloat16)
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        run()
    torch.cuda.synchronize()
    t = (time.perf_counter() - t0) / reps
    print(f"gemm fp8 {2 * n ** 3 / t / 1e12:.1f} TFLOP/s")


def make_step(precision, opt, scaler, forward_loss):
    """One AdamW step under autocast (mixed precisions) with the GradScaler (16-mixed)."""
    low = torch.float16 if precision == "16-mixed" else torch.bfloat16

    def step():
        opt.zero_grad()
        with torch.autocast("cuda", dtype=low, enabled=precision != "32-true"):
            loss = forward_loss()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    return step


def time_steps(step, warmup, steps):
    """Seconds per step after `warmup`, up to the host's read of the last loss."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        last = step()
    loss = last.item()
    return (time.perf_counter() - t0) / steps, loss


def bench_mlp(precision, batch, warmup, steps):
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()
    net = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(),
                              torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                              torch.nn.Linear(1024, 10)).cuda()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)  # PyTorch's default (foreach) AdamW
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "16-mixed")
    x = torch.randn(batch, 784, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    step = make_step(precision, opt, scaler,
                     lambda: torch.nn.functional.cross_entropy(net(x), y))
    t, loss = time_steps(step, warmup, steps)
    print(f"mlp {precision} {t * 1e3:.3f} ms/step (loss {loss:.4f}, "
          f"peak {torch.cuda.max_memory_allocated() >> 20} MiB)")


class Block(torch.nn.Module):
    """Pre-norm block as mantissa/models/gpt.h: causal self-attention and a 4x GELU MLP."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        # PyTorch eager as users write it: the fused (flash) attention.
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x)), approximate="tanh"))


class Gpt(torch.nn.Module):
    def __init__(self, layers, d, heads, context, vocab=256):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(context, d)
        self.blocks = torch.nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(d)
        for p in self.parameters():  # GPT-2's N(0, 0.02), as mantissa/models/gpt.h (speed is the same)
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        h = self.ln(self.blocks(self.tok(idx) + self.pos(pos)))
        return h @ self.tok.weight.t()  # tied head, as mantissa/models/gpt.h


def bench_gpt(precision, layers, d, heads, context, batch, warmup, steps):
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()
    gpt = Gpt(layers, d, heads, context).cuda()
    opt = torch.optim.AdamW(gpt.parameters(), lr=3e-4)
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "16-mixed")
    tokens = torch.randint(0, 256, (batch, context + 1), device="cuda")
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    # The loss in fp32 whatever the logits' dtype, as GPT::loss (mantissa/models/gpt.h).
    step = make_step(precision, opt, scaler, lambda: torch.nn.functional.cross_entropy(
        gpt(x).float().view(-1, 256), y.view(-1)))
    t, loss = time_steps(step, warmup, steps)
    print(f"gpt{layers} {precision} {t * 1e3:.3f} ms/step ({batch * context / t:.0f} tokens/s, "
          f"loss {loss:.4f}, peak {torch.cuda.max_memory_allocated() >> 20} MiB)")
    return t


def bench_gpt_graphed(precision, layers, d, heads, context, batch, warmup, steps):
    """bench_gpt with forward and backward captured once in a CUDA graph (torch.cuda.graph) and
    replayed; the optimizer step and the scaler eager, as mantissa's train::GraphedStep."""
    torch.manual_seed(0)
    gpt = Gpt(layers, d, heads, context).cuda()
    opt = torch.optim.AdamW(gpt.parameters(), lr=3e-4)
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "16-mixed")
    tokens = torch.randint(0, 256, (batch, context + 1), device="cuda")
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    low = torch.float16 if precision == "16-mixed" else torch.bfloat16

    def forward_backward():
        # autocast's weight cache must be off inside a capture (PyTorch's CUDA graphs notes).
        with torch.autocast("cuda", dtype=low, enabled=precision != "32-true", cache_enabled=False):
            loss = torch.nn.functional.cross_entropy(gpt(x).float().view(-1, 256), y.view(-1))
        scaler.scale(loss).backward()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as the docs do it
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            forward_backward()
            scaler.step(opt)
            scaler.update()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)  # the capture's backward makes the gradients in its pool
    with torch.cuda.graph(graph):
        static_loss = forward_backward()

    def step():
        graph.replay()
        scaler.step(opt)
        scaler.update()
        return static_loss.clone()

    t, loss = time_steps(step, warmup, steps)
    print(f"gpt{layers} {precision}+graphs {t * 1e3:.3f} ms/step ({batch * context / t:.0f} "
          f"tokens/s, loss {loss:.4f})")
    return t


def bench_attention(name, dtype):
    """Causal attention at the GPT-2-sized model's shape, forward + backward, as cuda_bench."""
    b, h, t, d = 16, 12, 256, 64
    g = torch.Generator(device="cuda").manual_seed(5)
    qkv = torch.randn(b, t, 3 * h * d, device="cuda", generator=g).to(dtype).requires_grad_()
    dy = torch.randn(b, h, t, d, device="cuda", generator=g).to(dtype)

    def run():
        q, k, v = qkv.view(b, t, 3, h, d).permute(2, 0, 3, 1, 4)
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).backward(dy)

    for _ in range(3):
        run()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(50):
        run()
    torch.cuda.synchronize()
    print(f"attn {name} {(time.perf_counter() - t0) / 50 * 1e3:.3f} ms "
          f"(forward + backward, causal 16x12x256x64)")


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    print(f"device {torch.cuda.get_device_name(0)} (torch {torch.__version__})")
    torch.backends.cuda.matmul.allow_tf32 = False
    if what in ("all", "gemm"):
        bench_gemm("bf16", torch.bfloat16, 4096, 50)
        bench_gemm("fp16", torch.float16, 4096, 50)
        bench_gemm("fp32", torch.float32, 4096, 10)
        if torch.cuda.get_device_capability(0) >= (8, 9):
            bench_gemm_fp8(4096, 50)
        torch.backends.cuda.matmul.allow_tf32 = True
        bench_gemm("tf32", torch.float32, 4096, 20)
        torch.backends.cuda.matmul.allow_tf32 = False
    if what in ("all", "attn"):
        bench_attention("bf16", torch.bfloat16)
        bench_attention("fp16", torch.float16)
        bench_attention("fp32", torch.float32)
    if what in ("all", "mlp"):
        for precision in ("32-true", "16-mixed", "bf16-mixed"):
            bench_mlp(precision, 512, 10, 100)
    if what in ("all", "gpt"):
        for layers, d, heads, context in ((6, 256, 8, 128), (12, 768, 12, 256)):
            fp32 = bench_gpt("32-true", layers, d, heads, context, 16, 5, 30)
            fp16 = bench_gpt("16-mixed", layers, d, heads, context, 16, 5, 30)
            bench_gpt("bf16-mixed", layers, d, heads, context, 16, 5, 30)
            print(f"speedup gpt{layers} 16-mixed/32-true {fp32 / fp16:.2f}x")
    if what in ("all", "graphs"):
        for layers, d, heads, context in ((6, 256, 8, 128), (12, 768, 12, 256)):
            ms = {}
            for precision in ("32-true", "16-mixed", "bf16-mixed"):
                ms[precision] = (bench_gpt(precision, layers, d, heads, context, 16, 5, 50),
                                 bench_gpt_graphed(precision, layers, d, heads, context, 16, 5, 50))
            print(f"speedup gpt{layers} 16-mixed/32-true with graphs "
                  f"{ms['32-true'][1] / ms['16-mixed'][1]:.2f}x "
                  f"(eager {ms['32-true'][0] / ms['16-mixed'][0]:.2f}x)")


if __name__ == "__main__":
    main()
