"""schedule: GraphIR -> ordered steps (kernel groups and extern calls).

* Dead buffers (computed but never read by an output or an extern) are dropped.
* Consecutive computed buffers over the same iteration space fuse into one kernel group when the
  later ones read the earlier ones only at the element they are computing (same index), so no
  thread needs another thread's result. A library call between them (a matmul that reads the
  first) does not separate them unless the later buffer reads the call's result (`_can_pass`).
* Reductions over the same rows fuse with each other and with pointwise buffers shaped like their
  input or their output (schedule/rows.py), under the same rule: a buffer reads the group's
  buffers only at the element (or the row) it computes. Such a group is a reduction kernel.
* Scans take pointwise buffers shaped like the scanned tensor, before and after them, into one
  scan kernel (schedule/scans.py).
* A buffer written and read only inside one group, and not a graph output, is never stored: it
  lives in registers (`KernelGroup.internal`).
* torch.distributed's functional collectives start as early and are waited for as late as their
  data allows (schedule/collectives.py).

Not responsible for: iteration order or tiling inside a kernel (codegen/kernel.py).
"""
from __future__ import annotations

import dataclasses

from ..ir import expr as ex
from ..ir.nodes import ComputedBuffer, ExternCall, GraphIR, ReductionBuffer, ScanBuffer
from ..ir.scatter import ScatterOp
from ..ir.symbols import dim_vars, simplify_with_ranges, without_unit_dims
from .collectives import is_start, order_collectives
from .steps import is_pure_call
from .rows import RowSpace, row_space_of
from .scans import is_scan_group, scan_joins, scan_row_space


@dataclasses.dataclass
class KernelGroup:
    buffers: list[ComputedBuffer]
    internal: set[str] = dataclasses.field(default_factory=set)
    rows: RowSpace | None = None  # set for reduction kernels

    @property
    def is_reduction(self) -> bool:
        return self.rows is not None

    @property
    def is_scan(self) -> bool:
        return is_scan_group(self)

    @property
    def size(self):
        return self.buffers[0].layout.size

    @property
    def stored(self) -> list[ComputedBuffer]:
        return [b for b in self.buffers if b.name not in self.internal]

    def origins(self) -> list[str]:
        seen = []
        for b in self.buffers:
            for o in b.origins:
                if o not in seen:
                    seen.append(o)
        return seen


@dataclasses.dataclass
class Schedule:
    steps: list  # KernelGroup | ExternCall

    def render(self) -> str:
        lines = []
        for i, step in enumerate(self.steps):
            if isinstance(step, KernelGroup):
                names = ", ".join(b.name + (" (internal)" if b.name in step.internal else "") for b in step.buffers)
                verb = "scanned" if step.is_scan else "reduced"
                space = (f"rows {list(step.rows.x_sizes)} x {verb} {list(step.rows.r_sizes)}"
                         if step.is_reduction else f"over {list(step.size)}")
                lines.append(f"step {i}: kernel {space}: {names}  # {', '.join(step.origins())}")
            elif isinstance(step, ScatterOp):
                lines.append(f"step {i}: scatter ({step.mode}) into {step.target} over {list(step.size)}")
            else:
                outs = ", ".join(o.buffer.name for o in step.outputs)
                lines.append(f"step {i}: {step.kind} {step.target} -> {outs}")
        return "\n".join(lines)


def schedule(graph: GraphIR) -> Schedule:
    operations = eliminate_dead_buffers(graph)
    steps = order_collectives(fuse(operations), reads_of)
    mark_internal_buffers(steps, graph)
    return Schedule(steps)


def _extern_reads(call: ExternCall) -> set[str]:
    names: set[str] = set()

    def visit(v):
        if hasattr(v, "buffer_name"):
            names.add(v.buffer_name)
        elif isinstance(v, (list, tuple)):
            for x in v:
                visit(x)
        elif isinstance(v, dict):
            for x in v.values():
                visit(x)

    visit(call.args)
    visit(call.kwargs)
    return names


def reads_of(op) -> set[str]:
    if isinstance(op, ComputedBuffer):
        return {e.args[0] for e in ex.loads(op.body)}
    if isinstance(op, ScatterOp):
        return op.reads()
    return _extern_reads(op)


def eliminate_dead_buffers(graph: GraphIR) -> list:
    needed = {o.view.buffer_name for o in graph.outputs if o.view is not None}
    kept = []
    for op in reversed(graph.operations):
        if isinstance(op, ComputedBuffer) and op.name not in needed:
            continue
        if isinstance(op, ScatterOp) and op.target not in needed:  # writes a dead buffer
            continue
        needed |= reads_of(op)
        kept.append(op)
    return list(reversed(kept))


