"""Lowerings of casts, copies and tensor factories (full, arange, empty...)."""
from __future__ import annotations

import torch

from ..errors import Unsupported
from ..ir import expr as ex
from ..ir.nodes import TensorValue
from ..ir.sizes import is_symbolic
from ..ir.symbols import dim_var
from .pointwise import broadcast_index, operand, output_of
from .registry import lowering

aten = torch.ops.aten
prims = torch.ops.prims


def cast(ctx, node, x: TensorValue) -> TensorValue:
    size, dtype, device = output_of(node)
    if torch.device(device) != torch.device(x.device):
        raise Unsupported("device-to-device copy")
    body = ex.to_dtype(x.at(broadcast_index(x, size, ctx.sizes)), dtype)
    return TensorValue(size, dtype, device, body)


@lowering(aten._to_copy)
def lower_to_copy(ctx, node, x, **kwargs):
    return cast(ctx, node, x)


@lowering(prims.convert_element_type)
def lower_convert_element_type(ctx, node, x, dtype):
    return cast(ctx, node, x)


@lowering(aten.copy.default)
def lower_copy(ctx, node, dst, src, non_blocking=False):
    if not isinstance(src, TensorValue):
        return constant_tensor(node, src)
    return cast(ctx, node, src)


def constant_tensor(node, value) -> TensorValue:
    """A tensor of one value: a number, or a symbolic size (scalar_tensor(x.shape[-1]))."""
    size, dtype, device = output_of(node)
    if is_symbolic(value):
        return TensorValue(size, dtype, device, operand(value, size, dtype))
    return TensorValue(size, dtype, device, ex.constant(value, dtype))


@lowering(aten.full.default, aten.full_like.default)
def lower_full(ctx, node, size_or_tensor, fill_value, **kwargs):
    return constant_tensor(node, fill_value)


@lowering(aten.scalar_tensor.default)
def lower_scalar_tensor(ctx, node, value, **kwargs):
    return constant_tensor(node, value)


@lowering(aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default)
def lower_zeros(ctx, node, *args, **kwargs):
    return constant_tensor(node, 0)


@lowering(aten.ones.default, aten.ones_like.default, aten.new_ones.default)
def lower_ones(ctx, node, *args, **kwargs):
    return constant_tensor(node, 1)


@lowering(aten.empty.memory_format, aten.empty_like.default, aten.empty_strided.default,
          aten.new_empty.default, aten.new_empty_strided.default)
def lower_empty(ctx, node, *args, **kwargs):
    # Contents are unspecified: zeros are as good as anything and cost no read.
    return constant_tensor(node, 0)


@lowering(aten.fill.Scalar)
def lower_fill(ctx, node, x, value):
    return constant_tensor(node, value)


def _arange(node, start, step) -> TensorValue:
    size, dtype, device = output_of(node)
    compute = torch.float64 if dtype.is_floating_point else torch.int64
    index = ex.to_dtype(ex.index_expr(dim_var(0), torch.int64), compute)
    scaled = index if step == 1 else ex.op("mul", index, _number(step, compute), dtype=compute)
    body = scaled if start == 0 else ex.op("add", scaled, _number(start, compute), dtype=compute)
    return TensorValue(size, dtype, device, ex.to_dtype(body, dtype))


def _number(value, dtype) -> ex.Expr:
    """A constant, or a symbolic int (a SymInt argument: arange(x.shape[0], 2 * x.shape[0]))."""
    if is_symbolic(value):
        return ex.to_dtype(ex.index_expr(value, torch.int64), dtype)
    return ex.constant(value, dtype)


@lowering(aten.arange.default)
def lower_arange(ctx, node, end, **kwargs):
    return _arange(node, 0, 1)


@lowering(aten.arange.start, aten.arange.start_step)
def lower_arange_start(ctx, node, start, end, step=1, **kwargs):
    return _arange(node, start, step)


@lowering(prims.iota.default)
def lower_iota(ctx, node, length, *, start, step, **kwargs):
    return _arange(node, start, step)
