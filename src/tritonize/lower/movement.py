"""Lowerings of data movement beyond single views, all as index maps (no copies):

* several views at once: split, split_with_sizes, unbind (and chunk, which decomposes to split);
* repeat (modular indices) and unfold (sliding windows);
* scatters of a whole view: slice_scatter, select_scatter, diagonal_scatter -- the input, with
  the positions of the view replaced by `src` (a mask picks them); as_strided_scatter, which
  addresses storage, is a copy laid out like eager's input and a ScatterOp writing into it;
* the `*_copy` variants of the views (view_copy, permute_copy, ...): in this functional IR a copy
  is the view itself; graph outputs that eager does not alias get their own buffer anyway
  (lower/graph.py).
"""
from __future__ import annotations

import sympy
import torch

from ..errors import CompileError, Unsupported
from ..ir import expr as ex
from ..ir.nodes import TensorValue, buffer_value
from ..ir.scatter import ScatterOp
from ..ir.symbols import FloorDiv, ModularIndexing, dim_vars, simplify_with_ranges
from . import views
from .dtypes import symbolic_size
from .pointwise import output_of
from .registry import lowering
from .storage import overlaps

aten = torch.ops.aten


def index_view(x: TensorValue, size, index) -> TensorValue:
    """x read through `index` as a value of shape `size` (a view of one of several outputs)."""
    size = tuple(size)
    ranges = dict(zip(dim_vars(len(size)), size))
    body = ex.map_indices(x.at(index), lambda e: simplify_with_ranges(e, ranges))
    return TensorValue(size, x.dtype, x.device, body)


