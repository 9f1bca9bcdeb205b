"""Lowerings of indirect writes: index_put (with and without accumulate), scatter (src, value,
reduce="add"), scatter_add, scatter_reduce(sum), index_add, index_copy and index_fill
(scatter_reduce's and index_reduce's other reductions: lower/scatter_reduce.py).

Indices wrap (a negative one counts from the end) only where eager's do: index_put (x[i] = v) and
index_fill; scatter, index_add and index_copy reject a negative index like eager.

The general form is a copy of the destination into a fresh buffer (a generated kernel), then a
ScatterOp (ir/scatter.py) that writes the updates into it: plain stores, or atomic adds where
writes may collide. Accumulating into fp16/bf16 or small integer types goes through an fp32 /
int32 copy (atomics need 32 bits; fp32 sums are also closer to eager's), cast back lazily.

Two forms need no scatter kernel and stay lazy (they fuse like any pointwise op):
* one update per row (the index has size 1 along `dim` and the destination's size elsewhere),
  as cross_entropy's backward writes -1 at the target: out = where(d[dim] == idx, src, dest);
* a boolean-mask index_put with a single value (x[mask] = v): out = where(mask, v, x).
"""
from __future__ import annotations

import sympy
import torch

from ..errors import Unsupported
from ..ir import expr as ex
from ..ir.nodes import TensorValue, buffer_value
from ..ir.scatter import ScatterOp, binding
from ..ir.symbols import dim_vars
from .dtypes import upcast
from .indexing import require_index_dtype, advanced_index, check_text, normalize_dim
from .pointwise import broadcast_index
from .registry import lowering

aten = torch.ops.aten

ACCUMULATE_IN = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.int8: torch.int32,
                 torch.uint8: torch.int32, torch.int16: torch.int32, torch.bool: torch.int32}
ATOMIC_ADD_DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64)
# ScatterOp modes (ir/scatter.py) written with atomics; "store" and "nan" (a store of the NaN
# updates alone, lower/scatter_reduce.py) are plain stores
ATOMIC_MODES = ("add", "max", "min")


def _numel(size) -> int:
    n = 1
    for s in size:
        n *= s
    return n


def _cast(value: TensorValue, dtype: torch.dtype) -> TensorValue:
    return TensorValue(value.size, dtype, value.device, ex.to_dtype(value.body, dtype))


def scatter_into_copy(ctx, node, dest: TensorValue, size, bindings, position_fn, value: ex.Expr,
                      mode: str) -> TensorValue:
    """A fresh copy of dest with `value` stored (or added) at position_fn(bound symbols) for every
    element of `size`. Returns the result as a lazy value in dest's dtype."""
    if _numel(dest.size) == 0:
        raise Unsupported("scatter into an empty tensor")
    dtype = dest.dtype
    work_dtype = ACCUMULATE_IN.get(dtype, dtype) if mode in ATOMIC_MODES else dtype
    if mode == "add" and work_dtype not in ATOMIC_ADD_DTYPES:
        raise Unsupported(f"accumulating scatter into {dtype}")
    if mode == "add" and work_dtype.is_floating_point and torch.are_deterministic_algorithms_enabled():
        raise Unsupported("deterministic algorithms requested: atomic float adds sum in any order")
    stride = _eager_strides(node) if work_dtype == dtype else None
    copy = ctx.compute_buffer(_cast(dest, work_dtype), stride)
    if _numel(size) == 0:
        return _cast(buffer_value(copy.name, copy.layout), dtype)
    position = position_fn([b.symbol for b in bindings])
    op = ScatterOp(ctx.new_name("scatter"), copy.name, tuple(size), tuple(bindings),
                   copy.layout.index(position), ex.to_dtype(value, work_dtype), mode, [ctx.origin()])
    ctx.operations.append(op)
    return _cast(buffer_value(copy.name, copy.layout), dtype)


def _eager_strides(node):
    from .graph import dense_strides  # graph.py imports this module

    meta = node.meta.get("val")
    return dense_strides(meta) if isinstance(meta, torch.Tensor) else None


# --- index_put ------------------------------------------------------------------------------

