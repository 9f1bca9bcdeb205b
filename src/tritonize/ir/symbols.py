"""Index arithmetic: the integer functions that view index maps need, and their simplification.

Index expressions are sympy expressions over non-negative integer symbols (one per iteration dim).
Views produce `FloorDiv` and `ModularIndexing` terms; this module keeps them small:

* invariant: the first argument of every FloorDiv/ModularIndexing is non-negative wherever the
  element is not masked off. Codegen prints them as Triton's `//` and `%`, which truncate toward
  zero (C semantics), and the range rules below assume it. A rule may only build a FloorDiv or
  ModularIndexing of an argument that is non-negative for every value of its symbols;

* rules that hold for every integer argument live in the functions' `eval` (sympy applies them
  whenever an expression is built or substituted);
* rules that need the ranges of the variables (`x < n`) live in `simplify_with_ranges`, called
  when a kernel's iteration space is known;
* `combine_digits` folds `d*FloorDiv(x, d) + ModularIndexing(x, 1, d)` back into `x`, which is what
  a reshape followed by its inverse leaves behind.

Not responsible for: choosing iteration orders (codegen) or printing (codegen/index_printer).
"""
from __future__ import annotations

import functools
import math
import re

import sympy


def index_symbol(prefix: str, k: int) -> sympy.Symbol:
    return sympy.Symbol(f"{prefix}{k}", integer=True, nonnegative=True)


@functools.lru_cache(None)
def dim_var(k: int) -> sympy.Symbol:
    """The canonical variable of dimension k of a value's index space."""
    return index_symbol("d", k)


def dim_vars(rank: int) -> list[sympy.Symbol]:
    return [dim_var(k) for k in range(rank)]


def without_unit_dims(index: sympy.Expr, dims, size) -> sympy.Expr:
    """index with the dims of size 1 put to 0. A load's index has dropped such a dim (simplified
    over its range) where a buffer's layout index keeps its stride: compared as they are, the
    same element looks like another (a batch of one)."""
    units = {d: 0 for d, s in zip(dims, size) if s == 1}
    return index.xreplace(units) if units else index


@functools.lru_cache(None)
def reduction_var(k: int) -> sympy.Symbol:
    """The variable of the k-th reduced dimension in a reduction's body."""
    return index_symbol("rd", k)


def reduction_vars(rank: int) -> list[sympy.Symbol]:
    return [reduction_var(k) for k in range(rank)]


def _split_divisible(expr: sympy.Expr, divisor: int):
    """Split an Add into (terms whose integer coefficient is a multiple of divisor, the rest).

    (0, expr) when the rest could be negative: `FloorDiv(2 - d0, 2)` must not become
    `1 + FloorDiv(-d0, 2)`, whose argument breaks the module's invariant (printed as Triton's
    truncating `//` it gives 0 instead of -1 at d0 = 1)."""
    multiple, rest = [], []
    for term in sympy.Add.make_args(expr):
        coeff, _ = term.as_coeff_Mul()
        if coeff.is_Integer and int(coeff) % divisor == 0:
            multiple.append(term)
        else:
            rest.append(term)
    rest = sympy.Add(*rest)
    if not _is_nonnegative(rest):
        return sympy.Integer(0), expr
    return sympy.Add(*multiple), rest


def _is_nonnegative(expr: sympy.Expr) -> bool:
    """True when expr >= 0 for every value of its symbols (a sum of non-negative terms)."""
    for term in sympy.Add.make_args(expr):
        coeff, rest = term.as_coeff_Mul()
        if coeff < 0 or rest.is_nonnegative is not True:
            return False
    return True