def _same_element_reads(group: KernelGroup, buffer: ComputedBuffer) -> bool:
    """buffer reads each group buffer only at the element it is itself computing. A dim of size
    1 is 0 on both sides: a load's index has dropped it (a batch of one), the layout has not."""
    produced = {b.name: b for b in group.buffers}
    size = buffer.layout.size
    dims = dim_vars(len(size))
    for load in ex.loads(buffer.body):
        source = produced.get(load.args[0])
        if source is not None and (without_unit_dims(load.args[1], dims, size)
                                   != without_unit_dims(source.layout.index(dims), dims, size)):
            return False
    return True


def _same_row_element_reads(group: KernelGroup, rows: RowSpace, buffer: ComputedBuffer) -> bool:
    """Like _same_element_reads, in the coordinates of a reduction kernel."""
    mapping = rows.mapping(buffer)
    if mapping is None:
        return False
    ranges = rows.ranges()
    for load in ex.loads(buffer.body):
        source = next((b for b in group.buffers if b.name == load.args[0]), None)
        if source is None:
            continue
        source_map = rows.mapping(source)
        stored_at = source.layout.index(dim_vars(len(source.layout.size))).xreplace(source_map)
        read_at = load.args[1].xreplace(mapping)
        if simplify_with_ranges(stored_at, ranges) != simplify_with_ranges(read_at, ranges):
            return False
    return True


def _reads_in_place(buffers: list, rows: RowSpace) -> bool:
    return all(_same_row_element_reads(KernelGroup(buffers[:k]), rows, b) for k, b in enumerate(buffers))


def _joins(group: KernelGroup | None, op: ComputedBuffer) -> bool:
    if group is None:
        return False
    if isinstance(op, ScanBuffer) or group.is_scan:
        return scan_joins(group, op, _reads_in_place)
    if group.is_reduction:
        return _same_row_element_reads(group, group.rows, op)
    if isinstance(op, ReductionBuffer):
        rows = row_space_of(op)
        members = group.buffers + [op]
        if not all(rows.role(b) is not None for b in group.buffers):
            return False
        if all(_same_row_element_reads(KernelGroup(members[:k]), rows, b) for k, b in enumerate(members)):
            group.rows = rows
            return True
        return False
    return op.layout.size == group.size and _same_element_reads(group, op)


def fuse(operations: list) -> list:
    steps: list = []
    group: KernelGroup | None = None
    passed: set[str] = set()  # what the library calls after the open group's kernel produce
    for i, op in enumerate(operations):
        if isinstance(op, ComputedBuffer):
            if not reads_of(op) & passed and _joins(group, op):  # (_joins may set group.rows)
                group.buffers.append(op)
                continue
            if _steps_aside(op, group, passed, operations[i + 1:i + 2]):  # its own kernel; the group stays open
                steps.append(KernelGroup([op]))
                passed.add(op.name)
                continue
            group, passed = KernelGroup([op], rows=_row_space(op)), set()
            steps.append(group)
        elif group is not None and _can_pass(op):
            passed |= {out.buffer.name for out in op.outputs}
            steps.append(op)
        else:
            group = None
            steps.append(op)
    return steps


def _steps_aside(op: ComputedBuffer, group: KernelGroup | None, passed: set, following: list) -> bool:
    """Whether a buffer that does not join the open group gets a kernel of its own after it and
    leaves the group open, as a library call that can pass does: a pointwise buffer of one
    element (a batch norm's num_batches_tracked + 1 in training) whose next operation joins the
    group. Before, it closed the group, so the running statistics after it, which join their
    statistics' reduction, were a kernel of their own, and so was the normalization."""
    if group is None or type(op) is not ComputedBuffer or not all(s == 1 for s in op.layout.size):
        return False
    (after,) = following or (None,)
    return (isinstance(after, ComputedBuffer) and not reads_of(after) & (passed | {op.name})
            and _joins(group, after))  # (a join it finds, it would find again next)


def _can_pass(op) -> bool:
    """Whether a buffer computed after this call may be computed before it, in the open kernel
    group (a matmul between a value and its second consumer): a library call that writes none of
    its arguments, draws no random numbers and binds no data-dependent sizes. The buffer must
    also not read the call's results (fuse checks). Not a collective: the work after it would be
    done before it, delaying the communication it could overlap (schedule/collectives.py)."""
    return is_pure_call(op) and not is_start(op)


def _row_space(op: ComputedBuffer) -> RowSpace | None:
    if isinstance(op, ReductionBuffer):
        return row_space_of(op)
    if isinstance(op, ScanBuffer):
        return scan_row_space(op)
    return None


def mark_internal_buffers(steps: list, graph: GraphIR) -> None:
    outputs = {o.view.buffer_name for o in graph.outputs if o.view is not None}
    readers: dict[str, set[int]] = {}
    for i, step in enumerate(steps):
        ops = step.buffers if isinstance(step, KernelGroup) else [step]
        for op in ops:
            for name in reads_of(op):
                readers.setdefault(name, set()).add(i)
    for i, step in enumerate(steps):
        if isinstance(step, KernelGroup):
            for b in step.buffers:
                if b.name not in outputs and readers.get(b.name, set()) <= {i}:
                    step.internal.add(b.name)
