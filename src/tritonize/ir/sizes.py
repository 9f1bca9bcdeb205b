"""Sizes that may be symbolic, and the one place that answers questions about them.

A size is an int, or a sympy expression over the ShapeEnv's own symbols (`s0`, `u0`: taken from
`SymInt.node.expr`) when torch.compile made it dynamic. Static graphs hold ints only, so every
question below is plain int arithmetic for them.

`SizeOracle` answers for one graph:
* guard-free questions (`known_equal`, `known_multiple`, `known_at_most`): True only when the
  ShapeEnv proves it for every size the graph may see. For optimizations (dropping a mask,
  int32 indexing) and for fusion: a False is always safe.
* `guard_at_most(expr, limit)`: an answer the generated code relies on, true at the example
  sizes: it is guarded through the ShapeEnv, so Dynamo recompiles for a size that breaks it.
  Every guard added is recorded (`guards`) and `explain()` lists them.
* `hint(expr)`: the example's value, for heuristics only, never for correctness.

Not responsible for: where symbols are read at run time (lower/graph.py binds them) or how
they are printed (codegen).
"""
from __future__ import annotations

import sympy
import torch

Size = int | sympy.Expr
# Heuristics whose choice on symbolic sizes the generated code bakes in: name -> function of
# the sizes' example values (and plain arguments). Registered with @heuristic where they live.
HEURISTICS: dict = {}


def heuristic(name: str):
    def register(fn):
        HEURISTICS[name] = fn
        return fn
    return register


UNBACKED_GUESS = 8192  # a data-dependent size, for heuristics (what Inductor assumes too)


def as_size(value) -> Size:
    """An int, or the sympy expression of a SymInt (an int when it is a known constant), in our
    index functions (ir/symbols.py) rather than the ShapeEnv's."""
    shape_env = None
    if isinstance(value, torch.SymInt):
        value, shape_env = value.node.expr, value.node.shape_env
    if isinstance(value, sympy.Expr):
        if shape_env is not None and value.has(*_extrema()):  # (over the ShapeEnv's own functions)
            value = _without_decided_extrema(value, shape_env)
        value = _from_shape_env(value)
        return int(value) if value.is_Integer else value
    return int(value)


def _without_decided_extrema(expr: sympy.Expr, shape_env) -> sympy.Expr:
    """Max(1, s8) -> s8 where the symbols' ranges decide it (torch writes contiguous strides
    with Max(1, size); a symbol sympy does not know to be positive keeps the Max)."""
    maxima, minima = _extrema()[0::2], _extrema()[1::2]

    def decided(e):
        if len(e.args) != 2:
            return e
        a, b = e.args
        gap = shape_env.bound_sympy(a - b)
        if gap.lower >= 0:
            return a if isinstance(e, maxima) else b
        if gap.upper <= 0:
            return b if isinstance(e, maxima) else a
        return e
    return expr.replace(lambda e: isinstance(e, maxima + minima), decided)


def without_max_one(stride: Size, sizes=()) -> Size:
    """torch writes the stride past a dim of size n as Max(1, n) where n may be 0 (a
    data-dependent size, or a difference such as s0 - s1 + 3 whose sign no guard settled): the
    same layout as n for every size with elements, since n = 0 leaves the tensor empty. So a
    Max(1, n) is dropped, inside products too (s2*Max(1, s0 - s1 + 3), a channels-last stride of
    a convolution's output traced on CUDA), where n is one of the tensor's `sizes`. Not where n is
    not: a size that is itself Max(1, n) keeps elements at n = 0, where n would be a stride of 0."""
    if not isinstance(stride, sympy.Basic):
        return stride
    maxima = _extrema()[0::2]
    own = {n for n in sizes if isinstance(n, sympy.Basic)}

    def of_own_size(e) -> bool:
        return (isinstance(e, maxima) and len(e.args) == 2 and sympy.Integer(1) in e.args
                and next(a for a in e.args if a != 1) in own)

    return stride.replace(of_own_size, lambda e: next(a for a in e.args if a != 1))


def _extrema() -> tuple:
    """(Max, Min) of sympy and of the ShapeEnv (torch.utils._sympy.functions), alternating."""
    from torch.utils._sympy import functions

    return (sympy.Max, sympy.Min, getattr(functions, "Max", sympy.Max), getattr(functions, "Min", sympy.Min))


def _function_pairs():
    """(the ShapeEnv's function, ours) for the integer functions sizes use."""
    from torch.utils._sympy import functions as shape_env_functions

    from .symbols import FloorDiv, ModularIndexing

    pairs = [(shape_env_functions.FloorDiv, FloorDiv), (shape_env_functions.ModularIndexing, ModularIndexing)]
    clean_div = getattr(shape_env_functions, "CleanDiv", None)  # a division known to be exact
    return pairs + ([(clean_div, FloorDiv)] if clean_div is not None else [])


