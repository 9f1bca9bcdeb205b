"""Ops run through aten from the wrapper: externs on purpose (matmul, conv, attention, sort, and
random ops under the fallback_random option), collectives (torch.distributed's functional
collectives, `_c10d_functional`: their own kind, scheduled by schedule/collectives.py) and
fallbacks for ops we do not lower. Their tensor arguments are realized first; their results are
buffers whose layout comes from the FX node's metadata (checked again at run time).

Strides of the arguments: an op whose result depends on its inputs' strides gets eager's. Custom
ops (torch.library) get exactly the traced strides unless their layout tag says they are
flexible (torch's default for them is needs_exact_strides: a custom op may check
`x.is_contiguous()` or read the raw storage), and random ops under fallback_random do too (rand_like
and bernoulli fill in the input's memory order, so other strides would give other numbers)."""
from __future__ import annotations

import torch
from torch._library.utils import get_layout_constraint_tag

from ..errors import Unsupported
from ..ir.nodes import TensorValue, contiguous_strides, strided_view_of, writes_no_argument
from ..ir.sizes import at_most_one
from ..ir.symbols import FloorDiv
from .conv_layout import channels_last_arguments, channels_last_meta, channels_last_strides
from .decompositions import is_random_op
from .product_rows import PRODUCT_OPERANDS, aligns_products, padded_product_strides, with_aligned_operands
from .dtypes import meta_value, symbolic_size

aten = torch.ops.aten

# Library kernels we call on purpose: faster than anything we would generate for them today.
# Training's backward graphs call the backward kernels of the same libraries.
# Matmuls read their operands in whatever strides (lower/graph.py's shared values rely on it).
MATMUL_OPS = {aten.mm, aten.bmm, aten.addmm, aten.baddbmm, aten.mv, aten.dot}
EXTERN_OPS = MATMUL_OPS | {
    aten.convolution, aten._convolution,
    aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_cudnn_attention, aten._scaled_dot_product_flash_attention_for_cpu,
    aten.scaled_dot_product_attention,
    aten.convolution_backward, aten._scaled_dot_product_flash_attention_backward,
    aten._scaled_dot_product_efficient_attention_backward,
    aten._scaled_dot_product_cudnn_attention_backward,
    aten._scaled_dot_product_flash_attention_for_cpu_backward,
    # sort and topk: the library's radix and selection kernels (we generate no sorts yet)
    aten.sort, aten.topk,
}


# The memory-efficient attention kernel reads its bias in aligned rows: every stride but the last
# a multiple of 16 bytes. Eager's sdpa pads the bias's last dim to a multiple of 16 elements and
# passes a slice of that; a bias we compute is stored the same way (position of the argument).
ALIGNED_BIAS_ARGUMENT = {
    aten._scaled_dot_product_efficient_attention.default: 3,
    aten._scaled_dot_product_efficient_attention_backward.default: 4,
}
BIAS_ROW_ALIGNMENT = 16  # elements, as eager pads

RANDOM_THROUGH_ATEN = "random op through aten (option fallback_random)"
STRICT_LAYOUT_TAGS = (torch.Tag.needs_exact_strides, torch.Tag.needs_fixed_stride_order,
                      torch.Tag.needs_contiguous_strides)


def is_extern(target, options) -> bool:
    """Called through aten on purpose: a library kernel, a collective, or a random op when the
    user asked for eager's random numbers."""
    return (getattr(target, "overloadpacket", target) in EXTERN_OPS or is_collective(target)
            or random_through_aten(target, options))


COLLECTIVE_NAMESPACE = "_c10d_functional"


def is_collective(target) -> bool:
    """A functional collective (all_reduce, all_gather_into_tensor, reduce_scatter_tensor,
    all_to_all_single, broadcast, their _coalesced forms) or the wait that completes one."""
    return isinstance(target, torch._ops.OpOverload) and target.namespace == COLLECTIVE_NAMESPACE


def random_through_aten(target, options) -> bool:
    return options.fallback_random and is_random_op(target)


def needs_traced_strides(target, options) -> bool:
    """The op must see its arguments with the strides they had in the trace (eager's)."""
    if random_through_aten(target, options):
        return True
    if not isinstance(target, torch._ops.OpOverload) or target.namespace in ("aten", "prims"):
        return False
    return get_layout_constraint_tag(target) in STRICT_LAYOUT_TAGS


def realize_arguments(ctx, value, store=None):
    """Replace every TensorValue inside (nested) arguments by a TensorArg, made by `store`
    (ctx.realize by default; ctx.realize_read_only for an op that writes none of them)."""
    store = store or ctx.realize
    if isinstance(value, TensorValue):
        return store(value)
    if isinstance(value, (list, tuple)):
        return type(value)(realize_arguments(ctx, v, store) for v in value)
    if isinstance(value, dict):
        return {k: realize_arguments(ctx, v, store) for k, v in value.items()}
    return value


