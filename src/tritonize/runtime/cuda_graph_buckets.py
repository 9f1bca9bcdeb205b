"""Padding to size buckets for CUDA graphs (mode="reduce-overhead", option cudagraph_buckets).

A graph with symbolic sizes records one CUDA graph per size. With buckets, a call whose size is
not a bucket is run at the next bucket up: the inputs are padded along the dimensions that carry
that size (copies of the first row after the caller's data), and the outputs are cut back to the
caller's size.
cudagraphs/padding.py decides at compile time which sizes may be padded (those no operation mixes
along) and writes a `PaddingPlan`; this module applies it at call time.

A size `s` "carries" a dimension whose size is s times a factor free of s (a flattened batch of
s rows of t tokens: s*t). Padding s to S makes that dimension S times the factor; the real data
stays first, so cutting outputs back is a narrower view with the same strides.
"""
from __future__ import annotations

import bisect
import dataclasses

import sympy
import torch
import torch.utils._sympy.functions as size_functions


@dataclasses.dataclass(frozen=True)
class PaddingPlan:
    """What may be padded, as plain data (the Dynamo-level cache stores it as JSON).

    symbols: the sizes' names (for messages); upper: per symbol, the largest value its guards
    allow (None: no bound); inputs: (input position, dim, symbol index, factor) per carrying
    dimension, dim -1 for an int input holding the size; outputs: (output position, dim, symbol
    index) per carrying dimension of an output, whose size is the symbol's value times the factor
    read from the padded output itself; refused: (symbol name, why) for sizes that stay exact;
    guards: the shape environment's guards on padded symbols (text), which a padded call must
    satisfy at its bucket's sizes; readers: (symbol name, input position, dim) where each size
    the guards read is found (dim -1: an int input)."""

    symbols: tuple = ()
    upper: tuple = ()
    inputs: tuple = ()
    outputs: tuple = ()
    refused: tuple = ()
    guards: tuple = ()
    readers: tuple = ()

    def to_json(self) -> dict:
        return {field.name: [list(item) if isinstance(item, tuple) else item for item in getattr(self, field.name)]
                for field in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: dict) -> "PaddingPlan":
        return cls(**{field.name: tuple(tuple(item) if isinstance(item, list) else item
                                        for item in data.get(field.name, ()))
                      for field in dataclasses.fields(cls)})


def sizes_of(plan: PaddingPlan, args) -> list[int]:
    """The value of each padded symbol in this call."""
    values: list = [None] * len(plan.symbols)
    for position, dim, symbol, factor in plan.inputs:
        if values[symbol] is None:
            x = args[position]
            values[symbol] = int(x) if dim < 0 else x.shape[dim] // factor
    return values


def parse_guard(text: str, names: list) -> sympy.Basic:
    """A guard's text over the shape environment's symbols and size functions (FloorDiv, Mod...)."""
    namespace = {name: getattr(size_functions, name) for name in dir(size_functions) if not name.startswith("_")}
    namespace.update({name: sympy.Symbol(name, integer=True, positive=True) for name in names})
    return sympy.sympify(text, locals=namespace)


def bucket_for(value: int, buckets: tuple, upper) -> int:
    """The smallest bucket at least `value` that the symbol's guards allow, or value itself."""
    index = bisect.bisect_left(buckets, value)
    if index == len(buckets) or (upper is not None and buckets[index] > upper):
        return value
    return buckets[index]