def _dim(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


# --- several views at once -----------------------------------------------------------------


def _split(x: TensorValue, sizes, dim: int) -> tuple:
    dim = _dim(dim, x.rank)
    out = dim_vars(x.rank)
    pieces, start = [], 0
    for length in sizes:
        size = list(x.size)
        size[dim] = length
        index = list(out)
        index[dim] = out[dim] + start
        pieces.append(index_view(x, size, index))
        start += length
    return tuple(pieces)


@lowering(aten.split_with_sizes, aten.split_with_sizes_copy)
def lower_split_with_sizes(ctx, node, x, split_sizes, dim=0):
    return _split(x, split_sizes, dim)


@lowering(aten.split.Tensor, aten.split_copy.Tensor)
def lower_split(ctx, node, x, split_size, dim=0):
    length = x.size[_dim(dim, x.rank)]
    if split_size <= 0:
        raise Unsupported(f"split into pieces of size {split_size}")
    sizes = [min(split_size, length - start) for start in range(0, length, split_size)] or [0]
    return _split(x, sizes, dim)


@lowering(aten.unbind.int, aten.unbind_copy.int)
def lower_unbind(ctx, node, x, dim=0):
    dim = _dim(dim, x.rank)
    out = dim_vars(x.rank - 1)
    size = x.size[:dim] + x.size[dim + 1:]
    return tuple(index_view(x, size, out[:dim] + [sympy.Integer(k)] + out[dim:]) for k in range(x.size[dim]))


# --- repeat and unfold ---------------------------------------------------------------------


@lowering(aten.repeat.default)
def lower_repeat(ctx, node, x, repeats):
    size, dtype, device = output_of(node)
    if any(s == 0 for s in size):  # nothing to read (an empty input has no element to repeat)
        return TensorValue(size, dtype, device, ex.constant(0, dtype))
    out = dim_vars(len(size))
    lead = len(size) - x.rank
    index = [sympy.Integer(0) if s == 1 else ModularIndexing(out[lead + k], 1, s) for k, s in enumerate(x.size)]
    return views.view_of(node, x, index)


@lowering(aten.unfold.default, aten.unfold_copy.default)
def lower_unfold(ctx, node, x, dimension, size, step):
    if x.rank == 0:  # a 0-d tensor unfolds to its one element (size is 0 or 1)
        return views.view_of(node, x, [])
    dim = _dim(dimension, x.rank)
    out = dim_vars(x.rank + 1)
    index = out[:x.rank]
    index[dim] = out[dim] * step + out[x.rank]
    return views.view_of(node, x, index)


# --- scatters of a view ----------------------------------------------------------------------


def _replace_where(node, x: TensorValue, mask: ex.Expr, src_value: ex.Expr) -> TensorValue:
    """x with the elements where `mask` holds taken from src_value (an Expr over the output index)."""
    size, dtype, device = output_of(node)
    out = dim_vars(len(size))
    kept = ex.to_dtype(x.at(out), dtype)
    body = ex.op("where", mask, ex.masked(mask, ex.to_dtype(src_value, dtype), 0), kept, dtype=dtype)
    return TensorValue(size, dtype, device, body)


def _index_eq(index: sympy.Expr, value: int) -> ex.Expr:
    return ex.op("eq", ex.index_expr(index, torch.int64), ex.constant(value, torch.int64), dtype=torch.bool)


def _all(checks: list) -> ex.Expr:
    mask = checks[0]
    for check in checks[1:]:
        mask = ex.op("logical_and", mask, check, dtype=torch.bool)
    return mask


@lowering(aten.slice_scatter.default)
def lower_slice_scatter(ctx, node, x, src, dim=0, start=None, end=None, step=1):
    dim = _dim(dim, x.rank)
    length = x.size[dim]
    if all(isinstance(v, int) for v in (start or 0, end or 0, length)):
        start = 0 if start is None else (start + length if start < 0 else start)
        end = length if end is None else (end + length if end < 0 else end)
        start, end = max(0, min(length, start)), max(0, min(length, end))
        if src.size[dim] == 0 or start >= end:
            return x
    else:
        start, end = _symbolic_slice_bounds(ctx, start, end, length, step)
    out = dim_vars(x.rank)
    # position i is replaced when start <= i < end and step divides i - start; it then holds
    # src[(i - start) // step]. Shift by a multiple of step so the arguments stay non-negative.
    shift = step * -(-start // step) - start
    position = ex.index_expr(out[dim], torch.int64)
    checks = [c for c in [ex.op("ge", position, _int_value(start), dtype=torch.bool)
                          if not _known_equal(ctx, start, 0) else None,
                          ex.op("lt", position, _int_value(end), dtype=torch.bool)
                          if not _known_equal(ctx, end, length) else None,
                          _index_eq(ModularIndexing(out[dim] + shift, 1, step), 0) if step > 1 else None]
              if c is not None]
    index = list(out)
    index[dim] = FloorDiv(out[dim] + shift, step) - (shift + start) // step
    if not checks:  # src covers all of x
        size, dtype, device = output_of(node)
        return TensorValue(size, dtype, device, ex.to_dtype(src.at(index), dtype))
    return _replace_where(node, x, _all(checks), src.at(index))


def _symbolic_slice_bounds(ctx, start, end, length, step):
    """slice_scatter's [start, end) with symbolic values or length: known to lie in [0, length]
    without clamping (the trace's sizes assumed so), else the op runs through aten. With a
    step, the start must be a number (`x[::2] += 1` over a symbolic length): the positions the
    step selects are counted from it."""
    if step != 1 and not isinstance(start if start is not None else 0, int):
        raise Unsupported("slice_scatter with a step from a symbolic start")
    end = length if end is None or (isinstance(end, int) and end >= length_limit()) else end
    bounds = []
    for value in (0 if start is None else start, end):
        value = views.from_the_end(ctx, value, length, "slice_scatter bound")
        if not (ctx.sizes.known_le(0, value) and ctx.sizes.known_le(value, length)):
            raise Unsupported(f"slice_scatter bound {value} not known to lie in [0, {length}]")
        bounds.append(value)
    return tuple(bounds)


def _known_equal(ctx, a, b) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return ctx.sizes.known_equal(a, b)


def length_limit() -> int:
    """An end at or past this many elements means "to the end" (torch writes sys.maxsize)."""
    return 2**62


def _int_value(value) -> ex.Expr:
    """An int64 Expr of a bound: a constant, or a symbolic size."""
    return ex.constant(value, torch.int64) if isinstance(value, int) else ex.index_expr(sympy.sympify(value), torch.int64)


@lowering(aten.select_scatter.default)
def lower_select_scatter(ctx, node, x, src, dim, position):
    dim = _dim(dim, x.rank)
    position = views.from_the_end(ctx, position, x.size[dim], "select_scatter position")
    out = dim_vars(x.rank)
    return _replace_where(node, x, _index_eq(out[dim], position), src.at(out[:dim] + out[dim + 1:]))


@lowering(aten.diagonal_scatter.default)
def lower_diagonal_scatter(ctx, node, x, src, offset=0, dim1=0, dim2=1):
    d1, d2 = _dim(dim1, x.rank), _dim(dim2, x.rank)
    out = dim_vars(x.rank)
    rest = [out[k] for k in range(x.rank) if k not in (d1, d2)]
    diag = out[d1] - max(-offset, 0)
    mask = _index_eq(out[d2] - out[d1], offset)
    return _replace_where(node, x, mask, src.at(rest + [diag]))


@lowering(aten.as_strided_scatter.default)
def lower_as_strided_scatter(ctx, node, x, src, size, stride, storage_offset=None):
    """x with src written at storage positions offset + sum(stride * index) of x's eager layout.

    Eager clones x keeping its strides and storage offset, then writes through as_strided: so
    the copy is laid out like eager's x (meta["val"]: a graph input's own layout, gaps of a
    step slice included, as eager's clone keeps them) and the writes address that copy from x's
    storage offset."""
    source = node.args[0]
    meta = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
    if not isinstance(meta, torch.Tensor):
        raise CompileError("lowering", f"as_strided_scatter over {source}, which has no meta['val']: "
                           "the layout eager gives it (the storage it writes) is unknown", node)
    layout_size, layout_stride = symbolic_size(meta.shape), symbolic_size(meta.stride())
    start = (meta.storage_offset() if storage_offset is None else storage_offset) - meta.storage_offset()
    last = start + sum(st * (n - 1) for st, n in zip(stride, size))
    span = sum(st * (n - 1) for st, n in zip(layout_stride, layout_size)) + 1
    if overlaps(layout_size, layout_stride) or (0 not in size and (start < 0 or last >= span)):
        raise CompileError("lowering", f"as_strided_scatter writes storage positions {start}..{last} "
                           f"of an input laid out as size {list(layout_size)}, stride "
                           f"{list(layout_stride)}: outside its elements or overlapping", node)
    dtype = output_of(node)[1]
    copy = ctx.compute_buffer(TensorValue(x.size, dtype, x.device, ex.to_dtype(x.body, dtype)), layout_stride)
    if 0 not in size:
        out = dim_vars(len(size))
        index = start + sum((st * d for st, d in zip(stride, out)), sympy.Integer(0))
        ctx.operations.append(ScatterOp(ctx.new_name("scatter"), copy.name, tuple(size), (), index,
                                        ex.to_dtype(src.at(out), dtype), "store", [ctx.origin()]))
    return buffer_value(copy.name, copy.layout)


# --- *_copy variants of views ------------------------------------------------------------------

COPY_OF_VIEW = {
    aten.view_copy.default: views.lower_view, aten.permute_copy: views.lower_permute,
    aten.t_copy: views.lower_t, aten.transpose_copy.int: views.lower_transpose,
    aten.unsqueeze_copy: views.lower_unsqueeze, aten.squeeze_copy: views.lower_squeeze,
    aten.slice_copy.Tensor: views.lower_slice, aten.select_copy.int: views.lower_select,
    aten.diagonal_copy: views.lower_diagonal, aten.narrow_copy: views.lower_narrow,
    aten.expand_copy: views.lower_expand, aten.as_strided_copy: views.lower_as_strided,
    aten.alias_copy: lambda ctx, node, x: x, aten.detach_copy: lambda ctx, node, x: x,
}
for _target, _lower in COPY_OF_VIEW.items():
    lowering(_target)(_lower)
