"""compile_graph: the whole compiler, stage by stage. Read this first.

    aten FX graph
      -> lower_graph       (lower/)     GraphIR: buffers, lazy values, extern calls, user kernels
      -> reinplace_user_kernels (schedule/) user kernels write in place where nothing needs a copy
      -> schedule          (schedule/)  ordered kernel groups and extern calls, fused
      -> render_kernel     (codegen/)   one @triton.jit kernel per group
      -> render_wrapper    (codegen/)   the Python module that allocates, launches, frees
      -> load_source_module (runtime/)  import it; kernels compile (GPU) or interpret (CPU)

Each stage's output is written to the debug directory when one is set. A graph we cannot compile
as a whole (dynamic shapes, non-tensor inputs, mixed devices) runs through aten and is reported.
"""
from __future__ import annotations

import re
import warnings

import torch

from .codegen.kernel import render_kernel
from .codegen.memory_plan import lower_peak_order
from .codegen.reduction_kernel import render_reduction_kernel
from .codegen.scan_kernel import render_scan_kernel
from .codegen.scatter_kernel import render_scatter_kernel
from .codegen.traffic import step_costs
from .codegen.wrapper import render_wrapper
from .debug import DebugDump
from .errors import CompileError, Unsupported
from .ir.nodes import ExternCall
from .ir.sizes import has_symbolic_sizes
from .ir.scatter import ScatterOp
from .ir.user_kernel import UserKernelCall
from .lower.conv_layout import layout_copies
from .lower.graph import lower_graph
from .report import GraphArtifacts, KernelInfo, user_kernel_info
from .runtime.loader import load_source_module
from .schedule.collectives import collective_sizes
from .schedule.fusion import KernelGroup, schedule
from .schedule.reinplace import reinplace_user_kernels


PEAK_BUFFERS_SHOWN = 5  # the largest buffers live at the planned peak that explain() names


class CompiledGraph:
    """A callable for AOTAutograd (boxed: takes the list of inputs) plus what produced it, and
    the strides of the tensors it returns (None where aten decides them, or for a non-tensor)."""

    _boxed_call = True

    def __init__(self, call, artifacts: GraphArtifacts, constants: dict | None = None,
                 output_strides: list | None = None):
        # in the instance's __dict__ too: AOTAutograd's wrappers (DDPOptimizer's fakified first
        # call) copy it with functools.wraps, which reads only the __dict__
        self._boxed_call = True
        self.call = call
        self.artifacts = artifacts
        self.constants = constants or {}  # the wrapper's CONSTANTS (kept for the graph cache)
        self.output_strides = output_strides
        self.cache_key: str | None = None  # its graph-cache key, once it is stored there (graph_cache)
        self.padding = None  # CUDA graphs: where padding to size buckets is legal (cudagraphs/padding.py)
        self.frozen = None  # option freeze: the inputs frozen into constants, checked at each call (lower/freezing.py)

    @torch._dynamo.disable
    def __call__(self, args):
        # Never traced by Dynamo: a backward run from inside a compiled function would be.
        return self.call(args)


