"""`make demo`: compile a small MLP and a transformer block with tritonize, print what was
generated, check the results against eager, and (on a GPU) compare eager and compiled time."""
from __future__ import annotations

import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tritonize


class MLP(nn.Module):
    def __init__(self, d_in: int, d_hidden: int, d_out: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_in, d_hidden), nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x))).relu()


class TransformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = MLP(dim, 4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attention.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


def _time(fn, x, repeat: int = 20) -> float:
    fn(x)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        fn(x)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeat * 1e3


def run_example(name: str, model: nn.Module, x: torch.Tensor) -> bool:
    with torch.no_grad():
        expected = model(x)
        report = tritonize.explain(model, x)
        compiled = torch.compile(model, backend="tritonize")
        actual = compiled(x)
    tol = 1e-4 if x.dtype == torch.float32 else 3e-2
    ok = torch.allclose(actual, expected, atol=tol, rtol=tol)
    print(f"== {name}: {'matches eager' if ok else 'MISMATCH'} "
          f"(max abs diff {(actual - expected).abs().max().item():.2e})")
    print(report)
    if x.is_cuda:
        with torch.no_grad():
            print(f"   eager {_time(model, x):.3f} ms, tritonize {_time(compiled, x):.3f} ms")
    return ok


def main() -> int:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    big = device == "cuda"
    # On a GPU, sizes where the device work outweighs the per-launch host cost of either side.
    mlp = MLP(1024, 4096, 1024) if big else MLP(32, 64, 16)
    block = TransformerBlock(1024, 16) if big else TransformerBlock(32, 4)
    ok = run_example("MLP", mlp.to(device, dtype).eval(),
                     torch.randn(8192 if big else 8, mlp.fc1.in_features, device=device, dtype=dtype))
    ok &= run_example("transformer block", block.to(device, dtype).eval(),
                      torch.randn(16 if big else 2, 512 if big else 8, block.qkv.in_features,
                                  device=device, dtype=dtype))
    print("demo: all results match eager" if ok else "demo: MISMATCH against eager")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
