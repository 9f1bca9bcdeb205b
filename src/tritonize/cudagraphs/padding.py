"""Where padding to size buckets is legal (CUDA graphs, option cudagraph_buckets; the runtime
side: runtime/cuda_graph_buckets.py; the per-operation rules: padding_rules.py).

Padding a size s to a bucket S adds elements along every dimension that s carries. It is legal
when no operation mixes elements along such a dimension, so the padded elements never reach the
caller's: pointwise ops, matrix products whose contracted dimension is another, reductions,
softmaxes and scans over other dimensions, views that keep s's rows in order, attention over a
batch or query dimension. A reduction or a scan along it, a matrix product contracting it,
attention's key dimension, an index into it, s used as a number (`x / s`) or an operation this
module does not know make s illegal, and the note says which node did it.

Per symbol, the inputs' carrying dimensions are read from their shapes (a dimension of size s
times a factor free of s; any other use of s in a size is illegal); each operation's rule
predicts its output's from its inputs' (padding_rules.py), and the prediction must explain the
output's shape.
"""
from __future__ import annotations

import operator

import sympy
import torch

from ..runtime.cuda_graph_buckets import PaddingPlan
from .padding_rules import POINTWISE_EXTRA, RULES, SHAPE_ARGUMENTS, Illegal, argument, carriers, expr_of, \
    flat, pointwise, value_of

aten = torch.ops.aten


def padding_plan(gm: torch.fx.GraphModule, example_inputs, metadata) -> PaddingPlan:
    """The symbols of an inference graph that may be padded, and where they sit."""
    candidates = _input_symbols(example_inputs)
    if not candidates:
        return PaddingPlan()
    whole_graph = _graph_refusal(metadata)
    legal, refused = [], []
    for symbol in sorted(candidates, key=str):
        try:
            if whole_graph:
                raise Illegal(whole_graph)
            check_symbol(gm, example_inputs, symbol)
            legal.append(symbol)
        except Illegal as why:
            refused.append((str(symbol), str(why)))
    readers = _readers(example_inputs)
    guards = _guards_to_check(example_inputs, legal, readers, refused)
    return PaddingPlan(symbols=tuple(map(str, legal)), upper=tuple(_upper(example_inputs, s) for s in legal),
                       inputs=tuple(_input_places(example_inputs, legal)), outputs=tuple(_output_places(gm, legal)),
                       refused=tuple(refused), guards=tuple(guards),
                       readers=tuple((name, *place) for name, place in readers.items()))


def _guards_to_check(example_inputs, legal: list, readers: dict, refused: list) -> list[str]:
    """The guards on padded symbols (the compiled code may rely on any of them: an index width, a
    divisibility), as text: a padded call checks them at its bucket's sizes (runtime
    cuda_graph_buckets.py) and runs at its own sizes where one fails. A guard that reads a size
    no input holds makes its symbols stay exact (`legal` and `refused` are updated)."""
    guards = []
    shape_env = _shape_env(example_inputs)
    for guard in getattr(shape_env, "guards", []):
        expr = shape_env.replace(guard.expr)  # in the symbols the inputs hold (s97 -> s11)
        if expr is sympy.true:
            continue
        involved = [symbol for symbol in legal if symbol in expr.free_symbols]
        if not involved:
            continue
        missing = sorted(str(s) for s in expr.free_symbols if str(s) not in readers)
        if missing:
            for symbol in involved:
                legal.remove(symbol)
                refused.append((str(symbol), f"the guard {expr} reads {', '.join(missing)}, which no input holds"))
            continue
        guards.append(expr)
    return [str(expr) for expr in guards if any(symbol in expr.free_symbols for symbol in legal)]


def _readers(example_inputs) -> dict:
    """symbol name -> (input position, dim) where a call's value of it can be read (dim -1: an
    int input)."""
    readers: dict = {}
    for position, x in enumerate(example_inputs):
        for dim, size in _sizes(x):
            expr = expr_of(size)
            if isinstance(expr, sympy.Symbol):
                readers.setdefault(str(expr), (position, dim))
    return readers


