"""Ops run through aten from the wrapper: externs on purpose (matmul, conv, attention, sort) and
fallbacks for ops we do not lower. Their tensor arguments are realized first; their results are
buffers whose layout comes from the FX node's metadata (checked again at run time)."""
from __future__ import annotations

import torch

from ..errors import Unsupported
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


def call_through_aten(ctx, node, args, kwargs, reason: str = ""):
    if not isinstance(node.target, torch._ops.OpOverload):  # sym_float, operator.truediv...
        raise Unsupported(f"{getattr(node.target, '__name__', node.target)} has no lowering and is not an aten op"
                          + (f" ({reason})" if reason else ""))
    kind = "extern" if is_extern(node.target) else "fallback"
    args = tuple(_realize_as_traced(ctx, a, n) for a, n in zip(args, node.args))
    kwargs = {k: _realize_as_traced(ctx, v, node.kwargs.get(k)) for k, v in kwargs.items()}
    args = realize_arguments(ctx, tuple(args))
    kwargs = realize_arguments(ctx, dict(kwargs))
    return ctx.extern_call(node.target, args, kwargs, meta_value(node), kind, reason)


def _realize_as_traced(ctx, value, traced_node):
    """An aten op gets a view of an existing buffer as it is, unless the trace gave it a
    contiguous last dim and the view has none: our lowering drops clone/contiguous, and the op
    may have been chosen for that layout (SDPA picks its fused kernel at trace time, for a mask
    made contiguous by graph_passes). Then it gets a copy with the traced strides. Computed
    values are stored contiguous anyway."""
    if not isinstance(value, TensorValue) or not all(isinstance(n, int) for n in value.size):
        return value  # data-dependent sizes (the output of nonzero...) are left as they are
    if value.rank == 0 or value.size[-1] <= 1:
        return value
    view = strided_view_of(value)
    traced = getattr(traced_node, "meta", {}).get("val")
    if view is None or view[2][-1] == 1 or not isinstance(traced, torch.Tensor):
        return value
    stride = tuple(traced.stride())
    if not all(isinstance(st, int) for st in stride) or stride[-1] != 1:
        return value
    if any(st == 0 and n > 1 for st, n in zip(stride, traced.shape)):  # broadcast dims: store dense
        stride = contiguous_strides(value.size)
    return ctx.realize(value, stride=stride)