def compile_graph(gm: torch.fx.GraphModule, example_inputs, options, graph_id: int) -> CompiledGraph:
    dump = DebugDump(options.debug_dir, graph_id)
    dump.write("0_aten_graph.py", gm.print_readable(print_output=False))
    try:
        graph = lower_graph(gm, example_inputs, options)
        reinplace_user_kernels(graph)
        dump.write("1_ir.txt", graph.render())
        plan = schedule(graph)
        plan.steps = lower_peak_order(graph, plan.steps)
        dump.write("2_schedule.txt", plan.render())
        kernels, calls = render_kernels(plan, graph, dump)
        device = graph_device(example_inputs, gm)
        check_kernel_devices(calls.values(), graph.buffers, device)
        wrapper, constants, memory = render_wrapper(graph, plan.steps, calls, kernels, device, f"graph {graph_id}",
                                             options.mode)
        dump.write("4_wrapper.py", wrapper)
        # A wrapper with constants gets a module of its own: another graph may have the same
        # source but other constant values.
        module = load_source_module(wrapper, "wrapper", interpret=False, shared=not constants)
    except Unsupported as err:
        reason = f"graph runs through aten: {err}"
        warnings.warn(f"tritonize: graph {graph_id} {reason}", stacklevel=2)
        return eager_graph(gm, reason)
    except Exception as err:
        if has_symbolic_sizes(example_inputs) or _has_unbacked_sizes(gm):  # lowered stage by stage
            return _symbolic_sizes_not_lowered(gm, graph_id, err)
        if isinstance(err, CompileError):
            return _on_failure(gm, options, err)
        # a bug in the compiler: say where, never run wrong code
        return _on_failure(gm, options, CompileError("codegen", f"{type(err).__name__}: {err}"))
    module.CONSTANTS.update(constants)
    user_kernels = [op for op in plan.steps if isinstance(op, UserKernelCall)]
    artifacts = GraphArtifacts(
        [KernelInfo(name, k.kind, k.source, k.origins) for name, k in kernels.items()]
        + [user_kernel_info(op) for op in user_kernels],
        [(str(op.target), op.reason) for op in graph.operations
         if isinstance(op, ExternCall) and op.kind == "fallback"],
        [str(op.target) for op in graph.operations if isinstance(op, ExternCall) and op.kind == "extern"],
        wrapper,
        clones=[(op.kernel_name, arg, reason) for op in user_kernels for arg, reason in op.clones.items()],
        guards=list(graph.sizes.guards) if graph.sizes is not None else [],
        choices=list(graph.sizes.choices) if graph.sizes is not None else [],
        peak_memory=memory.peak, peak_buffers=[list(item) for item in memory.live_at_peak[:PEAK_BUFFERS_SHOWN]],
        layout_copies=layout_copies(graph), costs=_step_costs(plan.steps, calls, graph, graph_id))
    artifacts.collectives = collective_sizes(plan.steps, graph)
    warn_op_fallbacks(artifacts.fallbacks, graph_id)
    output_strides = None if graph.is_symbolic else [  # symbolic: AOTAutograd keeps its own (stage 3)
        tuple(out.view.stride) if out.view is not None else None for out in graph.outputs]
    return CompiledGraph(module.call, artifacts, constants, output_strides)


def _has_unbacked_sizes(gm: torch.fx.GraphModule) -> bool:
    return any(node.meta.get("unbacked_bindings") for node in gm.graph.nodes)


def warn_op_fallbacks(fallbacks, graph_id: int) -> None:
    """Once per graph (compiled, or loaded from the graph cache): the ops that run through aten
    for want of a lowering, and why; explain() lists them too. fallbacks: (op, reason) pairs.
    Externs called on purpose (cuBLAS, attention) are not fallbacks."""
    reasons: dict = {}
    for target, reason in fallbacks:
        if target != "<whole graph>":  # (warned as the graph was compiled)
            reasons.setdefault(target, reason)
    if reasons:
        listed = "; ".join(f"{target} ({reason})" if reason else target for target, reason in reasons.items())
        warnings.warn(f"tritonize: graph {graph_id}: ops run through aten: {listed}", stacklevel=3)


def graph_device(example_inputs, gm: torch.fx.GraphModule | None = None) -> str:
    devices = {t.device.type for t in example_inputs if isinstance(t, torch.Tensor)}
    if len(devices) > 1:  # 0-d CPU tensors mix with any device, as in eager (host scalars)
        devices = {t.device.type for t in example_inputs
                   if isinstance(t, torch.Tensor) and not (t.dim() == 0 and t.device.type == "cpu")}
    if not devices and gm is not None:  # no tensor inputs (torch.rand(...) alone): ask the nodes
        values = [node.meta.get("val") for node in gm.graph.nodes]
        devices = {v.device.type for v in values if isinstance(v, torch.Tensor)}
    if len(devices) > 1:
        raise Unsupported(f"inputs on several devices: {sorted(devices)}")
    return "cpu" if devices == {"cpu"} or not devices else "cuda"


