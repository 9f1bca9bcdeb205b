"""Eager's storage of a value, for the ops that address storage rather than elements (as_strided).

Views and reshapes are logical: they pick elements by position, so their index maps do not care
how a value is laid out. as_strided is not: it reads `storage[offset + sum(stride * index)]` of
the storage its input lives in, and in eager that is the storage of the first non-view node
up the input's view chain (a graph input, a computed value, an extern result), laid out with
the strides eager gave that node (`meta["val"]`): channels-last for `x + 1` of a channels-last
x, dense and contiguous for `x.repeat(...)`, whatever our lowering made of it.

`eager_storage` hands back a real tensor (TensorArg) holding that node's value with exactly those
strides -- the node's own buffer when it already has them, else a new buffer -- and the storage
offset eager gave the node, so that eager's storage position p is element `arg.offset + p - start`
of the buffer. Not responsible for: the index math of as_strided itself (lower/views.py).
"""
from __future__ import annotations

import operator

import torch

from ..errors import CompileError
from ..ir.nodes import InputBuffer, TensorArg, buffer_value, strided_view_of
from ..ir.sizes import as_size
from .dtypes import symbolic_size

aten = torch.ops.aten


def _meta(node) -> torch.Tensor | None:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return value if isinstance(value, torch.Tensor) else None


def _aliases_first_argument(node) -> bool:
    """True when eager's result of node shares the storage of node.args[0] (and its dtype)."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    source = node.args[0] if node.args else None
    if not isinstance(source, torch.fx.Node):
        return False
    mine, theirs = _meta(node), _meta(source)
    if mine is not None and theirs is not None and mine.dtype != theirs.dtype:
        return False  # view.dtype: storage positions count other elements; the view owns its own
    if node.target is aten.reshape.default:  # a view when it can be one, else a copy
        return mine is not None and theirs is not None and \
            mine.untyped_storage()._cdata == theirs.untyped_storage()._cdata
    # _unsafe_view's schema says "fresh" but eager returns a view of its (just cloned) input.
    return node.target.is_view or node.target is aten._unsafe_view.default


def storage_owner(node: torch.fx.Node) -> torch.fx.Node:
    """The FX node whose result owns the storage eager keeps `node`'s value in."""
    while True:
        if node.op == "call_function" and node.target is operator.getitem:
            parent = node.args[0]  # one piece of split/unbind (views) or of a multi-output op
            if isinstance(parent, torch.fx.Node) and _aliases_first_argument(parent):
                node = parent.args[0]
                continue
            return node
        if not _aliases_first_argument(node):
            return node
        node = node.args[0]


def eager_storage(ctx, owner: torch.fx.Node) -> tuple[TensorArg, int]:
    """(a tensor holding owner's value with eager's strides, eager's storage offset of owner)."""
    value = ctx.values[owner]
    view = strided_view_of(value)
    if owner.op in ("placeholder", "get_attr") and view is not None:
        name = view[0]
        if isinstance(ctx.buffers[name], InputBuffer):  # the caller's tensor itself
            return ctx.realize(value), ctx.storage_offset_of(name)
    meta = _meta(owner)
    if meta is None:
        raise CompileError("lowering", f"as_strided over {owner.name}, which has no meta['val']: "
                           "the layout eager gives it (the storage as_strided reads) is unknown",
                           ctx.current_node)
    size, stride = symbolic_size(meta.shape), symbolic_size(meta.stride())
    if overlaps(size, stride):
        raise CompileError("lowering", f"as_strided over {owner.name}, whose eager layout "
                           f"(size {list(size)}, stride {list(stride)}) overlaps itself: "
                           "which element eager's storage keeps there is not defined",
                           ctx.current_node)
    storage = ctx.realize(value, stride=stride)
    if storage.is_plain:  # later readers (another as_strided) reuse the buffer, not a second copy
        ctx.values[owner] = buffer_value(storage.buffer_name, ctx.buffers[storage.buffer_name].layout)
    return storage, as_size(meta.storage_offset())  # never int(): it would specialize a symbolic offset


def overlaps(size, stride) -> bool:
    """True when two elements of (size, stride) share a storage position."""
    if 0 in size:
        return False
    dims = sorted((st, n) for n, st in zip(size, stride) if n > 1)
    reach = 0  # the largest position the dims seen so far reach
    for st, n in dims:
        if st <= reach:
            return True
        reach += st * (n - 1)
    return False
