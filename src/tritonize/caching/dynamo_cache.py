"""The Dynamo-level cache: a warm process skips AOTAutograd for inference graphs as well.

The graph cache (graph_cache.py) is keyed by the aten graph, which only AOTAutograd's trace
produces (about half of a warm first call). This cache sits one level up, in the backend: its key
is the graph Dynamo hands us, and its entry names the aten graph's graph-cache entry, so a hit goes
from Dynamo's graph straight to our compiled wrapper.

The key (`dynamo_key`) covers what decides AOTAutograd's output:
* the graph as text: each node's op, name, target by qualified name, args and kwargs (constants by
  type and value); source locations are not part of it. Targets must be aten/prims operators,
  torch's own functions, builtins, or tensor methods; anything else (call_module, higher-order
  operators such as user Triton kernels, user functions, custom operators) is not cached, nor is
  a graph with parameters or buffers of its own (AOTAutograd would add them as inputs);
* the bytes of the tensors it reads with get_attr;
* each example input's size, stride, storage offset, dtype, device, requires_grad, whether it is
  an nn.Parameter and whether it is an inference tensor (plain values by type and value); for a
  symbolic graph, the inputs as Dynamo traced them (`traced_inputs`: sizes as expressions) and
  the symbols' ranges. A hit reinstalls the graph's size guards (caching/graph_cache.py) and
  the guards AOTAutograd's trace added (an int input specialized: Eq(k, 1) for `x[:, -k:]` traced
  at k=1), which the key, made before the trace, cannot include: the entry stores them, and a
  hit where one is false is a miss;
* global state AOTAutograd reads: grad mode, inference mode, autocast per device type, default
  dtype, matmul precisions, deterministic algorithms, SDPA back ends, the functorch config, and
  the GPU's name and capability for CUDA inputs;
* the backend's options and the torch, triton, Python and tritonize versions.

Only inference graphs whose calling convention AOTAutograd leaves trivial are stored
(`trivial_convention`): the compiled aten graph takes exactly Dynamo's inputs, in order, and its
outputs are Dynamo's outputs. Read from AOTAutograd's metadata for the graph being compiled: no
input mutations (data or metadata), every output "non_alias" (AOTAutograd's runtime wrapper
regenerates none of them: no alias of an input, no view it rebuilds from an intermediate base; in
an inference graph a view of another output is returned as the compiled graph returns it, and is
non_alias), no tensor subclasses, no effect tokens, no functionalized RNG state, no grad-mode
change, no output that requires grad, and the same inputs and outputs in number and layout (no
lifted or deduplicated inputs, no synthetic bases). Anything not proven so is not stored.

A hit (`CachedInference`) runs the graph as AOTAutograd's runtime wrapper runs an inference graph:
boxed arguments, grad mode off, autocast off when it was on at trace time (the trace applied it),
outputs as a list. The backend returns the same runner on a miss for a graph with a trivial
convention (`PendingEntry.finish` says whether it has one, keyed or not), so a cold and a warm
process run a graph alike, and torch's AOT precompile can save it (a SerializableCallable whose
bytes precompiled.py defines). Entries go through runtime/disk_cache.py like every other entry (checksummed,
written atomically; a damaged entry is a miss and is rewritten); TRITONIZE_CACHE=0 or a debug
directory turn this cache off with the graph cache, TRITONIZE_DYNAMO_CACHE=0 this cache alone.
"""
from __future__ import annotations

import collections
import json
import logging
import os
import re
import sys

import torch

from . import graph_cache
from ..config import code_options
from ..pipeline import CompiledGraph
from ..runtime import disk_cache
from ..runtime.cuda_graph_buckets import PaddingPlan

try:
    from torch._dynamo.aot_compile_types import SerializableCallable
except ImportError:  # a torch without AOT precompile: nothing asks for it
    SerializableCallable = object

log = logging.getLogger("tritonize.cache")

# Hits, misses, stores, unkeyable graphs and graphs not stored, in this process.
STATS: collections.Counter = collections.Counter()

FORMAT = "dynamo-v1"
AUTOCAST_DEVICES = ("cpu", "cuda")


class NotCacheable(Exception):
    """The graph (or its inputs) has something the key cannot describe."""


def cache_dir(options):
    """The entries' directory, or None when caching is off, a debug directory is set, or
    TRITONIZE_DYNAMO_CACHE=0 turns this cache alone off (the graph cache stays on)."""
    if options.debug_dir is not None or not enabled():
        return None
    return disk_cache.entry_dir("dynamo")


