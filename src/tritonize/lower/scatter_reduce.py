"""scatter_reduce and index_reduce with reduce amax, amin and mean (sum is lower/scatter.py's).

* amax/amin: atomic max/min (ScatterOp modes "max"/"min") into a copy of the destination, whose
  positions that receive updates start from the dtype's lowest/highest value when include_self
  is false. Eager's max lets a NaN win, an update's or (with include_self) one already there;
  atomics on floats do not promise that, so the updates the atomics see are NaN-free (a NaN
  becomes the identity), a second scatter (mode "nan") stores the NaN updates themselves, and
  the destination's own NaNs are put back with a where.
* mean (floating dtypes): the sum and the count of the updates, by atomic adds as scatter_add,
  then sum / count where anything arrived (with include_self the destination counts once).
* prod has no atomic, and eager's integer mean rounds its own way: those stay aten calls.

fp16/bf16 go through an fp32 copy (scatter.py's ACCUMULATE_IN), exact for max and min.
"""
from __future__ import annotations

import torch

from ..errors import Unsupported
from ..ir import expr as ex
from ..ir.nodes import TensorValue
from ..ir.symbols import dim_vars
from .indexing import normalize_dim, require_index_dtype
from .registry import lowering
from .scatter import ACCUMULATE_IN, along_dim, scatter_into_copy, sum_scatter_reduce

aten = torch.ops.aten

ATOMIC_MINMAX_DTYPES = (torch.float32, torch.int32, torch.int64)


@lowering(aten.scatter_reduce.two)
def lower_scatter_reduce(ctx, node, x, dim, index, src, reduce, *, include_self=True):
    if reduce == "sum":
        return sum_scatter_reduce(ctx, node, x, dim, index, src, include_self)
    require_index_dtype(index, "scatter_reduce")
    if x.rank == 0 or index.rank != x.rank or not isinstance(src, TensorValue):
        raise Unsupported("scatter_reduce of 0-d tensors")
    dim = normalize_dim(dim, x.rank)
    out = dim_vars(index.rank)
    updates = _Updates(index.size, *along_dim(node, x, dim, index.at(out), out), ex.to_dtype(src.at(out), x.dtype))
    return _reduce(ctx, node, x, updates, reduce, include_self)


@lowering(aten.index_reduce.default)
def lower_index_reduce(ctx, node, x, dim, index, source, reduce, *, include_self=True):
    require_index_dtype(index, "index_reduce")
    if x.rank == 0 or index.rank > 1 or source.rank != x.rank:
        raise Unsupported("index_reduce of a 0-d tensor or with a multi-dimensional index")
    dim = normalize_dim(dim, x.rank)
    out = dim_vars(source.rank)
    updates = _Updates(source.size, *along_dim(node, x, dim, index.at(out[dim:dim + index.rank]), out),
                       ex.to_dtype(source.at(out), x.dtype))
    return _reduce(ctx, node, x, updates, reduce, include_self)


class _Updates:
    """One update per element of `size`: `value` goes to position_fn(bound symbols)."""

    def __init__(self, size, bindings, position_fn, value: ex.Expr):
        self.size, self.bindings, self.position_fn, self.value = size, bindings, position_fn, value

    def write(self, ctx, node, dest: TensorValue, value: ex.Expr, mode: str) -> TensorValue:
        return scatter_into_copy(ctx, node, dest, self.size, self.bindings, self.position_fn, value, mode)


def _reduce(ctx, node, x: TensorValue, updates: _Updates, reduce: str, include_self: bool) -> TensorValue:
    if reduce in ("amax", "amin"):
        return _extremum(ctx, node, x, updates, "max" if reduce == "amax" else "min", include_self)
    if reduce == "mean" and x.dtype.is_floating_point:
        return _mean(ctx, node, x, updates, include_self)
    raise Unsupported(f"{node.target} with reduce={reduce!r} of {x.dtype}")


def _extremum(ctx, node, x: TensorValue, updates: _Updates, mode: str, include_self: bool) -> TensorValue:
    if ACCUMULATE_IN.get(x.dtype, x.dtype) not in ATOMIC_MINMAX_DTYPES or x.dtype == torch.bool:
        raise Unsupported(f"{node.target} of {x.dtype} (no atomic {mode})")
    identity = _identity(mode, x.dtype)
    start = x if include_self else updates.write(ctx, node, x, identity, "store")
    floating = x.dtype.is_floating_point
    value = updates.value
    if floating:  # NaN-free for the atomics: the NaNs are stored below
        value = ex.op("where", _isnan(value), identity, value, dtype=x.dtype)
    result = updates.write(ctx, node, start, value, mode)
    if not floating:
        return result
    result = updates.write(ctx, node, result, updates.value, "nan")
    if include_self:  # the destination's own NaNs win, as in eager
        result = TensorValue(x.size, x.dtype, x.device,
                             ex.op("where", _isnan(x.body), x.body, result.body, dtype=x.dtype))
    return result


def _mean(ctx, node, x: TensorValue, updates: _Updates, include_self: bool) -> TensorValue:
    zero, one = ex.constant(0, x.dtype), ex.constant(1, x.dtype)
    start = x if include_self else updates.write(ctx, node, x, zero, "store")
    sums = updates.write(ctx, node, start, updates.value, "add")
    counted = TensorValue(x.size, x.dtype, x.device, one if include_self else zero)
    counts = updates.write(ctx, node, counted, one, "add")
    arrived = ex.op("gt", counts.body, zero, dtype=torch.bool)
    mean = ex.op("truediv", sums.body, ex.op("where", arrived, counts.body, one, dtype=x.dtype), dtype=x.dtype)
    return TensorValue(x.size, x.dtype, x.device, ex.op("where", arrived, mean, x.body, dtype=x.dtype))


def _identity(mode: str, dtype: torch.dtype) -> ex.Expr:
    if dtype.is_floating_point:
        return ex.constant(float("-inf") if mode == "max" else float("inf"), dtype)
    info = torch.iinfo(dtype)
    return ex.constant(info.min if mode == "max" else info.max, dtype)


def _isnan(value: ex.Expr) -> ex.Expr:
    if value.dtype in ex.LOW_PRECISION_FLOATS:  # asked in fp32, as our pointwise kernels compute
        value = ex.to_dtype(value, torch.float32)
    return ex.op("ne", value, value, dtype=torch.bool)
