"""Lowerings of views and data movement as index maps: no copies.

Each view builds the index of its input from the index of its output (`x.at(index)`): permute
reorders the variables, expand pins broadcast dims to 0, slice scales and shifts, reshape splits
and merges dims with FloorDiv/ModularIndexing. cat, constant_pad_nd and flip are index maps too,
with masks where an output element has no input element.
"""
from __future__ import annotations


import sympy
import torch

from ..errors import CompileError, Unsupported
from ..ir import expr as ex
from ..ir.nodes import TensorValue
from ..ir.sizes import as_size
from ..ir.symbols import FloorDiv, ModularIndexing, dim_vars, simplify_with_ranges
from .pointwise import is_broadcast, output_of
from .registry import lowering
from .storage import eager_storage, storage_owner

aten = torch.ops.aten


def view_of(node, x: TensorValue, index, sizes=None) -> TensorValue:
    """x read through `index`; indices are simplified so views of buffers stay plain strides
    (sizes: the SizeOracle, whose known equalities let digits of symbolic sizes combine)."""
    size, dtype, device = output_of(node)
    ranges = dict(zip(dim_vars(len(size)), size))
    equal = sizes.known_equal if sizes is not None and sizes.shape_env is not None else None
    body = ex.map_indices(x.at(index), lambda e: simplify_with_ranges(e, ranges, equal))
    return TensorValue(size, x.dtype, device, body)


