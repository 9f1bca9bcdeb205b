"""Lowerings of random ops: rand, randn (and their _like forms), uniform, normal, bernoulli and
native_dropout, generated inside kernels (no fallback). With the fallback_random option they run
through aten instead (lower/fallback.py), for eager's exact numbers.

A random value is an expression like any other: `rand(seed, offset, stream)` (or `randn`), a
Philox4x32 draw (runtime/triton_helpers.py) where
* seed: a 64-bit integer the wrapper draws from torch's default generator for the device at the
  start of every call (an ExternCall of kind "seed": `aten.randint`), so `torch.manual_seed`
  makes a compiled function reproducible and consecutive calls give different numbers;
* stream: a number per random op of the graph, so two ops never share numbers;
* offset: the element's row-major position in the op's output.
It is a pure function of those three, so inlining it into several kernels gives the same numbers
everywhere: dropout's output and its mask agree, and training gets the mask AOTAutograd saves
from the forward graph for the backward. The numbers follow eager's distributions; they are not
eager's numbers.
"""
from __future__ import annotations

import dataclasses

import sympy
import torch

from ..errors import Unsupported
from ..ir import expr as ex
from ..ir.nodes import Buffer, ExternCall, ExternOutput, Layout, TensorValue, contiguous_strides
from ..ir.symbols import dim_vars
from .dtypes import upcast
from .pointwise import operand, output_of
from .registry import lowering

aten = torch.ops.aten
SEED_HIGH = 2**62  # seeds are drawn uniformly from [0, SEED_HIGH)
LOW_PRECISION_STEPS = {torch.bfloat16: 2.0**8, torch.float16: 2.0**11}  # 2**(mantissa digits)


@dataclasses.dataclass
class RandomState:
    """Per graph: the seed buffer of each device and the next stream number."""

    seeds: dict = dataclasses.field(default_factory=dict)
    streams: int = 0


def _state(ctx) -> RandomState:
    if ctx.random is None:
        ctx.random = RandomState()
    return ctx.random


def _seed(ctx, device: torch.device) -> ex.Expr:
    """A load of this graph call's seed for device; the draw is the graph's first operation."""
    state = _state(ctx)
    key = str(device)
    if key not in state.seeds:
        buffer = Buffer(ctx.new_name("seed"), Layout((1,), (1,), 0, torch.int64, device))
        ctx.add_buffer(buffer)
        call = ExternCall(ctx.new_name("extern"), aten.randint.low, (0, SEED_HIGH, [1]),
                          {"dtype": torch.int64, "device": device}, [ExternOutput(buffer, ())], "seed",
                          ctx.origin())
        ctx.operations.insert(0, call)  # no inputs: first, so it splits no fusion group
        state.seeds[key] = buffer.name
    return ex.load(state.seeds[key], sympy.Integer(0), torch.int64)


def random_expr(ctx, kind: str, size, device) -> ex.Expr:
    """A float32 Expr over d0.. of size: "rand" (uniform in [0, 1)) or "randn" (standard normal)."""
    state = _state(ctx)
    stream = state.streams
    state.streams += 1
    position = sum((st * d for st, d in zip(contiguous_strides(size), dim_vars(len(size)))), sympy.Integer(0))
    offset = ex.index_expr(position, torch.int64)
    return ex.op(kind, _seed(ctx, device), offset, ex.constant(stream, torch.int32), dtype=torch.float32)


def _no_generator(kwargs) -> None:
    if kwargs.get("generator") is not None:
        raise Unsupported("random op with an explicit generator")


def _random_tensor(ctx, node, kind: str, kwargs, scale=1.0, shift=0.0) -> TensorValue:
    """shift + scale * (a rand/randn draw) in the node's dtype."""
    _no_generator(kwargs)
    size, dtype, device = output_of(node)
    if not dtype.is_floating_point:
        raise Unsupported(f"{kind} into {dtype}")
    compute = torch.float64 if dtype == torch.float64 else torch.float32
    value = ex.to_dtype(random_expr(ctx, kind, size, device), compute)
    if kind == "rand" and dtype in LOW_PRECISION_STEPS:
        # On the dtype's own grid (as eager draws them), so rounding never makes a 1.0.
        steps = ex.constant(LOW_PRECISION_STEPS[dtype], compute)
        value = ex.op("truediv", ex.op("floor", ex.op("mul", value, steps, dtype=compute), dtype=compute),
                      steps, dtype=compute)
    if scale != 1.0:
        value = ex.op("mul", value, ex.constant(scale, compute), dtype=compute)
    if shift != 0.0:
        value = ex.op("add", value, ex.constant(shift, compute), dtype=compute)
    return TensorValue(size, dtype, device, ex.to_dtype(value, dtype))