class Padder:
    """Pads one call's inputs to its buckets and cuts the outputs back."""

    def __init__(self, plan: PaddingPlan, buckets: tuple):
        self.plan = plan
        self.buckets = tuple(sorted(buckets))
        self.grown = {position for position, dim, _, _ in plan.inputs if dim >= 0}  # tensors padding grows
        self._guards = None  # the plan's guards, parsed at the first padded call
        self._allowed: dict = {}  # sizes of a call -> whether the guards hold at its buckets

    def targets(self, args) -> list[tuple[int, int]] | None:
        """(value, bucket) per symbol, or None when no symbol needs padding in this call."""
        pairs = [(value, bucket_for(value, self.buckets, upper))
                 for value, upper in zip(sizes_of(self.plan, args), self.plan.upper)]
        if all(value == bucket for value, bucket in pairs):
            return None
        return pairs if not self.plan.guards or self._guards_hold(args, pairs) else None

    def _guards_hold(self, args, pairs) -> bool:
        """Whether every guard on the padded sizes holds at the buckets (the other sizes as this
        call has them); decided once per distinct set of sizes."""
        key = (tuple(int(args[position]) if dim < 0 else args[position].shape[dim]
                     for _, position, dim in self.plan.readers), tuple(pairs))
        if key not in self._allowed:
            values = {name: value for (name, _, _), value in zip(self.plan.readers, key[0])}
            values.update({name: bucket for name, (_, bucket) in zip(self.plan.symbols, pairs)})
            if self._guards is None:
                self._guards = [parse_guard(text, [name for name, _, _ in self.plan.readers])
                                for text in self.plan.guards]
            numbers = {sympy.Symbol(name, integer=True, positive=True): sympy.Integer(v) for name, v in values.items()}
            self._allowed[key] = all(bool(guard.xreplace(numbers)) for guard in self._guards)
        return self._allowed[key]

    def pad(self, args, pairs) -> list:
        """The inputs at the bucket sizes: the caller's data first, copies of its first row after
        it (inputs already at the bucket's sizes stay as they are)."""
        padded = list(args)
        for position, grows in self._growth(args, pairs).items():
            if grows[0][0] < 0:
                padded[position] = grows[0][1]
            else:
                padded[position] = padded_copy(args[position], grows)
        return padded

    def stand_ins(self, args, pairs) -> list:
        """The inputs as the size key reads them at the bucket's sizes, without padding any:
        a grown tensor's stand-in has only the padded `.shape`."""
        shaped = list(args)
        for position, grows in self._growth(args, pairs).items():
            if grows[0][0] < 0:
                shaped[position] = grows[0][1]
                continue
            size = list(args[position].shape)
            for dim, extra in grows:
                size[dim] += extra
            shaped[position] = _Shape(tuple(size))
        return shaped

    def _growth(self, args, pairs) -> dict:
        """position -> [(dim, extra elements)] for tensors still at the caller's sizes, or
        [(-1, bucket)] for an int input."""
        growth: dict = {}
        for position, dim, symbol, factor in self.plan.inputs:
            value, bucket = pairs[symbol]
            if value == bucket:
                continue
            if dim < 0:
                growth[position] = [(-1, bucket)]
            elif args[position].shape[dim] == factor * value:
                growth.setdefault(position, []).append((dim, factor * (bucket - value)))
        return growth

    def shapes(self, sizes: list, pairs) -> dict:
        """Output position -> the caller's size, for the outputs padding made larger; `sizes`:
        the padded outputs' sizes."""
        shapes: dict = {}
        for position, dim, symbol in self.plan.outputs:
            value, bucket = pairs[symbol]
            if value == bucket:
                continue
            size = list(shapes.get(position, sizes[position]))
            size[dim] = size[dim] // bucket * value
            shapes[position] = tuple(size)
        return shapes


class _Shape:
    __slots__ = ("shape",)

    def __init__(self, shape: tuple):
        self.shape = shape


def padded_copy(x: torch.Tensor, grows) -> torch.Tensor:
    """A contiguous copy of x grown by `grows` [(dim, extra)], each new row a copy of x's first
    along that dim. Padded rows are then copies of a real row, so whatever the graph derives from
    them is as valid as for that row: an index stays in bounds, a divisor is no new zero."""
    size = list(x.shape)
    for dim, extra in grows:
        size[dim] += extra
    padded = x.new_empty(size)
    leading_region(padded, x.shape).copy_(x)
    for dim, extra in grows:
        tail = padded.narrow(dim, x.shape[dim], extra)
        tail.copy_(padded.narrow(dim, 0, 1).expand_as(tail))
    return padded


def leading_region(t: torch.Tensor, shape) -> torch.Tensor:
    """The first `shape` elements of t along each dim (where the caller's data sits)."""
    for dim, size in enumerate(shape):
        t = t.narrow(dim, 0, size)
    return t


def cut(outputs: list, shapes: dict) -> list:
    """Outputs narrowed to the caller's sizes (the real data is first along each dimension)."""
    for position, size in shapes.items():
        out = outputs[position]
        outputs[position] = out.as_strided(size, out.stride(), out.storage_offset())
    return outputs