def _graph_refusal(metadata) -> str | None:
    if metadata is None:
        return "no AOTAutograd metadata"
    if getattr(metadata, "mutated_inp_runtime_indices", None):
        return "the graph mutates an input"
    for info in getattr(metadata, "output_info", []):
        if getattr(info.output_type, "name", "non_alias") != "non_alias":
            return "an output aliases an input or another output"
    return None


def _sizes(x) -> list:
    """(dim, size) of an input's sizes: a tensor's, or an int input's own value as dim -1."""
    if isinstance(x, torch.SymInt):
        return [(-1, x)]
    return list(enumerate(x.shape)) if isinstance(x, torch.Tensor) else []


def _input_symbols(example_inputs) -> set:
    return {s for x in example_inputs for _, size in _sizes(x) for s in expr_of(size).free_symbols
            if isinstance(s, sympy.Symbol)}


def _upper(example_inputs, symbol) -> int | None:
    """The largest value the shape environment allows the symbol (None: unbounded)."""
    bound = _shape_env(example_inputs).var_to_range.get(symbol)
    upper = bound.upper if bound is not None else None
    return int(upper) if isinstance(upper, sympy.Integer) else None


# ----------------------------------------------------------------------------- carrying dims


def _involves(value, symbol) -> bool:
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return symbol in value.node.expr.free_symbols
    return False


def _input_places(example_inputs, symbols) -> list:
    places = []
    for position, x in enumerate(example_inputs):
        for index, symbol in enumerate(symbols):
            if isinstance(x, torch.SymInt) and _involves(x, symbol):
                places.append((position, -1, index, 1))
            elif isinstance(x, torch.Tensor):
                places += [(position, dim, index, int(factor))
                           for dim, (_, factor) in carriers(x, symbol).items()]
    return places


def _output_places(gm, symbols) -> list:
    outputs = _outputs(gm)
    places = []
    for position, node in enumerate(outputs):
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if isinstance(value, torch.Tensor):
            for index, symbol in enumerate(symbols):
                places += [(position, dim, index) for dim in carriers(value, symbol)]
    return places


def _outputs(gm) -> list:
    output = next(node for node in gm.graph.nodes if node.op == "output")
    result = output.args[0]
    return list(result) if isinstance(result, (tuple, list)) else [result]


# ----------------------------------------------------------------------------- the check


def check_symbol(gm, example_inputs, symbol) -> None:
    """Raise Illegal when padding `symbol` could change the caller's elements."""
    states: dict = {}  # node -> its state (padding_rules.py), a list for several outputs
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    for node, x in zip(placeholders, example_inputs):
        states[node] = _input_state(node, x, symbol)
    for node in gm.graph.nodes:
        if node.op == "call_function":
            states[node] = _node_state(node, symbol, states)
        elif node.op == "output":
            _check_outputs(node, symbol, states)


def _input_state(node, x, symbol) -> dict:
    if isinstance(x, torch.SymInt) and _involves(x, symbol) and x.node.expr != symbol:
        raise Illegal(f"input {node.name} holds {x.node.expr}, not {symbol} itself")
    found = carriers(x, symbol) if isinstance(x, torch.Tensor) else {}
    if isinstance(x, torch.Tensor) and not found and any(
            symbol in expr_of(v).free_symbols for v in (*x.stride(), x.storage_offset())):
        raise Illegal(f"input {node.name}'s strides depend on {symbol}, its sizes do not")
    if found and not _contiguous(x):
        raise Illegal(f"input {node.name} is not contiguous")
    if any(not factor.is_Integer for _, factor in found.values()):
        raise Illegal(f"input {node.name} has a size that is {symbol} times another size")
    return found


def _shape_env(example_inputs):
    for x in example_inputs:
        for _, size in _sizes(x):
            if isinstance(size, torch.SymInt):
                return size.node.shape_env
    return None


def _contiguous(x) -> bool:
    expected = 1
    for size, stride in reversed(list(zip(x.shape, x.stride()))):
        if expr_of(size) != 1 and sympy.expand(expr_of(stride) - expr_of(expected)) != 0:
            return False
        expected = expected * size
    return True


