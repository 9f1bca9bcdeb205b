"""The compiled-graph cache: a second process skips lowering, scheduling and code generation.

`compile_graph_cached` wraps pipeline.compile_graph. On a miss it compiles and stores the
artifact: the wrapper source (kernels inline), its CONSTANTS, the strides of its outputs (which
the backend reports to AOTAutograd), and the explain() report data (kernels, fallbacks, externs;
the backend sets the graph's role on hits and misses alike). On a hit it imports the stored
wrapper; its kernels then compile through Triton's own binary cache and pick their configs
from the autotune cache, so a warm process does neither code generation, nor Triton
compilation, nor timing.

The key covers everything that can change the generated code:
* the aten graph as text, with every value's dtype, size, stride and device (comment lines,
  which hold source locations, are left out), and the contents of its tensor constants;
* each input's size, stride, dtype and device (plain Python values by type and value);
* the options that reach code generation (config.code_options: mode, fallback, fallback_random, partitioner);
* torch, triton, Python and tritonize versions (tritonize's: a hash of its source files), the
  default dtype, the float32 matmul precision and whether deterministic algorithms are on.
Graphs with symbolic sizes are keyed by the same text (sizes and strides as expressions over the
ShapeEnv's symbols, whose names Dynamo derives from the inputs' sources), each symbol's range,
and each SymInt input's expression. The guards a compile added on sizes (ir/sizes.py: int32
indexing) are stored with the entry; a hit evaluates them at this process's sizes: all true,
they are added to this ShapeEnv (Dynamo installs them as on a compile) and the entry is used;
one false, the code was generated for other sizes and the graph compiles afresh. So does a hit
where a heuristic choice the compile baked in (a split count: `choices`) comes out otherwise at
this process's example: the entry is right anywhere, but fast where its choices hold.
Graphs that cannot be keyed (unknown input types) and graphs run through aten are not cached;
neither is anything while a debug directory is set (so every stage is dumped).
Entries are checksummed and written atomically (runtime/disk_cache.py); a damaged or unloadable
entry is a miss, reported at debug level, and is replaced by the fresh compile.
"""
from __future__ import annotations

import base64
import collections
import hashlib
import json
import logging
import platform

import sympy
import torch

from ..config import code_options
from ..ir.sizes import SizeOracle
from ..pipeline import CompiledGraph, compile_graph, warn_op_fallbacks
from ..report import GraphArtifacts, KernelInfo
from ..runtime import disk_cache
from ..runtime.loader import load_source_module

log = logging.getLogger("tritonize.cache")

# Hits, misses, stores and skipped graphs in this process (read by bench/compile_cache.py).
STATS: collections.Counter = collections.Counter()


def compile_graph_cached(gm: torch.fx.GraphModule, example_inputs, options, graph_id: int) -> CompiledGraph:
    directory = disk_cache.entry_dir("graphs") if options.debug_dir is None else None
    key = graph_key(gm, example_inputs, options) if directory is not None else None
    if key is None:
        STATS["uncached"] += 1
        return compile_graph(gm, example_inputs, options, graph_id)
    path = directory / f"{key}.entry"
    hit = _load(path, example_inputs)
    if hit is not None:
        STATS["hit"] += 1
        log.debug("tritonize cache: graph %d is a hit (%s)", graph_id, key)
        warn_op_fallbacks(hit.artifacts.fallbacks, graph_id)
        hit.cache_key = key
        return hit
    STATS["miss"] += 1
    compiled = compile_graph(gm, example_inputs, options, graph_id)
    if unstorable_reason(compiled) is None:
        payload = serialize_graph(compiled)
        if payload is not None and disk_cache.write_entry(path, payload):
            STATS["store"] += 1
            compiled.cache_key = key
    return compiled


