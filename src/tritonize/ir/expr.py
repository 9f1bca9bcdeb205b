"""Value expressions: what one element of a tensor is, as hashable data.

An `Expr` is an op name, its arguments and its result dtype. Leaves are `load` (a buffer read at
a sympy index), `constant` and `index_expr` (an integer computed from the index). Everything else
is an elementwise op whose arguments are Exprs. Lazy tensors in the IR are an Expr over the
dimension variables d0..dN (see ir/symbols.py); a view substitutes those variables.

`indirect(t, index, size, wrap, check, body)` binds the index variable t to the value of the Expr
`index` (a loaded integer: gather, embedding, x[idx]) for `body`, whose sympy indices may use t.

Exprs are frozen dataclasses, so they print, compare and hash; the hash of a kernel's exprs is part
of its identity. They carry no Triton text: codegen/ops_table.py maps op names to Triton.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
from typing import Any

import sympy
import torch

LOW_PRECISION_FLOATS = (torch.float16, torch.bfloat16)


@dataclasses.dataclass(frozen=True)
class Expr:
    op: str
    args: tuple
    dtype: torch.dtype

    def __repr__(self) -> str:
        return format_expr(self)

    def children(self) -> list["Expr"]:
        return [a for a in self.args if isinstance(a, Expr)]

    @functools.cached_property
    def _hash(self) -> int:
        return hash((self.op, tuple(_arg_key(a) for a in self.args), self.dtype))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if not isinstance(other, Expr) or self._hash != other._hash:
            return False
        return _same_structure(self, other)


def _same_structure(a: Expr, b: Expr) -> bool:
    """Structural equality that visits each pair of nodes once. The recursive comparison of
    two equal DAGs built separately (a substituted copy) would follow every path: exponential
    for max pooling's running maximum, whose nodes each feed two others."""
    seen: set = set()
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y or (id(x), id(y)) in seen:
            continue
        if (x.op, x.dtype, len(x.args)) != (y.op, y.dtype, len(y.args)) or x._hash != y._hash:
            return False
        seen.add((id(x), id(y)))
        for p, q in zip(x.args, y.args):
            if isinstance(p, Expr) and isinstance(q, Expr):
                stack.append((p, q))
            elif isinstance(p, Expr) or isinstance(q, Expr) or (p is not q and _arg_key(p) != _arg_key(q)):
                return False
    return True


def _arg_key(arg):
    """What identifies a non-Expr argument. Floats by their text: `==` calls 0.0 and -0.0 equal
    (a kernel's CSE then printed one constant for both: x / -0.0 gave +inf) and NaN unequal to
    itself; their reprs tell the signed zeros apart and make every NaN one constant. A float is
    never equal to an int or bool of the same value (1.0 and True are different constants)."""
    return ("float", repr(arg)) if isinstance(arg, float) else arg


LEAVES = ("load", "constant", "index_expr")


def format_expr(expr: Expr) -> str:
    """expr as text. A sub-expression used more than once (the expression is a DAG: max
    pooling's running maximum feeds both its comparison and its where) is written once as
    `$k = ...` in front, so the text grows with the number of distinct nodes, not of paths."""
    order = walk(expr)
    uses: dict = {}
    for e in order:
        for child in e.children():
            uses[child] = uses.get(child, 0) + 1
    texts: dict = {}
    definitions: list[str] = []
    for e in order:
        inner = ", ".join(texts[a] if isinstance(a, Expr) else repr(a) for a in e.args)
        text = f"{e.op}[{str(e.dtype).replace('torch.', '')}]({inner})"
        if uses.get(e, 0) > 1 and e.op not in LEAVES:
            texts[e] = f"${len(definitions)}"
            definitions.append(f"{texts[e]} = {text}")
        else:
            texts[e] = text
    if not definitions:
        return texts[expr]
    return "{" + "; ".join(definitions) + "} " + texts[expr]


def load(buffer_name: str, index: sympy.Expr, dtype: torch.dtype) -> Expr:
    return Expr("load", (buffer_name, sympy.sympify(index)), dtype)


def constant(value: Any, dtype: torch.dtype) -> Expr:
    if dtype == torch.bool:
        value = bool(value)
    elif dtype.is_floating_point:
        value = float(value)
    else:
        value = wrap_integer(int(value), dtype)
    return Expr("constant", (value,), dtype)


def wrap_integer(value: int, dtype: torch.dtype) -> int:
    """value converted to an integer dtype the way torch converts a scalar: modulo 2**bits
    (uint8 -1 is 255, int8 200 is -56)."""
    info = torch.iinfo(dtype)
    if info.min <= value <= info.max:
        return value
    value &= (1 << info.bits) - 1
    return value - (1 << info.bits) if info.min < 0 and value > info.max else value


def index_expr(index: sympy.Expr, dtype: torch.dtype) -> Expr:
    return Expr("index_expr", (sympy.sympify(index),), dtype)


def to_dtype(x: Expr, dtype: torch.dtype) -> Expr:
    if x.dtype == dtype:
        return x
    if x.op == "constant":
        return constant(x.args[0], dtype)
    # fp32 -> fp16/bf16 -> fp32 keeps the fp32 value: low-precision intermediates are not rounded.
    if x.op == "to_dtype" and x.dtype in LOW_PRECISION_FLOATS and dtype == torch.float32:
        inner = x.args[0]
        if inner.dtype == torch.float32:
            return inner
    # ... and through a where() of low-precision branches or an indirect load's let (a product
    # masked or gathered before its sum: nll_loss)
    if x.dtype in LOW_PRECISION_FLOATS and dtype == torch.float32:
        if x.op == "where":
            condition, a, b = x.args
            return Expr("where", (condition, to_dtype(a, dtype), to_dtype(b, dtype)), dtype)
        if x.op == "indirect":
            return Expr("indirect", x.args[:-1] + (to_dtype(x.args[-1], dtype),), dtype)
    return Expr("to_dtype", (x,), dtype)


