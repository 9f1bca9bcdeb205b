"""Lowerings of 2-D pooling: max_pool2d_with_indices, avg_pool2d and their backward ops.

Window sizes are static, so a window is unrolled into one pointwise expression over the output:
kernel_h * kernel_w masked loads (taps) combined with `where`/`add`. The result is a lazy value
like any other, so what produces the input (relu, batch norm) is inlined into the taps and what
consumes the output fuses after it.

* max pool: taps in row-major window order; a tap is taken when it is larger than the best so far
  or NaN (so the last NaN of a window wins, and ties keep the first tap), which is eager's rule on
  both the CPU and CUDA. Padded taps never win. The index (into the flattened H*W plane) starts at
  the window's first tap inside the input, as eager's does, so a window of -inf keeps that one.
* avg pool: the sum of the valid taps in fp32 (fp16/bf16) divided by eager's divisor:
  divisor_override, or the taps inside the padded input (count_include_pad), or the taps inside
  the input; integer inputs sum in their dtype and divide with truncation, like eager.
* backward ops are gathers over the input: each input element sums the contributions of the
  output windows that cover it (no atomics, so the gradient is a pointwise value too). For max
  pool a covering window contributes its gradient when its saved index is this element. The
  candidates are the outputs o whose window span [o*s - p, o*s - p + (k-1)*d] contains the
  element, or, with a dilation, the outputs (h + p - i*d) / s of each tap i, whichever is fewer.
  The gather assumes the indices come from max_pool2d_with_indices (each lies in its own window),
  which is how autograd calls the op.

Windows of more than MAX_TAPS taps, and backward ops whose elements have more than MAX_TAPS
candidate windows, raise Unsupported: the op then runs through aten and explain() says why.
"""
from __future__ import annotations

import dataclasses
import operator

import sympy
import torch

from ..errors import Unsupported
from ..ir import expr as ex
from ..ir.nodes import TensorValue, buffer_value
from ..ir.symbols import FloorDiv, ModularIndexing, dim_vars
from .dtypes import meta_value, static_size, upcast
from .pointwise import output_of
from .registry import lowering

aten = torch.ops.aten

MAX_TAPS = 49  # a 7x7 window; larger windows would make one expression of hundreds of ops
I64 = torch.int64


# --- parameters ------------------------------------------------------------------------------

def pair(value, name: str, op: str) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    value = [int(v) for v in value]
    if len(value) == 1:
        return value[0], value[0]
    if len(value) == 2:
        return value[0], value[1]
    raise Unsupported(f"{op}: {name} {value} is not one or two numbers")


