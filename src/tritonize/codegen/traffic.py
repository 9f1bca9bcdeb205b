"""What each step of a graph moves and computes, counted from the IR (issue 24's profile).

No profiler knows a kernel's bytes and operations; we do, from the buffers it reads and writes
and the expressions it evaluates. Counts are at the graph's example sizes (`hint`).

* Bytes: each buffer a kernel loads is read once and each buffer it stores written once (a
  buffer read through a slice counts at most as many elements as the kernel has points);
  buffers internal to a kernel (kept in registers) move nothing.
* Floating-point operations: each distinct arithmetic node of a kernel's bodies (common
  subexpressions once across members, as codegen computes them: a softmax's exp(x - max) feeds
  its sum and its output) counts once per point it is evaluated at: every element where it
  varies along the reduced variables (and in pointwise kernels), every row where not (a layer
  norm's `mean = sum / n`); a reduction adds its combine per element (1; var 3).
  Loads, constants, casts, selects, comparisons and index arithmetic are not counted, and a
  transcendental function counts as one.
* Library calls: matmuls and convolutions 2 * M * N * K (plus a bias), from their shapes;
  fused attention its products, 2 * L * S * (E + Ev) a batch and head forward and 2.5 times
  that backward (five products, one recomputed), half of it under is_causal; bytes their tensor
  arguments and results, each once. Other calls: bytes only.
"""
from __future__ import annotations

import dataclasses

from torch.utils._pytree import tree_leaves

from ..ir import expr as ex
from ..ir.nodes import ExternCall, TensorArg

NOT_ARITHMETIC = {"load", "constant", "index_expr", "to_dtype", "where", "masked", "indirect", "eq", "ne", "chunk_bound",
                  "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "isnan", "isinf",
                  "signbit", "rounded"}
# operations a reduction adds per element it combines (var: a two-pass sub, mul and add)
COMBINE_FLOPS = {"sum": 1, "prod": 1, "max": 1, "min": 1, "argmax": 1, "argmin": 1, "var": 3, "mean": 2}
MATMULS = {"mm", "addmm", "bmm", "baddbmm", "matmul"}


@dataclasses.dataclass
class Cost:
    bytes_read: int = 0
    bytes_written: int = 0
    flops: int = 0

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(self.bytes_read + other.bytes_read, self.bytes_written + other.bytes_written,
                    self.flops + other.flops)


def arithmetic(e: ex.Expr) -> bool:
    return e.op not in NOT_ARITHMETIC and e.dtype.is_floating_point


def body_flops(body: ex.Expr) -> int:
    """Floating-point arithmetic nodes of an expression, each distinct one once."""
    return sum(1 for e in ex.walk(body) if arithmetic(e))


def kernel_cost(group, buffers: dict, hint=int) -> Cost:
    """A fused kernel (schedule/fusion.KernelGroup) at the example sizes."""
    members = {b.name for b in group.buffers}
    if group.rows is None:
        points = _numel(group.size, hint)
        flops = _distinct_flops([b.body for b in group.buffers]) * points
    else:
        points = hint(group.rows.xnumel) * hint(group.rows.rnumel)
        flops = _row_kernel_flops(group, hint)
    loaded = {e.args[0] for b in group.buffers for e in ex.loads(b.body)} - members
    read = sum(min(_numel(buffers[n].layout.size, hint), points) * buffers[n].layout.dtype.itemsize
               for n in loaded if n in buffers)
    written = sum(_numel(b.layout.size, hint) * b.layout.dtype.itemsize for b in group.stored)
    return Cost(read, written, flops)


def _distinct_flops(bodies) -> int:
    seen: set = set()
    for body in bodies:
        seen.update(e for e in ex.walk(body) if arithmetic(e))
    return len(seen)


def _row_kernel_flops(group, hint) -> int:
    """A reduction kernel: its members' bodies over the group's row and reduced variables, each
    distinct node once, per element where it varies along the reduced variables, else per row;
    plus each reduction's combine per element."""
    rows = group.rows
    rows_count, reduced = hint(rows.xnumel), hint(rows.rnumel)
    r_vars = set(rows.r_vars)
    element, per_row = set(), set()
    combines = 0
    for buffer in group.buffers:
        mapping = rows.mapping(buffer)
        body = ex.substitute(buffer.body, mapping) if mapping else buffer.body
        varies = _varying(body, r_vars)
        for e in ex.walk(body):
            if arithmetic(e):
                (element if varies[e] else per_row).add(e)
        if rows.role(buffer) == "reduction":
            combines += COMBINE_FLOPS.get(getattr(buffer, "reduction_type", None), 0)
    return (len(element) + combines) * rows_count * reduced + len(per_row - element) * rows_count


