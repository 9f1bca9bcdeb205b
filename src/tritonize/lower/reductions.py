"""Lowerings of reductions: sum, mean, prod, amax/amin, max/min with indices, argmax/argmin,
any/all and var.

Each becomes a `ReductionBuffer` (ir/nodes.py): a body over the output's dims and one variable per
reduced dim, a reduction type and an accumulation dtype (fp32 for fp16/bf16, like eager). The
lowering returns a lazy value that reads the buffer and casts to the dtype eager gives, so what
follows a reduction (mean's division, softmax's exp and div) fuses into the same kernel.
softmax, log_softmax, layer_norm, group_norm, batch_norm, norms, std and logsumexp arrive here as
these primitives through the decomposition table (lower/decompositions.py).
"""
from __future__ import annotations

import torch

from ..errors import Unsupported
from ..ir import expr as ex
from ..ir.nodes import Layout, ReductionBuffer, TensorValue, buffer_value, contiguous_strides, neutral_value
from ..ir.symbols import FloorDiv, ModularIndexing, affine_coefficients, dim_vars, is_size_symbol, reduction_vars
from ..ir.sizes import any_symbolic, heuristic, is_symbolic
from .dtypes import upcast
from .one_hot import one_hot_pick
from .pointwise import output_of
from .registry import lowering

aten = torch.ops.aten
prims = torch.ops.prims


def _reduced_dims(dims, rank: int) -> list[int]:
    """Sorted, unique, non-negative dims; None or [] means every dim (aten's convention)."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d + rank if d < 0 else d for d in dims}) if rank else []


def reduce(ctx, x: TensorValue, dims: list[int], keepdim: bool, rtype: str, acc_dtype: torch.dtype,
           body_fn=None, correction: float = 0.0) -> TensorValue:
    """A ReductionBuffer of x over dims; returns a value loading it (in acc_dtype)."""
    kept = [k for k in range(x.rank) if k not in dims]
    out_size = tuple(1 if k in dims else x.size[k] for k in range(x.rank)) if keepdim else \
        tuple(x.size[k] for k in kept)
    ranges = tuple(x.size[k] for k in dims)
    if 0 in ranges and 0 not in out_size:
        if rtype not in ("sum", "prod"):
            raise Unsupported("reduction over an empty dim")
        return TensorValue(out_size, acc_dtype, x.device, ex.constant(neutral_value(rtype, acc_dtype), acc_dtype))
    out_vars, red_vars = dim_vars(len(out_size)), reduction_vars(len(dims))
    index = [None] * x.rank
    for j, k in enumerate(dims):
        index[k] = red_vars[j]
    for j, k in enumerate(kept):
        index[k] = out_vars[k if keepdim else j]
    element = x.at(index)
    body = body_fn(element) if body_fn else ex.to_dtype(element, acc_dtype)
    if rtype == "sum" and len(red_vars) == 1:
        picked = one_hot_pick(body, red_vars[0], ranges[0])
        if picked is not None:  # a row with one nonzero element: no loop over the row
            return TensorValue(out_size, body.dtype, x.device, picked)
    result_dtype = torch.int64 if rtype in ("argmax", "argmin") else body.dtype
    layout = Layout(out_size, contiguous_strides(out_size), 0, result_dtype, x.device)
    if 0 in out_size:
        empty = TensorValue(out_size, result_dtype, x.device, ex.constant(0, result_dtype))
        return buffer_value(ctx.compute_buffer(empty).name, layout)
    outer = _is_outer(element, red_vars)
    split = _split_of(ctx, _product(out_size), _product(ranges), outer)
    if rtype in SPLITTABLE and split > 1:
        return _split_reduce(ctx, x, dims, kept, out_size, rtype, body, split, outer)
    source = tuple((s, k in dims) for k, s in enumerate(x.size))
    buffer = ReductionBuffer(ctx.new_name(), layout, body, [ctx.origin()], rtype, ranges, source,
                             float(correction))
    ctx.add_computed(buffer)
    return buffer_value(buffer.name, layout)


# --- split reductions: few, long rows use the whole GPU in two kernels ----------------------

SPLITTABLE = {"sum": "sum", "prod": "prod", "max": "max", "min": "min"}
TARGET_PROGRAMS = 1024
# Outer splits aim at twice as many programs of 64 columns: on the H100, x.sum(0) of a bf16
# 16384x4096 took 55.2 us in 32 splits (2048 programs, ~7.8 waves at 2 programs an SM) against
# 55.8-56.4 us in 16 (the last of ~3.9 waves ran part-empty) and 59.6 us in 64
# (the sum_first experiment, docs/benchmarks.md, 2026-11-24; kernel 2 under programmatic dependent launch).
TARGET_PROGRAMS_OUTER = 2048
MIN_SPLIT_CHUNK = 1024
MIN_SPLIT_CHUNK_OUTER = 512  # rows; an outer program still reads 64 columns of each, 32K elements
MIN_SPLIT_RNUMEL = 16384  # shorter rows take a few microseconds in one program: not worth a launch


@heuristic("split_factor")
def split_factor(xnumel: int, rnumel: int, outer: bool) -> int:
    """How many partial results a row is split into (1: no split). A looped inner reduction
    runs a row a program; an outer one 64 rows a program. Split until about TARGET_PROGRAMS
    (outer: TARGET_PROGRAMS_OUTER) programs run, keeping each partial at least MIN_SPLIT_CHUNK
    elements (outer: MIN_SPLIT_CHUNK_OUTER rows) long."""
    if rnumel < MIN_SPLIT_RNUMEL:
        return 1
    programs = -(-xnumel // 64) if outer else xnumel
    if programs * 2 > TARGET_PROGRAMS:
        return 1
    target, min_chunk = (TARGET_PROGRAMS_OUTER, MIN_SPLIT_CHUNK_OUTER) if outer else (TARGET_PROGRAMS, MIN_SPLIT_CHUNK)
    split = 1
    while programs * split < target and (split * 2) * min_chunk <= rnumel:
        split *= 2
    return split


def _split_of(ctx, xnumel, rnumel, outer: bool) -> int:
    """split_factor of the sizes, or for symbolic ones of the example's (the split is a
    constant of the graph; the chunk a partial reduces is then symbolic: any size stays right,
    and sizes near the example's get its speed; the graph cache reuses the graph only where
    the split comes out the same). An unbacked size counts as SizeOracle.hint's guess."""
    if not any_symbolic([xnumel, rnumel]):
        return split_factor(xnumel, rnumel, outer)
    if ctx.sizes is None or ctx.sizes.shape_env is None:
        return 1
    return ctx.sizes.choose("split_factor", (xnumel, rnumel), outer)