def rounded_to(x: Expr, dtype: torch.dtype) -> Expr:
    """x converted to dtype as eager reads it: a low-precision value widened to float32 is rounded
    to its own dtype first, even where a fused chain kept it unrounded (to_dtype's elision).
    For comparisons, whose result one ulp changes: a backward that recomputes `a + b` in bf16
    and compares it with the forward's saved maximum (amax's gradient) must see eager's sum."""
    if x.op != "constant" and x.dtype in LOW_PRECISION_FLOATS and dtype == torch.float32:
        return Expr("to_dtype", (x,), dtype)
    return to_dtype(x, dtype)


def op(name: str, *args, dtype: torch.dtype) -> Expr:
    return Expr(name, tuple(args), dtype)


def masked(mask: Expr, body: Expr, other: Any) -> Expr:
    """body where mask holds, `other` elsewhere; loads inside body are masked too."""
    return Expr("masked", (mask, body, other), body.dtype)


def substitute(expr: Expr, mapping: dict) -> Expr:
    """Replace index variables in every load/index_expr of expr (simultaneously)."""
    return map_indices(expr, lambda index: index.xreplace(mapping))


def map_indices(expr: Expr, fn) -> Expr:
    """Apply fn to every sympy index in expr's loads and index_exprs."""
    def rewrite(e: Expr):
        if e.op not in ("load", "index_expr"):
            return None
        new_args = tuple(fn(a) if isinstance(a, sympy.Basic) else a for a in e.args)
        return e if new_args == e.args else Expr(e.op, new_args, e.dtype)

    return _transform(expr, rewrite)


def replace(expr: Expr, replacements: dict) -> Expr:
    """expr with each sub-expression found in `replacements` (Expr -> Expr) replaced."""
    return _transform(expr, replacements.get)


def _transform(expr: Expr, rewrite) -> Expr:
    """expr rebuilt bottom-up, each distinct node once: rewrite(e) gives e's replacement, or None
    to rebuild e from its transformed children (an indirect binding renames its symbol)."""
    cache: dict = {}

    def visit(e: Expr) -> Expr:
        if e in cache:
            return cache[e]
        result = rewrite(e)
        if result is None:
            if e.op == "indirect":
                result = _map_indirect(e, visit)
            else:
                args = tuple(visit(a) if isinstance(a, Expr) else a for a in e.args)
                result = e if args == e.args else Expr(e.op, args, e.dtype)
        cache[e] = result
        return result

    return visit(expr)


def walk(expr: Expr):
    """Every distinct sub-expression once, children before parents."""
    seen: set = set()
    order: list = []

    def visit(e: Expr):
        if e in seen:
            return
        seen.add(e)
        for c in e.children():
            visit(c)
        order.append(e)

    visit(expr)
    return order


def loads(expr: Expr) -> list[Expr]:
    return [e for e in walk(expr) if e.op == "load"]


def count_ops(expr: Expr) -> int:
    return sum(1 for e in walk(expr) if e.op not in ("load", "constant", "index_expr"))


# --- indirect indexing ---------------------------------------------------------------------------
# An `indirect` Expr is a let: args (symbol, index, size, wrap, check, body). `index` is an integer
# Expr (the loaded index); the symbol holds its value, wrapped (+size when negative) if `wrap`, and
# checked to lie in [0, size) (`check` names the op for the error). The symbol's name is a digest
# of (index, size, wrap): equal bindings share one variable, and a binding that a view changed
# gets a new one, so within a kernel a symbol always means one value.

INDIRECT_PREFIX = "ind_"


def indirect_symbol(index: Expr, size: int, wrap: bool) -> sympy.Symbol:
    digest = hashlib.sha1(f"{index!r}|{size}|{wrap}".encode()).hexdigest()[:10]
    return sympy.Symbol(f"{INDIRECT_PREFIX}{digest}", integer=True, nonnegative=True)


def is_indirect_symbol(symbol) -> bool:
    return isinstance(symbol, sympy.Symbol) and symbol.name.startswith(INDIRECT_PREFIX)


def indirect(index: Expr, size: int, wrap: bool, check: str, body_fn) -> Expr:
    """body_fn(t), with t bound to the value of `index` (an integer Expr) as an index into a dim
    of `size` elements: negative values wrap when `wrap` (x[idx] does, gather does not)."""
    symbol = indirect_symbol(index, size, wrap)
    body = body_fn(symbol)
    size = int(size) if not isinstance(size, sympy.Expr) or size.is_Integer else size  # symbolic: a sympy size
    return Expr("indirect", (symbol, index, size, bool(wrap), check, body), body.dtype)


def _map_indirect(e: Expr, visit) -> Expr:
    symbol, index, size, wrap, check, body = e.args
    new_index, new_body = visit(index), visit(body)
    new_symbol = indirect_symbol(new_index, size, wrap) if new_index != index else symbol
    if new_symbol != symbol:
        new_body = map_indices(new_body, lambda i: i.xreplace({symbol: new_symbol}))
    if (new_symbol, new_index, new_body) == (symbol, index, body):
        return e
    return Expr("indirect", (new_symbol, new_index, size, wrap, check, new_body), e.dtype)


def indirect_ranges(exprs) -> dict:
    """{symbol: size} for every indirect binding in exprs: a bound symbol lies in [0, size)."""
    ranges = {}
    for root in exprs:
        for e in walk(root):
            if e.op == "indirect":
                ranges[e.args[0]] = e.args[2]
    return ranges
