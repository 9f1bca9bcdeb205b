"""Symbolic sizes in generated kernels (docs/design.md, "Dynamic shapes").

A kernel never contains a size symbol of the ShapeEnv: every symbol its numels and index math
need becomes an int parameter `ks0, ks1...`, named by role in order of first use, so kernels alike
but for their sizes have the same source. The wrapper passes its bound symbols for them.

A product of sizes in the index math (a convolution's H * W, as a stride or a divisor) is a
parameter of its own too, which the wrapper computes: Triton specializes an int argument
divisible by 16 and propagates that to the index, but knows nothing of a product of two
arguments that are not (56 * 56). Without it the channels-last copies of a dynamic depthwise
convolution load and store one element at a time (sm_90 PTX: 16 scalar `ld.global` where the
static kernel has 4 `ld.global.v4`), with it as the static kernel does.

Shared by the pointwise (codegen/kernel.py) and reduction (codegen/reduction_kernel.py)
renderers. Static kernels never come here.
"""
from __future__ import annotations

import sympy

from ..ir import expr as ex
from ..ir.sizes import SizeOracle
from .index_printer import print_index

INT32_LIMIT = 2**31 - 1


class SizeParameters:
    """The size symbols and products of sizes a kernel needs, as its parameters; `arguments` are
    the wrapper's source for each (a symbol's name, a product's expression)."""

    def __init__(self, symbols: list, products: list = ()):
        self.arguments = [s.name for s in symbols] + [print_index(p) for p in products]
        self.names = [f"ks{k}" for k in range(len(symbols) + len(products))]
        parameters = [sympy.Symbol(n, integer=True, positive=True) for n in self.names]
        self.renames = dict(zip(symbols, parameters))  # ShapeEnv symbol -> parameter
        self.products = dict(zip(products, parameters[len(symbols):]))  # product of sizes -> parameter

    @classmethod
    def of(cls, expressions, index_symbols) -> "SizeParameters":
        """From the numels and index expressions of a kernel over `index_symbols` (products of
        sizes from the index expressions only)."""
        found, products = [], []
        index_symbols = set(index_symbols)
        for expr in expressions:
            expr = sympy.sympify(expr)
            free = expr.free_symbols - index_symbols
            for symbol in sorted((s for s in free if not ex.is_indirect_symbol(s)), key=lambda s: s.name):
                if symbol not in found:
                    found.append(symbol)
            if not expr.free_symbols & index_symbols:
                continue  # a numel: the dims' extents, renamed one by one (a product of parameters)
            for product in _size_products(expr, index_symbols):
                if product not in products:
                    products.append(product)
        return cls(found, products)

    def rename(self, expr):
        expr = sympy.sympify(expr)
        if self.products:
            expr = _replace_products(expr, self.products, self._is_size)
        return expr.xreplace(self.renames)

    def rename_dims(self, dims) -> list:
        return [(symbol, self.rename(extent)) for symbol, extent in dims]

    def _is_size(self, expr) -> bool:
        return bool(expr.free_symbols) and expr.free_symbols <= set(self.renames)


def _size_part(mul: sympy.Mul, is_size) -> tuple:
    """(the product of a Mul's factors made of sizes only, the rest): (s0*s1, 2*y0) of 2*y0*s0*s1."""
    sizes = [a for a in mul.args if is_size(a)]
    rest = [a for a in mul.args if not is_size(a)]
    return sympy.Mul(*sizes), sympy.Mul(*rest)


def _is_product(expr) -> bool:
    """A product of two or more size factors (a power of a size counts as one): 56 * 56, N * H * W."""
    if expr.is_Pow:
        return expr.exp.is_Integer and expr.exp > 1
    return expr.is_Mul and sum(1 for a in expr.args if a.free_symbols) >= 2


def _size_products(expr, index_symbols: set) -> list:
    """The products of sizes in `expr` (each Mul's size factors together), outermost first."""
    def is_size(e):
        return bool(e.free_symbols) and not (e.free_symbols & index_symbols) and \
            not any(ex.is_indirect_symbol(s) for s in e.free_symbols)

    found = []
    for node in sympy.preorder_traversal(expr):
        if not isinstance(node, sympy.Expr) or not node.free_symbols:
            continue
        if node.is_Mul:
            candidate = _size_part(node, is_size)[0]
        elif node.is_Pow and is_size(node):
            candidate = node
        else:
            continue
        if _is_product(candidate) and candidate not in found:
            found.append(candidate)
    return found


def _replace_products(expr, products: dict, is_size):
    """`expr` with each product of sizes in `products` replaced by its parameter."""
    if not isinstance(expr, sympy.Expr) or not expr.free_symbols or expr.is_Symbol:
        return expr
    if expr in products:
        return products[expr]
    if expr.is_Mul:
        sizes, rest = _size_part(expr, is_size)
        if sizes in products:
            return products[sizes] * _replace_products(rest, products, is_size)
    args = [_replace_products(a, products, is_size) for a in expr.args]
    return expr.func(*args) if args != list(expr.args) else expr


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
