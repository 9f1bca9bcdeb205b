"""What the scheduling passes ask of a step (a kernel group, an aten call, a scatter, a user
kernel's call): the buffers it reads and allocates, its bytes, whether its place matters only
through its buffers. Steps are told apart by type or by their attributes (a kernel group has
`buffers`): schedule/fusion.py, which defines kernel groups, imports the passes that use these."""
from __future__ import annotations

import torch

from ..ir.nodes import Buffer, ExternCall, GraphIR, writes_no_argument
from ..ir.user_kernel import UserKernelCall


def is_pure_call(step) -> bool:
    """An aten call whose place among the steps matters only through the buffers it reads and
    writes: it writes none of its arguments, draws no random numbers (option fallback_random:
    eager's numbers in the graph's order) and binds no data-dependent sizes."""
    return isinstance(step, ExternCall) and not step.after and writes_no_argument(step.target) \
        and torch.Tag.nondeterministic_seeded not in getattr(step.target, "tags", ())


def allocations(step) -> list[str]:
    """The buffers a step brings into being (its own allocations and aten's results)."""
    if hasattr(step, "buffers"):  # a kernel group
        return [b.name for b in step.stored]
    if isinstance(step, ExternCall):
        return [out.buffer.name for out in step.outputs]
    if isinstance(step, UserKernelCall):
        return [out.buffer.name for out in step.outputs if out.arg_name in step.clones]
    return []  # a scatter writes into its target, allocated before it


def storage_bytes(graph: GraphIR, buffer: Buffer) -> int:
    span = buffer.layout.storage_span()
    hint = int(span) if isinstance(span, int) or getattr(span, "is_number", False) else graph.sizes.hint(span)
    return hint * buffer.layout.dtype.itemsize


def step_reads(step, reads_of) -> set[str]:
    """The buffers a step reads (reads_of: fusion's, an operation's reads)."""
    ops = step.buffers if hasattr(step, "buffers") else [step]  # a kernel group: its operations
    return set().union(*(reads_of(op) for op in ops))
