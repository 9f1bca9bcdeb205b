"""Row spaces: how the buffers of one reduction kernel line up on (row, position-in-row).

A reduction kernel iterates over x (the rows: the reductions' output elements) and r (the
reduced elements of a row). Every buffer in it plays one role:

* "reduction": a ReductionBuffer; its output dims map to x, its reduction variables to r;
* "full": a pointwise buffer shaped like the reduced tensor (softmax's output, layer_norm's
  output); its kept dims map to x and its reduced dims to r. With an inner reduction the kept
  dims may also come merged into one (layer_norm's output viewed as (batch * tokens, hidden)
  for a matmul): that dim maps to the row-major flat index of the x variables;
* "row": a pointwise buffer shaped like the reductions' output (mean = sum / n, rstd).

Only dims of size > 1 take part, so keepdim and squeezed forms line up. `RowSpace.mapping`
gives, for one buffer, the substitution from its own dim variables to the kernel's x*/r*
variables (the canonical group variables `X_VARS` / `R_VARS`), or None when it does not fit.
"""
from __future__ import annotations

import dataclasses

import sympy

from ..ir.nodes import ComputedBuffer, ReductionBuffer
from ..ir.symbols import dim_vars, index_symbol, reduction_vars


def group_x_var(k: int) -> sympy.Symbol:
    return index_symbol("gx", k)


def group_r_var(k: int) -> sympy.Symbol:
    return index_symbol("gr", k)


def _non_unit(sizes) -> tuple[int, ...]:
    return tuple(s for s in sizes if s != 1)


@dataclasses.dataclass(frozen=True)
class RowSpace:
    x_sizes: tuple[int, ...]  # rows, outer to inner (non-1 output dims)
    r_sizes: tuple[int, ...]  # reduced dims, outer to inner (non-1)
    source: tuple[tuple[int, bool], ...]  # non-1 dims of the reduced tensor: (size, reduced)

    @property
    def xnumel(self) -> int:
        return _product(self.x_sizes)

    @property
    def rnumel(self) -> int:
        return _product(self.r_sizes)

    @property
    def x_vars(self) -> list[sympy.Symbol]:
        return [group_x_var(k) for k in range(len(self.x_sizes))]

    @property
    def r_vars(self) -> list[sympy.Symbol]:
        return [group_r_var(k) for k in range(len(self.r_sizes))]

    def _flat_row(self):
        return _flat_row_of(self.x_vars, self.x_sizes)

    def ranges(self) -> dict:
        return {**dict(zip(self.x_vars, self.x_sizes)), **dict(zip(self.r_vars, self.r_sizes))}

    def role(self, buffer: ComputedBuffer) -> str | None:
        if isinstance(buffer, ReductionBuffer):
            same = (_non_unit(buffer.layout.size) == self.x_sizes
                    and _non_unit(buffer.reduction_ranges) == self.r_sizes)
            return "reduction" if same else None
        sizes = _non_unit(buffer.layout.size)
        if sizes == self.x_sizes:
            return "row"
        if sizes == tuple(s for s, _ in self.source):
            return "full"
        if self._rows_merged(sizes):
            return "full"
        return None

    def _rows_merged(self, sizes) -> bool:
        """A full-shaped buffer whose rows are one dim: layer_norm's output viewed as
        (batch * tokens, hidden) for the matmul after it. Only for inner reductions (the reduced
        dims are the source's innermost), so the merged row index is linear in the x variables."""
        reduced = [flag for _, flag in self.source]
        inner = reduced == sorted(reduced)  # kept dims first, then reduced ones
        return (inner and len(self.x_sizes) > 1 and len(sizes) == 1 + len(self.r_sizes)
                and sizes[0] == self.xnumel and sizes[1:] == self.r_sizes)

    def mapping(self, buffer: ComputedBuffer) -> dict | None:
        """{own dim variable: expression over the group's x*/r* variables}, or None."""
        role = self.role(buffer)
        if role is None:
            return None
        size = buffer.layout.size
        own = dim_vars(len(size))
        if role == "row":
            return _assign(own, size, iter(self.x_vars), None, None)
        if role == "full" and _non_unit(size) == tuple(s for s, _ in self.source):
            flags = iter(reduced for _, reduced in self.source)
            return _assign(own, size, iter(self.x_vars), iter(self.r_vars), flags)
        if role == "full":  # rows merged into one dim
            return _assign(own, size, iter([self._flat_row()]), iter(self.r_vars),
                           iter([False] + [True] * len(self.r_sizes)))
        table = _assign(own, size, iter(self.x_vars), None, None)
        table.update(_assign(reduction_vars(len(buffer.reduction_ranges)), buffer.reduction_ranges,
                             iter(self.r_vars), None, None))
        return table


def _flat_row_of(x_vars, x_sizes):
    """The row-major flat index of the x variables."""
    flat, stride = sympy.Integer(0), 1
    for var, size in reversed(list(zip(x_vars, x_sizes))):
        flat += var * stride
        stride *= size
    return flat


def _assign(variables, sizes, x_vars, r_vars, reduced_flags) -> dict:
    table = {}
    for var, size in zip(variables, sizes):
        if size == 1:
            table[var] = sympy.Integer(0)
        elif reduced_flags is not None and next(reduced_flags):
            table[var] = next(r_vars)
        else:
            table[var] = next(x_vars)
    return table


def row_space_of(buffer: ReductionBuffer) -> RowSpace:
    source = tuple((s, reduced) for s, reduced in buffer.source if s != 1)
    return RowSpace(_non_unit(buffer.layout.size), _non_unit(buffer.reduction_ranges), source)


def _product(values) -> int:
    result = 1
    for v in values:
        result *= v
    return result