def enabled() -> bool:
    return os.environ.get("TRITONIZE_DYNAMO_CACHE", "1").strip().lower() not in ("0", "false", "off", "no")


# ----------------------------------------------------------------------------- keys


def dynamo_key(gm: torch.fx.GraphModule, example_inputs, options) -> str | None:
    """The key of Dynamo's graph with these inputs, or None (logged at debug) if it has none."""
    try:
        if any(True for _ in gm.named_parameters()) or any(True for _ in gm.named_buffers()):
            raise NotCacheable("the graph module has parameters or buffers of its own")
        text = graph_text(gm)
        traced = traced_inputs(gm, example_inputs)
        inputs = [input_key(x) for x in traced] + [graph_cache.symbol_ranges(traced), graph_cache.shape_guards(traced)]
        with graph_cache.real_tensors():
            constants = graph_cache.constants_digest(gm)
        if any(len(c) == 2 for c in constants):
            raise NotCacheable("get_attr of something other than a tensor")
        state = global_state(example_inputs)
    except NotCacheable as err:
        log.debug("tritonize cache: Dynamo graph not keyed: %s", err)
        return None
    except Exception as err:  # an unusual graph or torch: compile it, do not cache it
        log.debug("tritonize cache: Dynamo graph not keyed: %s: %s", type(err).__name__, err)
        return None
    return disk_cache.stable_hash(FORMAT, text, inputs, constants, state, code_options(options),
                                  graph_cache.versions())


def traced_inputs(gm: torch.fx.GraphModule, example_inputs) -> list:
    """The inputs as Dynamo traced them: where a placeholder's traced value has symbolic sizes,
    that fake tensor (Dynamo hands the backend real tensors of this call's sizes)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return list(example_inputs)
    found = []
    for node, value in zip(placeholders, example_inputs):
        traced = node.meta.get("example_value")
        symbolic = isinstance(traced, torch.Tensor) and isinstance(value, torch.Tensor) and any(
            isinstance(s, torch.SymInt) for s in (*traced.shape, *traced.stride(), traced.storage_offset()))
        found.append(traced if symbolic else value)
    return found


def graph_text(gm: torch.fx.GraphModule) -> str:
    """One line per node: name, op, target and arguments, no source locations."""
    lines = []
    for node in gm.graph.nodes:
        target = _target_name(node)
        args = _value_text(node.args)
        kwargs = _value_text(node.kwargs)
        lines.append(f"{node.name} = {node.op} {target} {args} {kwargs}")
    return "\n".join(lines)


def _target_name(node: torch.fx.Node) -> str:
    target = node.target
    if node.op in ("placeholder", "output", "get_attr"):
        return str(target)
    if node.op == "call_method":
        if type(target) is not str:
            raise NotCacheable(f"method {target!r} is not named by a string")
        return target
    if node.op != "call_function":
        raise NotCacheable(f"{node.op} node {node.name}")
    return function_name(target)


def function_name(target) -> str:
    """A qualified name for a function we trust the torch version to pin down, else NotCacheable."""
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        namespace = getattr(target, "namespace", None) or str(target).split(".")[0]
        if namespace not in ("aten", "prims"):
            raise NotCacheable(f"operator {target} is not an aten or prims operator")
        return f"torch.ops.{target}"
    if isinstance(target, torch._ops.HigherOrderOperator):
        raise NotCacheable(f"higher-order operator {target}")
    kind = type(target).__name__
    if kind in ("method_descriptor", "wrapper_descriptor"):
        owner = getattr(target, "__objclass__", None)
        if owner is None or not _is_torch_module(owner.__module__):
            raise NotCacheable(f"method {target!r} of a class outside torch")
        return f"{owner.__module__}.{owner.__qualname__}.{target.__name__}"
    module = getattr(target, "__module__", None)
    qualname = _public_name(target, module) or getattr(target, "__qualname__", None)
    trusted = kind == "builtin_function_or_method" and module in ("_operator", "operator", "math", "builtins")
    if not (trusted or (module and _is_torch_module(module))) or not qualname or "<" in qualname:
        raise NotCacheable(f"function {target!r} from {module}")
    if kind not in ("builtin_function_or_method", "function"):
        raise NotCacheable(f"callable of type {kind}: {target!r}")
    return f"{module}.{qualname}"


def _public_name(target, module: str | None) -> str | None:
    """The name a function made by a factory is published under in its module (F.max_pool2d is
    torch's `boolean_dispatch.<locals>.fn`), when the module really holds it under that name."""
    name = getattr(target, "__name__", None)
    holder = sys.modules.get(module) if module else None
    if name and holder is not None and getattr(holder, name, None) is target:
        return name
    return None


def _is_torch_module(module: str) -> bool:
    return module == "torch" or module.startswith("torch.")


PLAIN_TYPES = (bool, int, float, complex, str, type(None), type(Ellipsis))
TORCH_ENUMS = (torch.dtype, torch.device, torch.layout, torch.memory_format)


def _value_text(value) -> str:
    if isinstance(value, torch.fx.Node):
        return f"%{value.name}"
    if type(value) in PLAIN_TYPES:
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, TORCH_ENUMS):
        return f"{type(value).__name__}:{value}"
    if isinstance(value, slice):
        return f"slice({_value_text(value.start)}, {_value_text(value.stop)}, {_value_text(value.step)})"
    if isinstance(value, (tuple, list)):  # torch.Size and fx's immutable_list included
        return f"{type(value).__name__}[{', '.join(_value_text(v) for v in value)}]"
    if isinstance(value, dict):
        items = sorted((str(k), _value_text(v)) for k, v in value.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    raise NotCacheable(f"argument of type {type(value).__name__}")


def input_key(value) -> list:
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, torch.nn.Parameter) and not _is_fake(value):
            raise NotCacheable(f"input of type {type(value).__name__}")
        if value.layout != torch.strided or value.is_quantized or value.is_conj() or value.is_neg():
            raise NotCacheable("an input that is not a plain strided tensor")
        sizes = graph_cache.sizes_key  # ints as they are, symbolic sizes as their expressions' text
        return ["tensor", sizes(value.shape), sizes(value.stride()), sizes([value.storage_offset()]),
                str(value.dtype), str(value.device), value.requires_grad, isinstance(value, torch.nn.Parameter),
                value.is_inference()]
    if isinstance(value, torch.SymInt):
        return ["symint", str(value.node.expr)]
    if type(value) in (bool, int, float, str, type(None)):
        return [type(value).__name__, value]
    raise NotCacheable(f"input of type {type(value).__name__}")


