"""Per operation: where a padded size's dimensions go (cudagraphs/padding.py asks).

A tensor's state for a symbol s is {dim: (outer, factor)} for each dimension that s carries: the
dimension flattens outer * s * factor elements, s in the middle (a [t, s] tensor reshaped to
[t*s] carries s with outer t). A rule gets an FX node, the symbol and `state` (a node's state) and
returns the state it predicts for the node's output (a list for an op with several outputs), or
raises Illegal when the operation mixes elements along a carrying dimension. An operation with
no rule and no pointwise tag is illegal.
"""
from __future__ import annotations

import sympy
import torch

aten, prims = torch.ops.aten, torch.ops.prims


class Illegal(Exception):
    """Padding this symbol would mix padded elements into real ones (the text says where)."""


def expr_of(value):
    """A size, stride or size argument as a sympy expression."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value.node.expr
    return sympy.sympify(value)


def value_of(node):
    """An FX argument's example value (a fake tensor, a SymInt, or the literal itself)."""
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else node


def flat(args):
    for arg in args:
        if isinstance(arg, (list, tuple)):
            yield from flat(arg)
        else:
            yield arg


def carriers(value, symbol) -> dict:
    """The state read from a tensor's shape alone: each dimension of size s * factor, outer 1."""
    found = {}
    for dim, size in enumerate(value.shape):
        expr = expr_of(size)
        if symbol not in expr.free_symbols:
            continue
        factor = sympy.cancel(expr / symbol)
        if symbol in factor.free_symbols:
            raise Illegal(f"a size {expr} that is not a multiple of {symbol}")
        found[dim] = (sympy.Integer(1), factor)
    return found


def _rank(node) -> int:
    return value_of(node).dim()


def _dim(dim, rank: int) -> int:
    return dim % rank if rank else 0


def argument(node, index: int, name: str, default=None):
    """An FX node's argument, given by position or by keyword."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _forbid(node, symbol, dims, found: dict, what: str) -> None:
    if set(dims) & set(found):
        raise Illegal(f"{node.name} ({node.target}) {what} along {symbol}'s dimension")


# ----------------------------------------------------------------------------- the rules


def _merge(node, symbol, predicted: dict, dim: int, place) -> None:
    if predicted.setdefault(dim, place) != place:
        raise Illegal(f"{node.name} ({node.target}) lines up {symbol}'s dimensions differently")


def pointwise(node, symbol, state) -> dict:
    """Elementwise with broadcasting: each input's dims line up with the output's from the right."""
    rank = node.meta["val"].dim()
    predicted: dict = {}
    for arg in flat(list(node.args) + list(node.kwargs.values())):
        if isinstance(value_of(arg), torch.Tensor):
            shift = rank - _rank(arg)
            for dim, place in state(arg).items():
                _merge(node, symbol, predicted, dim + shift, place)
    return predicted


def _exact(expr):
    """expr when it is a polynomial (no division left), else None."""
    expr = sympy.cancel(expr)
    return expr if sympy.fraction(expr)[1] == 1 else None


def _view(node, symbol, state) -> dict:
    """A reshape keeps the row-major order: s stays where as many elements come before it. So a
    carrying dimension of the input with `before` elements ahead of its s (the sizes before it
    times its outer part) is found again at the output dimension whose own elements ahead of s
    are `before` too; the view's equal numel makes the parts after s match as well."""
    shape_in = [expr_of(size) for size in value_of(node.args[0]).shape]
    shape_out = [expr_of(size) for size in node.meta["val"].shape]
    predicted = {}
    for dim, (outer, _) in state(node.args[0]).items():
        before = sympy.Mul(*shape_in[:dim]) * outer
        for out_dim, size in enumerate(shape_out):
            out_outer = _exact(before / sympy.Mul(*shape_out[:out_dim]))
            out_factor = _exact(size / (out_outer * symbol)) if out_outer is not None else None
            if out_factor is not None and symbol not in (out_outer * out_factor).free_symbols:
                predicted[out_dim] = (out_outer, out_factor)
                break
        else:
            raise Illegal(f"{node.name} ({node.target}) reshapes across {symbol}'s dimension")
    return predicted


