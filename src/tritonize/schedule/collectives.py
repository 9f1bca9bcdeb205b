"""Where torch.distributed's functional collectives go in the schedule: started early, waited late.

A functional collective is two ops in the aten graph: the collective (`_c10d_functional.all_reduce`,
`all_gather_into_tensor`, `reduce_scatter_tensor`...), which starts the communication and returns
its result tensor at once, and `wait_tensor` on that result, which makes the stream wait for the
communication. Between them the GPU can compute while the network moves data; Dynamo traces them
wherever the program wrote them, usually next to each other. After fusion (schedule/fusion.py):

* each collective moves up, with the steps that compute its input (when they can move too), past
  the steps it does not depend on: the communication starts as soon as its input can exist;
* each wait moves down to just before the first step that reads its result (or the collective's),
  so the stream blocks as late as possible.

A collective never passes another collective (every rank starts them in the graph's order), a
wait never passes another wait, and neither passes a step whose effects are not known to us (a
mutating aten call or collective, a user kernel, a call that binds data-dependent sizes): those
are barriers. A collective may pass a wait it does not depend on, and a wait a collective.
Fusion does not pull a later kernel's work in front of a collective (fusion._can_pass), and
nothing moves a wait earlier.
"""
from __future__ import annotations

from ..ir.nodes import ComputedBuffer, ExternCall, writes_no_argument
from ..ir.scatter import ScatterOp
from .steps import is_pure_call, step_reads

WAIT_OPS = ("wait_tensor",)


def is_wait(step) -> bool:
    return isinstance(step, ExternCall) and step.kind == "collective" and \
        getattr(step.target, "_opname", "") in WAIT_OPS


def is_start(step) -> bool:
    return isinstance(step, ExternCall) and step.kind == "collective" and not is_wait(step)


def order_collectives(steps: list, reads_of) -> list:
    """steps with collectives started early and waited late (reads_of: fusion's, a step's reads)."""
    steps = list(steps)
    for start in [s for s in steps if is_start(s)]:
        _move_up(steps, start, reads_of)
    for wait in [s for s in reversed(steps) if is_wait(s)]:
        _move_down(steps, wait, reads_of)
    return steps


def _move_up(steps: list, start: ExternCall, reads_of) -> None:
    """Moves the block [producers of the collective's input..., the collective] up past every step
    it does not depend on; a step that writes what the block reads joins the block (the block
    then goes on from above it) unless it is a wait or cannot move."""
    if not writes_no_argument(start.target):  # an in-place collective (all_reduce_) stays put
        return
    top, size = steps.index(start), 1
    needed, written = reads_of(start), set()
    while top > 0:
        before = steps[top - 1]
        writes = _writes(before, reads_of)
        if writes is None or is_start(before) or step_reads(before, reads_of) & written:
            break
        if writes & needed:  # a producer of the block's input: it moves with the block
            if is_wait(before):
                break  # a wait never moves earlier
            needed |= step_reads(before, reads_of)
            written |= writes
            top, size = top - 1, size + 1
            continue
        steps[top - 1:top + size] = steps[top:top + size] + [before]
        top -= 1


def _move_down(steps: list, wait: ExternCall, reads_of) -> None:
    i = steps.index(wait)
    touched = reads_of(wait) | {o.buffer.name for o in wait.outputs}  # the result, by either name
    while i + 1 < len(steps):
        after = steps[i + 1]
        if _writes(after, reads_of) is None or step_reads(after, reads_of) & touched or is_wait(after):
            break
        steps[i + 1], steps[i] = wait, after
        i += 1


def _writes(step, reads_of) -> set | None:
    """The buffers a step writes; None when that is not known, or when its place matters for
    itself (a barrier: an aten call that is not `is_pure_call`)."""
    if hasattr(step, "buffers"):  # a kernel group
        return {b.name for b in step.buffers}
    if isinstance(step, ComputedBuffer):
        return {step.name}
    if isinstance(step, ScatterOp):
        return {step.target}
    if is_pure_call(step):
        outputs = {o.buffer.name for o in step.outputs}
        return outputs | reads_of(step) if is_wait(step) else outputs  # a wait completes its input
    return None


def collective_sizes(steps: list, graph) -> list:
    """[op, bytes sent] of each collective started, in schedule order (what explain() lists)."""
    from ..codegen.traffic import extern_cost

    hint = graph.sizes.hint if graph.sizes is not None else int
    return [[str(s.target), extern_cost(s, graph.buffers, hint).bytes_read] for s in steps if is_start(s)]