def _is_fake(value) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return type(value) is FakeTensor


def global_state(example_inputs) -> dict:
    """What AOTAutograd's trace reads besides the graph and its inputs."""
    state = {
        "grad": torch.is_grad_enabled(),
        "inference_mode": torch.is_inference_mode_enabled(),
        "autocast": [[d, torch.is_autocast_enabled(d), str(torch.get_autocast_dtype(d))] for d in AUTOCAST_DEVICES],
        "autocast_any": torch._C._is_any_autocast_enabled(),
        "autocast_cache": torch.is_autocast_cache_enabled(),
        "default_dtype": str(torch.get_default_dtype()),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic": [torch.are_deterministic_algorithms_enabled(),
                          torch.is_deterministic_algorithms_warn_only_enabled()],
        "backends": _backend_flags(),
        "functorch": _functorch_config(),
    }
    gpus = gpu_identity(example_inputs)
    if gpus:
        state["gpus"] = gpus
    return state


def gpu_identity(example_inputs) -> list:
    """[device, name, capability] of each GPU the inputs are on (the generated code is for it)."""
    devices = sorted({str(x.device) for x in example_inputs if isinstance(x, torch.Tensor) and x.is_cuda})
    return [[d, torch.cuda.get_device_name(d), list(torch.cuda.get_device_capability(d))] for d in devices]


def _backend_flags() -> list:
    cuda = torch.backends.cuda
    return [cuda.matmul.allow_tf32, cuda.matmul.allow_bf16_reduced_precision_reduction,
            cuda.matmul.allow_fp16_reduced_precision_reduction, torch.backends.cudnn.allow_tf32,
            torch.backends.cudnn.enabled, cuda.flash_sdp_enabled(), cuda.mem_efficient_sdp_enabled(),
            cuda.math_sdp_enabled(), getattr(cuda, "cudnn_sdp_enabled", lambda: None)()]


def _functorch_config() -> str:
    import torch._functorch.config as functorch_config

    try:
        return json.dumps(functorch_config.save_config_portable(), sort_keys=True, default=repr)
    except Exception as err:  # an unusual value: do not guess
        raise NotCacheable(f"functorch config: {err}") from err


# ----------------------------------------------------------------------------- the triviality rule


