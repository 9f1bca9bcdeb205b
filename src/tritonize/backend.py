"""The torch.compile entry: Dynamo hands us a torch-level FX graph (graph_passes adjusts it);
AOTAutograd with our decompositions turns it into aten graphs (an inference graph, or a forward
and a backward graph when training), and each aten graph goes through pipeline.compile_graph
(by way of graph_cache.compile_graph_cached, which may find it compiled on disk).

Before all that, dynamo_cache looks Dynamo's graph up: a hit (an inference graph stored by an
earlier process) skips AOTAutograd too and runs the stored graph directly. An inference graph
whose AOTAutograd calling convention is trivial gets the same runner on a miss
(dynamo_cache.CachedInference): it is what torch's AOT precompile needs (a SerializableCallable;
caching/precompiled.py), and under aot_compile any other graph is refused with a CompileError saying why."""
from __future__ import annotations

import contextlib
import itertools
import unittest.mock

import torch
import torch.utils._pytree as pytree
from torch._dynamo.utils import counters
from torch._functorch.aot_autograd import aot_module_simplified
from torch._functorch import config as functorch_config
from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

from .caching import dynamo_cache, graph_cache, precompiled
from .config import Options, make_options
from .cudagraphs.plan import attach_cuda_graphs
from .caching.graph_cache import compile_graph_cached
from .pipeline import compile_graph
from .pool_offsets import save_pool_offsets
from .graph_passes import contiguous_attention_masks
from .lower import conv_layout, freezing
from .lower.decompositions import decomposition_table

_GRAPH_IDS = itertools.count()
# Recorders that every back end fills, besides its own, while a `recording_graphs()` block runs
# (`python -m tritonize.profile script.py`: the graphs a script compiles with backend="tritonize").
_OBSERVERS: list[list] = []


@contextlib.contextmanager
def recording_graphs():
    """A list that collects, while the block runs, what every tritonize back end compiles: "graph"
    for each Dynamo graph and each aten graph's GraphArtifacts (as make_backend's recorder)."""
    recorder: list = []
    _OBSERVERS.append(recorder)
    try:
        yield recorder
    finally:  # by identity: two recorders holding the same graphs are equal lists
        _OBSERVERS[:] = [each for each in _OBSERVERS if each is not recorder]


def _recorders(own: list | None) -> list:
    return ([own] if own is not None else []) + _OBSERVERS