def _is_outer(element: ex.Expr, red_vars) -> bool:
    """True when no load is contiguous along the innermost reduced dim (an outer reduction)."""
    if not red_vars:
        return False
    innermost = red_vars[-1]
    for load in ex.loads(element):
        variables = [s for s in load.args[1].free_symbols if not is_size_symbol(s)]  # (not sizes)
        coeffs = affine_coefficients(load.args[1], sorted(variables, key=str))
        if coeffs is not None and coeffs.get(innermost, 0) == 1:
            return False
    return bool(ex.loads(element))


def _split_reduce(ctx, x, dims, kept, out_size, rtype, body, split, outer) -> TensorValue:
    """Reduce chunks of each row into `split` partials (kernel 1), then the partials (kernel 2).
    Partials are laid out [kept..., split] for inner reductions (a row's partials together) and
    [split, kept...] for outer ones (rows stay the contiguous, innermost dim)."""
    ranges = [x.size[k] for k in dims]
    rnumel = _product(ranges)
    chunk = FloorDiv(rnumel + split - 1, split) if is_symbolic(rnumel) else -(-rnumel // split)
    kept_size = tuple(x.size[k] for k in kept)
    partial_vars = dim_vars(len(kept_size) + 1)
    split_var, kept_vars = (partial_vars[0], partial_vars[1:]) if outer else (partial_vars[-1], partial_vars[:-1])
    flat = split_var * chunk + reduction_vars(1)[0]
    # body is over the final output's dims; re-index it: kept dims and the flat reduced position
    out_vars = dim_vars(len(out_size))
    mapping = {}
    for j, k in enumerate(kept):
        mapping[out_vars[k if len(out_size) == x.rank else j]] = kept_vars[j]
    stride = rnumel
    for j, size in enumerate(ranges):
        stride //= size
        mapping[reduction_vars(len(dims))[j]] = ModularIndexing(flat, stride, size) if j else FloorDiv(flat, stride)
    element = ex.substitute(body, mapping)
    if chunk * split != rnumel:
        # the last chunk's end: r < rnumel - split_var * chunk, whose right side is the same for a
        # whole row of partials (computed once a program), not r + split_var * chunk < rnumel
        # computed at every element
        rest = rnumel - split_var * chunk
        r, rest = ex.index_expr(reduction_vars(1)[0], torch.int64), ex.index_expr(rest, torch.int64)
        if is_symbolic(rnumel):  # true for every r when split divides rnumel: the launch knows (EVEN)
            remainder = ex.index_expr(rnumel - split * FloorDiv(rnumel, split), torch.int64)
            inside = ex.op("chunk_bound", r, rest, remainder, dtype=torch.bool)
        else:
            inside = ex.op("lt", r, rest, dtype=torch.bool)
        element = ex.masked(inside, element, neutral_value(rtype, body.dtype))
    partial_size = (split,) + kept_size if outer else kept_size + (split,)
    partial = ReductionBuffer(ctx.new_name(), Layout(partial_size, contiguous_strides(partial_size), 0,
                                                     body.dtype, x.device),
                              element, [ctx.origin()], rtype, (chunk,),
                              tuple((s, False) for s in partial_size) + ((chunk, True),))
    ctx.add_computed(partial)
    partials = buffer_value(partial.name, partial.layout)
    final_dims = [0 if outer else len(kept_size)]
    keep = len(out_size) == x.rank and bool(dims)
    result = reduce(ctx, partials, final_dims, False, SPLITTABLE[rtype], body.dtype)
    if keep:
        result = TensorValue(out_size, result.dtype, result.device,
                             ex.substitute(result.body, _drop_reduced(out_size, dims)))
    return result


def _drop_reduced(out_size, dims) -> dict:
    """keepdim: the non-keepdim result's dim j is the j-th kept dim of the keepdim output."""
    kept = [k for k in range(len(out_size)) if k not in dims]
    out_vars = dim_vars(len(out_size))
    return {dim_vars(len(kept))[j]: out_vars[k] for j, k in enumerate(kept)}


def _product(values) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def _cast(value: TensorValue, dtype: torch.dtype) -> TensorValue:
    return TensorValue(value.size, dtype, value.device, ex.to_dtype(value.body, dtype))


def _accumulation_dtype(out_dtype: torch.dtype) -> torch.dtype:
    return upcast(out_dtype) if out_dtype.is_floating_point else out_dtype


def _sum_like(ctx, node, x, dims, keepdim, rtype):
    _, out_dtype, _ = output_of(node)
    acc = _accumulation_dtype(out_dtype)
    return _cast(reduce(ctx, x, _reduced_dims(dims, x.rank), keepdim, rtype, acc), out_dtype)


@lowering(aten.sum.dim_IntList)
def lower_sum(ctx, node, x, dim=None, keepdim=False, *, dtype=None):
    return _sum_like(ctx, node, x, dim, keepdim, "sum")


@lowering(aten.sum.default)
def lower_sum_all(ctx, node, x, *, dtype=None):
    return _sum_like(ctx, node, x, None, False, "sum")


@lowering(prims.sum.default)
def lower_prims_sum(ctx, node, x, dims, *, output_dtype=None):
    if not dims:
        return _cast(x, output_of(node)[1])
    return _sum_like(ctx, node, x, dims, False, "sum")


@lowering(aten.prod.dim_int)
def lower_prod(ctx, node, x, dim, keepdim=False, *, dtype=None):
    return _sum_like(ctx, node, x, [dim], keepdim, "prod")


@lowering(aten.prod.default)
def lower_prod_all(ctx, node, x, *, dtype=None):
    return _sum_like(ctx, node, x, None, False, "prod")


@lowering(aten.mean.dim)
def lower_mean(ctx, node, x, dim=None, keepdim=False, *, dtype=None):
    _, out_dtype, _ = output_of(node)
    if not out_dtype.is_floating_point:
        raise Unsupported(f"mean of {out_dtype}")
    acc = upcast(out_dtype)
    dims = _reduced_dims(dim, x.rank)
    total = reduce(ctx, x, dims, keepdim, "sum", acc)
    count = _product(x.size[k] for k in dims)
    divisor = ex.constant(count, acc) if not is_symbolic(count) else \
        ex.to_dtype(ex.index_expr(count, torch.int64), acc)  # a kernel's size parameters
    body = ex.op("truediv", total.body, divisor, dtype=acc)
    return _cast(TensorValue(total.size, acc, x.device, body), out_dtype)


@lowering(aten.mean.default)
def lower_mean_all(ctx, node, x, *, dtype=None):
    return lower_mean(ctx, node, x, None, False)


def _extremum(ctx, x, dims, keepdim, rtype):
    acc = upcast(x.dtype) if x.dtype != torch.bool else torch.int32
    return _cast(reduce(ctx, x, dims, keepdim, rtype, acc), x.dtype)


@lowering(aten.amax, prims.amax.default)
def lower_amax(ctx, node, x, dim=(), keepdim=False):
    return _extremum(ctx, x, _reduced_dims(dim, x.rank), keepdim, "max")


@lowering(aten.amin, prims.amin.default)
def lower_amin(ctx, node, x, dim=(), keepdim=False):
    return _extremum(ctx, x, _reduced_dims(dim, x.rank), keepdim, "min")


@lowering(aten.max.default)
def lower_max_all(ctx, node, x):
    return _extremum(ctx, x, _reduced_dims(None, x.rank), False, "max")


@lowering(aten.min.default)
def lower_min_all(ctx, node, x):
    return _extremum(ctx, x, _reduced_dims(None, x.rank), False, "min")


def _arg_extremum(ctx, x, dims, keepdim, rtype):
    acc = upcast(x.dtype) if x.dtype != torch.bool else torch.int32
    index = reduce(ctx, x, dims, keepdim, rtype, acc,
                   body_fn=lambda e: ex.to_dtype(e, acc))
    return _cast(index, torch.int64)


@lowering(aten.max.dim)
def lower_max_dim(ctx, node, x, dim, keepdim=False):
    dims = _reduced_dims([dim], x.rank)
    return _extremum(ctx, x, dims, keepdim, "max"), _arg_extremum(ctx, x, dims, keepdim, "argmax")


@lowering(aten.min.dim)
def lower_min_dim(ctx, node, x, dim, keepdim=False):
    dims = _reduced_dims([dim], x.rank)
    return _extremum(ctx, x, dims, keepdim, "min"), _arg_extremum(ctx, x, dims, keepdim, "argmin")


@lowering(aten.argmax.default)
def lower_argmax(ctx, node, x, dim=None, keepdim=False):
    dims = list(range(x.rank)) if dim is None else _reduced_dims([dim], x.rank)
    keep = keepdim and dim is not None
    return _arg_extremum(ctx, x, dims, keep, "argmax")


@lowering(aten.argmin.default)
def lower_argmin(ctx, node, x, dim=None, keepdim=False):
    dims = list(range(x.rank)) if dim is None else _reduced_dims([dim], x.rank)
    keep = keepdim and dim is not None
    return _arg_extremum(ctx, x, dims, keep, "argmin")


def _truth(ctx, node, x, dim, keepdim, rtype):
    nonzero = lambda e: ex.to_dtype(ex.to_dtype(e, torch.bool), torch.int32)  # noqa: E731
    dims = _reduced_dims(dim, x.rank)
    flag = reduce(ctx, x, dims, keepdim, rtype, torch.int32, body_fn=nonzero)
    return _cast(flag, output_of(node)[1])


@lowering(aten.any.default, aten.any.dim, aten.any.dims)
def lower_any(ctx, node, x, dim=None, keepdim=False):
    return _truth(ctx, node, x, dim, keepdim, "max")


@lowering(aten.all.default, aten.all.dim, aten.all.dims)
def lower_all(ctx, node, x, dim=None, keepdim=False):
    return _truth(ctx, node, x, dim, keepdim, "min")


def _variance(ctx, out_dtype, x, dims, correction, keepdim, rtype="var"):
    if not out_dtype.is_floating_point:
        raise Unsupported(f"{rtype} of {out_dtype}")
    acc = upcast(out_dtype)
    return _cast(reduce(ctx, x, dims, keepdim, rtype, acc, correction=correction), out_dtype)


@lowering(aten.var.correction)
def lower_var(ctx, node, x, dim=None, *, correction=None, keepdim=False):
    correction = 1 if correction is None else correction
    return _variance(ctx, output_of(node)[1], x, _reduced_dims(dim, x.rank), correction, keepdim)


@lowering(prims.var.default)
def lower_prims_var(ctx, node, x, dims, correction=1.0, *, output_dtype=None):
    if not dims and x.rank:
        raise Unsupported("prims.var over no dims")
    return _variance(ctx, output_of(node)[1], x, _reduced_dims(dims, x.rank), correction, False)


@lowering(aten.var_mean.correction)
def lower_var_mean(ctx, node, x, dim=None, *, correction=None, keepdim=False):
    """(var, mean), one kernel: the mean comes out of the variance's own passes (rtype "mean"),
    exact for a row of equal values, where sum / n may be an ulp off (layer norm's statistics)."""
    correction = 1 if correction is None else correction
    dims = _reduced_dims(dim, x.rank)
    out_dtype = x.dtype
    return (_variance(ctx, out_dtype, x, dims, correction, keepdim),
            _variance(ctx, out_dtype, x, dims, correction, keepdim, rtype="mean"))