def trivial_convention(aten_gm: torch.fx.GraphModule, aten_inputs, dynamo_inputs, dynamo_outputs: int) -> str | None:
    """None when the inference graph being compiled takes Dynamo's inputs as they are and returns
    Dynamo's outputs as they are; else why not. Reads AOTAutograd's metadata for this graph."""
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None) if context is not None else None
    if meta is None:
        return "no AOTAutograd metadata"
    if getattr(context, "fakify_first_call", False):
        return "the first call's outputs are fakified"
    try:
        return _convention_problem(meta, aten_gm, aten_inputs, dynamo_inputs, dynamo_outputs)
    except Exception as err:  # another torch's metadata, an odd graph: do not guess
        return f"metadata not understood ({type(err).__name__}: {err})"


def _convention_problem(meta, aten_gm, aten_inputs, dynamo_inputs, dynamo_outputs) -> str | None:
    placeholders = [n for n in aten_gm.graph.nodes if n.op == "placeholder"]
    if not (len(meta.input_info) == len(aten_inputs) == len(dynamo_inputs) == len(placeholders)):
        return "AOTAutograd changed the number of inputs (lifted, deduplicated or synthetic-base inputs)"
    if any(not _same_input(a, d) for a, d in zip(aten_inputs, dynamo_inputs)):
        return "AOTAutograd's inputs differ from Dynamo's"
    for info in meta.input_info:
        if info.mutates_data or info.mutates_metadata or getattr(info, "mutates_storage_metadata", False) \
                or getattr(info, "mutation_inductor_storage_resize", False):
            return "an input is mutated"
    if meta.num_mutated_inp_runtime_indices:
        return "an input is mutated"
    outputs = _graph_outputs(aten_gm)
    if not (len(meta.output_info) == len(outputs) == dynamo_outputs):
        return "AOTAutograd changed the number of outputs"
    for info in meta.output_info:
        if info.output_type.name != "non_alias":
            return f"an output is {info.output_type.name}"
        if info.requires_grad:
            return "an output requires grad"
    checks = {
        "intermediate bases": meta.num_intermediate_bases,
        "aliased outputs": meta.num_outputs_aliased,
        "effect tokens": len(meta.tokens),
        "functionalized RNG": meta.is_rng_op_functionalized or meta.num_outputs_rng_offset,
        "RNG states": getattr(meta, "num_graphsafe_rng_states", 0),
        "a grad-mode change": meta.grad_enabled_mutation is not None,
        "tangents (a training graph)": len(meta.traced_tangents),
        "tensor subclasses": not (_identity(meta.subclass_inp_meta) and _identity(meta.subclass_fw_graph_out_meta)),
        "async collective inputs": getattr(meta, "act_input_indices", None),
    }
    for what, present in checks.items():
        if present:
            return f"the graph has {what}"
    return None


def _graph_outputs(gm: torch.fx.GraphModule) -> list:
    (output,) = [n for n in gm.graph.nodes if n.op == "output"]
    values = output.args[0]
    return list(values) if isinstance(values, (tuple, list)) else [values]