def make_backend(options: Options | None = None, recorder: list | None = None):
    """A Dynamo backend with fixed options. `recorder` (a list) collects each graph's artifacts."""
    options = options or make_options()

    def record(compiled, role: str) -> None:
        compiled.artifacts.role = role
        for each in _recorders(recorder):
            each.append(compiled.artifacts)

    def aten_compiler(role: str, pending: dynamo_cache.PendingEntry | None = None, user_outputs: int | None = None,
                      freezable: tuple | None = None):
        """user_outputs (a forward graph): how many outputs the Dynamo graph had; the forward's
        other outputs are saved for the backward (mark_user_visible_outputs). freezable (option
        freeze): the Dynamo graph's parameter and buffer inputs and its input count."""
        def compile_aten(gm, example_inputs):
            graph_id = next(_GRAPH_IDS)
            if user_outputs is not None:
                mark_user_visible_outputs(gm, user_outputs)
            graph_options, layout_note = conv_layout.decide(options, gm, role)
            frozen = None
            if freezable is not None and role == "inference":
                frozen = freezing.freeze_graph(gm, *freezable, f"graph {graph_id}",
                                               channels_last=graph_options.conv_layout == "channels_last")
                compiled = compile_graph(gm, example_inputs, graph_options, graph_id)  # never cached: its weights
            else:
                compiled = compile_graph_cached(gm, example_inputs, graph_options, graph_id)
            for note in (layout_note, frozen.note if frozen else None, _training_not_frozen(freezable, role)):
                if note and note not in compiled.artifacts.notes:
                    compiled.artifacts.notes.append(note)
            attach_cuda_graphs(compiled, gm, example_inputs, role, options, f"graph {graph_id} ({role})")
            if frozen is not None and frozen.frozen is not None:
                check_frozen_inputs(compiled, frozen.frozen)
            record(compiled, role)
            report_output_strides(compiled)
            if pending is not None:
                pending.offer(compiled, gm, example_inputs)
            return compiled

        return compile_aten

    def compile_backward(gm, example_inputs):
        # A `.backward()` inside a compiled function runs with Dynamo's frame hook still set:
        # Dynamo must not trace our compiler (nor, see CompiledGraph, the code it generates).
        return torch._dynamo.disable(aten_compiler("backward"))(gm, example_inputs)

    def backend(gm: torch.fx.GraphModule, example_inputs):
        for each in _recorders(recorder):
            each.append("graph")
        start_gpu_runtime(example_inputs, compiling=False)  # the driver: kernels load either way
        precompiling = precompiled.under_aot_compile()
        if precompiling:
            precompiled.check_inference_graph(gm, example_inputs)
        with precompiled.plain_aot_autograd(precompiling):
            return compile_dynamo_graph(gm, example_inputs, precompiling)

    def compile_dynamo_graph(gm, example_inputs, precompiling: bool):
        if options.freeze:  # its graphs hold the model's weights: not cached, nor precompiled
            if precompiling:
                raise precompiled.cannot_precompile(gm, "option freeze holds the weights in the graph")
            freezable = (freezing.frozen_candidates(gm, example_inputs), len(example_inputs))
            return trace_and_compile(gm, example_inputs, None, freezable)
        key, hit = dynamo_cache.lookup(gm, example_inputs, options)
        if hit is not None:
            # the size key reads which sizes are symbolic: Dynamo's traced inputs, not this call's
            traced = dynamo_cache.traced_inputs(gm, example_inputs)
            attach_cuda_graphs(hit.compiled, None, traced, "inference", options, "a cached graph", dynamo_gm=gm)
            record(hit.compiled, "inference")
            return hit
        pending = dynamo_cache.PendingEntry(key, gm, example_inputs, options)
        compiled_fn = trace_and_compile(gm, example_inputs, pending, None)
        compiled, problem = pending.finish()
        problem = problem or graph_cache.unstorable_reason(compiled)
        if problem is None:  # the runner a warm process gets; torch's aot_compile can save it
            return dynamo_cache.CachedInference(compiled, pending.disable_autocast,
                                                dynamo_cache.gpu_identity(example_inputs), pending.dynamic_dims)
        if precompiling:
            raise precompiled.cannot_precompile(gm, problem)
        return compiled_fn

    def trace_and_compile(gm, example_inputs, pending, freezable):
        """AOTAutograd's trace of the Dynamo graph, our compilers for the graphs it makes."""
        start_gpu_runtime(example_inputs, compiling=True)
        contiguous_attention_masks(gm)
        # Dynamo's DDPOptimizer (DistributedDataParallel's graph splitting) reads this counter to
        # know AOTAutograd compiled a bucket's submodule; it then makes the fake first call that
        # AOTAutograd's wrapper answers with fake outputs. Not counted, the first real call got them.
        counters["aot_autograd"]["total"] += 1
        user_outputs = len(pytree.tree_leaves(gm.graph.output_node().args))
        return aot_module_simplified(
            gm, example_inputs,
            fw_compiler=aten_compiler("forward", user_outputs=user_outputs, freezable=freezable),
            bw_compiler=compile_backward,
            inference_compiler=aten_compiler("inference", pending, freezable=freezable),
            partition_fn=partition_function(options),
            decompositions=decomposition_table(options.fallback_random),
            keep_inference_input_mutations=False,
        )

    return backend


def _training_not_frozen(freezable, role: str) -> str | None:
    if freezable is not None and role == "forward":
        return "freeze: a training graph is not frozen (its weights change at every step)"
    return None


def check_frozen_inputs(compiled, frozen: freezing.FrozenInputs) -> None:
    """Each call of a frozen graph first checks that its frozen inputs are unchanged."""
    run, check = compiled.call, frozen.check

    def call(args):
        check(args)
        return run(args)
    compiled.call = call
    compiled.frozen = frozen


def mark_user_visible_outputs(gm: torch.fx.GraphModule, user_outputs: int) -> None:
    """Record on a forward graph's output node which outputs the caller sees (the Dynamo graph's
    outputs, after the mutated inputs AOTAutograd returns first), as the meta key
    "user_visible_output_idxs" (Inductor's name for it). The others are saved for the backward:
    their layout is ours to choose (lower/graph.py), and report_output_strides tells AOTAutograd."""
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None)
    start = metadata.num_mutated_inp_runtime_indices if metadata is not None else 0
    outputs = pytree.tree_leaves(gm.graph.output_node().args)
    gm.graph.output_node().meta["user_visible_output_idxs"] = list(range(start, min(start + user_outputs, len(outputs))))


def partition_function(options: Options):
    """How AOTAutograd splits a training graph into forward and backward (options.partitioner).
    The min-cut partitioner chooses what to save by the ops a fusing compiler recomputes cheaply
    (its "inductor" op set: pointwise and views; never random ops nor matmuls), which are ours."""
    if options.partitioner == "min_cut":
        return _min_cut_random_safe
    return default_partition


