"""Numbers computed from sizes alone are computed by the wrapper, once a call (symbolic sizes).

A kernel body can hold a value that depends on no element, only on sizes: attention's
`x.shape[-1] ** -0.5` is traced as scalar_tensor(s1) -> float64 -> pow(-0.5) -> float32, and a
static compile sees the number itself (Dynamo computes it). Left in the kernel, every thread of
every program computes it, here a float64 `pow`: on the H100 that made the attention softmax of
the kernel suite 11-15% slower than its static compile. So each such sub-expression that holds
work worth moving (a division, a power, a root, exp or log, or any float64 arithmetic) becomes a
`HostValueBuffer`: the wrapper evaluates it in Python after binding the sizes
(`hv0_item = host_math.pow_(float(s1), -0.5)`), and kernels take the number as an argument, as
they take a host scalar input's value (codegen/kernel.py).

The Python evaluation follows the kernel's types: doubles for float64, rounded to float32 where
the expression is float32 (host_math.to_float32), Python ints for sizes; host_math gives IEEE
results where Python would raise. Only integer and float32/float64 expressions over sizes the
wrapper reads from its inputs are moved (not data-dependent sizes, bound later in the call).
"""
from __future__ import annotations

import sympy
import torch

from ..codegen.index_printer import print_index, print_number
from ..ir import expr as ex
from ..ir.nodes import ComputedBuffer, GraphIR, HostValueBuffer, Layout
from ..ir.scatter import ScatterOp

HOST_DTYPES = (torch.int32, torch.int64, torch.float32, torch.float64)
# op -> Python source over its arguments' source (the result is then rounded to its dtype)
HOST_OPS = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "neg": "(-{0})",
    "truediv": "host_math.div({0}, {1})", "pow": "host_math.pow_({0}, {1})",
    "sqrt": "host_math.sqrt({0})", "rsqrt": "host_math.rsqrt({0})", "exp": "host_math.exp({0})",
    "log": "host_math.log({0})",
}
WORTH_MOVING = {"truediv", "pow", "sqrt", "rsqrt", "exp", "log"}


def move_size_values_to_host(graph: GraphIR) -> None:
    """Replace, in every generated op's body, the sub-expressions computed from sizes alone
    (and worth moving) by loads of HostValueBuffers; equal expressions share one."""
    if not graph.symbol_sources:
        return
    bound = set(graph.symbol_sources)
    found: dict = {}  # Expr -> HostValueBuffer
    for op in graph.operations:
        if isinstance(op, ComputedBuffer):
            op.body = _rewrite(op.body, bound, found, graph)
        elif isinstance(op, ScatterOp):
            op.value = _rewrite(op.value, bound, found, graph)


def _rewrite(body: ex.Expr, bound: set, found: dict, graph: GraphIR) -> ex.Expr:
    movable = _movable(body, bound)
    if not movable:
        return body
    parents: dict = {}
    for e in ex.walk(body):
        for child in e.children():
            parents.setdefault(child, []).append(e)
    replacements = {}
    for e in movable:
        used_outside = e is body or any(p not in movable for p in parents.get(e, []))
        if used_outside and _worth_moving(e):
            replacements[e] = ex.load(_host_buffer(e, found, graph).name, sympy.Integer(0), e.dtype)
    return ex.replace(body, replacements) if replacements else body


def _movable(body: ex.Expr, bound: set) -> set:
    """The sub-expressions of body computed from constants and bound sizes alone."""
    movable = set()
    for e in ex.walk(body):  # children first
        if e.dtype not in HOST_DTYPES:
            continue
        if e.op == "constant":
            movable.add(e)
        elif e.op == "index_expr":
            if sympy.sympify(e.args[0]).free_symbols <= bound:
                movable.add(e)
        elif e.op in HOST_OPS or e.op == "to_dtype":
            if all(isinstance(a, ex.Expr) and a in movable for a in e.args):
                movable.add(e)
    return movable


def _worth_moving(e: ex.Expr) -> bool:
    return any(s.op in WORTH_MOVING or (s.dtype == torch.float64 and s.op in HOST_OPS) for s in ex.walk(e))


def _host_buffer(e: ex.Expr, found: dict, graph: GraphIR) -> HostValueBuffer:
    if e not in found:
        name = f"hv{len(found)}"
        while name in graph.buffers:
            name += "_"
        layout = Layout((), (), 0, e.dtype, torch.device("cpu"))
        found[e] = graph.buffers[name] = HostValueBuffer(name, layout, source=python_source(e))
    return found[e]


def python_source(e: ex.Expr) -> str:
    """Python that computes e in the wrapper, after its size symbols are bound."""
    if e.op == "constant":
        return print_number(e.args[0])
    if e.op == "index_expr":
        text = print_index(e.args[0])
        return _rounded(text, e.dtype) if e.dtype.is_floating_point else text
    if e.op == "to_dtype":
        return _rounded(python_source(e.args[0]), e.dtype)
    text = HOST_OPS[e.op].format(*[python_source(a) for a in e.args])
    return _rounded(text, e.dtype) if e.op not in ("add", "sub", "mul", "neg") or e.dtype.is_floating_point else text


def _rounded(text: str, dtype: torch.dtype) -> str:
    if dtype == torch.float32:
        return f"host_math.to_float32({text})"
    if dtype == torch.float64:
        return f"float({text})"
    return f"int({text})"
