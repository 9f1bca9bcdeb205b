"""Symbolic sizes in generated kernels (docs/design.md, "Dynamic shapes").

A kernel never contains a size symbol of the ShapeEnv: every symbol its numels and index math
need becomes an int parameter `ks0, ks1...`, named by role in order of first use, so kernels alike
but for their sizes have the same source. The wrapper passes its bound symbols for them.

Shared by the pointwise (codegen/kernel.py) and reduction (codegen/reduction_kernel.py)
renderers. Static kernels never come here.
"""
from __future__ import annotations

import sympy

from ..ir import expr as ex
from ..ir.sizes import SizeOracle

INT32_LIMIT = 2**31 - 1


class SizeParameters:
    """The size symbols a kernel needs, as its parameters; `arguments` are the wrapper's names."""

    def __init__(self, symbols: list):
        self.arguments = [s.name for s in symbols]
        self.names = [f"ks{k}" for k in range(len(symbols))]
        self.renames = {s: sympy.Symbol(n, integer=True, positive=True) for s, n in zip(symbols, self.names)}

    @classmethod
    def of(cls, expressions, index_symbols) -> "SizeParameters":
        """From the numels and index expressions of a kernel over `index_symbols`."""
        found: list = []
        for expr in expressions:
            free = sympy.sympify(expr).free_symbols - set(index_symbols)
            for symbol in sorted((s for s in free if not ex.is_indirect_symbol(s)), key=lambda s: s.name):
                if symbol not in found:
                    found.append(symbol)
        return cls(found)

    def rename(self, expr):
        return sympy.sympify(expr).xreplace(self.renames)

    def rename_dims(self, dims) -> list:
        return [(symbol, self.rename(extent)) for symbol, extent in dims]


def is_symbolic_kernel(expressions, sizes: SizeOracle | None) -> bool:
    """Whether sizes or index expressions of a kernel hold a size symbol."""
    return sizes is not None and any(
        sizes.is_size_symbol(s) for v in expressions for s in sympy.sympify(v).free_symbols)


def kernel_size_expressions(bodies) -> list:
    """Sizes a kernel's bodies use beside its numels and indices: the dims indirect indices
    are checked against (and wrapped by)."""
    return list(ex.indirect_ranges(bodies).values())


def needs_int64(numel, buffers: dict, bodies, stored: list[str], sizes: SizeOracle) -> bool:
    """int32 indices when the iteration space and every buffer the kernel touches hold fewer
    than 2^31 elements: each index is then below one of those (views stay inside their
    buffer), guarded through the ShapeEnv when not proven."""
    touched = {e.args[0] for body in bodies for e in ex.walk(body) if e.op == "load"} | set(stored)
    extents = [numel] + [buffers[n].layout.storage_span() for n in sorted(touched)]
    return not all(sizes.guard_at_most(e, INT32_LIMIT) for e in extents)