def _normalize_dim(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


@lowering(aten.permute)
def lower_permute(ctx, node, x, dims):
    out = dim_vars(x.rank)
    index = [None] * x.rank
    for position, source in enumerate(dims):
        index[_normalize_dim(source, x.rank)] = out[position]
    return view_of(node, x, index)


@lowering(aten.transpose.int)
def lower_transpose(ctx, node, x, dim0, dim1):
    if x.rank == 0:  # a 0-d tensor's dims 0 and -1 name its (absent) one dim: itself
        return x
    order = list(range(x.rank))
    a, b = _normalize_dim(dim0, x.rank), _normalize_dim(dim1, x.rank)
    order[a], order[b] = order[b], order[a]
    return lower_permute(ctx, node, x, order)


@lowering(aten.t.default)
def lower_t(ctx, node, x):
    return lower_permute(ctx, node, x, list(reversed(range(x.rank))))


@lowering(aten.expand.default)
def lower_expand(ctx, node, x, size, implicit=False):
    out_size = output_of(node)[0]
    out = dim_vars(len(out_size))
    lead = len(out_size) - x.rank
    index = [sympy.Integer(0) if is_broadcast(ctx.sizes, s, out_size[lead + k]) else out[lead + k]
             for k, s in enumerate(x.size)]
    return view_of(node, x, index)


@lowering(torch.ops.prims.broadcast_in_dim.default)
def lower_broadcast_in_dim(ctx, node, x, shape, broadcast_dimensions):
    out = dim_vars(len(shape))
    index = [sympy.Integer(0) if is_broadcast(ctx.sizes, x.size[k], shape[d])
             else out[d] for k, d in enumerate(broadcast_dimensions)]
    return view_of(node, x, index)


@lowering(aten.unsqueeze.default)
def lower_unsqueeze(ctx, node, x, dim):
    out = dim_vars(x.rank + 1)
    dim = _normalize_dim(dim, x.rank + 1)
    return view_of(node, x, out[:dim] + out[dim + 1:])


@lowering(aten.squeeze)
def lower_squeeze(ctx, node, x, dims=None):
    if x.rank == 0:
        return x
    if dims is None:
        dims = range(x.rank)
    elif isinstance(dims, int):
        dims = [dims]
    removed = {_normalize_dim(d, x.rank) for d in dims if x.size[_normalize_dim(d, x.rank)] == 1}
    out = iter(dim_vars(x.rank - len(removed)))
    index = [sympy.Integer(0) if k in removed else next(out) for k in range(x.rank)]
    return view_of(node, x, index)


@lowering(aten.slice.Tensor)
def lower_slice(ctx, node, x, dim=0, start=None, end=None, step=1):
    dim = _normalize_dim(dim, x.rank)
    start = _slice_start(ctx, 0 if start is None else start, x.size[dim])
    out = dim_vars(x.rank)
    index = list(out)
    index[dim] = start + step * out[dim]
    return view_of(node, x, index)


def _slice_start(ctx, start, length):
    """Where a slice starts: negative counts from the end, clamped to [0, length] as Python's
    slices are. With symbolic sizes the clamp must be known not to apply (the output's size,
    from the trace, already assumed it); otherwise the op falls back."""
    if isinstance(start, int) and isinstance(length, int):
        return max(0, min(length, start + length if start < 0 else start))
    start = from_the_end(ctx, start, length, "slice start")
    if ctx.sizes.known_le(0, start) and ctx.sizes.known_le(start, length):
        return start
    raise Unsupported(f"slice start {start} of a dim of symbolic size {length}")


def from_the_end(ctx, position, length, what: str):
    """A position that counts from the end when negative (`x[:, -n:]`, `x.select(0, -k)`), as
    a nonnegative one. A symbolic position must be known to be one or the other."""
    if isinstance(position, int):
        return position + length if position < 0 else position
    if ctx.sizes.known_le(0, position):
        return position
    if ctx.sizes.known_le(position, -1):
        return position + length
    raise Unsupported(f"{what} {position}: not known to be negative or not")


@lowering(aten.select.int)
def lower_select(ctx, node, x, dim, position):
    dim = _normalize_dim(dim, x.rank)
    position = from_the_end(ctx, position, x.size[dim], "select position")
    out = dim_vars(x.rank - 1)
    return view_of(node, x, out[:dim] + [sympy.sympify(position)] + out[dim:])


@lowering(aten.narrow.default)
def lower_narrow(ctx, node, x, dim, start, length):
    start = from_the_end(ctx, start, x.size[_normalize_dim(dim, x.rank)], "narrow start")
    return lower_slice(ctx, node, x, dim, start, start + length)


@lowering(aten.diagonal.default)
def lower_diagonal(ctx, node, x, offset=0, dim1=0, dim2=1):
    d1, d2 = _normalize_dim(dim1, x.rank), _normalize_dim(dim2, x.rank)
    out = dim_vars(x.rank - 1)
    rest = iter(out[:-1])
    diag = out[-1]
    index = []
    for k in range(x.rank):
        if k == d1:
            index.append(diag + max(-offset, 0))
        elif k == d2:
            index.append(diag + max(offset, 0))
        else:
            index.append(next(rest))
    return view_of(node, x, index)


def reshape_index(old_size, new_size, sizes=None) -> list:
    """Index into old_size given the index (d0..) of a reshape to new_size. Dims are grouped
    where their products are equal; with symbolic sizes the products must be known equal, or
    equal at the example and then guarded (torch's view check made them equal: x.reshape(2, -1)
    has s0*s1 == 2*(s0*s1 // 2)); the example's values say which side to extend."""
    hint = sizes.hint if sizes is not None else int
    equal = sizes.guard_equal if sizes is not None else (lambda a, b: a == b)

    new_dims = dim_vars(len(new_size))
    old_nontrivial = [k for k, s in enumerate(old_size) if s != 1]
    new_nontrivial = [k for k, s in enumerate(new_size) if s != 1]
    index = [sympy.Integer(0)] * len(old_size)
    i = j = 0
    while i < len(old_nontrivial) or j < len(new_nontrivial):
        old_group, new_group = [old_nontrivial[i]], [new_nontrivial[j]]
        i, j = i + 1, j + 1
        old_prod, new_prod = old_size[old_group[0]], new_size[new_group[0]]
        while not equal(old_prod, new_prod):
            if hint(old_prod) < hint(new_prod):
                old_group.append(old_nontrivial[i]); old_prod *= old_size[old_nontrivial[i]]; i += 1
            else:
                new_group.append(new_nontrivial[j]); new_prod *= new_size[new_nontrivial[j]]; j += 1
        flat, stride = sympy.Integer(0), 1
        for k in reversed(new_group):
            flat += stride * new_dims[k]
            stride *= new_size[k]
        stride = 1
        for k in reversed(old_group):
            index[k] = ModularIndexing(flat, stride, old_size[k]) if k != old_group[0] else FloorDiv(flat, stride)
            stride *= old_size[k]
    return index


@lowering(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.view.dtype)
def lower_view(ctx, node, x, shape):
    if isinstance(shape, torch.dtype):
        if shape != x.dtype:
            raise Unsupported("view as another dtype")
        return x
    size = output_of(node)[0]
    if 0 in size or 0 in x.size:
        return view_of(node, x, [sympy.Integer(0)] * x.rank) if x.rank else x
    return view_of(node, x, reshape_index(x.size, size, ctx.sizes), ctx.sizes)


@lowering(aten.as_strided.default)
def lower_as_strided(ctx, node, x, size, stride, storage_offset=None):
    """Reads the storage eager keeps x in (lower/storage.py), not whatever buffer x reads."""
    source = node.args[0]
    storage, start = eager_storage(ctx, storage_owner(source))
    if storage_offset is None:  # as_strided keeps its input's storage offset
        storage_offset = _eager_storage_offset(ctx, source, start)
    out = dim_vars(len(size))
    index = storage.offset + storage_offset - start + sum((st * d for st, d in zip(stride, out)),
                                                          sympy.Integer(0))
    out_size, _, device = output_of(node)
    layout = ctx.buffers[storage.buffer_name].layout
    return TensorValue(out_size, x.dtype, device, ex.load(storage.buffer_name, index, layout.dtype))


def _eager_storage_offset(ctx, node, owner_start: int) -> int:
    meta = node.meta.get("val")
    if isinstance(meta, torch.Tensor):
        return as_size(meta.storage_offset())
    if storage_owner(node) is node:
        return owner_start
    raise CompileError("lowering", f"as_strided without a storage offset over {node.name}, which "
                       "has no meta['val']: eager's storage offset of it is unknown", ctx.current_node)


@lowering(aten.flip.default)
def lower_flip(ctx, node, x, dims):
    flipped = {_normalize_dim(d, x.rank) for d in dims}
    out = dim_vars(x.rank)
    index = [x.size[k] - 1 - out[k] if k in flipped else out[k] for k in range(x.rank)]
    return view_of(node, x, index)


def _in_range(index, low, high, size):
    """Bool Expr: low <= index < high, with the checks the ranges make trivial left out (a
    symbolic bound keeps its check unless it is the same expression as the range's end)."""
    value = ex.index_expr(index, torch.int64)
    checks = []
    if not _known_true(low <= 0):
        checks.append(ex.op("ge", value, _bound(low), dtype=torch.bool))
    if not (_known_true(high >= size) or sympy.expand(sympy.sympify(high) - size) == 0):
        checks.append(ex.op("lt", value, _bound(high), dtype=torch.bool))
    mask = None
    for check in checks:
        mask = check if mask is None else ex.op("logical_and", mask, check, dtype=torch.bool)
    return mask


def _known_true(condition) -> bool:
    """A comparison of sizes: its value for ints; for symbolic sizes, True only when sympy
    decides it (sizes are positive integers), else False."""
    return condition is True or condition == sympy.true


def _bound(value) -> ex.Expr:
    if isinstance(value, int) or getattr(value, "is_Integer", False):
        return ex.constant(int(value), torch.int64)
    return ex.index_expr(value, torch.int64)  # a symbolic size: a kernel parameter


@lowering(aten.cat.default)
def lower_cat(ctx, node, tensors, dim=0):
    size, dtype, device = output_of(node)
    dim = _normalize_dim(dim, len(size))
    parts = [t for t in tensors if not (t.rank == 1 and t.size[0] == 0 and len(size) != 1)]
    parts = [t for t in parts if t.size[dim] != 0]
    if not parts:
        return TensorValue(size, dtype, device, ex.constant(0, dtype))
    out = dim_vars(len(size))
    pieces, offset = [], 0
    for t in parts:
        index = list(out)
        index[dim] = out[dim] - offset
        pieces.append((offset, offset + t.size[dim], ex.to_dtype(t.at(index), dtype)))
        offset += t.size[dim]
    body = None
    for low, high, value in reversed(pieces):
        mask = _in_range(out[dim], low, high, size[dim])
        guarded = value if mask is None else ex.masked(mask, value, 0)
        body = guarded if body is None else ex.op("where", mask, guarded, body, dtype=dtype)
    return TensorValue(size, dtype, device, body)


@lowering(aten.constant_pad_nd.default)
def lower_constant_pad_nd(ctx, node, x, pad, value=0):
    size, dtype, device = output_of(node)
    out = dim_vars(len(size))
    index = list(out)
    mask = None
    for pair in range(len(pad) // 2):
        k = len(size) - 1 - pair
        before = pad[2 * pair]
        index[k] = out[k] - before
        low = max(before, 0) if isinstance(before, int) else sympy.Max(before, 0)  # (a crop if < 0)
        check = _in_range(out[k], low, before + x.size[k], size[k])
        if check is not None:
            mask = check if mask is None else ex.op("logical_and", mask, check, dtype=torch.bool)
    inner = ex.to_dtype(x.at(index), dtype)
    if mask is None:
        return TensorValue(size, dtype, device, inner)
    body = ex.op("where", mask, ex.masked(mask, inner, 0), ex.constant(value, dtype), dtype=dtype)
    return TensorValue(size, dtype, device, body)