def _min_cut_random_safe(joint_module, joint_inputs, **kwargs):
    """The min-cut partition, its common-subexpression pass kept away from random ops. That pass
    merges equal calls except those of its own list of random ops, which lacks randn_like,
    uniform, exponential and others: `randn_like(x) - randn_like(x)` gave 0 in training (a review
    of the eighteenth session). The list is widened, for this call, by every op of the graph that
    torch tags as drawing random numbers and every custom or higher-order op (_kept_apart_by_cse);
    the pass still merges the rest (each layer's copy of one attention mask, saved once instead of
    once a layer). A max pool's indices are then saved as int8 offsets (pool_offsets.py)."""
    from torch._functorch import compile_utils

    _recompute_host_scalars(joint_module.graph)
    if not hasattr(compile_utils, "rand_ops"):  # a torch whose pass we cannot widen: no pass
        with functorch_config.patch(cse=False):
            forward, backward = min_cut_rematerialization_partition(joint_module, joint_inputs, compiler="inductor",
                                                                     **kwargs)
    else:
        widened = list(compile_utils.rand_ops)
        widened += [op for op in _kept_apart_by_cse(joint_module.graph) if op not in widened]
        with unittest.mock.patch.object(compile_utils, "rand_ops", widened):
            forward, backward = min_cut_rematerialization_partition(joint_module, joint_inputs, compiler="inductor",
                                                                     **kwargs)
    save_pool_offsets(forward, backward, kwargs["num_fwd_outputs"])
    return forward, backward


def _recompute_host_scalars(graph: torch.fx.Graph) -> None:
    """In a graph on a GPU, values computed as 0-d CPU tensors (arithmetic on the float
    attributes Dynamo passes as CPU tensors with dynamic=True, such as a rotary embedding's
    scaling cast to the model's dtype) are recomputed in the backward, never saved: our kernels
    take such values as numbers inside the GPU kernels that read them, and cannot store one
    into a CPU tensor for the backward. The CPU input it comes from is saved instead."""
    from torch.utils.checkpoint import CheckpointPolicy

    values = [node.meta.get("val") for node in graph.nodes]
    if not any(isinstance(v, torch.Tensor) and v.device.type == "cuda" for v in values):
        return
    for node, value in zip(graph.nodes, values):
        if node.op == "call_function" and isinstance(value, torch.Tensor) and value.dim() == 0 \
                and value.device.type == "cpu":
            node.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE


def _kept_apart_by_cse(graph: torch.fx.Graph) -> list:
    """What the CSE pass must leave apart, as it compares call targets: the op packets of the
    graph's calls that draw random numbers (torch's nondeterministic_seeded tag), and every call
    of an op outside aten and prims (a custom op may draw random numbers or have effects without
    saying so) or of a higher-order op."""
    packets = []
    for node in graph.nodes:
        target = node.target
        if node.op != "call_function":
            continue
        if isinstance(target, torch._ops.OpOverload):
            apart = torch.Tag.nondeterministic_seeded in target.tags or target.namespace not in ("aten", "prims")
            key = target.overloadpacket
        else:
            apart, key = isinstance(target, torch._ops.HigherOrderOperator), target
        if apart and key not in packets:
            packets.append(key)
    return packets


def start_gpu_runtime(example_inputs, compiling: bool) -> None:
    """For a graph with CUDA inputs, start the GPU runtime's set-up on a background thread now,
    while the graph is traced and lowered (runtime/launcher.py, CudaEnvironment); `compiling`:
    the compile pool too (not for a graph the Dynamo-level cache had)."""
    devices = {x.device.index or 0 for x in example_inputs
               if isinstance(x, torch.Tensor) and x.device.type == "cuda"}
    if devices:
        from .runtime.launcher import CudaEnvironment

        CudaEnvironment.start_in_background(min(devices), compiling)


def report_output_strides(compiled) -> None:
    """Tell AOTAutograd the strides our forward graph's outputs really have (a non-dense output,
    such as an expanded tensor, is returned dense): it compiles the backward graph for the saved
    tensors it will actually get."""
    context = torch._guards.TracingContext.try_get()
    if context is None or context.output_strides is None or compiled.output_strides is None:
        return
    context.output_strides.extend(compiled.output_strides)


def tritonize_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The backend registered as "tritonize" (options from the environment and config.patch,
    torch.compile's `options`, and its `mode`, which torch hands a custom back end as a keyword)."""
    mode = {"mode": kwargs["mode"]} if kwargs.get("mode") else {}
    options = make_options(kwargs.get("options"), **mode)
    return make_backend(options)(gm, example_inputs)
