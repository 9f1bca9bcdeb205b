"""The wrapper's memory plan: which buffer takes over the storage of a freed one, which freed
buffers are deleted at once, and the planned peak (issue 19; docs/design.md, "Memory plan").

Every buffer lives from the step that allocates it to its last use (graph outputs to the end).
With every free immediate and nothing reused, the bytes live during each step give a timeline
and its maximum, the planned peak. Reusing a freed buffer's storage for a later allocation of
the same class (device, dtype and storage span in elements: any layout fits, through
`reinterpret_tensor`) saves an allocation, but holds the freed buffer from its last use to the
reuse; a reuse is taken only where that holding keeps the timeline at or under the peak. So
reuse never raises the peak, and a freed buffer nothing takes is deleted right after its last
use (before, every freed buffer of a reusable kind was held to the end of the call).

First, a pointwise kernel whose one stored buffer has the layout of an input that dies at that
kernel, read only at the element the kernel writes, writes over it (in place): each program
reads its elements before it stores them (the store depends on the loads), and no other program
touches them. That lowers the timeline at the kernel's step (a GELU after the MLP's up
projection: one 4H-wide buffer instead of two).

Graph inputs and parameters are not counted; an extern's result is (aten allocates it); a view
the graph returns keeps its buffer to the end.
"""
from __future__ import annotations

import dataclasses

import sympy

from ..ir import expr as ex
from ..ir.nodes import Buffer, ComputedBuffer, ExternCall, GraphIR, HostValueBuffer
from ..ir.symbols import dim_vars, without_unit_dims
from ..ir.user_kernel import UserKernelCall
from ..schedule.fusion import KernelGroup, reads_of
from ..schedule.memory_order import free_inputs_sooner, last_uses, live_bytes
from ..schedule.steps import allocations, step_reads


@dataclasses.dataclass
class MemoryPlan:
    """reuse: new buffer -> the freed buffer whose storage it takes; in_place: a kernel's output
    -> the input it writes over; deleted: step -> buffers deleted after it; peak: planned peak
    bytes (at the example's sizes) and the step it is reached at; live_at_peak: (buffer, bytes)
    live there, largest first."""

    reuse: dict
    in_place: dict
    deleted: dict
    peak: int
    peak_step: int
    live_at_peak: list


def lower_peak_order(graph: GraphIR, steps: list) -> list:
    """steps, or the order schedule/memory_order.py proposes (kernels that only feed outputs moved
    up where the larger inputs they free die otherwise) when its planned peak is lower."""
    reads = {id(step): step_reads(step, reads_of) for step in steps}  # walked once, for every order

    def reads_of_step(step):
        return reads[id(step)]
    proposed = free_inputs_sooner(steps, graph, reads_of_step)
    if proposed is steps:
        return steps

    def planned_peak(order):
        return plan_memory(graph, order, last_uses(order, graph, reads_of_step)).peak
    return proposed if planned_peak(proposed) < planned_peak(steps) else steps


def plan_memory(graph: GraphIR, steps: list, last_use: dict) -> MemoryPlan:
    allocated = {i: allocations(step) for i, step in enumerate(steps)}
    timeline, sizes, born = live_bytes(steps, graph, last_use)
    end = len(steps)
    sources = _reusable_storages(graph, steps)
    in_place = _in_place(graph, steps, last_use, sources)
    for out in in_place:
        timeline[born[out]] -= sizes[out]  # one storage at that step, not two
    peak = max(timeline)
    peak_step = timeline.index(peak)
    live = sorted(((name, sizes[name]) for name, start in born.items()
                   if start <= peak_step <= last_use.get(name, start)
                   and not (name in in_place and start == peak_step)), key=lambda item: -item[1])
    reuse = _choose_reuse(graph, steps, allocated, last_use, sizes, timeline, peak,
                          sources - set(in_place.values()), set(in_place))
    taken = set(reuse.values())
    deleted: dict = {}
    for name, last in last_use.items():
        if last < end and name in graph.buffers and name not in taken and _deletable(graph, name):
            deleted.setdefault(last, []).append(name)
    return MemoryPlan(reuse, in_place, {i: sorted(names) for i, names in deleted.items()}, peak, peak_step, live)