def load_cached_graph(key: str, example_inputs=()) -> CompiledGraph | None:
    """The stored graph with this key (the Dynamo-level cache's hit path), or None. Symbolic
    sizes: its size guards are reinstalled in example_inputs' ShapeEnv (None if one fails)."""
    directory = disk_cache.entry_dir("graphs")
    if directory is None:
        return None
    hit = _load(directory / f"{key}.entry", example_inputs)
    if hit is not None:
        STATS["hit"] += 1
        hit.cache_key = key
    return hit


# ----------------------------------------------------------------------------- keys


def graph_key(gm: torch.fx.GraphModule, example_inputs, options) -> str | None:
    inputs = [_input_key(x) for x in example_inputs]
    if any(k is None for k in inputs):
        return None
    inputs += [symbol_ranges(example_inputs), shape_guards(example_inputs)]
    try:
        text = graph_text(gm)
        with real_tensors():
            constants = constants_digest(gm)
    except Exception as err:  # an unusual graph: compile it, do not cache it
        log.debug("tritonize cache: graph not keyed: %s: %s", type(err).__name__, err)
        return None
    settings = [str(torch.get_default_dtype()), torch.get_float32_matmul_precision(),
                torch.are_deterministic_algorithms_enabled()]  # lower/scatter.py reads it
    return disk_cache.stable_hash("graph-v2", text, inputs, constants, code_options(options),
                                  versions(), settings)


def versions() -> list:
    """torch, triton, Python and tritonize versions: a change to any invalidates the caches."""
    import triton

    return [torch.__version__, triton.__version__, platform.python_version(), disk_cache.tritonize_version()]


def graph_text(gm: torch.fx.GraphModule) -> str:
    """The graph's code with each value's dtype, size, stride and device, no comment lines."""
    text = gm.print_readable(print_output=False, include_stride=True, include_device=True)
    user_visible = gm.graph.output_node().meta.get("user_visible_output_idxs")  # a forward's (backend.py)
    return "\n".join([line for line in text.splitlines() if not line.lstrip().startswith("#")]
                     + ([f"user-visible outputs {user_visible}"] if user_visible is not None else []))


def _input_key(value):
    if isinstance(value, torch.Tensor):
        negated = ["neg"] if value.is_neg() else []  # the wrapper resolves the bit (InputBuffer)
        return ["tensor", sizes_key(value.shape), sizes_key(value.stride()), sizes_key([value.storage_offset()]),
                str(value.dtype), str(value.device), value.requires_grad] + negated
    if isinstance(value, torch.SymInt):
        return ["symint", str(value.node.expr)]
    if value is None or type(value) in (bool, int, float, str):
        return [type(value).__name__, value]
    return None


def sizes_key(values) -> list:
    """Ints as they are, symbolic sizes as their expression's text. A SymInt whose expression is
    a number (Dynamo passes a dimension it specialized, a 3x3 kernel's, as one) is that int: the
    aten trace of the same input has the plain int there."""
    return [s if type(s) is int else _symbolic_size_key(s.node.expr) for s in values]


def _symbolic_size_key(expr):
    return int(expr) if expr.is_number else str(expr)


def shape_guards(example_inputs) -> list:
    """The guards on symbolic sizes that the ShapeEnv holds (Dynamo's, and ours): two traces with
    the same graph text and ranges may differ there and nowhere else. `a[:a.shape[0] // 2 - 1] * b`
    traced with Eq(s0 // 2 - 1, s1) multiplies row by row; with Eq(s0 // 2 - 1, 1) it broadcasts
    (a review of the nineteenth session: the Dynamo-level cache returned the first for the second)."""
    shape_env = SizeOracle.of(example_inputs).shape_env
    if shape_env is None:
        return []
    return sorted({str(guard.expr) for guard in shape_env.guards})


def symbol_ranges(example_inputs) -> list:
    """[symbol, lower, upper] of every symbol the inputs' sizes use (empty for a static graph)."""
    oracle = SizeOracle.of(example_inputs)
    if oracle.shape_env is None:
        return []
    found = set()
    for value in example_inputs:
        if isinstance(value, torch.SymInt):
            found |= value.node.expr.free_symbols
        elif isinstance(value, torch.Tensor):
            for s in list(value.shape) + list(value.stride()) + [value.storage_offset()]:
                if isinstance(s, torch.SymInt):
                    found |= s.node.expr.free_symbols
    ranges = oracle.shape_env.var_to_range
    return [[s.name, str(ranges[s].lower), str(ranges[s].upper)] for s in sorted(found, key=lambda s: s.name)
            if s in ranges]


