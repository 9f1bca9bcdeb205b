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