def _check_outputs(node, symbol, states) -> None:
    for out in flat(node.args[0]):
        value = value_of(out)
        if _involves(value, symbol):
            raise Illegal(f"the graph returns the size {symbol} as a number")
        if not isinstance(value, torch.Tensor) or not states.get(out):
            continue
        if any(outer != 1 for outer, _ in states[out].values()):
            raise Illegal(f"output {out.name} interleaves padded elements with its own")
        if any(symbol in expr_of(stride).free_symbols for stride in value.stride()):
            raise Illegal(f"output {out.name}'s strides depend on {symbol} (cutting it back would change them)")


def _node_state(node, symbol, states):
    """The node's state, after checking that its operation keeps the symbol's elements apart."""
    value = node.meta.get("val")
    if node.target is operator.getitem and isinstance(states.get(node.args[0]), list):
        return states[node.args[0]][node.args[1]]
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)) or node.target in SIZE_ARITHMETIC:
        return {}  # size arithmetic: its uses are checked where they are consumed
    _check_size_uses(node, symbol)

    def state(arg):
        return states.get(arg, {}) if isinstance(arg, torch.fx.Node) else {}

    inputs = [arg for arg in flat(list(node.args) + list(node.kwargs.values())) if state(arg)]
    if not inputs and not _carries(value, symbol):
        return [{} for _ in value] if isinstance(value, (tuple, list)) else {}
    rule = RULES.get(node.target) or (pointwise if _is_pointwise(node.target) else None)
    if rule is None:
        raise Illegal(f"{node.name} ({node.target}) is not known to keep {symbol}'s elements apart")
    predicted = rule(node, symbol, state)
    for out, expected in zip(*((value, predicted) if isinstance(value, (tuple, list)) else ([value], [predicted]))):
        if isinstance(out, torch.Tensor) and not _fits(out, expected, symbol):
            raise Illegal(f"{node.name} ({node.target}) moves {symbol}'s elements")
    return predicted


def _fits(value, predicted: dict, symbol) -> bool:
    """The predicted state explains exactly the dimensions whose sizes involve the symbol."""
    involved = {dim for dim, size in enumerate(value.shape) if symbol in expr_of(size).free_symbols}
    return involved == set(predicted) and all(
        sympy.expand(outer * symbol * factor - expr_of(value.shape[dim])) == 0
        for dim, (outer, factor) in predicted.items())


def _carries(value, symbol) -> bool:
    values = value if isinstance(value, (tuple, list)) else [value]
    return any(isinstance(v, torch.Tensor) and any(symbol in expr_of(d).free_symbols for d in v.shape)
               for v in values)


SIZE_ARITHMETIC = {operator.mul, operator.add, operator.sub, operator.floordiv, operator.mod,
                   operator.getitem, aten.sym_size.int, aten.sym_numel.default, aten.sym_stride.int}


def _check_size_uses(node, symbol) -> None:
    exempt = SHAPE_ARGUMENTS.get(node.target, ())
    if node.target is aten.slice.Tensor:
        exempt = {3, "end"} if _slices_to_the_end(node) else ()
    for index, arg in enumerate(node.args):
        if index not in exempt and any(_involves(value_of(a), symbol) for a in flat([arg])):
            raise Illegal(f"{node.name} ({node.target}) uses the size {symbol} as a number")
    for name, arg in node.kwargs.items():
        if name not in exempt and any(_involves(value_of(a), symbol) for a in flat([arg])):
            raise Illegal(f"{node.name} ({node.target}) uses the size {symbol} as a number")


def _slices_to_the_end(node) -> bool:
    """A slice whose end is its dimension's whole size (x[:n] of an x with n rows): a bound that
    moves with the padding and cuts nothing. A start, or any other end, that depends on the size
    picks other elements once it is padded (t[n:n + 1])."""
    x = value_of(node.args[0])
    dim, end = argument(node, 1, "dim", 0), argument(node, 3, "end")
    if end is None:
        return False
    return sympy.expand(expr_of(value_of(end)) - expr_of(x.shape[dim % x.dim()])) == 0


def _is_pointwise(target) -> bool:
    return torch.Tag.pointwise in getattr(target, "tags", ()) or target in POINTWISE_EXTRA