@lowering(aten.rand.default, aten.rand_like.default)
def lower_rand(ctx, node, *args, **kwargs):
    return _random_tensor(ctx, node, "rand", kwargs)


@lowering(aten.randn.default, aten.randn_like.default)
def lower_randn(ctx, node, *args, **kwargs):
    return _random_tensor(ctx, node, "randn", kwargs)


@lowering(aten.uniform.default)
def lower_uniform(ctx, node, x, low=0.0, high=1.0, *, generator=None):
    return _random_tensor(ctx, node, "rand", {"generator": generator}, high - low, low)


@lowering(aten.normal_functional.default)
def lower_normal(ctx, node, x, mean=0.0, std=1.0, *, generator=None):
    return _random_tensor(ctx, node, "randn", {"generator": generator}, std, mean)


def _bernoulli(ctx, node, probability) -> TensorValue:
    """1 where a uniform draw is below probability (a float or a TensorValue), else 0."""
    size, dtype, device = output_of(node)
    draw = random_expr(ctx, "rand", size, device)
    compute = torch.float64 if isinstance(probability, TensorValue) and probability.dtype == torch.float64 \
        else torch.float32
    below = ex.op("lt", ex.to_dtype(draw, compute), operand(probability, size, compute, sizes=ctx.sizes), dtype=torch.bool)
    return TensorValue(size, dtype, device, ex.to_dtype(below, dtype))


@lowering(aten.bernoulli.p)
def lower_bernoulli_p(ctx, node, x, p=0.5, *, generator=None):
    _no_generator({"generator": generator})
    return _bernoulli(ctx, node, float(p))


@lowering(aten.bernoulli.Tensor)
def lower_bernoulli_tensor(ctx, node, x, p, *, generator=None):
    _no_generator({"generator": generator})
    return _bernoulli(ctx, node, p)


@lowering(aten.native_dropout.default)
def lower_native_dropout(ctx, node, x, p, train):
    """(x * mask * 1/(1-p), mask) with mask ~ Bernoulli(1 - p), like eager; identity when not
    training."""
    if not x.dtype.is_floating_point:
        raise Unsupported(f"dropout of {x.dtype}")
    compute = upcast(x.dtype)
    element = ex.to_dtype(x.at(dim_vars(x.rank)), compute)
    if train is False or p == 0:
        return x, TensorValue(x.size, torch.bool, x.device, ex.constant(True, torch.bool))
    if p >= 1:
        zeros = TensorValue(x.size, x.dtype, x.device, ex.constant(0, x.dtype))
        return zeros, TensorValue(x.size, torch.bool, x.device, ex.constant(False, torch.bool))
    draw = random_expr(ctx, "rand", x.size, x.device)
    keep = ex.op("lt", draw, ex.constant(1.0 - p, torch.float32), dtype=torch.bool)
    kept = ex.op("mul", element, ex.to_dtype(keep, compute), dtype=compute)
    scaled = ex.op("mul", kept, ex.constant(1.0 / (1.0 - p), compute), dtype=compute)
    return TensorValue(x.size, x.dtype, x.device, ex.to_dtype(scaled, x.dtype)), \
        TensorValue(x.size, torch.bool, x.device, keep)


@lowering(torch.ops.higher_order.run_and_save_rng_state, torch.ops.higher_order.run_with_rng_state)
def lower_rng_state_wrapper(ctx, node, *args, **kwargs):
    """Activation checkpointing (and functionalize_rng_ops) wraps a random op to save torch's
    generator state in the forward and replay it in the backward: that protocol is aten's, so
    the op runs through aten, inside the wrapper (only this op, not the graph)."""
    raise Unsupported("saves or replays torch's RNG state around the op (activation checkpointing)")