def _permute(node, symbol, state) -> dict:
    found = state(node.args[0])
    rank = value_of(node.args[0]).dim()
    if node.target == aten.t.default:
        order = list(range(rank))[::-1]
    elif node.target == aten.transpose.int:
        order = list(range(rank))
        a, b = _dim(node.args[1], rank), _dim(node.args[2], rank)
        order[a], order[b] = order[b], order[a]
    else:
        order = [_dim(d, rank) for d in node.args[1]]
    return {out: found[source] for out, source in enumerate(order) if source in found}


def _unit_dims(node, symbol, state) -> dict:
    """squeeze and unsqueeze: the dimensions other than size one keep their order."""
    found = state(node.args[0])
    before = [d for d, size in enumerate(value_of(node.args[0]).shape) if expr_of(size) != 1]
    after = [d for d, size in enumerate(node.meta["val"].shape) if expr_of(size) != 1]
    if len(before) != len(after):
        raise Illegal(f"{node.name} ({node.target}) changes the dimensions")
    return {out: found[source] for source, out in zip(before, after) if source in found}


def _broadcast(node, symbol, state) -> dict:
    """expand and broadcast_in_dim: the input's dims keep theirs; new ones repeat one value."""
    found = state(node.args[0])
    if node.target == prims.broadcast_in_dim.default:
        mapped = {node.args[2][dim]: place for dim, place in found.items()}
    else:
        shift = node.meta["val"].dim() - _rank(node.args[0])
        mapped = {dim + shift: place for dim, place in found.items()}
    return {**carriers(node.meta["val"], symbol), **mapped}


def _select(node, symbol, state) -> dict:
    found = state(node.args[0])
    dim = _dim(node.args[1], value_of(node.args[0]).dim())
    _forbid(node, symbol, [dim], found, "picks one element")
    return {d - (d > dim): place for d, place in found.items()}


def _slice(node, symbol, state) -> dict:
    found = state(node.args[0])
    dim = _dim(argument(node, 1, "dim", 0), _rank(node.args[0]))
    whole = argument(node, 2, "start") in (None, 0) and argument(node, 4, "step", 1) == 1 and \
        expr_of(node.meta["val"].shape[dim]) == expr_of(value_of(node.args[0]).shape[dim])
    if dim in found and not whole:
        raise Illegal(f"{node.name} ({node.target}) slices {symbol}'s dimension")
    return found


def _reduction(node, symbol, state):
    x = value_of(node.args[0])
    dims = argument(node, 1, "dim")
    if node.target in (aten.sum.default, aten.mean.default, aten.prod.default) or dims is None or dims == []:
        reduced = set(range(x.dim()))
    else:
        reduced = {_dim(d, x.dim()) for d in (dims if isinstance(dims, (list, tuple)) else [dims])}
    found = state(node.args[0])
    _forbid(node, symbol, reduced, found, "reduces")
    value = node.meta["val"]

    def kept(out):
        if out.dim() == x.dim():
            return found
        return {d - sum(r < d for r in reduced): place for d, place in found.items()}

    return [kept(out) for out in value] if isinstance(value, (tuple, list)) else kept(value)


def _along_dim(node, symbol, state):
    """softmax and scans: each slice along `dim` by itself."""
    found = state(node.args[0])
    _forbid(node, symbol, [_dim(argument(node, 1, "dim"), value_of(node.args[0]).dim())], found, "mixes elements")
    value = node.meta["val"]
    return [found for _ in value] if isinstance(value, (tuple, list)) else found


def _matmul(node, symbol, state) -> dict:
    with_bias = node.target in (aten.addmm.default, aten.baddbmm.default)
    a, b = node.args[int(with_bias)], node.args[int(with_bias) + 1]
    rank_a, rank_b = value_of(a).dim(), value_of(b).dim()
    found_a, found_b = state(a), state(b)
    _forbid(node, symbol, [rank_a - 1], found_a, "contracts")
    _forbid(node, symbol, [rank_b - 2], found_b, "contracts")
    out_rank = node.meta["val"].dim()
    predicted = dict(found_a)
    for dim, place in found_b.items():
        _merge(node, symbol, predicted, out_rank - 1 if dim == rank_b - 1 else dim, place)
    if with_bias:
        shift = out_rank - _rank(node.args[0])
        for dim, place in state(node.args[0]).items():
            _merge(node, symbol, predicted, dim + shift, place)
    return predicted


def _embedding(node, symbol, state) -> dict:
    _forbid(node, symbol, range(2), state(node.args[0]), "looks rows up")
    return state(node.args[1])