def constants_digest(gm: torch.fx.GraphModule) -> list:
    """Each get_attr's target with its tensor's dtype, size, stride and a digest of its bytes."""
    found = []
    for node in gm.graph.nodes:
        if node.op != "get_attr":
            continue
        value = gm
        for part in node.target.split("."):
            value = getattr(value, part)
        if isinstance(value, torch.Tensor):
            data = value.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
            digest = hashlib.sha256(data.numpy().tobytes()).hexdigest()
            found.append([node.target, str(value.dtype), list(value.shape), list(value.stride()), digest])
        else:
            found.append([node.target, type(value).__name__])  # a submodule: its code is in the text
    return found


def real_tensors():
    """Backends run under Dynamo's fake-tensor mode; reading constants needs real tensors."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    return unset_fake_temporarily()


# ----------------------------------------------------------------------------- entries


def unstorable_reason(compiled: CompiledGraph) -> str | None:
    """Why serialize_graph cannot describe this graph completely, or None when it can."""
    if compiled.artifacts.eager_reason is not None:
        return f"it runs through aten ({compiled.artifacts.eager_reason})"
    if not compiled.artifacts.wrapper:
        return "it has no generated wrapper"
    for name, value in compiled.constants.items():
        if type(value) is not torch.Tensor:  # a user kernel's launcher, an odd argument
            return f"its constant {name} is a {type(value).__name__}, which has no stored form"
    return None


def serialize_graph(compiled: CompiledGraph) -> bytes | None:
    """The graph as bytes (JSON: wrapper source with its kernels, constants, report data), or
    None when it has no stored form (unstorable_reason says why, for most graphs)."""
    art = compiled.artifacts
    try:
        with real_tensors():
            constants = {name: _encode_tensor(value) for name, value in compiled.constants.items()}
    except (TypeError, RuntimeError) as err:
        log.debug("tritonize cache: graph not stored: %s", err)
        return None
    entry = {
        "wrapper": art.wrapper,
        "kernels": [[k.name, k.kind, k.source, list(k.fused_nodes)] for k in art.kernels],
        "fallbacks": [list(f) for f in art.fallbacks],
        "externs": list(art.externs),
        "clones": [list(c) for c in art.clones],
        "constants": constants,
        "output_strides": _plain_strides(compiled.output_strides),
        "guards": list(art.guards),
        "choices": list(art.choices),
        "peak_memory": int(art.peak_memory),
        "peak_buffers": [[name, int(nbytes)] for name, nbytes in art.peak_buffers],
        "layout_copies": [int(n) for n in art.layout_copies],
        "costs": [[str(name), str(kind), int(r), int(w), int(f)] for name, kind, r, w, f in art.costs],
        "collectives": [[str(name), int(nbytes)] for name, nbytes in art.collectives],
    }
    return json.dumps(entry).encode()


def _plain_strides(strides):
    if strides is None:
        return None
    return [None if s is None else [int(v) for v in s] for s in strides]


def _encode_tensor(value) -> dict:
    """A tensor as plain data (no pickle): layout, dtype, device and its values' bytes. Anything
    else in CONSTANTS (a user kernel's launcher, an odd argument) has no stored form: the graph is
    then not cached, which also keeps graphs whose user kernels the key cannot see out."""
    if type(value) is not torch.Tensor:
        raise TypeError(f"constant of type {type(value).__name__} is not stored")
    data = value.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
    return {"size": list(value.shape), "stride": list(value.stride()), "dtype": str(value.dtype).split(".")[1],
            "device": str(value.device), "data": base64.b64encode(data.numpy().tobytes()).decode()}


def _decode_tensor(data: dict) -> torch.Tensor:
    dtype = getattr(torch, data["dtype"])
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {data['dtype']}")
    out = torch.empty_strided(data["size"], data["stride"], dtype=dtype, device=data["device"])
    raw = base64.b64decode(data["data"])
    if out.numel():
        values = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(data["size"])
        out.copy_(values)
    return out


def _load(path, example_inputs=()) -> CompiledGraph | None:
    payload = disk_cache.read_entry(path)
    if payload is None:
        return None
    try:
        return load_graph(payload, example_inputs)
    except StaleGuards as err:
        log.debug("tritonize cache: graph entry %s was generated for other sizes: %s", path, err)
        return None
    except Exception as err:  # never crash on a cache entry: recompile instead
        log.debug("tritonize cache: ignoring graph entry %s: %s: %s", path, type(err).__name__, err)
        return None


class StaleGuards(Exception):
    """A stored graph's size guard does not hold at this process's sizes."""


def reinstall_guards(guards: list[str], example_inputs) -> None:
    """Evaluate the stored size guards here; all true: add them to this ShapeEnv, as the compile
    that generated the code did. One false: StaleGuards (the caller compiles afresh)."""
    if not guards:
        return
    oracle = SizeOracle.of(example_inputs)
    if oracle.shape_env is None:
        raise StaleGuards("no ShapeEnv to hold the guards")
    conditions = [parse_condition(text, oracle) for text in guards]
    for text, condition in zip(guards, conditions):
        if not oracle.holds_at_hint(condition):
            raise StaleGuards(text)
    for condition in conditions:
        oracle.install(condition)


def check_choices(choices: list, example_inputs) -> None:
    """StaleGuards unless the entry's heuristic choices (ir/sizes.py, SizeOracle.choose) come
    out the same at this example: the entry is right anywhere, but fast where they hold."""
    if not choices:
        return
    oracle = SizeOracle.of(example_inputs)
    if oracle.shape_env is None or not oracle.same_choices(choices, lambda text: parse_condition(text, oracle)):
        raise StaleGuards(f"heuristic choices made for other sizes: {choices}")


def parse_condition(text: str, oracle: SizeOracle):
    """A guard's text (ir/sizes.py's) over this ShapeEnv's symbols."""
    from ..ir.symbols import FloorDiv, ModularIndexing

    names = {s.name: s for s in oracle.shape_env.var_to_range}
    return sympy.sympify(text, locals=dict(names, FloorDiv=FloorDiv, ModularIndexing=ModularIndexing))


