"""Ops run through aten from the wrapper: externs on purpose (matmul, conv, attention, sort) and
fallbacks for ops we do not lower. Their tensor arguments are realized first; their results are
buffers whose layout comes from the FX node's metadata (checked again at run time)."""
from __future__ import annotations

import torch

from ..ir.nodes import TensorValue
from .dtypes import meta_value

aten = torch.ops.aten

# Library kernels we call on purpose: faster than anything we would generate for them today.
# Training's backward graphs call the backward kernels of the same libraries.
EXTERN_OPS = {
    aten.mm, aten.bmm, aten.addmm, aten.baddbmm, aten.convolution, aten._convolution,
    aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_cudnn_attention, aten._scaled_dot_product_flash_attention_for_cpu,
    aten.scaled_dot_product_attention, aten.mv, aten.dot,
    aten.convolution_backward, aten._scaled_dot_product_flash_attention_backward,
    aten._scaled_dot_product_efficient_attention_backward,
    aten._scaled_dot_product_cudnn_attention_backward,
    aten._scaled_dot_product_flash_attention_for_cpu_backward,
    # sort and topk: the library's radix and selection kernels (we generate no sorts yet)
    aten.sort, aten.topk,
}


def is_extern(target) -> bool:
    return getattr(target, "overloadpacket", target) in EXTERN_OPS


def realize_arguments(ctx, value):
    """Replace every TensorValue inside (nested) arguments by a TensorArg."""
    if isinstance(value, TensorValue):
        return ctx.realize(value)
    if isinstance(value, (list, tuple)):
        return type(value)(realize_arguments(ctx, v) for v in value)
    if isinstance(value, dict):
        return {k: realize_arguments(ctx, v) for k, v in value.items()}
    return value


def call_through_aten(ctx, node, args, kwargs, reason: str = ""):
    kind = "extern" if is_extern(node.target) else "fallback"
    args = realize_arguments(ctx, tuple(args))
    kwargs = realize_arguments(ctx, dict(kwargs))
    return ctx.extern_call(node.target, args, kwargs, meta_value(node), kind, reason)
