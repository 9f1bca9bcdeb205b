"""Compile-time decisions for CUDA graphs (mode="reduce-overhead", issue 18): which inputs a
recording reads in place, which outputs are new values of mutated inputs, what the size key reads,
and whether the graph can be captured at all, and (padding.py) which sizes may be padded to
buckets. runtime/cuda_graphs.py does the rest at call time.

The decisions come from AOTAutograd's metadata (TracingContext.fw_metadata): its static inputs
(parameters and buffers), and its mutated inputs, whose new values the graph returns first. A
backward graph's saved primal inputs are static where the forward's were. A graph from the
Dynamo-level cache has no such metadata; its static inputs are read from Dynamo's graph, by the
rule AOTAutograd follows (`dynamo_static_inputs`).
"""
from __future__ import annotations

import warnings

import torch

from ..errors import Unsupported
from ..ir.sizes import has_symbolic_sizes
from ..pipeline import graph_device as graph_device_kind
from ..runtime.cuda_graph_buckets import Padder
from ..runtime.cuda_graph_pool import pool_for
from ..runtime.cuda_graphs import CapturePlan, GraphRunner
from .padding import padding_plan

CAPTURING_MODES = ("reduce-overhead",)


def attach_cuda_graphs(compiled, gm, example_inputs, role: str, options, name: str, dynamo_gm=None) -> None:
    """Under a capturing mode, route `compiled`'s calls through a GraphRunner (and say what was
    decided in its explain() notes); otherwise leave it alone. dynamo_gm: Dynamo's graph, for a
    Dynamo-level cache hit (no aten graph, no AOTAutograd metadata)."""
    if options.mode not in CAPTURING_MODES:
        return
    notes = compiled.artifacts.notes
    plan = capture_plan(gm, example_inputs, role, options.cudagraph_capture, dynamo_gm)
    if plan.refusal is not None:
        notes.append(f"CUDA graphs: off: {plan.refusal}")
        if plan.refusal == CPU_GRAPH:
            warnings.warn(f"tritonize: {name}: mode={options.mode!r}: a CPU graph has no CUDA graphs, so its "
                          "kernels are launched one by one (as in the default mode)", stacklevel=3)
        return
    device = cuda_device(example_inputs) if options.cudagraph_capture == "cuda" else torch.device("cpu")
    pool = pool_for(options.cudagraph_capture, device)
    notes.append(f"CUDA graphs: recorded at the second call of each size (up to {options.cudagraph_sizes} "
                 f"sizes), {len(plan.static)} static input(s), {len(plan.mutations)} input mutation(s) "
                 "inside the graph")
    compiled.call = GraphRunner(compiled.call, plan, pool, options.cudagraph_capture,
                                options.cudagraph_sizes, notes, name, padder(compiled, gm, example_inputs, role, options))


def padder(compiled, gm, example_inputs, role: str, options) -> Padder | None:
    """The bucket padding of an inference graph with symbolic sizes (None without buckets, or
    when no size may be padded). The plan is kept on `compiled` (the Dynamo-level cache stores
    it: a hit has no aten graph to analyse)."""
    if role == "inference" and gm is not None and has_symbolic_sizes(example_inputs):
        compiled.padding = padding_plan(gm, example_inputs, _aot_metadata())
    plan = getattr(compiled, "padding", None)
    if plan is None or not options.cudagraph_buckets:
        return None
    notes = compiled.artifacts.notes
    notes += [f"CUDA graphs: size {symbol} is not padded: {why}" for symbol, why in plan.refused]
    if not plan.symbols:
        return None
    notes.append(f"CUDA graphs: sizes {', '.join(plan.symbols)} are padded up to the next of the buckets "
                 f"{tuple(options.cudagraph_buckets)}")
    return Padder(plan, options.cudagraph_buckets)


CPU_GRAPH = "a CPU graph (mode='reduce-overhead' has no effect on the CPU)"


def cuda_device(example_inputs) -> torch.device:
    """The GPU of a CUDA graph's inputs (the current one for a graph with no CUDA input)."""
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "cuda":
            return x.device
    return torch.device("cuda", torch.cuda.current_device())