@lowering(aten.index_put.default)
def lower_index_put(ctx, node, x, indices, values, accumulate=False):
    if x.rank == 0:
        raise Unsupported("index_put into a 0-d tensor")
    tensors = [i for i in indices if i is not None]
    if any(i.dtype in (torch.bool, torch.uint8) for i in tensors):
        return _masked_index_put(node, x, indices, values, accumulate)
    plan = advanced_index(x.size, indices)
    if len(values.size) > len(plan.size) or any(
            v not in (1, s) for v, s in zip(reversed(values.size), reversed(plan.size))):
        raise Unsupported(f"index_put values of shape {list(values.size)} for {list(plan.size)} positions")
    check = check_text(node)
    bindings = [binding(plan.values[k], x.size[k], True, check) for k in sorted(plan.values)]
    value = ex.to_dtype(values.at(broadcast_index(values, plan.size, ctx.sizes)), x.dtype)

    def position(symbols):
        bound = dict(zip(sorted(plan.values), symbols))
        return [bound[k] if k in bound else plan.source[k] for k in range(x.rank)]

    return scatter_into_copy(ctx, node, x, plan.size, bindings, position, value,
                             "add" if accumulate else "store")


def _masked_index_put(node, x, indices, values, accumulate):
    """x[mask] = v with one value: where(mask, v, x), no data-dependent sizes."""
    positions = [k for k, i in enumerate(indices) if i is not None]
    if len(positions) != 1 or _numel(values.size) != 1:
        raise Unsupported("boolean-mask index_put with several index tensors or values (data-dependent)")
    start = positions[0]
    mask = indices[start]
    if tuple(mask.size) != tuple(x.size[start:start + mask.rank]):
        raise Unsupported("boolean mask shaped unlike the dims it indexes")
    out = dim_vars(x.rank)
    selected = ex.to_dtype(mask.at(out[start:start + mask.rank]), torch.bool)
    current = x.body
    new = ex.to_dtype(values.at([0] * values.rank), x.dtype)
    if accumulate:
        new = _add(current, new)
    body = ex.op("where", selected, new, current, dtype=x.dtype)
    return TensorValue(x.size, x.dtype, x.device, body)


def _add(a: ex.Expr, b: ex.Expr) -> ex.Expr:
    """a + b in torch's arithmetic for a's dtype (bool adds as logical or)."""
    if a.dtype == torch.bool:
        return ex.op("logical_or", a, b, dtype=torch.bool)
    compute = torch.float32 if a.dtype in (torch.float16, torch.bfloat16) else a.dtype
    total = ex.op("add", ex.to_dtype(a, compute), ex.to_dtype(b, compute), dtype=compute)
    return ex.to_dtype(total, a.dtype)


# --- scatter along a dim --------------------------------------------------------------------

def _scatter(ctx, node, x, dim, index, src, mode):
    """scatter/scatter_add: x[..., index[d], ...] (=|+=) src[d] for every d in index's shape."""
    require_index_dtype(index, "scatter")
    if x.rank == 0 or index.rank != x.rank:
        raise Unsupported("scatter of 0-d tensors")
    dim = normalize_dim(dim, x.rank)
    out = dim_vars(index.rank)
    check = check_text(node)

    def src_at(at):
        if isinstance(src, TensorValue):
            return ex.to_dtype(src.at(at), x.dtype)
        return ex.constant(src, x.dtype)

    if _one_per_row(ctx.sizes, x, index, dim):
        return _scatter_one_per_row(x, index, dim, src_at, mode, check)
    bindings, position_fn = along_dim(node, x, dim, index.at(out), out)
    return scatter_into_copy(ctx, node, x, index.size, bindings, position_fn, src_at(out), mode)


def along_dim(node, x, dim: int, index: ex.Expr, out: list) -> tuple:
    """(bindings, position_fn) of a write along dim: the element at `out` goes to x's position
    `out` with `index` (an integer Expr over `out`, not wrapped: a negative one is out of
    bounds, as in eager) in place of out[dim]."""
    bindings = [binding(index, x.size[dim], False, check_text(node))]
    return bindings, lambda symbols: out[:dim] + [symbols[0]] + out[dim + 1:]


def _one_per_row(sizes, x, index, dim) -> bool:
    """Whether index holds one position for each row of x along dim (cross entropy's backward:
    a -1 at each row's target). Symbolic sizes equal only at run time (the targets' and the
    logits' row counts, separate symbols) are guarded equal."""
    equal = sizes.guard_equal if sizes is not None else (lambda a, b: a == b)
    return index.size[dim] == 1 and all(equal(index.size[k], x.size[k]) for k in range(x.rank) if k != dim)


