"""Lowerings of indirect reads: gather, index_select, embedding and advanced indexing (x[idx]).

Each is a lazy value whose body binds the loaded index with `ex.indirect` (ir/expr.py) and reads
its input at that position, so an indirect read fuses like any view: into pointwise consumers and
into reductions (cross_entropy's gather of log_softmax at the target). Codegen wraps negative
indices where eager does (x[idx], index_put) and checks every index against its dimension
(codegen/indirect.py); gather, index_select, embedding and scatter reject negatives like eager.

Boolean-mask indices make the result's size depend on the data: they are declined (the op runs
through aten, and such graphs reach us with dynamic shapes anyway).
"""
from __future__ import annotations

import dataclasses

import sympy
import torch

from ..errors import Unsupported
from ..ir import expr as ex
from ..ir.nodes import TensorValue
from ..ir.symbols import dim_vars
from .pointwise import output_of
from .registry import lowering

aten = torch.ops.aten
INDEX_DTYPES = (torch.int64, torch.int32)


def check_text(node) -> str:
    """How a bounds-check message names the op: 'aten.gather.default (node gather_1)'."""
    return f"{node.target} (node {node.name})"


def normalize_dim(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


def require_index_dtype(index: TensorValue, what: str) -> None:
    if index.dtype not in INDEX_DTYPES:
        raise Unsupported(f"{what} with a {index.dtype} index")


@lowering(aten.gather.default)
def lower_gather(ctx, node, x, dim, index, sparse_grad=False):
    require_index_dtype(index, "gather")
    if x.rank == 0:
        return _read_0d(node, x, index)
    size, _, device = output_of(node)
    dim = normalize_dim(dim, x.rank)
    out = dim_vars(len(size))
    body = ex.indirect(index.at(out), x.size[dim], False, check_text(node),
                       lambda t: x.at(out[:dim] + [t] + out[dim + 1:]))
    return TensorValue(size, x.dtype, device, body)


@lowering(aten.index_select.default)
def lower_index_select(ctx, node, x, dim, index):
    require_index_dtype(index, "index_select")
    if x.rank == 0:
        return _read_0d(node, x, index)
    size, _, device = output_of(node)
    dim = normalize_dim(dim, x.rank)
    out = dim_vars(len(size))
    value = index.at([out[dim]] if index.rank == 1 else [])
    body = ex.indirect(value, x.size[dim], False, check_text(node),
                       lambda t: x.at(out[:dim] + [t] + out[dim + 1:]))
    return TensorValue(size, x.dtype, device, body)


def _read_0d(node, x: TensorValue, index: TensorValue) -> TensorValue:
    """gather/index_select of a 0-d tensor: one element, read once per index (which must be 0)."""
    size, _, device = output_of(node)
    out = dim_vars(len(size))
    at = [sympy.Integer(0) if s == 1 or k >= len(out) else out[k] for k, s in enumerate(index.size)]
    value = index.at(at)
    return TensorValue(size, x.dtype, device, ex.indirect(value, 1, False, check_text(node), lambda t: x.at([])))


@lowering(aten.embedding.default)
def lower_embedding(ctx, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    require_index_dtype(indices, "embedding")
    if weight.rank != 2:
        raise Unsupported("embedding with a weight that is not 2-D")
    size, _, device = output_of(node)
    out = dim_vars(len(size))
    body = ex.indirect(indices.at(out[:-1]), weight.size[0], False, check_text(node),
                       lambda t: weight.at([t, out[-1]]))
    return TensorValue(size, weight.dtype, device, body)


# --- advanced indexing: x[i0, :, i2] ---------------------------------------------------------

@dataclasses.dataclass
class AdvancedIndex:
    """Where each element of an advanced-indexing result comes from.

    `size` is the result's size (aten.index's output, index_put's values shape). For a result
    index (d0..), `source` gives the position in x: a sympy expression of the result's dims for
    dims that are not indexed, None for dims that are; `values[k]` is the index tensor's element
    for indexed dim k. Index tensors broadcast together; their dims go where the indexed dims are
    when those are adjacent, first otherwise (numpy's rule).
    """

    size: tuple[int, ...]
    source: list
    values: dict  # x dim -> integer Expr over the result's dims

    def read(self, x: TensorValue, check: str) -> ex.Expr:
        """x's element at the position this result element comes from (indices wrap like eager)."""
        dims = sorted(self.values)

        def build(k: int, position: list) -> ex.Expr:
            if k == len(dims):
                return x.at(position)
            d = dims[k]
            return ex.indirect(self.values[d], x.size[d], True, check,
                               lambda t: build(k + 1, position[:d] + [t] + position[d + 1:]))

        return build(0, list(self.source))


def advanced_index(x_size, indices) -> AdvancedIndex:
    """Plan x[indices] (aten.index.Tensor's `indices`: tensors and Nones) for x of x_size."""
    indices = list(indices) + [None] * (len(x_size) - len(indices))
    if len(indices) > len(x_size):
        raise Unsupported("more indices than dimensions")
    positions = [k for k, i in enumerate(indices) if i is not None]
    for k in positions:
        if indices[k].dtype in (torch.bool, torch.uint8):
            raise Unsupported("boolean mask index: the result's size depends on the data")
        require_index_dtype(indices[k], "advanced indexing")
    if not positions:
        raise Unsupported("advanced indexing with no index tensor")
    broadcast = broadcast_sizes([indices[k].size for k in positions])
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    kept = [k for k in range(len(x_size)) if k not in positions]
    if adjacent:
        before = [k for k in kept if k < positions[0]]
        after = [k for k in kept if k > positions[-1]]
        order = [("x", k) for k in before] + [("b", j) for j in range(len(broadcast))] + [("x", k) for k in after]
    else:
        order = [("b", j) for j in range(len(broadcast))] + [("x", k) for k in kept]
    size = tuple(x_size[k] if kind == "x" else broadcast[k] for kind, k in order)
    out = dim_vars(len(size))
    source: list = [None] * len(x_size)
    b_dims = [None] * len(broadcast)
    for position, (kind, k) in enumerate(order):
        if kind == "x":
            source[k] = out[position]
        else:
            b_dims[k] = out[position]
    values = {}
    for k in positions:
        index = indices[k]
        lead = len(broadcast) - index.rank
        at = [sympy.Integer(0) if s == 1 else b_dims[lead + j] for j, s in enumerate(index.size)]
        values[k] = index.at(at)
    return AdvancedIndex(size, source, values)


def broadcast_sizes(shapes) -> tuple:
    """torch's broadcasting of sizes that may be symbolic (a symbolic size is never 1: it
    broadcasts only against 1 or itself)."""
    rank = max(len(shape) for shape in shapes)
    result = []
    for k in range(rank):
        sizes = {shape[k - rank + len(shape)] for shape in shapes if k - rank + len(shape) >= 0} - {1}
        if len(sizes) > 1:
            raise Unsupported(f"index tensors of sizes {[list(s) for s in shapes]} do not broadcast")
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


@lowering(aten.index.Tensor)
def lower_index(ctx, node, x, indices):
    if x.rank == 0:
        raise Unsupported("indexing a 0-d tensor")
    plan = advanced_index(x.size, indices)
    size, _, device = output_of(node)
    if plan.size != size:
        raise Unsupported(f"advanced indexing gives {list(plan.size)}, the graph says {list(size)}")
    return TensorValue(size, x.dtype, device, plan.read(x, check_text(node)))
