"""Lowerings of scans: cumsum, cumprod, cummax/cummin (values and indices), logcumsumexp.

Each becomes a `ScanBuffer` (ir/nodes.py): the input element over the output's own dims, in the
accumulation dtype (fp32 for fp16/bf16; integer and bool cumsum/cumprod give int64 like eager),
plus the scanned dim. The lowering returns a lazy value that reads the buffer and casts it to the
dtype eager gives, so a pointwise epilogue (cumsum(x) * 2) fuses into the scan kernel, and the
input is itself lazy, so a pointwise prologue (cumsum(x * 2)) is computed inside it.
"""
from __future__ import annotations

import torch

from ..errors import Unsupported
from ..ir import expr as ex
from ..ir.nodes import Layout, ScanBuffer, TensorValue, buffer_value, contiguous_strides
from ..ir.symbols import dim_vars
from .dtypes import upcast
from .pointwise import output_of
from .registry import lowering

aten = torch.ops.aten


def _normalize_dim(dim: int, rank: int) -> int:
    if rank == 0 and dim in (0, -1):
        return 0
    if not -rank <= dim < rank:
        raise Unsupported(f"scan dim {dim} out of range for rank {rank}")
    return dim + rank if dim < 0 else dim


def scan(ctx, x: TensorValue, dim: int, scan_type: str, acc_dtype: torch.dtype) -> TensorValue:
    """A ScanBuffer of x along dim; returns a value loading it (acc_dtype, or int64 for indices)."""
    dim = _normalize_dim(dim, x.rank)
    element = ex.to_dtype(x.at(dim_vars(x.rank)), acc_dtype)
    is_index = scan_type in ("argmax", "argmin")
    result_dtype = torch.int64 if is_index else acc_dtype
    if x.rank == 0 or x.size[dim] in (0, 1) or 0 in x.size:  # nothing to combine (a symbolic size is >= 2)
        body = ex.constant(0, torch.int64) if is_index else element
        return TensorValue(x.size, result_dtype, x.device, body)
    layout = Layout(x.size, contiguous_strides(x.size), 0, result_dtype, x.device)
    origins = list(dict.fromkeys(x.origins + (ctx.origin(),)))
    buffer = ScanBuffer(ctx.new_name(), layout, element, origins, scan_type, dim)
    ctx.add_computed(buffer)
    return buffer_value(buffer.name, layout)


def _cast(value: TensorValue, dtype: torch.dtype) -> TensorValue:
    return TensorValue(value.size, dtype, value.device, ex.to_dtype(value.body, dtype))


def _accumulating(ctx, node, x, dim, scan_type):
    _, out_dtype, _ = output_of(node)
    if out_dtype == torch.bool:
        raise Unsupported(f"{scan_type} scan into bool")
    acc = upcast(out_dtype)  # integer outputs are int64 already (eager's promotion)
    return _cast(scan(ctx, x, dim, scan_type, acc), out_dtype)


@lowering(aten.cumsum.default)
def lower_cumsum(ctx, node, x, dim, *, dtype=None):
    return _accumulating(ctx, node, x, dim, "sum")


@lowering(aten.cumprod.default)
def lower_cumprod(ctx, node, x, dim, *, dtype=None):
    return _accumulating(ctx, node, x, dim, "prod")


@lowering(aten.logcumsumexp.default)
def lower_logcumsumexp(ctx, node, x, dim):
    _, out_dtype, _ = output_of(node)
    if not out_dtype.is_floating_point:
        raise Unsupported(f"logcumsumexp of {out_dtype}")
    return _cast(scan(ctx, x, dim, "logsumexp", upcast(out_dtype)), out_dtype)


def _running_extremum(ctx, x, dim, kind):
    acc = torch.int32 if x.dtype == torch.bool else upcast(x.dtype)
    values = _cast(scan(ctx, x, dim, kind, acc), x.dtype)
    return values, scan(ctx, x, dim, f"arg{kind}", acc)


@lowering(aten.cummax.default)
def lower_cummax(ctx, node, x, dim):
    return _running_extremum(ctx, x, dim, "max")


@lowering(aten.cummin.default)
def lower_cummin(ctx, node, x, dim):
    return _running_extremum(ctx, x, dim, "min")