class FloorDiv(sympy.Function):
    """floor(x / d) for integer x >= 0 and positive integer d."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, x, d):
        if d == 1:
            return x
        if x == 0:
            return sympy.Integer(0)
        if x.is_Integer and d.is_Integer:
            return sympy.Integer(int(x) // int(d))
        if not d.is_Integer:
            return None
        if isinstance(x, FloorDiv):
            return FloorDiv(x.args[0], x.args[1] * d)
        multiple, rest = _split_divisible(x, int(d))
        if multiple != 0:
            return sympy.expand(multiple / d) + FloorDiv(rest, d)
        return None


class ModularIndexing(sympy.Function):
    """(x // d) % n: digit range [d, d*n) of x, for integer x >= 0."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, x, d, n):
        if n == 1 or x == 0:
            return sympy.Integer(0)
        if x.is_Integer and d.is_Integer and n.is_Integer:
            return sympy.Integer((int(x) // int(d)) % int(n))
        if not (d.is_Integer and n.is_Integer):
            return None
        if isinstance(x, FloorDiv):
            return ModularIndexing(x.args[0], x.args[1] * d, n)
        multiple, rest = _split_divisible(x, int(d) * int(n))
        if multiple != 0:
            return ModularIndexing(rest, d, n)
        return None


def upper_bound(expr: sympy.Expr, ranges: dict) -> int | None:
    """Largest value expr can take when each symbol s lies in [0, ranges[s]); None if unknown
    (a symbolic range or divisor counts as unknown)."""
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        extent = ranges.get(expr)
        return int(extent) - 1 if isinstance(extent, int) or getattr(extent, "is_Integer", False) else None
    if isinstance(expr, (FloorDiv, ModularIndexing)) and not all(a.is_Integer for a in expr.args[1:]):
        return None
    if isinstance(expr, FloorDiv):
        hi = upper_bound(expr.args[0], ranges)
        return None if hi is None else hi // int(expr.args[1])
    if isinstance(expr, ModularIndexing):
        hi = upper_bound(expr.args[0], ranges)
        n = int(expr.args[2])
        return n - 1 if hi is None else min(n - 1, hi // int(expr.args[1]))
    if expr.is_Add:
        parts = [upper_bound(a, ranges) for a in expr.args]
        return None if None in parts else sum(parts)
    if expr.is_Mul:
        coeff, rest = expr.as_coeff_Mul()
        if coeff == 1:  # a product of terms (a symbolic chunk times a position): bound each
            parts = [upper_bound(a, ranges) for a in expr.args]
            return None if None in parts or min(parts) < 0 else math.prod(parts)
        if coeff.is_Integer and coeff >= 0:
            hi = upper_bound(rest, ranges)
            return None if hi is None else int(coeff) * hi
        if coeff.is_Integer and rest.is_nonnegative is True:
            return 0  # a negative multiple of a non-negative term (flip's `n - 1 - d`)
    return None


def simplify_with_ranges(expr: sympy.Expr, ranges: dict, equal=None) -> sympy.Expr:
    """Drop FloorDiv/ModularIndexing that the variables' ranges make trivial, then combine digits.
    equal(a, b): whether two symbolic sizes are known equal beyond their expansion (the
    ShapeEnv's facts: a trace that viewed a step slice as flat guarded `s == 2*(s//2)`)."""

    def visit(e):
        if not e.args:
            return e
        e = e.func(*[visit(a) for a in e.args])
        if isinstance(e, FloorDiv) and e.args[1].is_Integer:
            hi = upper_bound(e.args[0], ranges)
            if hi is not None and hi < int(e.args[1]):
                return sympy.Integer(0)
        if isinstance(e, ModularIndexing) and e.args[1].is_Integer and e.args[2].is_Integer:
            x, d, n = e.args
            hi = upper_bound(x, ranges)
            if hi is not None and hi < int(d) * int(n):
                return FloorDiv(x, d)
        return e

    previous = None
    while previous != expr:
        previous = expr
        expr = _combined_through_products(combine_digits(visit(expr), equal), equal)
    return expr


def _digit_count(expr) -> int:
    return len(expr.atoms(FloorDiv, ModularIndexing))


def _combined_through_products(expr, equal=None):
    """expr, or its expansion where that lets digits combine: a stride times a flattened view's
    digits, `s14*(s0*FloorDiv(d0, s0) + ModularIndexing(d0, 1, s0))`, is `s14*d0` (the reshape of
    a step-sliced input and back: fuzz seed 91084). Other expressions keep their form."""
    if _digit_count(expr) < 2:
        return expr
    expanded = combine_digits(sympy.expand(expr), equal)
    return expanded if _digit_count(expanded) < _digit_count(expr) else expr


def _as_digit(term):
    """term == coeff * digits(x, d, n) with n None for 'all higher digits'; else None."""
    coeff, rest = term.as_coeff_Mul()
    if not isinstance(rest, (ModularIndexing, FloorDiv)):  # a symbolic size may stand in coeff's place
        factors = [f for f in sympy.Mul.make_args(term) if isinstance(f, (ModularIndexing, FloorDiv))]
        if len(factors) != 1:
            return None
        rest = factors[0]
        coeff = sympy.simplify(term / rest)
    if isinstance(rest, ModularIndexing):
        return coeff, rest.args[0], rest.args[1], rest.args[2]
    if isinstance(rest, FloorDiv):
        return coeff, rest.args[0], rest.args[1], None
    return None


def _same(a, b, equal) -> bool:
    """a == b by expansion, or by `equal` where they differ by a division (s against 2*(s//2):
    the only case that needs the ShapeEnv's facts, and each query costs a sympy proof)."""
    difference = sympy.expand(a - b)
    if difference == 0:
        return True
    return equal is not None and difference.has(FloorDiv, ModularIndexing) and equal(a, b)


def combine_digits(expr: sympy.Expr, equal=None) -> sympy.Expr:
    """Merge adjacent digit ranges of one x: c*d*MI(x,d,n) + c*d*n*MI(x,d*n,m) -> c*d*MI(x,d,n*m).
    equal: as simplify_with_ranges's, for the sizes the merge compares."""
    if not expr.is_Add:
        return expr
    terms = list(expr.args)
    changed = True
    while changed:
        changed = False
        for i, a in enumerate(terms):
            da = _as_digit(a)
            if da is None or da[3] is None:
                continue
            for j, b in enumerate(terms):
                db = _as_digit(b)
                if i == j or db is None or db[1] != da[1]:
                    continue
                ca, x, d, n = da
                cb, _, d2, m = db
                if not _same(d2, d * n, equal) or not _same(ca * n, cb, equal):
                    continue
                merged = FloorDiv(x, d) if m is None else ModularIndexing(x, d, n * m)
                terms = [t for k, t in enumerate(terms) if k not in (i, j)] + [ca * merged]
                changed = True
                break
            if changed:
                break
    return sympy.Add(*terms)


def count_divmod(expr: sympy.Expr) -> int:
    return sum(1 for e in sympy.preorder_traversal(expr) if isinstance(e, (FloorDiv, ModularIndexing)))


def is_size_symbol(symbol) -> bool:
    """A symbolic size, not an index variable (those are made by index_symbol and the
    indirect-index helpers: non-negative). The ShapeEnv's sizes read from inputs are positive;
    its data-dependent ones (u0, u1...: lower/unbacked.py) carry no sign, only a range."""
    if not getattr(symbol, "is_Symbol", False):
        return False
    return bool(symbol.is_positive) or bool(symbol.is_integer and UNBACKED_NAME.fullmatch(symbol.name))


UNBACKED_NAME = re.compile(r"u\d+")  # torch's names for data-dependent integer sizes


def affine_coefficients(expr: sympy.Expr, symbols) -> dict | None:
    """{symbol: coefficient, 1: constant} if expr is affine in symbols, else None. Coefficients
    are ints, or expressions over symbolic sizes (ir/sizes.py) when the sizes are symbolic."""
    expr = sympy.expand(expr)
    coeffs = {}
    for term in sympy.Add.make_args(expr):
        coeff, rest = term.as_coeff_Mul()
        if rest == 1:
            coeffs[1] = coeffs.get(1, 0) + int(coeff)
        elif rest in symbols and coeff.is_Integer:
            coeffs[rest] = coeffs.get(rest, 0) + int(coeff)
        else:
            split = _symbolic_coefficient(term, symbols)
            if split is None:
                return None
            symbol, value = split
            coeffs[symbol] = coeffs.get(symbol, 0) + value
    return coeffs


def _symbolic_coefficient(term: sympy.Expr, symbols):
    """(symbol or 1, coefficient) for a term c * symbol or c, with c a product of an integer and
    symbolic sizes; None for anything else."""
    factors = sympy.Mul.make_args(term)
    variables = [f for f in factors if f in symbols]
    sizes = [f for f in factors if f not in symbols]
    if len(variables) > 1 or not all(f.is_Integer or _is_size_power(f) for f in sizes):
        return None
    return (variables[0] if variables else 1), sympy.Mul(*sizes)


def _is_size_power(factor) -> bool:
    """A factor made of the graph's integers only: a size, a power of one, or a function of
    sizes (a reshape's FloorDiv(s0, 2) as a stride)."""
    base = factor.base if factor.is_Pow and factor.exp.is_Integer and factor.exp > 0 else factor
    if is_size_symbol(base) or _is_graph_integer(base):
        return True
    return isinstance(base, (FloorDiv, ModularIndexing)) and bool(base.free_symbols) and \
        all(is_size_symbol(s) for s in base.free_symbols)


def _is_graph_integer(symbol) -> bool:
    """An integer input of unknown sign (Dynamo's unspecialized int: transformers'
    `logits_to_keep`, whose slice `[:, -k:]` gives sizes like s0 + s1). Index variables are
    all declared non-negative, so they never match; the coefficient it makes may be negative,
    which callers check (nodes.strided_view_of asks the ShapeEnv)."""
    return bool(getattr(symbol, "is_Symbol", False) and symbol.is_integer and symbol.is_nonnegative is None)
