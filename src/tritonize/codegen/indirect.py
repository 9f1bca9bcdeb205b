"""Rendering indirect indices (the `indirect` Expr, ir/expr.py) inside any kernel body writer.

`bind` renders the index value once per (symbol, mask): the loaded integer, widened to int64
when the kernel indexes in int64, wrapped (`+ size` where negative) when the op wraps like
x[idx], and checked against [0, size) by `checks.check_index` (a device assert on the GPU, an
exception on the CPU: runtime/index_checks.py). The writer then prints the symbol as that
variable wherever a load or index_expr uses it (`resolve`).

Bindings live in the writer's cache under ("bound", symbol), so a looped reduction, which saves
and restores the cache around each loop, never uses a variable outside the loop defining it.
"""
from __future__ import annotations

import sympy
import torch

from ..ir import expr as ex
from .index_printer import print_index


def render_indirect(writer, e: ex.Expr, mask) -> str:
    symbol, index, size, wrap, check, body = e.args
    bind(writer, symbol, index, size, wrap, check, mask)
    return writer.render(body, mask)


def bind(writer, symbol, index: ex.Expr, size: int, wrap: bool, check: str, mask) -> str:
    """Define the kernel variable holding `symbol`'s value; returns its name."""
    key = ("bind", symbol, mask)
    if key not in writer.cache:
        value = writer.render(index, mask)
        if writer.use_int64 and index.dtype != torch.int64:
            value = writer.new_var(f"{value}.to(tl.int64)")
        elif not value.isidentifier():
            value = writer.new_var(value)
        size = size_text(writer, size)
        if wrap:
            value = writer.new_var(f"tl.where({value} < 0, {value} + {size}, {value})")
        wrapped = " (after wrapping negative indices)" if wrap else ""
        message = repr(f"index out of bounds in {check}{wrapped}")
        if mask:
            writer.lines.append(f"checks.check_index_masked({value}, {size}, {mask}, {message})")
        else:
            writer.lines.append(f"checks.check_index({value}, {size}, {message})")
        writer.has_checks = True
        writer.cache[key] = value
    writer.cache[("bound", symbol)] = writer.cache[key]
    return writer.cache[key]


def size_text(writer, size) -> str:
    """A dim's size as kernel source: a literal, or (symbolic) over the kernel's size parameters."""
    if isinstance(size, int):
        return str(size)
    return print_index(sympy.sympify(size).xreplace(getattr(writer, "size_renames", {})))


def resolve(writer, index: sympy.Expr) -> sympy.Expr:
    """index with its indirect symbols replaced by the kernel variables bound to them."""
    names = {s: sympy.Symbol(writer.cache[("bound", s)]) for s in index.free_symbols
             if ex.is_indirect_symbol(s)}
    return index.xreplace(names) if names else index


def has_indirect(index: sympy.Expr) -> bool:
    return any(ex.is_indirect_symbol(s) for s in index.free_symbols)
