"""One bitsandbytes Linear4bit (NF4, double quant) forward+backward on the CPU per compute dtype,
beside a plain fp32 nn.Linear: why bitsandbytes' CPU QLoRA speed hinges on the compute dtype
(docs/qlora.md, "The QLoRA benchmark"). Prints wall and process-CPU seconds per call; on a
loaded machine compare the CPU seconds.

    /work/venv-ref/bin/python bench/qlora/bnb_linear4bit_dtypes.py [--tokens 512] [--threads 1]
"""
import argparse
import time

import bitsandbytes as bnb
import torch


def timed(fn, repeats):
    out = []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        out.append((time.perf_counter() - t0, time.process_time() - c0))
    return min(out, key=lambda wc: wc[1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--in-features", type=int, default=768)
    p.add_argument("--out-features", type=int, default=3072)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    lin = torch.nn.Linear(a.in_features, a.out_features)
    x = torch.randn(a.tokens, a.in_features, requires_grad=True)

    def step(layer):
        return lambda: layer(x).sum().backward()

    rows = [("fp32 nn.Linear", timed(step(lin), a.repeats))]
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)):
        q = bnb.nn.Linear4bit(a.in_features, a.out_features, compute_dtype=dtype,
                              compress_statistics=True, quant_type="nf4")
        q.weight = bnb.nn.Params4bit(lin.weight.data.clone(), requires_grad=False,
                                     compress_statistics=True, quant_type="nf4")
        q = q.to("cpu")
        rows.append((f"bnb Linear4bit nf4-dq, {name} compute", timed(step(q), a.repeats)))
    print(f"{a.tokens} x {a.in_features} -> {a.out_features}, forward + backward, "
          f"{a.threads} thread(s), bitsandbytes {bnb.__version__}, torch {torch.__version__}")
    for name, (wall, cpu) in rows:
        print(f"{name:<40} wall {wall:7.3f} s   cpu {cpu:7.3f} s")


if __name__ == "__main__":
    main()