def _scatter_one_per_row(x, index, dim, src_at, mode, check):
    """Each row along dim receives exactly one update: a pointwise where, no scatter kernel."""
    out = dim_vars(x.rank)
    row = out[:dim] + [sympy.Integer(0)] + out[dim + 1:]
    current = x.body

    def body(t):
        hit = ex.op("eq", ex.index_expr(out[dim], torch.int64), ex.index_expr(t, torch.int64), dtype=torch.bool)
        new = src_at(row)
        if mode == "add":
            new = _add(current, new)
        return ex.op("where", hit, new, current, dtype=x.dtype)

    return TensorValue(x.size, x.dtype, x.device, ex.indirect(index.at(row), x.size[dim], False, check, body))


@lowering(aten.scatter.src, aten.scatter.value)
def lower_scatter(ctx, node, x, dim, index, src):
    return _scatter(ctx, node, x, dim, index, src, "store")


@lowering(aten.scatter.reduce, aten.scatter.value_reduce)
def lower_scatter_reduce_arg(ctx, node, x, dim, index, src, *, reduce):
    if reduce != "add":
        raise Unsupported(f"scatter with reduce={reduce!r}")
    return _scatter(ctx, node, x, dim, index, src, "add")


@lowering(aten.scatter_add.default)
def lower_scatter_add(ctx, node, x, dim, index, src):
    return _scatter(ctx, node, x, dim, index, src, "add")


def sum_scatter_reduce(ctx, node, x, dim, index, src, include_self: bool):
    """scatter_reduce(reduce="sum") (the other reductions: lower/scatter_reduce.py)."""
    if not include_self:  # positions that receive updates start from zero
        x = _scatter(ctx, node, x, dim, index, 0, "store")
    return _scatter(ctx, node, x, dim, index, src, "add")


# --- index_add / index_copy / index_fill ----------------------------------------------------

@lowering(aten.index_add.default)
def lower_index_add(ctx, node, x, dim, index, source, *, alpha=1):
    return _index_along(ctx, node, x, dim, index, source, "add", alpha)


@lowering(aten.index_copy.default)
def lower_index_copy(ctx, node, x, dim, index, source):
    return _index_along(ctx, node, x, dim, index, source, "store")


@lowering(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)
def lower_index_fill(ctx, node, x, dim, index, value):
    """x with value at every position along dim that index names; a negative index counts from
    the end, as in eager."""
    _check_index_along(node, x, index)
    dim = normalize_dim(dim, x.rank)
    size = x.size[:dim] + (_numel(index.size),) + x.size[dim + 1:]
    out = dim_vars(len(size))
    fill = value.at([]) if isinstance(value, TensorValue) else ex.constant(value, x.dtype)
    bindings = [binding(index.at(out[dim:dim + index.rank]), x.size[dim], True, check_text(node))]
    return scatter_into_copy(ctx, node, x, size, bindings,
                             lambda symbols: out[:dim] + [symbols[0]] + out[dim + 1:],
                             ex.to_dtype(fill, x.dtype), "store")


def _check_index_along(node, x, index) -> None:
    require_index_dtype(index, f"{node.target}")
    if x.rank == 0 or index.rank > 1:
        raise Unsupported(f"{node.target} of a 0-d tensor or with a {index.rank}-d index")


def _index_along(ctx, node, x, dim, index, source, mode, alpha=1):
    """x with source's slice k stored (or added, times alpha) at position index[k] along dim.
    The index does not wrap: a negative one is out of bounds, as in eager."""
    _check_index_along(node, x, index)
    if source.rank != x.rank:
        raise Unsupported(f"{node.target} with a {source.rank}-d source")
    dim = normalize_dim(dim, x.rank)
    if any(s != n for k, (s, n) in enumerate(zip(source.size, x.size)) if k != dim):
        raise Unsupported(f"{node.target} with a source of shape {list(source.size)}")
    out = dim_vars(source.rank)
    bindings, position_fn = along_dim(node, x, dim, index.at(out[dim:dim + index.rank]), out)
    value = source.at(out)
    if alpha != 1:
        if x.dtype == torch.bool:
            raise Unsupported("index_add of bools with alpha")
        compute = upcast(x.dtype)
        value = ex.op("mul", ex.to_dtype(value, compute), ex.constant(alpha, compute), dtype=compute)
    return scatter_into_copy(ctx, node, x, source.size, bindings, position_fn,
                             ex.to_dtype(value, x.dtype) if alpha == 1 else value, mode)