def _step_costs(steps, calls, graph, graph_id: int) -> list:
    """The profile's counts (codegen/traffic.py); a failure there costs the profile its rows for
    this graph, said in a warning, never the compile."""
    try:
        return step_costs(steps, calls, graph)
    except Exception as err:  # noqa: BLE001  (counting is not compiling)
        warnings.warn(f"tritonize: graph {graph_id}: no profile counts ({type(err).__name__}: {err})", stacklevel=2)
        return []


def check_kernel_devices(calls, buffers: dict, device: str) -> None:
    """Every tensor a generated kernel is launched on lives on the graph's device: a CPU tensor
    in a GPU graph (a constant, an aten result) would crash the launch, so the graph runs
    through aten instead, saying which tensor."""
    for kernel, arg_names in calls:
        for name in arg_names:
            buffer = buffers.get(name)
            if getattr(buffer, "host_scalar", False):
                continue  # passed as a number
            where = torch.device(buffer.layout.device).type if buffer is not None else device
            if where != device:
                raise Unsupported(f"kernel {kernel} would be launched on {name}, a {where} tensor, "
                                  f"in a {device} graph")


def render_kernels(plan, graph, dump):
    """Render each kernel group; identical kernels are defined once. Returns (kernels, calls)."""
    kernels: dict = {}
    by_body: dict = {}
    calls: dict = {}
    for step in plan.steps:
        if not isinstance(step, (KernelGroup, ScatterOp)):
            continue
        name = kernel_name(step, len(kernels))
        rendered = _renderer(step)(step, graph.buffers, name, graph.sizes if graph.is_symbolic else None)
        body_key = "\n".join(line for line in rendered.source.replace(name, "KERNEL").splitlines()
                             if not line.strip().startswith("# aten nodes"))
        if body_key not in by_body:
            by_body[body_key] = name
            kernels[name] = rendered
            dump.write(f"3_kernel_{len(kernels) - 1:03d}_{name}.py", rendered.source)
        # Same source means same parameter roles: launch the first definition on our buffers.
        calls[id(step)] = (by_body[body_key], rendered.arg_names)
    return kernels, calls


def _renderer(step):
    if isinstance(step, ScatterOp):
        return render_scatter_kernel
    if step.is_scan:
        return render_scan_kernel
    return render_reduction_kernel if step.is_reduction else render_kernel


def kernel_name(group: KernelGroup | ScatterOp, index: int) -> str:
    ops = []
    for origin in group.origins():
        op = re.sub(r"_\d+$", "", origin)
        if op not in ops:
            ops.append(op)
    if isinstance(group, ScatterOp):
        prefix = "scatter"
    else:
        prefix = "scan" if group.is_scan else ("red" if group.is_reduction else "poi")
    return f"triton_{prefix}_fused_{'_'.join(ops[:4])}_{index}"


def eager_graph(gm: torch.fx.GraphModule, reason: str) -> CompiledGraph:
    def run(args):
        result = gm(*args)
        args.clear()
        return result

    return CompiledGraph(run, GraphArtifacts([], [("<whole graph>", reason)], [], "", reason))


def _symbolic_sizes_not_lowered(gm, graph_id: int, err: Exception) -> CompiledGraph:
    """A dynamic graph that meets a construct not generated for symbolic sizes yet (see
    docs/design.md, "Dynamic shapes", stages) runs through aten, with a warning that says what."""
    first_line = str(err).splitlines()[0] if str(err) else ""
    reason = f"graph runs through aten: symbolic sizes not lowered here yet ({type(err).__name__}: {first_line})"
    warnings.warn(f"tritonize: graph {graph_id} {reason}", stacklevel=2)
    return eager_graph(gm, reason)


def _on_failure(gm, options, error: CompileError) -> CompiledGraph:
    if options.fallback != "eager":
        raise error
    warnings.warn(f"tritonize: running this graph through aten because compiling it failed:\n{error}")
    return eager_graph(gm, str(error).splitlines()[0])