def _varying(body: ex.Expr, r_vars: set) -> dict:
    """{node: whether it reads or computes an index that holds a reduced variable}."""
    varies: dict = {}
    for e in ex.walk(body):  # children first
        own = (e.op == "load" and bool(e.args[1].free_symbols & r_vars)) or \
            (e.op == "index_expr" and bool(e.args[0].free_symbols & r_vars))
        varies[e] = own or any(varies[c] for c in e.children())
    return varies


def extern_cost(call: ExternCall, buffers: dict, hint=int) -> Cost:
    """A library call: bytes of its tensor arguments and results; flops of matmuls and
    convolutions from their shapes."""
    tensors = [a for a in tree_leaves((call.args, call.kwargs)) if isinstance(a, TensorArg)]
    read = sum(_numel(t.size, hint) * buffers[t.buffer_name].layout.dtype.itemsize
               for t in tensors if t.buffer_name in buffers)
    written = sum(_numel(o.buffer.layout.size, hint) * o.buffer.layout.dtype.itemsize for o in call.outputs)
    return Cost(read, written, _extern_flops(call, tensors, hint))


def _extern_flops(call: ExternCall, tensors: list, hint) -> int:
    name = getattr(getattr(call.target, "overloadpacket", None), "__name__", str(call.target))
    if not call.outputs:
        return 0
    out = [hint(s) for s in call.outputs[0].buffer.layout.size]
    if name in MATMULS and len(tensors) >= 2:
        depth = hint(tensors[-1].size[-2])
        bias = _numel(out, int) if name in ("addmm", "baddbmm") else 0
        return 2 * _numel(out, int) * depth + bias
    if name in ("convolution", "_convolution", "conv2d") and len(tensors) >= 2:
        weight = [hint(s) for s in tensors[1].size]  # (out channels, in channels / groups, kernel...)
        return 2 * _numel(out, int) * _numel(weight[1:], int)
    if "scaled_dot_product" in name:
        return _attention_flops(call, name.endswith("_backward"), hint)
    return 0


def _attention_flops(call: ExternCall, backward: bool, hint) -> int:
    """Fused attention's products from q (..., L, E), k (..., S, E), v (..., S, Ev), found by
    their names in the op's schema (the backward's take them after the incoming gradient)."""
    schema = getattr(call.target, "_schema", None)
    if schema is None:
        return 0
    values = {arg.name: (call.args[i] if i < len(call.args) else call.kwargs.get(arg.name, arg.default_value))
              for i, arg in enumerate(schema.arguments)}
    q, k, v = (values.get(n) for n in ("query", "key", "value"))
    if not all(isinstance(t, TensorArg) for t in (q, k, v)):
        return 0
    length, source = hint(q.size[-2]), hint(k.size[-2])
    forward = 2 * _numel(q.size[:-2], hint) * length * source * (hint(q.size[-1]) + hint(v.size[-1]))
    flops = forward * 5 // 2 if backward else forward
    return flops // 2 if values.get("is_causal") is True else flops


def _numel(size, hint) -> int:
    n = 1
    for s in size:
        n *= hint(s)
    return n


def step_costs(steps: list, calls: dict, graph) -> list[list]:
    """[name, kind, bytes read, bytes written, flops] of each step of a schedule, in order: a
    generated kernel by its (shared) definition's name, a library call by its op. Scatter and
    user kernels are listed with what is known of them (bytes and flops left at 0)."""
    from ..schedule.fusion import KernelGroup

    hint = graph.sizes.hint if graph.sizes is not None else int
    rows = []
    for step in steps:
        if isinstance(step, KernelGroup):
            cost, name, kind = kernel_cost(step, graph.buffers, hint), calls[id(step)][0], "kernel"
        elif isinstance(step, ExternCall):
            cost, name, kind = extern_cost(step, graph.buffers, hint), str(step.target), step.kind
        else:
            cost = Cost()
            name = calls[id(step)][0] if id(step) in calls else getattr(step, "kernel_name", type(step).__name__)
            kind = "kernel" if id(step) in calls else "user"
        rows.append([name, kind, cost.bytes_read, cost.bytes_written, cost.flops])
    return rows
