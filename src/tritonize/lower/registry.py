"""The lowering table: aten op -> function that builds IR for it.

A lowering is called as fn(ctx, node, *args, **kwargs), with tensor arguments already turned into
`TensorValue`s, and returns a TensorValue (or a tuple of them). It raises `Unsupported` to decline
particular arguments; the op then runs through aten and the report lists it as a fallback.
"""
from __future__ import annotations

from typing import Callable

LOWERINGS: dict = {}


def lowering(*targets) -> Callable:
    def register(fn):
        for target in targets:
            LOWERINGS[target] = fn
        return fn

    return register


def find_lowering(target):
    if target in LOWERINGS:
        return LOWERINGS[target]
    packet = getattr(target, "overloadpacket", None)
    return LOWERINGS.get(packet)
