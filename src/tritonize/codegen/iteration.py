"""Iteration spaces of pointwise kernels: dim order, dim merging and the 1-D/2-D tiling choice.

Input: the size of a kernel group and every index expression its loads and stores use (over the
dimension variables d0..dN). Output: an `IterationSpace` that says how program ids and block
offsets become per-dim variables, and a rewrite of every index expression in those variables.

* Order: dims run outer to inner by the strides of the first stored buffer, so stores coalesce.
* Merging: adjacent dims fuse into one when no index gets more FloorDiv/ModularIndexing terms from
  it (contiguous tensors collapse to one flat index; broadcasts and transposes keep their dims).
* Tiling: when some load's unit-stride dim is not the innermost one (a transposed read), the dims
  split into a Y group and an X group and the kernel works on [YBLOCK, XBLOCK] tiles, so both the
  load and the store are coalesced.
"""
from __future__ import annotations

import dataclasses

import sympy

from ..ir.symbols import (
    FloorDiv,
    ModularIndexing,
    affine_coefficients,
    count_divmod,
    index_symbol,
    simplify_with_ranges,
)

MIN_TILE_EXTENT = 16


@dataclasses.dataclass
class IterationSpace:
    x_dims: list[tuple[sympy.Symbol, int]]  # inner to outer
    y_dims: list[tuple[sympy.Symbol, int]]  # inner to outer; empty for 1-D kernels
    rewrite: dict  # original index expression -> expression over the x*/y* symbols

    @property
    def xnumel(self) -> int:
        return _product(s for _, s in self.x_dims)

    @property
    def ynumel(self) -> int:
        return _product(s for _, s in self.y_dims)

    @property
    def is_2d(self) -> bool:
        return bool(self.y_dims)


def _product(values) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def plan_iteration(size, dims, store_strides, expressions, hint=int) -> IterationSpace:
    """hint: a symbolic size's value at the example sizes (ir/sizes.py), which orders dims and
    chooses the tiling: choices for speed, correct at any size."""
    ranges = {d: s for d, s in zip(dims, size)}
    trivial = {d: sympy.Integer(0) for d, s in zip(dims, size) if s == 1}
    current = {e: simplify_with_ranges(sympy.sympify(e).xreplace(trivial), ranges) for e in expressions}
    order = sorted((k for k in range(len(size)) if size[k] != 1), key=lambda k: -hint(store_strides[k]))
    space = [(dims[k], size[k]) for k in order]
    space, current = merge_dims(space, current)
    split = _tile_split(space, current.values(), hint)
    y_part, x_part = space[:split], space[split:]
    renames = {}
    x_dims = _rename(list(reversed(x_part)), "x", renames)
    y_dims = _rename(list(reversed(y_part)), "y", renames)
    rewrite = {e: v.xreplace(renames) for e, v in current.items()}
    return IterationSpace(x_dims, y_dims, rewrite)


def _rename(dims_inner_to_outer, prefix, renames):
    result = []
    for k, (symbol, extent) in enumerate(dims_inner_to_outer):
        new = index_symbol(prefix, k)
        renames[symbol] = new
        result.append((new, extent))
    return result


def merge_dims(space, current, prefix: str = "m", other_ranges=None):
    """Merge adjacent dims of `space` (outer to inner) while indices do not get costlier."""
    counter = 0
    merged = True
    while merged:
        merged = False
        for i in range(len(space) - 1):
            (outer, n_outer), (inner, n_inner) = space[i], space[i + 1]
            fused = index_symbol(prefix, counter)
            ranges = {**(other_ranges or {}), **{s: n for s, n in space}}
            ranges[fused] = n_outer * n_inner
            mapping = {outer: FloorDiv(fused, n_inner), inner: ModularIndexing(fused, 1, n_inner)}
            candidate = {e: simplify_with_ranges(v.xreplace(mapping), ranges) for e, v in current.items()}
            # Merging saves computing one dim variable: worth one more div/mod across all indices.
            before = sum(count_divmod(v) for v in current.values())
            after = sum(count_divmod(v) for v in candidate.values())
            if after <= before + 1:
                space = space[:i] + [(fused, n_outer * n_inner)] + space[i + 2:]
                current = candidate
                counter += 1
                merged = True
                break
    return space, current


def _tile_split(space, expressions, hint=int) -> int:
    """Index in `space` where the Y group ends, or 0 for a 1-D kernel."""
    if len(space) < 2:
        return 0
    symbols = [s for s, _ in space]
    innermost = symbols[-1]
    for expr in expressions:
        coeffs = affine_coefficients(expr, symbols)
        if coeffs is None or coeffs.get(innermost, 0) in (0, 1):
            continue
        unit = [j for j, s in enumerate(symbols[:-1]) if coeffs.get(s, 0) == 1]
        if not unit:
            continue
        split = unit[0] + 1
        y_extent = hint(_product(n for _, n in space[:split]))
        x_extent = hint(_product(n for _, n in space[split:]))
        if y_extent >= MIN_TILE_EXTENT and x_extent >= MIN_TILE_EXTENT:
            return split
    return 0
