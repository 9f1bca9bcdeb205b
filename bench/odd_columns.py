"""A product with an odd number of columns (GPT-2's LM head: vocabulary 50257), three ways.

    PYTHONPATH=src python3 bench/odd_columns.py [--rows 768,1048,1600,2048,3072] [--cols 50257]

For each row count M (batch 8 x sequence lengths 96, 131, 200, 256, 384): hidden (M, K) times
the transposed weight (K, N), bf16, timed as
  direct   aten.mm into a dense (M, N) result (its rows start at odd offsets: cuBLAS may take
           an unvectorized kernel),
  padded   runtime/wrapper_support.matmul_aligned on the transposed weight: the product of its
           first N - N % 8 columns and of the rest into rows padded to a multiple of 8, a block
           of rows at a time, each copied back dense (what tritonize runs for a graph output),
  padded, weight copied   the same with the weight copied with N padded (an operand whose
           columns are not 16-byte aligned),
  gemm     the padded product alone (no copies: what it costs when the result can stay padded),
  into_padded  the weight as it is, the product written into rows padded to a multiple of 8
           (aten.mm.out into a strided view), then copied dense; and that product alone.
  by_residue   matmul_aligned made to take its products by groups of rows at every M (the
           rows of one residue of the row index modulo 8, each group's product straight into
           the dense result; runtime/wrapper_support._product_by_row_residue), and "padded"
           made to take the padded blocks at every M: matmul_aligned chooses between them by M.
Reports microseconds per call (timed over 20 calls in a row) and which of direct / padded is faster.

--backward: the LM head's two backward products instead, the logits' gradient g (M, N) times the
weight (N, K) (odd depth) and g's transpose times the hidden states (M, K):
  direct        aten.mm on the dense g (odd row stride, odd depth),
  both padded   g and the weight copied with N padded by zeros, then one product (what matmul_aligned
                did before the thirty-first session),
  split         matmul_aligned now: g copied padded, the weight not copied; the depth's last N % 8
                steps a product of their own, the aligned rest added onto it (addmm, beta=1),
  split, g padded  the same with g stored in padded rows (what a kernel of ours writes for it:
                lower/product_rows.py): nothing copied,
  gT direct / gT padded  g's transpose times the hidden states, g dense (odd leading dimension)
                or in padded rows (a plain aten.mm).
"""
from __future__ import annotations

import argparse

import torch

from common import time_iterations
from tritonize.runtime import wrapper_support
from tritonize.runtime.wrapper_support import matmul_aligned


def _forced(rows_per_depth):
    """matmul_aligned with RESIDUE_MIN_ROWS_PER_DEPTH set for one call."""
    def run(*args):
        saved = wrapper_support.RESIDUE_MIN_ROWS_PER_DEPTH
        wrapper_support.RESIDUE_MIN_ROWS_PER_DEPTH = rows_per_depth
        try:
            return matmul_aligned(*args)
        finally:
            wrapper_support.RESIDUE_MIN_ROWS_PER_DEPTH = saved
    return run


def _into_padded(a, b, padded_cols):
    """a @ b written by aten.mm.out into the first columns of rows padded to padded_cols (b as it
    is: no copy of the weight); the (M, N) view of them."""
    out = torch.empty(a.shape[0], padded_cols, device=a.device, dtype=a.dtype)[:, :b.shape[1]]
    torch.mm(a, b, out=out)
    return out


def _repeated(fn, times):
    def run():
        for _ in range(times):
            fn()
    return run


def _time_us(ways: dict, device) -> dict:
    """Microseconds a call of each way, 20 calls a timing."""
    return {k: time_iterations(_repeated(f, 20), device, warmup=1, iters=5, rounds=3) * 1e6 / 20 for k, f in ways.items()}


def _check_exact_reductions(ways, grad, weight, hidden) -> None:
    """Each way against a float32 product, with cuBLAS's reduced-precision (bf16) reductions off for
    the check: with them on, a depth of 50257 rounds partial sums to bf16 and no two ways agree
    within a bf16 tolerance. Allowed: the tail product's own rounding and one of the result."""
    flag = torch.backends.cuda.matmul
    saved = flag.allow_bf16_reduced_precision_reduction
    flag.allow_bf16_reduced_precision_reduction = False
    try:
        checks = {"direct": torch.mm(grad.float(), weight.float()), "t_direct": torch.mm(grad.t().float(), hidden.float())}
        for way, reference in (("direct", "direct"), ("both_padded", "direct"), ("split", "direct"),
                               ("split_stored", "direct"), ("t_direct", "t_direct"), ("t_stored", "t_direct")):
            try:
                torch.testing.assert_close(ways[way]().float(), checks[reference], atol=0.05, rtol=2 ** -7)
            except AssertionError as error:  # reported, and the timings still run
                print(f"WRONG VALUES: {way}: {error}")
    finally:
        flag.allow_bf16_reduced_precision_reduction = saved


