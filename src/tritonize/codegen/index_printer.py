"""Print sympy index expressions as Triton (Python) source."""
from __future__ import annotations

import math

import sympy

from ..ir.symbols import FloorDiv, ModularIndexing


def print_index(expr: sympy.Expr) -> str:
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        return expr.name
    numerator, denominator = sympy.fraction(expr)
    if denominator != 1:  # a ratio of sizes (a float, lower/symbolic.py): the wrapper's a / b
        return f"({print_index(numerator)} / {_operand(denominator)})"
    if isinstance(expr, FloorDiv):
        return f"({print_index(expr.args[0])} // {_operand(expr.args[1])})"
    if isinstance(expr, ModularIndexing):
        x, d, n = expr.args
        inner = print_index(x) if d == 1 else f"({print_index(x)} // {_operand(d)})"
        return f"({inner} % {_operand(n)})"
    if expr.is_Pow and expr.exp.is_Integer and expr.exp > 0:  # a symbolic size squared...
        return "(" + " * ".join([_operand(expr.base)] * int(expr.exp)) + ")"
    if expr.func.__name__ in ("Min", "Max"):  # sympy's or the ShapeEnv's, over sizes
        return _print_extremum("min" if expr.func.__name__ == "Min" else "max", list(expr.args))
    if expr.is_Add:
        return _print_add(expr)
    if expr.is_Mul:
        coeff, rest = expr.as_coeff_Mul()
        if coeff == -1:
            return f"(-{print_index(rest)})"
        if coeff != 1:
            return f"{int(coeff)} * {print_index(rest)}" if rest.is_Symbol else f"{int(coeff)} * ({print_index(rest)})"
        factors = [print_index(f) for f in expr.args]
        return " * ".join(factors)
    raise NotImplementedError(f"cannot print index expression {expr}")


def print_number(value) -> str:
    """A Python number as source; infinities and NaN as float("...")."""
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    return repr(value)


RELATION_SYMBOLS = {sympy.Ge: ">=", sympy.Gt: ">", sympy.Le: "<=", sympy.Lt: "<", sympy.Eq: "==", sympy.Ne: "!="}


def print_condition(condition) -> str:
    """A comparison of sizes (a SymBool: `u0 >= 0`) as a Python bool expression."""
    if condition in (sympy.true, sympy.false):
        return str(bool(condition))
    return f"{print_index(condition.lhs)} {RELATION_SYMBOLS[type(condition)]} {print_index(condition.rhs)}"


def _print_extremum(name: str, args: list) -> str:
    """min(a, min(b, c)): Python's builtins in the wrapper; in kernels Triton maps them to
    tl.minimum / tl.maximum (two operands each)."""
    if len(args) == 1:
        return print_index(args[0])
    return f"{name}({print_index(args[0])}, {_print_extremum(name, args[1:])})"


def _operand(expr: sympy.Expr) -> str:
    """An operand of `//` or `%`: an int, a symbol, or a parenthesized expression."""
    text = print_index(expr)
    return text if expr.is_Integer or expr.is_Symbol else f"({text})"


def _print_add(expr: sympy.Expr) -> str:
    constant, terms = expr.as_coeff_Add()
    parts = []
    for term in sympy.Add.make_args(terms):
        coeff, rest = term.as_coeff_Mul()
        if coeff < 0:
            parts.append(("-", print_index(-term)))
        else:
            parts.append(("+", print_index(term)))
    if constant != 0:
        parts.append(("-" if constant < 0 else "+", str(abs(int(constant)))))
    text = parts[0][1] if parts[0][0] == "+" else f"-{parts[0][1]}"
    for sign, part in parts[1:]:
        text += f" {sign} {part}"
    return f"({text})" if len(parts) > 1 else text
