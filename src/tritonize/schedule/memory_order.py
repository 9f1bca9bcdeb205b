"""Steps moved up where that frees a larger input sooner (issue 19; docs/design.md, "Memory plan").

AOTAutograd's partitioner builds a training forward from the joint graph in the joint graph's
order, so a value computed only to be saved for the backward (a bf16 copy of a float32
activation, under autocast) comes after the whole forward: its float32 input stays alive to the
end, next to everything else saved. MobileNetV3's forward held 237 MiB of such inputs at its peak.
Lowering now stores such values where the forward computes them (lower/graph.py,
_stored_where_computed); this pass moves what is still computed late (a kernel reading an aten
call's result, a value in a layout of its own).

After fusion, a kernel whose stored buffers no other step reads (graph outputs only) moves up to
just after the last other reader of the inputs it is the last reader of, when those inputs take
more bytes than its outputs: they are freed there instead of at its old place, and its outputs
live from there, fewer bytes. The kernels stay as fused; only their order changes. The wrapper's
memory plan takes the new order only where its planned peak is lower (codegen/memory_plan.py,
lower_peak_order): a kernel moved up may meet a step where more is live.

A step never moves above one that writes what it reads, nor above a step whose effects are not
known to be confined to fresh buffers: only kernel groups and pure aten calls are passed (not a
scatter, a mutating aten call, a user kernel or a collective).

Also what the memory plan and the wrapper share with this pass: each buffer's last reading step
and the bytes live at each step.
"""
from __future__ import annotations

from ..ir.nodes import GraphIR
from .steps import allocations, is_pure_call, storage_bytes


def last_uses(steps: list, graph: GraphIR, reads_of_step) -> dict[str, int]:
    """Buffer -> the last step reading it (a buffer a graph output views: len(steps)). A kernel
    group's internal buffers (registers only) are never allocated, so never freed.
    reads_of_step: a step -> the buffers it reads."""
    last: dict[str, int] = {}
    for i, step in enumerate(steps):
        for name in reads_of_step(step):
            last[name] = i
    for step in steps:
        for name in getattr(step, "internal", ()):
            last.pop(name, None)
    for out in graph.outputs:
        if out.view is not None:
            last[out.view.buffer_name] = len(steps)
    return last


def live_bytes(steps: list, graph: GraphIR, last_use: dict) -> tuple[list[int], dict[str, int], dict[str, int]]:
    """(bytes live at each step, each allocated buffer's bytes, the step allocating it), every
    buffer freed right after its last use and nothing reused."""
    born = {name: i for i, step in enumerate(steps) for name in allocations(step)}
    sizes = {name: storage_bytes(graph, graph.buffers[name]) for name in born}
    end = len(steps)
    live = [0] * max(end, 1)
    for name, start in born.items():
        for step in range(start, min(last_use.get(name, start), end - 1) + 1):
            live[step] += sizes[name]
    return live, sizes, born


def free_inputs_sooner(steps: list, graph: GraphIR, reads_of_step) -> list:
    """steps with each kernel group that only feeds graph outputs moved up to where the inputs it
    frees die otherwise, when those outweigh its outputs (module docstring). reads_of_step: a
    step -> the buffers it reads."""
    if len(steps) < 3:  # a step moves above at least two: its input's producer and reader stay
        return steps
    order = _Order(steps, graph, reads_of_step)
    for step in [s for s in steps if order.only_feeds_outputs(s)]:
        order.move_up(step)
    return order.steps if order.moved else steps


class _Order:
    """The steps in their current order, with what each reads and allocates, each buffer's
    readers and producer, and the steps nothing may pass (barriers), looked up, not rescanned."""

    def __init__(self, steps: list, graph: GraphIR, reads_of_step):
        self.steps, self.graph, self.moved = list(steps), graph, False
        self.position = {id(s): i for i, s in enumerate(self.steps)}
        self.reads = {id(s): reads_of_step(s) for s in steps}
        self.readers: dict[str, list] = {}
        self.producer: dict[str, object] = {}
        for s in steps:
            for name in self.reads[id(s)]:
                self.readers.setdefault(name, []).append(s)
            for name in allocations(s):
                self.producer[name] = s
        self.barriers = [s for s in steps if _fresh_writes(s) is None]  # never move: positions fixed
        self.viewed = {o.view.buffer_name for o in graph.outputs if o.view is not None}

    def only_feeds_outputs(self, step) -> bool:
        if not hasattr(step, "buffers") or not step.stored:
            return False
        return all(reader is step for b in step.stored for reader in self.readers.get(b.name, ()))

    def move_up(self, step) -> None:
        at = self.position[id(step)]
        place = self._earlier_place(step, at)
        if place is None:
            return
        self.steps.insert(place, self.steps.pop(at))
        for i in range(place, at + 1):
            self.position[id(self.steps[i])] = i
        self.moved = True

    def _earlier_place(self, step, at: int) -> int | None:
        """Just after the last other reader (or producer) of the inputs the step is the last
        reader of, when those take more bytes than its outputs; never above a producer of what it
        reads or a barrier. None: it stays."""
        inputs = self.reads[id(step)] - {b.name for b in step.buffers}
        where = self.position
        floor = max([where[id(b)] + 1 for b in self.barriers if where[id(b)] < at] +
                    [where[id(self.producer[name])] + 1 for name in inputs if name in self.producer], default=0)
        freed = [name for name in inputs if name in self.producer and name not in self.viewed
                 and all(where[id(r)] <= at for r in self.readers[name])]
        if not freed:
            return None
        place = max([floor] + [where[id(r)] + 1 for name in freed for r in self.readers[name] if r is not step])
        freed_bytes = sum(storage_bytes(self.graph, self.graph.buffers[name]) for name in freed)
        stored_bytes = sum(storage_bytes(self.graph, b) for b in step.stored)
        return place if place < at and freed_bytes > stored_bytes else None


def _fresh_writes(step) -> set | None:
    """The buffers a step writes when it writes only buffers it allocates (a kernel group, a pure
    aten call); None for any other step (a barrier)."""
    if hasattr(step, "buffers"):
        return {b.name for b in step.buffers}
    if is_pure_call(step) and step.kind != "collective":
        return {o.buffer.name for o in step.outputs}
    return None