def _storage_class(buffer: Buffer):
    layout = buffer.layout
    return (str(layout.device), layout.dtype, sympy.sympify(layout.storage_span()))


def reusable_into(buffer: Buffer) -> bool:
    """A buffer the wrapper allocates itself at the start of its storage."""
    return isinstance(buffer, ComputedBuffer) and buffer.storage_offset == 0


def _reusable_storages(graph: GraphIR, steps: list) -> set:
    """Freed buffers whose storage nothing else can still see: our own buffers and the results of
    deliberate aten calls (one fresh result), not arguments of a fallback, a collective or a user
    kernel (a fallback's result may view them; a user kernel may return its argument; a
    collective reads its input until its wait, maybe on another stream, and a wait returns its
    argument)."""
    aliased = set()
    sources = set()
    for step in steps:
        if isinstance(step, ExternCall) and step.kind in ("fallback", "collective") or isinstance(step, UserKernelCall):
            aliased |= reads_of(step)
        if isinstance(step, KernelGroup):
            sources |= {b.name for b in step.stored if b.storage_offset == 0}
        elif isinstance(step, ExternCall) and step.kind == "extern" and len(step.outputs) == 1 \
                and step.outputs[0].path == ():
            sources.add(step.outputs[0].buffer.name)
    return sources - aliased - set(graph.constants)


def _in_place(graph: GraphIR, steps: list, last_use: dict, sources: set) -> dict:
    """A pointwise kernel's one stored buffer (its last: nothing is loaded after the store) ->
    an input of the same layout that dies at that kernel and is loaded only at the stored index."""
    dying: dict = {}  # step -> sources whose last use it is
    for name in sources:
        if name in last_use:
            dying.setdefault(last_use[name], []).append(name)
    in_place = {}
    for i, step in enumerate(steps):
        if not isinstance(step, KernelGroup) or step.is_reduction or step.is_scan or len(step.stored) != 1:
            continue
        out = step.stored[0]
        candidates = sorted(name for name in dying.get(i, []) if graph.buffers[name].layout == out.layout)
        if not candidates or out is not step.buffers[-1] or out.storage_offset != 0:
            continue
        size = out.layout.size
        dims = dim_vars(len(size))
        index = without_unit_dims(out.layout.index(dims), dims, size)
        loads = [e for b in step.buffers for e in ex.loads(b.body)]
        for name in candidates:
            if all(sympy.expand(without_unit_dims(e.args[1], dims, size) - index) == 0
                   for e in loads if e.args[0] == name):
                in_place[out.name] = name
                break
    return in_place


def _choose_reuse(graph, steps, allocated, last_use, sizes, timeline, peak, sources: set, written_over: set) -> dict:
    """New buffer -> the freed buffer whose storage it takes (module text); `written_over`: the
    kernels' outputs placed in place, which allocate nothing."""
    end = len(steps)
    freed_at: dict = {}  # step -> buffers whose last use it is
    for name in sources:
        if last_use.get(name, end) < end:
            freed_at.setdefault(last_use[name], []).append(name)
    pool: dict = {}  # storage class -> [(freed after step, name)]
    reuse = {}
    for j, names in allocated.items():
        for name in names:
            buffer = graph.buffers[name]
            if not reusable_into(buffer) or name in written_over:
                continue
            candidates = pool.get(_storage_class(buffer), [])
            for index in range(len(candidates) - 1, -1, -1):  # the latest freed holds the shortest
                freed, old = candidates[index]
                held = range(freed + 1, j)
                if all(timeline[t] + sizes[old] <= peak for t in held):
                    for t in held:
                        timeline[t] += sizes[old]
                    reuse[name] = old
                    del candidates[index]
                    break
        for old in freed_at.get(j, []):
            pool.setdefault(_storage_class(graph.buffers[old]), []).append((j, old))
    return reuse


def _deletable(graph: GraphIR, name: str) -> bool:
    return not isinstance(graph.buffers[name], HostValueBuffer) and name not in graph.constants