def capture_plan(gm, example_inputs, role: str, capture: str, dynamo_gm=None) -> CapturePlan:
    try:
        on_gpu = graph_device_kind(example_inputs, gm) == "cuda"
    except Unsupported as err:  # inputs on several devices (the graph ran through aten)
        return CapturePlan(refusal=str(err))
    if capture == "cuda" and not on_gpu:
        return CapturePlan(refusal=CPU_GRAPH)
    if gm is not None and any(node.meta.get("unbacked_bindings") for node in gm.graph.nodes):
        return CapturePlan(refusal="data-dependent sizes (the graph reads a size from the GPU)")
    metadata = _aot_metadata()
    static = static_inputs(gm, role, metadata) if metadata is not None or dynamo_gm is None \
        else dynamo_static_inputs(dynamo_gm)
    return CapturePlan(static=frozenset(static),
                       mutations=tuple(mutated_input_outputs(example_inputs, role, metadata)),
                       key=tuple(size_key(example_inputs, on_gpu)), tangents=frozenset(tangent_inputs(gm, role)))


def _aot_metadata():
    context = torch._guards.TracingContext.try_get()
    return getattr(context, "fw_metadata", None) if context is not None else None


def static_inputs(gm, role: str, metadata) -> list[int]:
    """Input positions AOTAutograd marks static (parameters, buffers); for a backward graph, the
    saved primal inputs whose forward input was static."""
    static = list(getattr(metadata, "static_input_indices", None) or [])
    if role != "backward" or gm is None:
        return static
    names = [node.name for node in gm.graph.nodes if node.op == "placeholder"]
    forward_static = set(static)
    return [position for position, name in enumerate(names)
            if name.startswith("primals_") and name[len("primals_"):].isdigit()
            and int(name[len("primals_"):]) - 1 in forward_static]


def tangent_inputs(gm, role: str) -> list[int]:
    """A backward graph's incoming gradients (AOTAutograd's tangents_N placeholders)."""
    if role != "backward" or gm is None:
        return []
    names = [node.name for node in gm.graph.nodes if node.op == "placeholder"]
    return [position for position, name in enumerate(names) if name.startswith("tangents_")]


def dynamo_static_inputs(dynamo_gm) -> list[int]:
    """Placeholders of Dynamo's graph that Dynamo marked static (parameters and buffers of inlined
    modules, tensors given torch._dynamo.mark_static_address): AOTAutograd's static inputs where
    its inputs are Dynamo's, one for one (the only graphs the Dynamo-level cache stores)."""
    placeholders = [node for node in dynamo_gm.graph.nodes if node.op == "placeholder"]
    return [position for position, node in enumerate(placeholders)
            if node.meta.get("tensor_dict", {}).get("_dynamo_static_input_type")]


def mutated_input_outputs(example_inputs, role: str, metadata) -> list[tuple[int, int]]:
    """(output position, input position) for each output that is the new data of an input the
    graph mutates, where writing it into the input inside the graph is what AOTAutograd would do
    after the call (same shape and dtype, data only, no gradient)."""
    if role == "backward" or metadata is None:
        return []
    pairs = []
    indices = list(getattr(metadata, "mutated_inp_runtime_indices", None) or [])
    infos = getattr(metadata, "input_info", [])
    for out_position, in_position in enumerate(indices):
        info = infos[in_position] if in_position < len(infos) else None
        x = example_inputs[in_position] if in_position < len(example_inputs) else None
        if info is None or not isinstance(x, torch.Tensor) or x.requires_grad:
            continue
        if getattr(info, "mutates_data", False) and not getattr(info, "mutates_metadata", True) \
                and not getattr(info, "mutates_storage_metadata", True):
            pairs.append((out_position, in_position))
    return pairs


def size_key(example_inputs, on_gpu: bool) -> list[tuple[int, str]]:
    """What a call's size key reads: size arguments, the shapes of tensors with symbolic sizes,
    and host scalars (0-d CPU tensors, whose value a capture bakes in)."""
    key = []
    for position, x in enumerate(example_inputs):
        if isinstance(x, (int, torch.SymInt)):
            key.append((position, "int"))
        elif isinstance(x, torch.Tensor):
            if on_gpu and x.device.type == "cpu" and x.dim() == 0:
                key.append((position, "host"))
            elif any(not isinstance(d, int) for d in x.shape):
                key.append((position, "shape"))
    return key