def _layer_norm(node, symbol, state) -> list:
    found = state(node.args[0])
    rank = _rank(node.args[0])
    _forbid(node, symbol, range(rank - len(node.args[1]), rank), found, "normalises")
    for weight in node.args[2:4]:
        _forbid(node, symbol, range(rank), state(weight), "scales")
    return [found for _ in node.meta["val"]]


def _attention(node, symbol, state) -> list:
    """Batch and heads may carry s on every input; the queries' length on the query only. The
    keys' length, the head size and the mask's key dimension mix."""
    q, k, v = (state(arg) for arg in node.args[:3])
    _forbid(node, symbol, [2, 3], k, "attends")
    _forbid(node, symbol, [2, 3], v, "attends")
    _forbid(node, symbol, [3], q, "attends")
    for mask in list(node.args[3:]) + list(node.kwargs.values()):  # (attn_mask may come as a keyword)
        if isinstance(value_of(mask), torch.Tensor):
            found = state(mask)
            _forbid(node, symbol, [_rank(mask) - 1], found, "masks keys")
            shift = 4 - _rank(mask)
            if any(q.get(d + shift) != place for d, place in found.items()):
                raise Illegal(f"{node.name} ({node.target}) broadcasts {symbol}'s dimension")
    for d in (0, 1):  # keys and values carrying the batch carry it where the queries do
        if (d in k or d in v) and not q.get(d) == k.get(d) == v.get(d):
            raise Illegal(f"{node.name} ({node.target}) broadcasts {symbol}'s dimension")
    value = node.meta["val"]
    return [{d: place for d, place in q.items() if d < out.dim()} if isinstance(out, torch.Tensor) and out.dim() >= 3
            else {} for out in value]


def _cat(node, symbol, state) -> dict:
    tensors = list(node.args[0])
    rank = node.meta["val"].dim()
    dim = _dim(argument(node, 1, "dim", 0), rank)
    found = [state(t) for t in tensors]
    for each in found:
        _forbid(node, symbol, [dim], each, "concatenates")
        if each != found[0]:
            raise Illegal(f"{node.name} ({node.target}) lines up {symbol}'s dimensions differently")
    return found[0] if found else {}


def _split(node, symbol, state) -> list:
    found = state(node.args[0])
    rank = _rank(node.args[0])
    dim = _dim(argument(node, 2, "dim", 0) if node.target != aten.unbind.int else argument(node, 1, "dim", 0), rank)
    _forbid(node, symbol, [dim], found, "splits")
    shifted = found if node.target != aten.unbind.int else {d - (d > dim): f for d, f in found.items()}
    return [shifted for _ in node.meta["val"]]


def _batch_first(node, symbol, state):
    """Convolutions, pooling, batch norm in inference: only the first input's batch dim may carry s."""
    found = state(node.args[0])
    _forbid(node, symbol, range(1, _rank(node.args[0])), found, "mixes elements")
    for arg in flat(list(node.args[1:]) + list(node.kwargs.values())):
        if isinstance(value_of(arg), torch.Tensor):
            _forbid(node, symbol, range(_rank(arg)), state(arg), "mixes elements")
    value = node.meta["val"]
    x_rank = value_of(node.args[0]).dim()
    outs = value if isinstance(value, (tuple, list)) else [value]
    predicted = [found if isinstance(out, torch.Tensor) and out.dim() == x_rank else {} for out in outs]
    return predicted if isinstance(value, (tuple, list)) else predicted[0]


def _factory(node, symbol, state):
    """A new tensor: its sizes say where s is (its values do not depend on s: checked apart).
    A range along the padded size is refused: its padded elements are new values (positions past
    the caller's size), which an index could take out of bounds."""
    value = node.meta["val"]
    if node.target in POSITIONS and carriers(value, symbol):
        raise Illegal(f"{node.name} ({node.target}) numbers the positions along {symbol}'s dimension")
    return [carriers(v, symbol) for v in value] if isinstance(value, (tuple, list)) else carriers(value, symbol)