def load_graph(payload: bytes, example_inputs=()) -> CompiledGraph:
    """The graph serialize_graph described, its wrapper imported; raises on a malformed payload
    (StaleGuards when its size guards do not hold for example_inputs)."""
    entry = json.loads(payload)
    guards, choices = list(entry.get("guards", [])), list(entry.get("choices", []))
    check_choices(choices, example_inputs)
    reinstall_guards(guards, example_inputs)
    with real_tensors():
        constants = {name: _decode_tensor(data) for name, data in entry["constants"].items()}
    artifacts = GraphArtifacts(
        [KernelInfo(name, kind, source, list(nodes)) for name, kind, source, nodes in entry["kernels"]],
        [tuple(f) for f in entry["fallbacks"]], list(entry["externs"]), entry["wrapper"],
        clones=[tuple(c) for c in entry["clones"]], guards=guards, choices=choices,
        peak_memory=int(entry.get("peak_memory", 0)), peak_buffers=list(entry.get("peak_buffers", [])),
        layout_copies=list(entry.get("layout_copies", [0, 0])), costs=list(entry.get("costs", [])),
        collectives=list(entry.get("collectives", [])))
    module = load_source_module(entry["wrapper"], "wrapper", interpret=False, shared=not constants)
    module.CONSTANTS.update(constants)
    strides = entry["output_strides"]
    if strides is not None:
        strides = [None if s is None else tuple(s) for s in strides]
    return CompiledGraph(module.call, artifacts, constants, strides)