@dataclasses.dataclass(frozen=True)
class Axis:
    """One spatial dim of a pooling: output o's window has taps o*stride - padding + i*dilation
    for i in [0, kernel), over an input of `size` elements and an output of `out` elements."""

    kernel: int
    stride: int
    padding: int
    dilation: int
    size: int
    out: int

    def tap(self, o, i: int) -> sympy.Expr:
        return o * self.stride - self.padding + i * self.dilation

    def _tap_range(self, i: int) -> tuple[int, int]:
        """Smallest and largest value of tap i over the outputs."""
        return self.tap(0, i), self.tap(self.out - 1, i)

    def low_check(self, o, i: int):
        """bool Expr: tap i of output o is >= 0; None when it always is."""
        if self._tap_range(i)[0] >= 0:
            return None
        return _ge(ex.index_expr(o * self.stride + i * self.dilation, self._check_dtype()), self.padding)

    def high_check(self, o, i: int, limit: int):
        """bool Expr: tap i of output o is < limit; None when it always is."""
        if self._tap_range(i)[1] < limit:
            return None
        return _lt(ex.index_expr(o * self.stride + i * self.dilation, self._check_dtype()), limit + self.padding)

    def _check_dtype(self) -> torch.dtype:
        """The checks compare a padded position, at most the last tap plus the padding: int32
        where that fits (int64 compares are two instructions each on the GPU, and a 7x7 window
        has 14 of them per element)."""
        return torch.int32 if self.tap(self.out - 1, self.kernel - 1) + 2 * self.padding < 2**31 else I64

    def checks(self, o, i: int) -> list:
        """The checks that tap i of output o lies inside the input."""
        return [c for c in (self.low_check(o, i), self.high_check(o, i, self.size)) if c is not None]

    def first_tap(self, o):
        """The first tap of output o's window that is >= 0 (eager's starting index), as an int64
        Expr."""
        result = ex.index_expr(self.tap(o, self.kernel - 1), I64)
        for i in reversed(range(self.kernel - 1)):
            check = self.low_check(o, i)
            value = ex.index_expr(self.tap(o, i), I64)
            result = value if check is None else ex.op("where", check, value, result, dtype=I64)
        return result

    def count(self, o, include_pad: bool):
        """How many taps of output o's window (dilation 1) lie inside the input, or inside the
        padded input when include_pad: an int when the same for every output, else an int64 Expr."""
        start_min, end_max = -self.padding, self.tap(self.out - 1, self.kernel)
        if include_pad:  # taps below size + padding (none lie below -padding)
            limit = self.size + self.padding
            if end_max <= limit:
                return self.kernel
            room = _sub(ex.constant(limit + self.padding, I64), ex.index_expr(o * self.stride, I64))
            return ex.op("minimum", ex.constant(self.kernel, I64), room, dtype=I64)
        if end_max <= self.size and start_min >= 0:
            return self.kernel
        start = ex.index_expr(self.tap(o, 0), I64)
        end = ex.op("add", start, ex.constant(self.kernel, I64), dtype=I64)
        if end_max > self.size:
            end = ex.op("minimum", end, ex.constant(self.size, I64), dtype=I64)
        if start_min < 0:
            start = ex.op("maximum", start, ex.constant(0, I64), dtype=I64)
        return _sub(end, start)

    def covering(self, x, exact: bool) -> list[tuple[sympy.Expr, list]]:
        """The outputs whose windows may cover input position x (a sympy expression), in
        increasing order, each with the bool Exprs that must hold for it to be one. With exact,
        the checks also say that x is a tap of that window; without, they only keep the output
        inside [0, out) (max pool's saved index decides the rest). exact needs dilation 1."""
        if exact and self.dilation != 1:
            raise Unsupported("pooling backward: exact window cover with a dilation")
        span = (self.kernel - 1) * self.dilation + 1
        if self.dilation > 1 and self.kernel < -(-span // self.stride):
            return self._covering_by_tap(x)
        return self._covering_by_span(x, span, exact)

    def _covering_by_span(self, x, span: int, exact: bool) -> list:
        """o = q - t with q = (x + padding) // stride: the outputs whose window span holds x."""
        q = FloorDiv(x + self.padding, self.stride)
        q_min, q_max = self.padding // self.stride, (self.size - 1 + self.padding) // self.stride
        offset = ModularIndexing(x + self.padding, 1, self.stride)  # x's offset from q's start
        result = []
        for t in reversed(range(-(-span // self.stride))):
            checks = []
            if q_min < t:
                checks.append(_ge(ex.index_expr(q, I64), t))
            if q_max >= self.out + t:
                checks.append(_lt(ex.index_expr(q, I64), self.out + t))
            if exact and self.stride - 1 + t * self.stride >= span:  # x past the window's end
                checks.append(_lt(ex.index_expr(offset, I64), span - t * self.stride))
            result.append((q - t, checks))
        return result

    def _covering_by_tap(self, x) -> list:
        """For each tap i, the output o with o*stride = x + padding - i*dilation, if it divides."""
        shift = max(0, -(-((self.kernel - 1) * self.dilation - self.padding) // self.stride))
        result = []
        for i in reversed(range(self.kernel)):  # larger taps belong to smaller outputs
            u = x + self.padding - i * self.dilation + shift * self.stride  # >= 0
            q = FloorDiv(u, self.stride)
            checks = [_ge(ex.index_expr(q, I64), shift), _lt(ex.index_expr(q, I64), self.out + shift)]
            if self.stride > 1:
                checks.append(ex.op("eq", ex.index_expr(ModularIndexing(u, 1, self.stride), I64),
                                    ex.constant(0, I64), dtype=torch.bool))
            result.append((q - shift, checks))
        return result


def _ge(value: ex.Expr, bound: int) -> ex.Expr:
    return ex.op("ge", value, ex.constant(bound, value.dtype), dtype=torch.bool)


def _lt(value: ex.Expr, bound: int) -> ex.Expr:
    return ex.op("lt", value, ex.constant(bound, value.dtype), dtype=torch.bool)


def _sub(a: ex.Expr, b: ex.Expr) -> ex.Expr:
    return ex.op("sub", a, b, dtype=a.dtype)


def all_of(checks: list):
    mask = None
    for check in checks:
        mask = check if mask is None else ex.op("logical_and", mask, check, dtype=torch.bool)
    return mask


def window_axes(op: str, x_size, out_size, kernel_size, stride, padding, dilation=1) -> tuple[Axis, Axis]:
    if len(x_size) not in (3, 4):
        raise Unsupported(f"{op} of a {len(x_size)}-D input")
    kernel = pair(kernel_size, "kernel_size", op)
    stride = pair(stride, "stride", op) if stride not in ([], (), None) else kernel
    padding, dilation = pair(padding, "padding", op), pair(dilation, "dilation", op)
    axes = tuple(Axis(kernel[k], stride[k], padding[k], dilation[k], x_size[k - 2], out_size[k - 2])
                 for k in range(2))
    return axes


def _require_small_window(op: str, axes) -> None:
    kh, kw = axes[0].kernel, axes[1].kernel
    if kh * kw > MAX_TAPS:
        raise Unsupported(f"{op}: a {kh}x{kw} window has more than {MAX_TAPS} taps "
                          "(the unrolled expression would be too large)")


def window_taps(axes, oh, ow):
    """(i, j, h, w, checks) for every tap (i, j) of output (oh, ow), row-major: the tap's
    position in the window, the input position it reads, and the checks that it is inside."""
    ah, aw = axes
    for i in range(ah.kernel):
        for j in range(aw.kernel):
            yield i, j, ah.tap(oh, i), aw.tap(ow, j), ah.checks(oh, i) + aw.checks(ow, j)


def _lowest(dtype: torch.dtype):
    return float("-inf") if dtype.is_floating_point else torch.iinfo(dtype).min


def add_to(total, term):
    return term if total is None else ex.op("add", total, term, dtype=term.dtype)


# --- forward ---------------------------------------------------------------------------------

@lowering(aten.max_pool2d_with_indices.default)
def lower_max_pool2d_with_indices(ctx, node, x, kernel_size, stride=(), padding=0, dilation=1,
                                  ceil_mode=False):
    values_meta, indices_meta = meta_value(node)
    out_size = static_size(values_meta.shape)
    axes = window_axes("max_pool2d", x.size, out_size[-2:], kernel_size, stride, padding, dilation)
    _require_small_window("max_pool2d", axes)
    out = dim_vars(len(out_size))
    lead, oh, ow = out[:-2], out[-2], out[-1]
    width = x.size[-1]
    compute = upcast(x.dtype)
    lowest = ex.constant(_lowest(compute), compute)
    best = lowest
    index = ex.op("add", ex.op("mul", axes[0].first_tap(oh), ex.constant(width, I64), dtype=I64),
                  axes[1].first_tap(ow), dtype=I64)
    for _, _, h, w, checks in window_taps(axes, oh, ow):
        value = ex.to_dtype(x.at(lead + [h, w]), compute)
        position = ex.index_expr(h * width + w, I64)
        if best is lowest and not checks:  # the first tap, always inside: start with it
            best, index = value, position
            continue
        mask = all_of(checks)
        candidate = value if mask is None else ex.masked(mask, value, _lowest(compute))
        take = ex.op("gt", candidate, best, dtype=torch.bool)
        if compute.is_floating_point:
            take = ex.op("logical_or", take, ex.op("isnan", candidate, dtype=torch.bool), dtype=torch.bool)
        best = ex.op("where", take, candidate, best, dtype=compute)
        index = ex.op("where", take, position, index, dtype=I64)
    origins = x.origins + (node.name,)
    values = TensorValue(out_size, x.dtype, x.device, ex.to_dtype(best, x.dtype), origins)
    indices = TensorValue(out_size, I64, x.device, index, origins)
    return _shared_outputs(ctx, node, (values, indices))


def _shared_outputs(ctx, node, values: tuple) -> tuple:
    """The outputs of a multi-output op, each stored once when several consumers read it and
    recomputing the window would cost more (the rule lower/graph.py applies to single outputs).
    When both are read, both are stored together, so one kernel computes the window once."""
    users = [0] * len(values)
    for user in node.users:
        if user.target is operator.getitem:
            users[user.args[1]] += len(user.users)
    if all(users):
        from .graph import dense_strides  # graph.py imports this module

        buffers = [ctx.compute_buffer(v, dense_strides(m)) for v, m in zip(values, meta_value(node))]
        return tuple(buffer_value(b.name, b.layout) for b in buffers)
    return tuple(ctx.maybe_realize_shared(v, n) if n else v for v, n in zip(values, users))


@lowering(aten.avg_pool2d.default)
def lower_avg_pool2d(ctx, node, x, kernel_size, stride=(), padding=0, ceil_mode=False,
                     count_include_pad=True, divisor_override=None):
    out_size, out_dtype, device = output_of(node)
    axes = window_axes("avg_pool2d", x.size, out_size[-2:], kernel_size, stride, padding)
    _require_small_window("avg_pool2d", axes)
    out = dim_vars(len(out_size))
    lead, oh, ow = out[:-2], out[-2], out[-1]
    compute = upcast(x.dtype)
    total = None
    for _, _, h, w, checks in window_taps(axes, oh, ow):
        value = ex.to_dtype(x.at(lead + [h, w]), compute)
        mask = all_of(checks)
        total = add_to(total, value if mask is None else ex.masked(mask, value, 0))
    divisor = _divisor(axes, oh, ow, count_include_pad, divisor_override)
    body = _divide(total, divisor)
    return TensorValue(out_size, out_dtype, device, ex.to_dtype(body, out_dtype))


def _divisor(axes, oh, ow, count_include_pad: bool, divisor_override):
    """avg_pool2d's divisor for output (oh, ow): an int, or an int64 Expr."""
    if divisor_override:
        return int(divisor_override)
    rows, cols = axes[0].count(oh, count_include_pad), axes[1].count(ow, count_include_pad)
    if isinstance(rows, int) and isinstance(cols, int):
        return rows * cols
    rows, cols = (ex.constant(c, I64) if isinstance(c, int) else c for c in (rows, cols))
    return ex.op("mul", rows, cols, dtype=I64)


def _divide(total: ex.Expr, divisor) -> ex.Expr:
    dtype = total.dtype
    divisor = ex.constant(divisor, dtype) if isinstance(divisor, int) else ex.to_dtype(divisor, dtype)
    name = "truediv" if dtype.is_floating_point else "truncdiv"
    return ex.op(name, total, divisor, dtype=dtype)


# --- backward --------------------------------------------------------------------------------

def _covering_windows(op: str, axes, h, w, exact: bool) -> list:
    """(oh, ow, checks) of the output windows that may cover input (h, w), row-major."""
    rows, cols = axes[0].covering(h, exact), axes[1].covering(w, exact)
    if len(rows) * len(cols) > MAX_TAPS:
        raise Unsupported(f"{op}: an input element has {len(rows)}x{len(cols)} candidate windows, "
                          f"more than {MAX_TAPS} (the unrolled expression would be too large)")
    return [(oh, ow, hc + wc) for oh, hc in rows for ow, wc in cols]


@lowering(aten.avg_pool2d_backward.default)
def lower_avg_pool2d_backward(ctx, node, grad, x, kernel_size, stride, padding, ceil_mode,
                              count_include_pad, divisor_override=None):
    size, out_dtype, device = output_of(node)
    if not grad.dtype.is_floating_point:
        raise Unsupported(f"avg_pool2d_backward of a {grad.dtype} gradient")
    axes = window_axes("avg_pool2d_backward", x.size, grad.size[-2:], kernel_size, stride, padding)
    dims = dim_vars(len(size))
    lead, h, w = dims[:-2], dims[-2], dims[-1]
    compute = upcast(grad.dtype)
    total = None
    for oh, ow, checks in _covering_windows("avg_pool2d_backward", axes, h, w, exact=True):
        divisor = _divisor(axes, oh, ow, count_include_pad, divisor_override)
        mask = all_of(checks)
        if mask is not None and isinstance(divisor, ex.Expr):  # no 0/0 where the mask is off
            divisor = ex.op("maximum", divisor, ex.constant(1, I64), dtype=I64)
        share = _divide(ex.to_dtype(grad.at(lead + [oh, ow]), compute), divisor)
        total = add_to(total, share if mask is None else ex.masked(mask, share, 0))
    return TensorValue(size, out_dtype, device, ex.to_dtype(total, out_dtype))


@lowering(aten.max_pool2d_with_indices_backward.default)
def lower_max_pool2d_with_indices_backward(ctx, node, grad, x, kernel_size, stride, padding, dilation,
                                           ceil_mode, indices):
    size, out_dtype, device = output_of(node)
    op = "max_pool2d_with_indices_backward"
    axes = window_axes(op, x.size, grad.size[-2:], kernel_size, stride, padding, dilation)
    dims = dim_vars(len(size))
    lead, h, w = dims[:-2], dims[-2], dims[-1]
    compute = upcast(grad.dtype)
    here = ex.index_expr(h * x.size[-1] + w, I64)
    zero = ex.constant(0, compute)
    total = None
    for oh, ow, checks in _covering_windows(op, axes, h, w, exact=False):
        hit = ex.op("eq", ex.to_dtype(indices.at(lead + [oh, ow]), I64), here, dtype=torch.bool)
        share = ex.op("where", hit, ex.to_dtype(grad.at(lead + [oh, ow]), compute), zero, dtype=compute)
        mask = all_of(checks)
        total = add_to(total, share if mask is None else ex.masked(mask, share, 0))
    if total is None:
        total = zero
    return TensorValue(size, out_dtype, device, ex.to_dtype(total, out_dtype))