def _same_input(aten_value, dynamo_value) -> bool:
    """Compared without guarding: a symbolic size is the same as another with the same
    expression (comparing it with a real one would add a guard and specialize the graph)."""
    if isinstance(dynamo_value, torch.Tensor) != isinstance(aten_value, torch.Tensor):
        return False
    if not isinstance(dynamo_value, torch.Tensor):
        if isinstance(aten_value, torch.SymInt) and isinstance(dynamo_value, torch.SymInt):
            return aten_value.node.expr == dynamo_value.node.expr
        if isinstance(aten_value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return False
        return type(aten_value) is type(dynamo_value) and aten_value == dynamo_value
    sizes = graph_cache.sizes_key  # symbolic sizes compared as expressions, which adds no guard
    return (sizes(aten_value.shape) == sizes(dynamo_value.shape)
            and sizes(aten_value.stride()) == sizes(dynamo_value.stride())
            and aten_value.dtype == dynamo_value.dtype and aten_value.device == dynamo_value.device)


def _identity(entries) -> bool:
    """Plain tensors only: entry i is index i (an int, or PlainTensorMeta in newer torch)."""
    for i, entry in enumerate(entries):
        index = entry if type(entry) is int else getattr(entry, "unwrapped_idx", None)
        if type(entry) is not int and type(entry).__name__ != "PlainTensorMeta":
            return False
        if index != i:
            return False
    return True


# ----------------------------------------------------------------------------- entries


class CachedInference(SerializableCallable):
    """What Dynamo gets for an inference graph with a trivial convention (a hit, or a miss that
    AOTAutograd just compiled): calls the graph as AOTAutograd runs an inference graph.

    It is also torch's SerializableCallable, which AOT precompile (torch._dynamo.aot_compile)
    requires: `gpus` ([device, name, capability] per GPU of its inputs) goes into the artifact,
    whose format is precompiled.py's. Being one costs the call path nothing."""

    def __init__(self, compiled: CompiledGraph, disable_autocast: bool, gpus: list | None = None,
                 dynamic_dims: list | None = None):
        self.compiled = compiled
        self.disable_autocast = disable_autocast
        self.gpus = gpus or []
        # symbolic sizes: per output, the dims Dynamo is told stay dynamic (or None), as
        # AOTAutograd's runtime wrapper marks them for the graphs that take them next
        self.dynamic_dims = dynamic_dims if dynamic_dims and any(dynamic_dims) else None
        self._mark_dynamic = _dynamic_marker() if self.dynamic_dims is not None else None

    @classmethod
    def serialize_compile_artifacts(cls, fn: "CachedInference") -> bytes:
        from . import precompiled

        return precompiled.dump_inference(fn)

    @classmethod
    def deserialize_compile_artifacts(cls, data: bytes) -> "CachedInference":
        from . import precompiled

        return precompiled.load_inference(data)

    @property
    def artifacts(self):
        return self.compiled.artifacts

    def __call__(self, *args):
        boxed = list(args)
        del args
        grad_enabled = torch.is_grad_enabled()
        try:
            if grad_enabled:
                torch._C._set_grad_enabled(False)
            if self.disable_autocast:
                with torch._C._DisableAutocast():
                    outputs = self.compiled(boxed)
            else:
                outputs = self.compiled(boxed)
        finally:
            if grad_enabled:
                torch._C._set_grad_enabled(True)
        outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
        if self.dynamic_dims is not None:
            for tensor, dims in zip(outputs, self.dynamic_dims):
                if dims:
                    self._mark_dynamic(tensor, set(dims))
        return outputs


def _dynamic_marker():
    """AOTAutograd's marking of an output's dynamic dims for the graphs that take it next.

    Newer torch has a helper that sets an unguarded attribute; older torch (2.11 and before) sets
    the weak dynamic indices itself, which `_mark_weak_dynamic_indices` does as it did."""
    from torch._functorch._aot_autograd import runtime_wrappers

    return getattr(runtime_wrappers, "mark_dynamo_propagated_dynamic_indices", _mark_weak_dynamic_indices)


def _mark_weak_dynamic_indices(tensor: torch.Tensor, dims: set) -> None:
    """Older AOTAutograd's marking: the next graph's Dynamo treats these dims as dynamic."""
    if hasattr(tensor, "_dynamo_weak_dynamic_indices"):
        tensor._dynamo_weak_dynamic_indices |= dims
    else:
        tensor._dynamo_weak_dynamic_indices = set(dims)


def output_dynamic_dims() -> list | None:
    """Per output of the graph AOTAutograd is compiling: its dynamic dims (sorted) or None."""
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None) if context is not None else None
    if meta is None:
        return None
    return [sorted(info.dynamic_dims) if info.dynamic_dims else None for info in meta.output_info]


def lookup(gm: torch.fx.GraphModule, example_inputs, options) -> tuple[str | None, CachedInference | None]:
    """(key, hit): key None when this graph is not cached, hit None on a miss."""
    key = dynamo_key(gm, example_inputs, options) if cache_dir(options) is not None else None
    if key is None:
        STATS["uncached"] += 1
        return None, None
    hit = load(key, options, gpu_identity(example_inputs), traced_inputs(gm, example_inputs))
    STATS["hit" if hit is not None else "miss"] += 1
    log.debug("tritonize cache: Dynamo graph is a %s (%s)", "hit" if hit is not None else "miss", key)
    return key, hit