def _table() -> dict:
    rules = {}

    def add(rule, *names, namespace=aten):
        for name in names:
            packet, _, overload = name.partition(".")
            op = getattr(namespace, packet, None)
            if op is not None and hasattr(op, overload or "default"):
                rules[getattr(op, overload or "default")] = rule

    add(_view, "view", "_unsafe_view", "reshape")
    add(_view, "reshape", "collapse_view", namespace=prims)
    add(_permute, "permute", "transpose.int", "t")
    add(_permute, "permute", namespace=prims)
    add(_unit_dims, "squeeze.dim", "squeeze.dims", "squeeze", "unsqueeze")
    add(_unit_dims, "squeeze", namespace=prims)
    add(_broadcast, "expand")
    add(_broadcast, "broadcast_in_dim", namespace=prims)
    add(_select, "select.int")
    add(_slice, "slice.Tensor")
    add(_reduction, "sum.dim_IntList", "sum", "mean.dim", "mean", "amax", "amin", "prod.dim_int", "prod",
        "var.correction", "std.correction", "var_mean.correction", "argmax", "argmin", "any.dim", "any.dims",
        "max.dim", "min.dim", "logsumexp")
    add(_reduction, "sum", "var", "amax", "amin", "prod", "xor_sum", namespace=prims)
    add(_along_dim, "_softmax", "_log_softmax", "softmax.int", "log_softmax.int", "cumsum", "cumprod",
        "logcumsumexp", "cummax", "cummin")
    add(_matmul, "mm", "addmm", "bmm", "baddbmm")
    add(_embedding, "embedding")
    add(_layer_norm, "native_layer_norm")
    add(_cat, "cat")
    add(_split, "split.Tensor", "split_with_sizes", "unbind.int")
    add(_batch_first, "convolution", "max_pool2d_with_indices", "avg_pool2d", "_adaptive_avg_pool2d",
        "adaptive_max_pool2d", "_native_batch_norm_legit_no_training", "upsample_nearest2d",
        "upsample_bilinear2d")
    add(_factory, "empty.memory_format", "empty_strided", "full", "zeros", "ones", "scalar_tensor",
        "arange", "arange.start", "arange.start_step", "new_empty", "new_zeros", "new_ones", "new_full",
        "new_empty_strided")
    add(_factory, "iota", namespace=prims)
    for name in ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                 "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
                 "scaled_dot_product_attention"):
        add(_attention, name)
    return rules


RULES = _table()
POSITIONS = {aten.arange.default, aten.arange.start, aten.arange.start_step, prims.iota.default}

POINTWISE_EXTRA = set()
for _name in ("_to_copy", "alias", "detach", "lift_fresh_copy", "copy", "empty_like", "zeros_like",
              "ones_like", "full_like"):
    POINTWISE_EXTRA.add(getattr(aten, _name).default)
for _name in ("add", "sub", "mul", "div", "neg", "exp", "exp2", "log", "log1p", "rsqrt", "sqrt", "tanh", "abs",
              "where", "maximum", "minimum", "pow", "eq", "ne", "gt", "ge", "lt", "le", "sin", "cos", "erf",
              "sign", "bitwise_and", "bitwise_or", "bitwise_not", "bitwise_xor", "fmod", "remainder",
              "reciprocal", "expm1", "floor", "ceil", "round", "trunc", "atan2", "sigmoid"):
    if hasattr(prims, _name):
        POINTWISE_EXTRA.add(getattr(prims, _name).default)

# Arguments that may hold a padded size because they are sizes (of a view or a new tensor); a
# slice's end only when it is the whole dimension (padding.py); anywhere else a size used as a
# number is illegal.
SHAPE_ARGUMENTS = {}
for _op, _places in ((aten.view.default, {1, "size"}), (aten._unsafe_view.default, {1, "size"}),
                     (aten.reshape.default, {1, "shape"}), (aten.expand.default, {1, "size"}),
                     (prims.broadcast_in_dim.default, {1, "shape"}),
                     (aten.empty.memory_format, {0, "size"}), (aten.empty_strided.default, {0, 1, "size", "stride"}),
                     (aten.full.default, {0, "size"}), (aten.zeros.default, {0, "size"}),
                     (aten.ones.default, {0, "size"}), (aten.new_empty.default, {1, "size"}),
                     (aten.new_zeros.default, {1, "size"}), (aten.new_ones.default, {1, "size"}),
                     (aten.new_full.default, {1, "size"}), (aten.new_empty_strided.default, {1, 2, "size", "stride"}),
                     (aten.arange.default, {0, "end"}), (aten.arange.start, {1, "end"}),
                     (aten.arange.start_step, {1, "end"}), (prims.iota.default, {0, "length"}),
                     (prims.reshape.default, {1, "shape"})):
    SHAPE_ARGUMENTS[_op] = _places