def _from_shape_env(expr: sympy.Expr) -> sympy.Expr:
    for theirs, ours in _function_pairs():
        if expr.has(theirs):
            expr = expr.replace(theirs, ours)
    pow_by_natural = getattr(__import__("torch.utils._sympy.functions", fromlist=["x"]), "PowByNatural", None)
    if pow_by_natural is not None and expr.has(pow_by_natural):
        expr = expr.replace(pow_by_natural, sympy.Pow)
    return expr


def _to_shape_env(expr):
    for theirs, ours in _function_pairs()[:2]:
        if isinstance(expr, sympy.Basic) and expr.has(ours):
            expr = expr.replace(ours, theirs)
    return expr


def _finite(bound) -> int | None:
    """A range bound as an int; None for the ShapeEnv's infinities."""
    return int(bound) if isinstance(bound, (int, sympy.Integer)) else None


def example_value(value, fallback: int = 0) -> int:
    """A SymInt's value at the example sizes (fallback for an unbacked one); ints as they are.
    For orderings and heuristics only: it adds no guard."""
    if not isinstance(value, torch.SymInt):
        return int(value)
    try:
        from torch.fx.experimental.symbolic_shapes import optimization_hint  # torch >= 2.12
    except ImportError:
        from torch.fx.experimental.symbolic_shapes import hint_int as optimization_hint
    return optimization_hint(value, fallback=fallback)


def is_symbolic(value) -> bool:
    return isinstance(value, sympy.Expr) and not value.is_Integer


def any_symbolic(sizes) -> bool:
    return any(is_symbolic(s) for s in sizes)


def size_symbols(sizes) -> set:
    found: set = set()
    for s in sizes:
        if is_symbolic(s):
            found |= s.free_symbols
    return found


def has_symbolic_sizes(example_inputs) -> bool:
    """Whether a graph's example inputs carry symbolic sizes (a dynamic graph)."""
    for value in example_inputs:
        if isinstance(value, torch.SymInt):
            return True
        if isinstance(value, torch.Tensor) and any(
                isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride(), value.storage_offset())):
            return True
    return False