class PendingEntry:
    """Watches AOTAutograd compile Dynamo's graph; then says whether the result is one inference
    graph with a trivial calling convention (what CachedInference runs), and stores the entry
    when the graph has a key and may be stored."""

    def __init__(self, key: str | None, gm: torch.fx.GraphModule, example_inputs, options):
        self.key, self.options = key, options
        self.inputs = traced_inputs(gm, example_inputs)
        # guards the trace adds (AOTAutograd's meta functions specializing an int input: k=1 in
        # x[:, -k:] becomes Eq(s16, 1)); the key, made before the trace, cannot hold them
        self.guards_before = set(graph_cache.shape_guards(self.inputs))
        self.num_outputs = len(_graph_outputs(gm))
        self.disable_autocast = torch._C._is_any_autocast_enabled()  # as AOTAutograd's wrapper decides
        self.offers: list = []
        self.dynamic_dims: list | None = None  # of the offered graph's outputs (symbolic sizes)

    def offer(self, compiled: CompiledGraph, aten_gm: torch.fx.GraphModule, aten_inputs) -> None:
        """Called by the inference compiler, inside AOTAutograd, for the graph it compiled."""
        problem = trivial_convention(aten_gm, aten_inputs, self.inputs, self.num_outputs)
        self.dynamic_dims = output_dynamic_dims()
        self.offers.append((compiled, problem))

    def finish(self) -> tuple[CompiledGraph | None, str | None]:
        """(compiled, None) for one inference graph with a trivial convention, else (compiled or
        None, why not). Stores the entry when there is a key and the graph is in the graph cache."""
        trace_guards = sorted(set(graph_cache.shape_guards(self.inputs)) - self.guards_before)
        self.inputs = []
        compiled = None
        if len(self.offers) != 1:
            problem = "not an inference graph" if not self.offers else "several inference graphs"
        else:
            compiled, problem = self.offers[0]
        if self.key is None:
            return compiled, problem
        not_stored = problem
        if not_stored is None and compiled.cache_key is None:
            not_stored = "its aten graph is not in the graph cache"
        if not_stored is None and store(self.key, self.options, compiled, self.disable_autocast, self.dynamic_dims,
                                        trace_guards):
            STATS["store"] += 1
        else:
            STATS["not_stored"] += 1
            log.debug("tritonize cache: Dynamo graph %s not stored: %s", self.key, not_stored or "the disk refused")
        return compiled, problem


def load(key: str, options, gpus: list | None = None, example_inputs=()) -> CachedInference | None:
    """The hit for this key, or None (a miss: no entry, a damaged one, its graph is gone, or,
    for symbolic sizes, the graph's size guards or choices, or the guards its trace added, fail
    at example_inputs)."""
    directory = cache_dir(options)
    if directory is None:
        return None
    path = directory / f"{key}.entry"
    entry = disk_cache.read_json(path)
    if entry is None:
        return None
    try:
        if entry["format"] != FORMAT:
            raise ValueError(f"format {entry['format']!r}")
        graph_key, disable_autocast = str(entry["graph_key"]), bool(entry["disable_autocast"])
        trace_guards = [str(g) for g in entry.get("trace_guards", [])]
        dynamic_dims = entry.get("dynamic_dims")
        # CUDA graphs' bucket padding (cudagraphs/padding.py): a hit has no aten graph to analyse
        padding = PaddingPlan.from_json(entry["padding"]) if entry.get("padding") is not None else None
        if not re.fullmatch(r"[0-9a-f]{40}", graph_key):
            raise ValueError(f"graph key {graph_key!r}")
    except (KeyError, TypeError, ValueError) as err:
        log.debug("tritonize cache: ignoring Dynamo entry %s: %s", path, err)
        return None
    try:  # the trace's own guards must hold here too (they specialized what it produced)
        graph_cache.reinstall_guards(trace_guards, example_inputs)
    except graph_cache.StaleGuards as err:
        log.debug("tritonize cache: Dynamo entry %s traced under %s, false here", path, err)
        return None
    compiled = graph_cache.load_cached_graph(graph_key, example_inputs)
    if compiled is None:
        log.debug("tritonize cache: Dynamo entry %s names graph %s, which did not load", path, graph_key)
        return None
    compiled.padding = padding
    return CachedInference(compiled, disable_autocast, gpus, dynamic_dims)


def store(key: str, options, compiled: CompiledGraph, disable_autocast: bool, dynamic_dims=None,
          trace_guards=()) -> bool:
    directory = cache_dir(options)
    if directory is None or compiled.cache_key is None:
        return False
    entry = {"format": FORMAT, "graph_key": compiled.cache_key, "disable_autocast": disable_autocast,
             "dynamic_dims": dynamic_dims, "trace_guards": list(trace_guards),
             "padding": compiled.padding.to_json() if compiled.padding is not None else None}
    return disk_cache.write_json(directory / f"{key}.entry", entry)
