"""reinplace_user_kernels: decide where user kernels write, in place or into a copy.

Functional graphs say "the kernel writes a copy of its argument and returns it". The copy is
needed only when the argument's old contents are still wanted afterwards. For each argument a
user kernel writes (in execution order), the kernel writes in place when:

* nothing after the kernel reads the buffer's old contents: no later operation and no graph
  output reads the buffer, nor an earlier in-place output that shares its memory (dead
  computed buffers, which the scheduler drops, do not count);
* the buffer is ours to overwrite: computed by a generated kernel, allocated, returned by a
  library call or a copy, or a graph input that the traced program passes to this kernel as it
  is, so that eager writes the caller's tensor too (its new value is copied back into it after
  the call anyway, which then costs nothing); never a graph input reached through a copy or a
  view the lowering folded away (`x.clone()` lowers to a view of x's buffer, but the caller's x
  must keep its contents), never a constant, nor the result of an aten fallback (which may be a
  view of another tensor).

Otherwise the argument is copied first, and the reason is kept for the report.
"""
from __future__ import annotations

from ..ir.nodes import ComputedBuffer, ExternCall, GraphIR, InputBuffer
from ..ir.user_kernel import UserKernelCall
from .fusion import eliminate_dead_buffers, reads_of


def reinplace_user_kernels(graph: GraphIR) -> None:
    operations = eliminate_dead_buffers(graph)
    if not any(isinstance(op, UserKernelCall) for op in operations):
        return
    producers = graph.producer_of()
    outputs = {o.view.buffer_name for o in graph.outputs if o.view is not None}
    shares_memory: dict[str, set[str]] = {}  # root buffer -> names that are in-place views of it
    root_of: dict[str, str] = {}
    for position, op in enumerate(operations):
        if not isinstance(op, UserKernelCall):
            continue
        later_reads = set(outputs)
        for later in operations[position + 1:]:
            later_reads |= reads_of(later)
        for out in op.outputs:
            arg = op.args[out.arg_name]
            root = root_of.get(arg.buffer_name, arg.buffer_name)
            old_names = {root} | shares_memory.get(root, set())
            reason = _owner_problem(graph, producers.get(root), root, op, out.arg_name)
            if reason is None and old_names & later_reads:
                reason = f"{', '.join(sorted(old_names & later_reads))} is read after the kernel"
            if reason is None:
                op.in_place.add(out.arg_name)
                root_of[out.buffer.name] = root
                shares_memory.setdefault(root, set()).add(out.buffer.name)
            else:
                op.clones[out.arg_name] = reason


def _owner_problem(graph: GraphIR, producer, root: str, call: UserKernelCall, arg_name: str):
    """Why the kernel may not overwrite buffer `root`, or None."""
    buffer = graph.buffers[root]
    if isinstance(buffer, InputBuffer):
        if buffer.position < 0:
            return f"{root} is a constant of the graph"
        if arg_name not in call.writes_graph_inputs:
            return f"{root} is a graph input the program does not pass to this kernel as it is"
        return None
    if isinstance(producer, ExternCall) and producer.kind in ("fallback", "collective"):
        return f"{root} comes from the aten call {producer.target} and may share memory"
    if producer is None and not isinstance(buffer, ComputedBuffer):
        return f"{root} has no known producer"
    return None
