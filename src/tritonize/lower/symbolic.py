"""Lowerings of the size arithmetic of graphs with symbolic sizes.

Dynamic graphs compute sizes in the graph itself: `sym_size.int(x, 0)`, then Python arithmetic on
the result (`operator.mul`, `operator.floordiv`...). These become sympy expressions over the
ShapeEnv's symbols (ir/sizes.py), which the lowerings that take sizes (view, expand, full...)
use like ints, and which the wrapper evaluates from its bound symbols.
"""
from __future__ import annotations

import math
import operator

import sympy
import torch

from ..errors import Unsupported
from ..ir.sizes import as_size
from ..ir.symbols import FloorDiv, ModularIndexing
from .registry import lowering

aten = torch.ops.aten


def _size_of(value, dim: int, attribute: str):
    sizes = getattr(value, attribute, None)
    if sizes is None:
        raise Unsupported(f"{attribute} of a {type(value).__name__}")
    return as_size(sizes[dim])


@lowering(aten.sym_size.int)
def lower_sym_size(ctx, node, x, dim):
    return as_size(x.size[dim])


@lowering(aten.sym_numel.default)
def lower_sym_numel(ctx, node, x):
    return as_size(sympy.Mul(*x.size))


def _floordiv(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return as_size(FloorDiv(sympy.sympify(a), sympy.sympify(b)))


def _mod(a, b):
    """Python's a % b of sizes (fftshift's roll by n // 2 writes one): for a non-negative a and a
    positive b, our ModularIndexing(a, 1, b)."""
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    return as_size(ModularIndexing(sympy.sympify(a), sympy.Integer(1), sympy.sympify(b)))


INT_ARITHMETIC = {
    operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
    operator.floordiv: _floordiv, operator.neg: operator.neg, operator.mod: _mod,
}
for _op, _fn in INT_ARITHMETIC.items():
    lowering(_op)(lambda ctx, node, *args, _fn=_fn: as_size(_fn(*args)))


def _truediv(a, b):
    """A ratio of sizes (decompositions write N / (N - 1) for an unbiased variance): Python's
    float a / b, kept as the exact fraction; pointwise operands (lower/pointwise.py) and the
    wrapper (codegen/index_printer.py) evaluate it as a / b in double precision. A float divisor
    (`x.shape[0] / 3.0`) is the exact fraction it stands for, so N / 2.5 is 2N / 5: the same real
    number, which one rounding of one division gives as Python does."""
    if isinstance(b, (float, sympy.Float)) and not isinstance(a, (float, sympy.Float)):
        if not math.isfinite(float(b)) or float(b) == 0:
            raise Unsupported(f"a size divided by {b}")
        b = sympy.Rational(*float(b).as_integer_ratio())
    if isinstance(b, (float, sympy.Float)) or not isinstance(a, (int, float, sympy.Expr)):
        raise Unsupported("a division by a float")
    if isinstance(a, (int, float)) and isinstance(b, int):
        return a / b
    if isinstance(a, (float, sympy.Float)):  # a float by a size (var's backward: 2.0 / (N - 1))
        return sympy.Float(a) / sympy.sympify(b)
    return sympy.sympify(a) / sympy.sympify(b)


lowering(operator.truediv)(lambda ctx, node, a, b: _truediv(a, b))


@lowering(operator.pow)
def lower_pow(ctx, node, base, exponent):
    """A size to a non-negative integer power (a float power is a SymFloat: not a size)."""
    if not isinstance(exponent, int) or exponent < 0 or isinstance(base, (float, sympy.Float)):
        raise Unsupported("a power of a size that is not a size")
    return as_size(sympy.sympify(base) ** exponent)


@lowering(torch.sym_sum)
def lower_sym_sum(ctx, node, values):
    return as_size(sympy.Add(*[sympy.sympify(v) for v in values]))


@lowering(torch.sym_float)
def lower_sym_float(ctx, node, value):
    """A size as a number: kept as the integer expression; an operand of a float op is cast to
    the op's dtype like any integer scalar (lower/pointwise.py, operand)."""
    if not isinstance(value, (int, sympy.Expr)):
        raise Unsupported(f"sym_float of a {type(value).__name__}")
    return as_size(value)
