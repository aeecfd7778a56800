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


def bench_mlp(precision, batch, warmup, steps):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(),
                              torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                              torch.nn.Linear(1024, 10)).cuda()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)  # PyTorch's default (foreach) AdamW
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "16-mixed")
    x = torch.randn(batch, 784, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    low = torch.float16 if precision == "16-mixed" else torch.bfloat16

    def step():
        opt.zero_grad()
        with torch.autocast("cuda", dtype=low, enabled=precision != "32-true"):
            loss = torch.nn.functional.cross_entropy(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        last = step()
    loss = last.item()
    t = (time.perf_counter() - t0) / steps
    print(f"mlp {precision} {t * 1e3:.3f} ms/step (loss {loss:.4f}, "
          f"peak {torch.cuda.max_memory_allocated() >> 20} MiB)")


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    print(f"device {torch.cuda.get_device_name(0)} (torch {torch.__version__})")
    torch.backends.cuda.matmul.allow_tf32 = False
    if what in ("all", "gemm"):
        bench_gemm("bf16", torch.bfloat16, 4096, 50)
        bench_gemm("fp16", torch.float16, 4096, 50)
        bench_gemm("fp32", torch.float32, 4096, 10)
        torch.backends.cuda.matmul.allow_tf32 = True
        bench_gemm("tf32", torch.float32, 4096, 20)
        torch.backends.cuda.matmul.allow_tf32 = False
    if what in ("all", "mlp"):
        for precision in ("32-true", "16-mixed", "bf16-mixed"):
            bench_mlp(precision, 512, 10, 100)


if __name__ == "__main__":
    main()