class SizeOracle:
    """Questions about the sizes of one graph (see the module docstring)."""

    def __init__(self, shape_env=None):
        self.shape_env = shape_env
        self.guards: list[str] = []
        self.choices: list = []  # [heuristic, [size texts], [extra], value]: see choose

    @classmethod
    def of(cls, example_inputs) -> "SizeOracle":
        from torch._guards import detect_fake_mode

        fake_mode = detect_fake_mode(list(example_inputs))
        return cls(getattr(fake_mode, "shape_env", None))

    def is_size_symbol(self, symbol) -> bool:
        """Whether a sympy symbol is one of the ShapeEnv's sizes (not an index variable)."""
        return self.shape_env is not None and symbol in self.shape_env.var_to_range

    def _statically_true(self, condition) -> bool:
        condition = sympy.sympify(condition)
        if condition == sympy.true:
            return True
        if condition == sympy.false or self.shape_env is None:
            return False
        condition = _to_shape_env(condition)
        if self.shape_env._maybe_evaluate_static(condition) == sympy.true:  # the symbols' ranges
            return True
        # the guards between symbols too (s1 <= s0 for x[:, -s1:] of a dim of size s0)
        axioms = getattr(self.shape_env, "get_axioms", None)
        if axioms is None:
            return False
        each = tuple(part for axiom in axioms() for part in sympy.And.make_args(axiom))  # (a & b): a, b
        return self.shape_env._maybe_evaluate_static(condition, axioms=each) == sympy.true

    def known_equal(self, a: Size, b: Size) -> bool:
        if not (is_symbolic(a) or is_symbolic(b)):
            return int(a) == int(b)
        return sympy.simplify(sympy.sympify(a) - b) == 0 or self._statically_true(sympy.Eq(a, b))

    def known_multiple(self, value: Size, divisor: int) -> bool:
        if not is_symbolic(value):
            return int(value) % divisor == 0
        return self._statically_true(sympy.Eq(sympy.Mod(value, divisor), 0))

    def known_le(self, a: Size, b: Size) -> bool:
        if not (is_symbolic(a) or is_symbolic(b)):
            return int(a) <= int(b)
        return self._statically_true(sympy.Le(a, b))

    def known_at_most(self, value: Size, limit: int) -> bool:
        if not is_symbolic(value):
            return int(value) <= limit
        return self._statically_true(sympy.Le(value, limit))

    def hint(self, value: Size) -> int:
        """The example's value; a data-dependent (unbacked) size has none: UNBACKED_GUESS, within
        the range the ShapeEnv knows for it."""
        if not is_symbolic(value):
            return int(value)
        if self.shape_env is None:
            raise ValueError(f"no hint for {value}: no ShapeEnv")
        backed = self._backed()
        unbacked = {s: sympy.Integer(self._unbacked_guess(s)) for s in value.free_symbols if s not in backed}
        hint = getattr(self.shape_env, "guarding_hint_or_throw", None) or self.shape_env.size_hint  # torch 2.11
        return int(hint(_to_shape_env(sympy.sympify(value).xreplace(unbacked) if unbacked else value)))

    def choose(self, name: str, sizes: tuple, *extra):
        """HEURISTICS[name] at the example's values of `sizes` (and the plain `extra`): a
        heuristic choice the generated code bakes in (a split count). No guard: any size stays
        right. A choice made on symbolic sizes is recorded (`choices`): a graph-cache entry is
        reused only where the choice comes out the same (caching/graph_cache.py), so a graph first
        compiled at small sizes does not run large ones with small-size choices."""
        value = HEURISTICS[name](*[self.hint(s) for s in sizes], *extra)
        symbols = size_symbols(sizes)
        if symbols and not symbols - set(self._backed()):
            self.choices.append([name, [str(s) for s in sizes], list(extra), value])
        return value

    def same_choices(self, choices: list, parse) -> bool:
        """Whether recorded choices come out the same at this graph's example; parse(text) is
        a size expression over this ShapeEnv's symbols."""
        for name, texts, extra, value in choices:
            if name not in HEURISTICS:
                return False
            hints = [self._hint_of(parse(text)) for text in texts]
            if None in hints or HEURISTICS[name](*hints, *extra) != value:
                return False
        return True

    def _hint_of(self, value) -> int | None:
        """The example's value of an expression over backed symbols; None if it has others."""
        return None if value.free_symbols - set(self._backed()) else self.hint(value)

    def _unbacked_guess(self, symbol) -> int:
        bounds = self.shape_env.var_to_range.get(symbol)
        if bounds is None:
            return UNBACKED_GUESS
        low, high = _finite(bounds.lower), _finite(bounds.upper)
        guess = UNBACKED_GUESS if low is None else max(UNBACKED_GUESS, low)
        return guess if high is None else min(guess, high)

    def _backed(self) -> dict:
        """The symbols with an example value (backed), to their values."""
        env = self.shape_env
        return env.backed_var_to_val if hasattr(env, "backed_var_to_val") else env.var_to_val  # torch 2.11

    def is_backed(self, sizes) -> bool:
        """Whether every symbol of these sizes has an example value (none is data-dependent)."""
        symbols = size_symbols(list(sizes))
        return not symbols or (self.shape_env is not None and not symbols - set(self._backed()))

    def holds_at_hint(self, condition) -> bool:
        """Whether a condition over backed symbols holds at the example sizes (no guard)."""
        values = {s: v for s, v in self._backed().items() if s in condition.free_symbols}
        if condition.free_symbols - set(values):
            return False
        return bool(sympy.sympify(condition).xreplace({s: sympy.Integer(int(v)) for s, v in values.items()}))

    def install(self, condition) -> None:
        """Add a guard that holds at the example sizes (a stored graph's, caching/graph_cache.py)."""
        self.shape_env.evaluate_expr(_to_shape_env(condition))
        self.guards.append(str(condition))

    def guard_equal(self, a: Size, b: Size) -> bool:
        """a == b, guarded when it holds at the example sizes but is not proven (a reshape's
        dims whose products torch's own view check made equal: Dynamo guards the same); False,
        with nothing guarded, when the example says otherwise or a size has no hint."""
        if self.known_equal(a, b):
            return True
        symbols = size_symbols([a, b])
        if self.shape_env is None or not symbols or symbols - set(self._backed()):
            return False
        if self.hint(a) != self.hint(b):
            return False
        self._guard(sympy.Eq(sympy.sympify(a), sympy.sympify(b)))
        return True

    def _guard(self, condition) -> None:
        self.shape_env.evaluate_expr(_to_shape_env(condition))  # records the guard with Dynamo's ShapeEnv
        self.guards.append(str(condition))

    def guard_at_most(self, value: Size, limit: int) -> bool:
        """value <= limit, guarded when it holds at the example sizes but is not proven; False
        (and nothing guarded) when it does not hold at the example sizes, or value has no hint
        (an unbacked size)."""
        if self.known_at_most(value, limit):
            return True
        if not is_symbolic(value) or self.shape_env is None or value.free_symbols - set(self._backed()):
            return False
        if self.hint(value) > limit:
            return False
        self._guard(sympy.Le(value, limit))
        return True


def at_most_one(n) -> bool:
    """A size known to be 0 or 1 (a symbolic size is at least 2, Dynamo specializing 0 and 1)."""
    return n == 1 or (isinstance(n, int) and n <= 1)


def same_strides(size, a, b) -> bool:
    """Equal strides wherever the dim has more than one element (a size-1 or empty dim's stride is
    free); symbolic ones equal once expanded (a view's 256*(s0 + s1) is eager's 256*s0 + 256*s1)."""
    return all(x == y or at_most_one(s) or sympy.expand(x - y) == 0 for s, x, y in zip(size, a, b))
