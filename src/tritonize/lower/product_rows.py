"""Rows at 16-byte boundaries for the operands of products (option `align_matmuls`).

cuBLAS's vectorized kernels need each operand's leading dimension (its row stride) to be a
multiple of 16 bytes. runtime/wrapper_support.matmul_aligned copies an operand whose rows are not:
GPT-2's logits' gradient (50257 bf16 wide; 393 MiB at 4096 rows) was copied padded for the LM
head's two backward products. A value our kernels compute for an mm or addmm is instead stored
with its rows padded to 16 bytes, as Inductor's stride padding does: the kernel writes through the
strides, the products read it as it is, nothing is copied. A value a graph output is or views keeps
eager's layout (the output would need a copy at the graph's edge).

A product of odd width that no graph output views is itself returned in padded rows (a strided
view of them), not copied back dense (`padded_product_strides`): its readers are our kernels, other
products and aten ops, which all take strides.

"auto" pads on CUDA only; "always" on every device (tests run the whole path on the CPU, where
matmul_aligned runs aten's CPU products); "never" keeps every layout as traced and sends no
product through matmul_aligned.
"""
from __future__ import annotations

import torch

from ..ir.nodes import TensorValue, contiguous_strides, strided_view_of
from .dtypes import symbolic_size

aten = torch.ops.aten
# the products whose operands are padded, with the positions of their two operands
PRODUCT_OPERANDS = {aten.mm.default: (0, 1), aten.addmm.default: (1, 2)}
PADDED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MIN_PADDED_MATMUL_MACS = 1 << 28  # M*N*K; smaller products: the copies would cost more than they save


def aligns_products(options, device: torch.device) -> bool:
    """Whether products on `device` run with rows at 16-byte boundaries (matmul_aligned)."""
    return options.align_matmuls == "always" or (options.align_matmuls == "auto" and device.type == "cuda")


def padded_row_strides(options, size: tuple, dtype: torch.dtype, device: torch.device) -> tuple | None:
    """Row-major strides of a tensor of `size` with each row padded to a multiple of 16 bytes,
    where its row width is a number that is not one (and more than 16 bytes: a product over fewer
    columns gains nothing); None otherwise."""
    if len(size) < 2 or dtype not in PADDED_DTYPES or not aligns_products(options, device):
        return None
    width, unit = size[-1], 16 // dtype.itemsize
    if not isinstance(width, int) or width % unit == 0 or width <= unit:
        return None
    return contiguous_strides((*size[:-1], -(-width // unit) * unit))


def with_aligned_operands(ctx, target, args: tuple, traced_args: tuple, store) -> tuple:
    """A product's arguments with each operand our kernels still have to compute stored in padded
    rows (`store(value, strides)`), unless a graph output views the value it computes."""
    positions = PRODUCT_OPERANDS.get(target, ())
    out = list(args)
    for i in positions:
        value = args[i] if i < len(args) else None
        if not isinstance(value, TensorValue) or traced_args[i] in ctx.output_views \
                or strided_view_of(value, ctx.sizes) is not None:  # a view of a tensor that exists
            continue
        strides = padded_row_strides(ctx.options, value.size, value.dtype, value.device)
        if strides is not None:
            out[i] = store(value, strides)
    return tuple(out)


def padded_product_strides(ctx, node, args: tuple, meta) -> tuple | None:
    """Padded row strides for an mm/addmm's own result (matmul_aligned's padded_rows=True), where
    its width is a number that is not a multiple of 16 bytes, its sizes are numbers with a
    product big enough for the wrapper to align it (MIN_PADDED_MATMUL_MACS: a smaller one is
    computed as it is, dense), addmm's bias is 1-D, and no graph output views it."""
    if node.target not in PRODUCT_OPERANDS or node in ctx.output_views or not isinstance(meta, torch.Tensor):
        return None
    if node.target == aten.addmm.default and len(args[0].size) != 1:
        return None
    size = symbolic_size(meta.shape)
    sizes = (*size, args[PRODUCT_OPERANDS[node.target][1]].size[0])
    if not all(isinstance(n, int) for n in sizes) or sizes[0] * sizes[1] * sizes[2] < MIN_PADDED_MATMUL_MACS:
        return None
    return padded_row_strides(ctx.options, size, meta.dtype, meta.device)
