"""Index arithmetic: exact expected simplifications."""
import sympy

from tritonize.ir.symbols import (
    FloorDiv,
    ModularIndexing,
    affine_coefficients,
    combine_digits,
    dim_var,
    simplify_with_ranges,
)

d0, d1 = dim_var(0), dim_var(1)


def test_floordiv_pulls_out_multiples():
    assert FloorDiv(8 * d0 + 3, 4) == 2 * d0
    assert FloorDiv(FloorDiv(d0, 2), 3) == FloorDiv(d0, 6)
    assert FloorDiv(d0, 1) == d0


def test_modular_indexing_drops_multiples():
    assert ModularIndexing(12 * d0 + d1, 1, 4) == ModularIndexing(d1, 1, 4)
    assert ModularIndexing(d0, 1, 1) == 0
    assert ModularIndexing(sympy.Integer(13), 2, 4) == 2


def test_reshape_round_trip_combines_back():
    assert combine_digits(4 * FloorDiv(d0, 4) + ModularIndexing(d0, 1, 4)) == d0
    three_digits = 12 * FloorDiv(d0, 12) + 4 * ModularIndexing(d0, 4, 3) + ModularIndexing(d0, 1, 4)
    assert simplify_with_ranges(three_digits, {d0: 48}) == d0


def test_ranges_remove_trivial_div_mod():
    assert simplify_with_ranges(ModularIndexing(d0, 1, 16), {d0: 16}) == d0
    assert simplify_with_ranges(FloorDiv(d0, 16), {d0: 16}) == 0
    assert simplify_with_ranges(ModularIndexing(d0, 4, 8), {d0: 32}) == FloorDiv(d0, 4)


def test_affine_coefficients():
    assert affine_coefficients(3 * d0 + d1 + 5, [d0, d1]) == {d0: 3, d1: 1, 1: 5}
    assert affine_coefficients(FloorDiv(d0, 2), [d0]) is None


def _eval_as_triton(expr, values: dict) -> int:
    """expr's value with FloorDiv/ModularIndexing printed as Triton's `//` and `%` (truncating)."""
    def trunc_div(a, b):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q

    def visit(e):
        if isinstance(e, FloorDiv):
            return trunc_div(visit(e.args[0]), int(e.args[1]))
        if isinstance(e, ModularIndexing):
            q = trunc_div(visit(e.args[0]), int(e.args[1]))
            return q - int(e.args[2]) * trunc_div(q, int(e.args[2]))
        if e.is_Integer:
            return int(e)
        if e.is_Symbol:
            return values[e]
        parts = [visit(a) for a in e.args]
        if e.is_Add:
            return sum(parts)
        result = 1
        for p in parts:
            result *= p
        return result

    return visit(sympy.sympify(expr))


def test_rules_keep_div_mod_arguments_non_negative():
    """A flipped index (n - 1 - d) must not be split into `1 + FloorDiv(-d, 2)`: Triton's `//`
    and `%` truncate toward zero, so a negative argument gives the wrong digit (issue 25, bug 6:
    cat(...).view(4)[0:3].flip(0) repeated an element)."""
    cases = [  # (built expression, its exact value as a Python function, ranges)
        (FloorDiv(2 - d0, 2), lambda a, b: (2 - a) // 2, {d0: 3}),
        (ModularIndexing(2 - d0, 1, 2), lambda a, b: (2 - a) % 2, {d0: 3}),
        (FloorDiv(7 - d0 + 4 * d1, 2), lambda a, b: (7 - a + 4 * b) // 2, {d0: 8, d1: 3}),
        (ModularIndexing(11 - d0 + 8 * d1, 2, 2), lambda a, b: (11 - a + 8 * b) // 2 % 2, {d0: 12, d1: 2}),
        (FloorDiv(d0 + 6 - 2 * d1, 3), lambda a, b: (a + 6 - 2 * b) // 3, {d0: 4, d1: 4}),
    ]
    for built, exact, ranges in cases:
        for simplified in (built, simplify_with_ranges(built, ranges)):
            for a in range(ranges[d0]):
                for b in range(ranges.get(d1, 1)):
                    assert _eval_as_triton(simplified, {d0: a, d1: b}) == exact(a, b), (built, simplified, a, b)


def test_ranges_bound_flipped_indices():
    assert simplify_with_ranges(FloorDiv(3 - d0, 4), {d0: 4}) == 0
    assert simplify_with_ranges(ModularIndexing(3 - d0, 1, 4), {d0: 4}) == 3 - d0
