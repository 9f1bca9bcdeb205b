"""ScatterOp: a kernel that writes into an existing buffer at positions read from index tensors.

index_put, scatter, scatter_add and scatter_reduce(sum) lower to two operations: a ComputedBuffer
holding a copy of the destination (a fresh buffer, never a graph input), then a ScatterOp that
writes the updates into it, in place. For every element d of `size` (the updates' iteration
space), with the `bindings` bound (each: symbol, integer index Expr, dim size, wrap, check text,
as in ex.indirect), it does

    target[index] = value      (mode "store": non-accumulating index_put, scatter)
    target[index] += value     (mode "add": atomically, since several d may hit one position)

The scheduler keeps a ScatterOp as a step of its own (it never fuses with the copy before it or
the readers after it: every program's copy must be done before any program writes, and every
write before anyone reads), and the wrapper launches it on the already allocated target.
"""
from __future__ import annotations

import dataclasses

import sympy

from . import expr as ex


@dataclasses.dataclass(frozen=True)
class Binding:
    symbol: sympy.Symbol
    index: ex.Expr  # integer Expr over the iteration dims d0..
    size: int | sympy.Expr  # the dim it indexes: the bound value lies in [0, size)
    wrap: bool  # negative values count from the end (index_put), or are errors (scatter)
    check: str  # names the op in the bounds-check message


def binding(index: ex.Expr, size, wrap: bool, check: str) -> Binding:
    size = size if isinstance(size, sympy.Expr) and not size.is_Integer else int(size)
    return Binding(ex.indirect_symbol(index, size, wrap), index, size, bool(wrap), check)


@dataclasses.dataclass
class ScatterOp:
    name: str
    target: str  # the buffer written in place
    size: tuple[int, ...]  # iteration space: one write per element
    bindings: tuple[Binding, ...]
    index: sympy.Expr  # element offset in target, over d0.. and the bound symbols
    value: ex.Expr  # over d0.., in the target's dtype
    mode: str  # "store" | "add" | "max" | "min" (atomics) | "nan" (stores the NaN values alone)
    nodes: list[str]  # the aten FX nodes it comes from

    def origins(self) -> list[str]:
        return list(self.nodes)

    def reads(self) -> set[str]:
        """Buffers the kernel touches: the target (it must stay alive) and every loaded buffer."""
        names = {self.target}
        for root in [b.index for b in self.bindings] + [self.value]:
            names |= {e.args[0] for e in ex.loads(root)}
        return names

    def render(self) -> str:
        op = "+=" if self.mode == "add" else "="
        lets = "".join(f"\n    {b.symbol} = {b.index!r} in [0, {b.size})" for b in self.bindings)
        return (f"{self.target}[{self.index}] {op} {self.value!r} for d in {list(self.size)}  "
                f"# {', '.join(self.nodes)}{lets}")
