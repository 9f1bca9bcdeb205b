"""Ops run through aten from the wrapper: externs on purpose (matmul, conv, attention, sort) and
fallbacks for ops we do not lower. Their tensor arguments are realized first; their results are
buffers whose layout comes from the FX node's metadata (checked again at run time)."""
from __future__ import annotations

import torch

from ..ir.nodes import TensorValue, contiguous_strides, strided_view_of
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


# Attention kernels picked at trace time for the layouts traced there (a mask or q/k/v with a
# contiguous last dim): our lowering drops clone/contiguous, so such arguments are realized so again.
ATTENTION_OPS = {
    aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_cudnn_attention, aten._scaled_dot_product_flash_attention_for_cpu,
    aten._scaled_dot_product_flash_attention_backward,
    aten._scaled_dot_product_efficient_attention_backward,
    aten._scaled_dot_product_cudnn_attention_backward,
    aten._scaled_dot_product_flash_attention_for_cpu_backward,
}


def call_through_aten(ctx, node, args, kwargs, reason: str = ""):
    kind = "extern" if is_extern(node.target) else "fallback"
    if getattr(node.target, "overloadpacket", None) in ATTENTION_OPS:
        args = tuple(_realize_as_traced(ctx, a, n) for a, n in zip(args, node.args))
        kwargs = {k: _realize_as_traced(ctx, v, node.kwargs[k]) for k, v in kwargs.items()}
    args = realize_arguments(ctx, tuple(args))
    kwargs = realize_arguments(ctx, dict(kwargs))
    return ctx.extern_call(node.target, args, kwargs, meta_value(node), kind, reason)


def _realize_as_traced(ctx, value, traced_node):
    """A tensor the trace saw with a contiguous last dim, realized with the traced strides if
    ours would not have it (e.g. a broadcast mask whose `.contiguous()` we elided)."""
    traced = getattr(traced_node, "meta", {}).get("val")
    if not isinstance(value, TensorValue) or not isinstance(traced, torch.Tensor) or traced.dim() == 0:
        return value
    if traced.stride(-1) != 1 or traced.size(-1) <= 1:
        return value
    view = strided_view_of(value)
    if view is not None and view[2][-1] == 1:
        return value
    stride = tuple(traced.stride())
    if any(st == 0 and n > 1 for st, n in zip(stride, traced.shape)):  # broadcast dims: store dense
        stride = contiguous_strides(value.size)
    return ctx.realize(value, stride=stride)
