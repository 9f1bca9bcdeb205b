"""A sum over a row that holds one nonzero element picks that element: no loop over the row.

Cross entropy's backward scatters -1 at each row's target (lower/scatter.py turns the one-hot
into `where(r == target, -1, 0)`) and then sums each row of it times the incoming gradient: a
reduction over the whole vocabulary (GPT-2: 50257 elements a row) to find the one value that
is not zero. When the summed element is, up to factors that do not vary along the row,
`where(r == t, v, 0)` with t a bound index into a dim of the row's length (an `indirect`
binding, checked in range) and v constant along the row, exactly one r matches and the sum is
v times those factors. `+ 0.0` keeps the sum's sign of zero (a row of zeros and -0.0 sums to
+0.0).
"""
from __future__ import annotations

import sympy

from ..ir import expr as ex


def one_hot_pick(body: ex.Expr, rvar: sympy.Symbol, extent) -> ex.Expr | None:
    """The element a sum over rvar (of `extent` values) adds up, when only one is nonzero;
    None when body is not of that form. The other elements are 0 times the row's factors: the
    sum is NaN where a factor is infinite or NaN (0 * inf), which `+ 0 * factor` keeps."""
    if extent == 1:
        return None
    factors: list = []
    picked = _pick(body, rvar, extent, {}, factors)
    if picked is None:
        return None
    if picked.dtype.is_floating_point:
        for factor in factors:
            zero = ex.op("mul", ex.constant(0.0, factor.dtype), factor, dtype=factor.dtype)
            picked = ex.op("add", picked, ex.to_dtype(zero, picked.dtype), dtype=picked.dtype)
        picked = ex.op("add", picked, ex.constant(0.0, picked.dtype), dtype=picked.dtype)
    return picked


def _pick(e: ex.Expr, rvar, extent, bound: dict, factors: list) -> ex.Expr | None:
    """e with its one-hot select replaced by the selected value; `factors` collects the
    row-constant factors it was multiplied by."""
    if e.op == "mul":
        a, b = e.args
        a_varies, b_varies = _varies(a, rvar), _varies(b, rvar)
        if a_varies == b_varies:
            return None
        varying, constant = (a, b) if a_varies else (b, a)
        inner = _pick(varying, rvar, extent, bound, factors)
        if inner is None:
            return None
        if constant.dtype.is_floating_point:
            factors.append(constant)
        return ex.op("mul", inner, constant, dtype=e.dtype) if a_varies else ex.op("mul", constant, inner, dtype=e.dtype)
    if e.op == "to_dtype":
        inner = _pick(e.args[0], rvar, extent, bound, factors)
        return None if inner is None else _cast_inside(inner, e.dtype)
    if e.op == "indirect":
        symbol, index, size, wrap, check, inner_body = e.args
        if _varies(index, rvar):
            return None
        inner = _pick(inner_body, rvar, extent, {**bound, symbol: size}, factors)
        return None if inner is None else ex.Expr("indirect", (symbol, index, size, wrap, check, inner), inner.dtype)
    if e.op == "where":
        return _pick_where(e, rvar, extent, bound)
    return None


def _cast_inside(e: ex.Expr, dtype) -> ex.Expr:
    """e converted to dtype, the conversion inside an indirect binding (whose body may be a
    constant: a cast of the binding itself would be applied to a literal in the kernel)."""
    if e.op == "indirect":
        return ex.Expr("indirect", e.args[:-1] + (_cast_inside(e.args[-1], dtype),), dtype)
    return ex.to_dtype(e, dtype)


def _pick_where(e: ex.Expr, rvar, extent, bound: dict) -> ex.Expr | None:
    """where(rvar == t, v, 0) with t bound to a dim of `extent` elements: v."""
    condition, hit, miss = e.args
    if miss.op != "constant" or miss.args[0] != 0 or _varies(hit, rvar) or condition.op != "eq":
        return None
    sides = [a.args[0] for a in condition.args if a.op == "index_expr"]
    if len(sides) != 2 or rvar not in sides:
        return None
    other = sides[1] if sides[0] == rvar else sides[0]
    size = bound.get(other)
    if size is None or not _equal_sizes(size, extent):
        return None
    return hit


def _equal_sizes(a, b) -> bool:
    return a == b or sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0


def _varies(e: ex.Expr, rvar) -> bool:
    """Whether any index e reads or computes holds rvar."""
    for sub in ex.walk(e):
        if sub.op == "load" and rvar in sub.args[1].free_symbols:
            return True
        if sub.op == "index_expr" and rvar in sub.args[0].free_symbols:
            return True
    return False