def backward_table(args, device, dtype) -> None:
    """--backward: the LM head's backward products (see the module's docstring)."""
    from tritonize.runtime.dense_copy import padded_rows

    cols, depth = args.cols, args.depth
    wide = -(-cols // 8) * 8
    weight = torch.randn(cols, depth, device=device, dtype=dtype)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, N={cols}, K={depth}, bf16; backward products")
    print("| M | direct us | both padded us | split us | split, g padded us | gT direct us | gT padded us |")
    print("|---|---|---|---|---|---|---|")
    for rows in (int(r) for r in args.rows.split(",")):
        grad = torch.randn(rows, cols, device=device, dtype=dtype)
        stored = torch.empty(rows, wide, device=device, dtype=dtype)[:, :cols]
        stored.copy_(grad)
        hidden = torch.randn(rows, depth, device=device, dtype=dtype)
        ways = {
            "direct": lambda: torch.mm(grad, weight),
            "both_padded": lambda: torch.mm(padded_rows(grad, rows, wide), padded_rows(weight, wide, depth)),
            "split": lambda: matmul_aligned(torch.ops.aten.mm.out, grad, weight),
            "split_stored": lambda: matmul_aligned(torch.ops.aten.mm.out, stored, weight),
            "t_direct": lambda: torch.mm(grad.t(), hidden),
            "t_stored": lambda: torch.mm(stored.t(), hidden),
        }
        _check_exact_reductions(ways, grad, weight, hidden)
        us = _time_us(ways, device)
        print(f"| {rows} | " + " | ".join(f"{us[k]:.1f}" for k in ways) + " |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="768,1048,1600,2048,3072")
    parser.add_argument("--cols", type=int, default=50257)
    parser.add_argument("--depth", type=int, default=768)
    parser.add_argument("--backward", action="store_true", help="the LM head's backward products")
    args = parser.parse_args()
    device, dtype = "cuda", torch.bfloat16
    if args.backward:
        return backward_table(args, device, dtype)
    weight = torch.randn(args.cols, args.depth, device=device, dtype=dtype)
    padded_cols = -(-args.cols // 8) * 8
    weight_padded = torch.zeros(padded_cols, args.depth, device=device, dtype=dtype)
    weight_padded[:args.cols].copy_(weight)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, N={args.cols}, K={args.depth}, bf16")
    weight_rows = weight.t().contiguous()  # (K, N) row-major, odd row stride: matmul_aligned copies it padded
    print("| M | direct us | padded us | padded, weight copied us | padded GEMM alone us | into padded rows us | "
          "its GEMM alone us | by residue us | faster |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rows in (int(r) for r in args.rows.split(",")):
        hidden = torch.randn(rows, args.depth, device=device, dtype=dtype)
        ways = {
            "direct": lambda: torch.mm(hidden, weight.t()),
            "padded": lambda: _forced(float("inf"))(torch.ops.aten.mm.out, hidden, weight.t()),
            "weight_copied": lambda: matmul_aligned(torch.ops.aten.mm.out, hidden, weight_rows),
            "gemm": lambda: torch.mm(hidden, weight_padded.t()),
            "into_padded": lambda: _into_padded(hidden, weight.t(), padded_cols).contiguous(),
            "into_padded_gemm": lambda: _into_padded(hidden, weight.t(), padded_cols),
            "by_residue": lambda: _forced(0)(torch.ops.aten.mm.out, hidden, weight.t()),
        }
        torch.testing.assert_close(ways["padded"](), ways["direct"](), atol=0.5, rtol=0.05)
        # 20 calls a timing: one call's events alone measure the host's launches of the small products
        us = _time_us(ways, device)
        faster = "direct" if us["direct"] < us["padded"] else "padded"
        torch.testing.assert_close(ways["into_padded"](), ways["direct"](), atol=0.5, rtol=0.05)
        torch.testing.assert_close(ways["weight_copied"](), ways["direct"](), atol=0.5, rtol=0.05)
        torch.testing.assert_close(ways["by_residue"](), ways["direct"](), atol=0.5, rtol=0.05)
        print(f"| {rows} | {us['direct']:.1f} | {us['padded']:.1f} | {us['weight_copied']:.1f} | {us['gemm']:.1f} | "
              f"{us['into_padded']:.1f} | {us['into_padded_gemm']:.1f} | {us['by_residue']:.1f} | {faster} |")


if __name__ == "__main__":
    main()
