"""A strided 2-D view copied into a new dense tensor by one tiled Triton kernel (or into a
larger one, zeros around it: a padded operand).

matmul_aligned computes a product of odd width into rows padded to 16 bytes and must hand the
graph a dense result (eager's strides). aten's copy of a non-contiguous tensor finds each
element's source by division and ran at about 1.6 TB/s on an H100 for GPT-2's logits (383 us of a
2.5 ms step at batch 8 x 384); this kernel reads whole row segments and writes them in order.
On the CPU it runs in Triton's interpreter (runtime/loader.py), like every generated kernel.
"""
from __future__ import annotations

import functools

import torch
import triton

from .loader import load_source_module

SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def copy_rows(src, dst, rows, cols, src_row_stride, dst_rows, dst_cols, ALIGN: tl.constexpr,
              DST_ALIGN: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
    inside = (r < rows) & (c < cols)
    start = tl.multiple_of(r.to(tl.int64) * src_row_stride, [ALIGN, 1])
    value = tl.load(src + start + c, inside, other=0)
    out = tl.multiple_of(r.to(tl.int64) * dst_cols, [DST_ALIGN, 1])
    tl.store(dst + out + c, value, (r < dst_rows) & (c < dst_cols))
'''
# Tiles of 8K elements, 4 warps: on the H100 (GPT-2's logits, 3072 x 50257 bf16) 2 x 4096 took
# 248 us, 8 x 2048 253, 4 x 1024 285, aten's copy 375 (one sweep of 34 shapes, noisy by ~10%).
BLOCK_R, BLOCK_C = 2, 4096


@functools.cache
def _kernel_module(interpret: bool):
    """The kernel's module, loaded once per target (not hashed again at every call)."""
    return load_source_module(SOURCE, "dense_copy", interpret=interpret)


def dense_rows(view: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """A dense copy of a 2-D view whose rows are contiguous (stride (s, 1), s >= its width), into
    `out` (dense, the view's shape) when given."""
    rows, cols = view.shape
    if out is None:
        out = torch.empty((rows, cols), dtype=view.dtype, device=view.device)
    assert out.shape == view.shape and out.is_contiguous(), (out.shape, out.stride())
    _copy(view, out)
    return out


def padded_rows(view: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """A new dense (rows, cols) tensor holding a 2-D view with contiguous rows in its top left
    corner and zeros elsewhere: one kernel (matmul_aligned's padded operands)."""
    out = torch.empty((rows, cols), dtype=view.dtype, device=view.device)
    _copy(view, out)
    return out


def _copy(view: torch.Tensor, out: torch.Tensor) -> None:
    if out.numel() == 0:
        return
    rows, cols = view.shape
    assert view.stride(1) == 1 or cols == 1, view.stride()
    module = _kernel_module(view.device.type == "cpu")
    grid = (triton.cdiv(out.shape[0], BLOCK_R), triton.cdiv(out.shape[1], BLOCK_C))
    module.copy_rows[grid](view, out, rows, cols, view.stride(0), out.shape[0], out.shape[1],
                           ALIGN=_alignment(view, view.stride(0)), DST_ALIGN=_alignment(out, out.shape[1]),
                           BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C, num_warps=4)


def _alignment(t: torch.Tensor, row_stride: int) -> int:
    """Elements every row start is a multiple of, in 16-byte units (1: rows not 16-byte aligned)."""
    aligned = (row_stride * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0
    return max(1, 16 // t.element_size()) if aligned else 1