def call_through_aten(ctx, node, args, kwargs, reason: str = ""):
    if not isinstance(node.target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)):
        # a Python function in the graph (sym_float, operator.truediv on sizes): no op to call
        raise Unsupported(f"{getattr(node.target, '__name__', node.target)} has no lowering and is not an op"
                          + (f" ({reason})" if reason else ""))
    kind = "collective" if is_collective(node.target) else "extern" if is_extern(node.target, ctx.options) \
        else "fallback"
    if random_through_aten(node.target, ctx.options):
        reason = RANDOM_THROUGH_ATEN  # the wrapper's comment on the call says why
    exact = needs_traced_strides(node.target, ctx.options)
    realize = _realize_exactly_as_traced if exact else _realize_as_traced
    store = ctx.realize_read_only if writes_no_argument(node.target) else ctx.realize
    channels_last = channels_last_arguments(ctx.options, node.target, args)
    args = tuple(store(a, channels_last_strides(tuple(a.size))) if i in channels_last
                 else realize(ctx, a, n, store) for i, (a, n) in enumerate(zip(args, node.args)))
    if node.target in ALIGNED_BIAS_ARGUMENT:
        args = _with_aligned_bias(ctx, args, ALIGNED_BIAS_ARGUMENT[node.target], store)
    traced = meta_value(node)
    align_rows = node.target in PRODUCT_OPERANDS and aligns_products(ctx.options, traced.device)
    if align_rows:
        args = with_aligned_operands(ctx, node.target, args, node.args, store)
    kwargs = {k: realize(ctx, v, node.kwargs.get(k), store) for k, v in kwargs.items()}
    args = realize_arguments(ctx, tuple(args), store)
    kwargs = realize_arguments(ctx, dict(kwargs), store)
    meta = channels_last_meta(traced) if channels_last else traced
    align_rows = align_rows and kind == "extern"
    stride = padded_product_strides(ctx, node, args, meta) if align_rows else None
    return ctx.extern_call(node.target, args, kwargs, meta, kind, reason, align_rows, stride)


def _realize_as_traced(ctx, value, traced_node, store):
    """An aten op gets a view of an existing buffer as it is, unless the trace gave it a
    contiguous last dim and the view has none: our lowering drops clone/contiguous, and the op
    may have been chosen for that layout (SDPA picks its fused kernel at trace time, for a mask
    made contiguous by graph_passes). Then it gets a copy with the traced strides. Computed
    values are stored contiguous anyway. Symbolic sizes too (a channels-last value stored NCHW
    and viewed as attention's query had a last stride of H*W); data-dependent ones (the output
    of nonzero...) are left as they are."""
    if not isinstance(value, TensorValue) or value.rank == 0 or not _sizes_known(ctx, value.size):
        return value
    if at_most_one(value.size[-1]):
        return value
    view = strided_view_of(value)
    traced = getattr(traced_node, "meta", {}).get("val")
    if view is None or view[2][-1] == 1 or not isinstance(traced, torch.Tensor):
        return value
    stride = symbolic_size(traced.stride())
    if stride[-1] != 1:
        return value
    if any(st == 0 and not at_most_one(n) for st, n in zip(stride, value.size)):  # broadcast dims: store dense
        stride = contiguous_strides(value.size)
    return store(value, stride)


def _sizes_known(ctx, size) -> bool:
    """Sizes that are numbers, or symbols with example values (not data-dependent)."""
    return ctx.sizes.is_backed(size) if ctx.sizes is not None else all(isinstance(n, int) for n in size)


def _with_aligned_bias(ctx, args: tuple, position: int, store) -> tuple:
    """args with the attention bias at `position` stored in aligned rows, unless it is a view
    whose rows already are (ALIGNED_BIAS_ARGUMENT)."""
    bias = args[position] if position < len(args) else None
    if not isinstance(bias, TensorValue) or bias.rank == 0:
        return args
    view = strided_view_of(bias, ctx.sizes)
    if view is not None and _has_aligned_rows(ctx.sizes, bias.size, view[2], view[3]):
        return args
    return args[:position] + (store(bias, aligned_row_strides(bias.size)),) + args[position + 1:]


def _has_aligned_rows(sizes, size, stride, offset) -> bool:
    """Every stride but the last (of dims longer than 1) and the offset are provably multiples of
    BIAS_ROW_ALIGNMENT elements, and the last stride is 1."""
    if size[-1] != 1 and stride[-1] != 1:
        return False
    leading = [st for n, st in zip(size[:-1], stride[:-1]) if n != 1]
    return all(sizes.known_multiple(n, BIAS_ROW_ALIGNMENT) for n in [offset, *leading])


def aligned_row_strides(size) -> tuple:
    """Row-major strides of `size` with each row (the last dim) padded to BIAS_ROW_ALIGNMENT."""
    row = FloorDiv(size[-1] + BIAS_ROW_ALIGNMENT - 1, BIAS_ROW_ALIGNMENT) * BIAS_ROW_ALIGNMENT
    return contiguous_strides((*size[:-1], row))


def _realize_exactly_as_traced(ctx, value, traced_node, store):
    """value (or each tensor of a list of them) as a tensor with the traced strides: a view of an
    existing buffer when it has them (size-1 dims aside), else a copy with them. A traced layout
    with overlapping elements (an expand) cannot be written by a kernel: it gets dense strides."""
    if isinstance(value, (list, tuple)) and isinstance(traced_node, (list, tuple)):
        return type(value)(_realize_exactly_as_traced(ctx, v, n, store) for v, n in zip(value, traced_node))
    traced = getattr(traced_node, "meta", {}).get("val")
    if not isinstance(value, TensorValue) or not isinstance(traced, torch.Tensor) \
            or not all(isinstance(n, int) for n in (*value.size, *traced.stride())):
        return value
    stride = tuple(traced.stride())
    view = strided_view_of(value)
    if view is not None and all(a == b or n <= 1 for n, a, b in zip(value.size, view[2], stride)):
        return ctx.realize(value)
    from .graph import dense_strides  # graph.py imports this module

    return store(value, dense_strides(traced))
