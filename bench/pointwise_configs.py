"""Launch-config sweep for generated pointwise kernels (GPU): which XBLOCK / tile / num_warps
reaches the most bandwidth on the kernel-suite cases. Feeds runtime/heuristics.py.

    PYTHONPATH=src python3 bench/pointwise_configs.py [case,case...]
"""
from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
import triton
import triton.testing

import tritonize
from tritonize.runtime.loader import load_source_module

N, M = 16384, 4096


def cases():
    bf = dict(device="cuda", dtype=torch.bfloat16)
    yield "gelu_bias", lambda x, b: F.gelu(x + b), (torch.randn(N, M, **bf), torch.randn(M, **bf))
    yield "relu_abc", lambda a, b, c: torch.relu(a * b + c), tuple(torch.randn(N, M, **bf) for _ in range(3))
    yield "silu_mul", lambda a, b: F.silu(a) * b, tuple(torch.randn(N, M, **bf) for _ in range(2))
    yield "transpose_add", lambda x, y: x.t() + y, tuple(torch.randn(4096, 4096, **bf) for _ in range(2))


def copy_bandwidth() -> float:
    src = torch.empty(2**29, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), return_mode="median")
    return 2 * src.numel() / ms / 1e6


def sweep(name, fn, args, copy_gbs):
    report = tritonize.explain(fn, *args)
    kernel = report.kernels[0]
    module = load_source_module(kernel.source, "kernel", interpret=False)
    jit_fn = getattr(module, kernel.name)
    out = torch.empty_like(fn(*args))
    nbytes = sum(a.numel() * a.element_size() for a in args) + out.numel() * out.element_size()
    numel = out.numel()
    two_d = "YBLOCK" in kernel.source
    rows = []
    if two_d:
        xnumel = int(kernel.source.split("xnumel = ")[1].split("\n")[0])
        ynumel = numel // xnumel
        for yb, xb, w in itertools.product([16, 32, 64, 128, 256], [32, 64, 128, 256], [2, 4, 8, 16]):
            if not 1024 <= yb * xb <= 32768 or yb * xb < 32 * w * 4:
                continue
            grid = (triton.cdiv(xnumel, xb) * triton.cdiv(ynumel, yb),)
            ms = triton.testing.do_bench(lambda: jit_fn[grid](*args, out, YBLOCK=yb, XBLOCK=xb, PDL=False, num_warps=w),
                                         return_mode="median")
            rows.append((f"Y{yb} X{xb} w{w}", ms))
    else:
        for xb, w in itertools.product([512, 1024, 2048, 4096], [2, 4, 8, 16]):
            if xb // (32 * w) < 1:
                continue
            grid = (triton.cdiv(numel, xb),)
            ms = triton.testing.do_bench(lambda: jit_fn[grid](*args, out, XBLOCK=xb, PDL=False, num_warps=w),
                                         return_mode="median")
            rows.append((f"X{xb} w{w}", ms))
    rows.sort(key=lambda r: r[1])
    for config, ms in rows[:6]:
        gbs = nbytes / ms / 1e6
        print(f"{name:14s} {config:16s} {ms * 1e3:8.1f} us {gbs:7.0f} GB/s {100 * gbs / copy_gbs:5.1f}% of copy")


def main():
    copy_gbs = copy_bandwidth()
    print(f"copy bandwidth {copy_gbs:.0f} GB/s")
    import sys
    only = sys.argv[1].split(",") if len(sys.argv) > 1 else None
    for name, fn, args in cases():
        if only is None or name in only:
            sweep(name, fn, args, copy_gbs)


if __name__ == "__main__":
    main()
