"""AOT precompile: save what Dynamo and tritonize made of a function, so that a new process calls
it without Dynamo's bytecode trace (seconds for a large model) and without compiling anything.

    # process 1: trace with Dynamo, compile with tritonize, save
    compiled = tritonize.precompile(model, (x,), "model.tritonize")
    # process 2: load and call; no Dynamo trace, no AOTAutograd, no code generation
    model_fn = tritonize.load_precompiled("model.tritonize", model)
    out = model_fn(x)          # guards checked first: another shape or dtype raises, as torch does

Both are thin layers over torch's own API, which they call as documented in torch 2.11 and 2.13:
`torch.compile(fn, fullgraph=True, backend=...).aot_compile(((args), {kwargs}))` returns an
AOTCompiledFunction (torch 2.11 needs torch._dynamo.config.enable_aot_compile, set here), its
serialized bytes are what `.save_compiled_function(path)` writes (written atomically here), and
`torch.compiler.load_compiled_function(file)` reads them back. The file is torch's; Dynamo's guards,
its transformed bytecode and the check of torch/Python/GPU versions are torch's. A module's
weights are not in the file: its forward is saved with the module as its first argument, and the
loaded function reads the weights of the module it is given (a module built the same way).

What tritonize adds is the backend's part. torch requires the backend to return a
SerializableCallable; ours (dynamo_cache.CachedInference) is what the backend returns for an
inference graph whose AOTAutograd calling convention is trivial (the graphs the Dynamo-level cache
stores), and its serialized form is built here: a framed payload (runtime/disk_cache.py: length
and SHA-256) holding a JSON header line (format tag; torch, triton, Python and tritonize versions;
the GPUs the graph was compiled for; whether autocast is disabled around it) and the graph in
graph_cache's stored form (wrapper source with every kernel inline, constants, report data). The
payload is self-contained: loading it needs no tritonize cache (TRITONIZE_CACHE=0 works). On
load, a damaged payload, another format, other versions or another GPU raise
PrecompiledArtifactError naming the cause, never a graph that could compute something else.

Only inference graphs can be precompiled: under aot_compile (recognized by the AOTAutograd cache
flags torch patches on for it, `under_aot_compile`) the backend refuses a training graph (grad
mode on and inputs that require grad), an input mutation, an output aliasing an input, a graph
run through aten or holding user-kernel launchers, with a CompileError naming the graph, its
source line and why. Those flags would make AOTAutograd bundle an Inductor cache entry, which our
compiled graphs are not: the backend turns them off for its own AOTAutograd call
(`plain_aot_autograd`).

Loading runs code: the wrapper in the file is imported (and torch's part is a pickle). Load only
artifacts you trust, as with torch.load(weights_only=False).
"""
from __future__ import annotations

import contextlib
import functools
import json
import pathlib

import torch

from . import graph_cache
from .dynamo_cache import CachedInference
from .errors import CompileError, PrecompiledArtifactError, user_source_line
from .runtime import disk_cache

FORMAT = "tritonize-precompiled-v1"

# Set together by torch._dynamo.aot_compile.aot_compile_fullgraph around the backend call (torch
# 2.11 and 2.13); torch's own eager backend reads force_autograd_cache the same way.
AOT_COMPILE_FLAGS = ("force_autograd_cache", "bundled_autograd_cache", "bypass_autograd_cache_key")
# AOTAutograd cache flags that make it wrap compiled graphs as Inductor cache entries.
CACHE_FLAGS = AOT_COMPILE_FLAGS + ("strict_autograd_cache",)


# ----------------------------------------------------------------------------- the user's side


def precompile(fn, example_args, path=None, *, example_kwargs: dict | None = None, options=None,
               dynamic=None, guard_filter_fn=None):
    """Compile `fn` (a function or an nn.Module) ahead of time with tritonize and, when `path` is
    given, save it there. Returns the compiled function, callable in this process (for a module:
    bound to it, called like the module). One graph (no graph breaks), inference only.

    A module's forward is what is compiled, with the module as its first argument (its weights
    are read from the module given at each call, not saved); its forward hooks are refused.
    `options`: tritonize's (config.Options); `dynamic` and `guard_filter_fn` go to torch.compile
    (a guard_filter_fn replaces aot_compile's default, which drops guards on globals and the
    kinds of guards torch cannot save)."""
    from .backend import make_backend
    from .config import make_options

    module = fn if isinstance(fn, torch.nn.Module) else None
    target, args = fn, tuple(example_args)
    if module is not None:
        _check_no_hooks(module)
        target, args = type(module).forward, (module,) + args
    with _aot_compile_enabled():
        torch_options = {"guard_filter_fn": guard_filter_fn} if guard_filter_fn is not None else None
        compiled = torch.compile(target, fullgraph=True, backend=make_backend(make_options(options)),
                                 dynamic=dynamic, options=torch_options)
        if not hasattr(compiled, "aot_compile"):
            raise RuntimeError(f"tritonize.precompile needs torch's aot_compile (torch {torch.__version__} has none)")
        aot_fn = compiled.aot_compile((args, dict(example_kwargs or {})))
    if path is not None:
        save(aot_fn, path)
    return functools.partial(aot_fn, module) if module is not None else aot_fn


def save(aot_fn, path) -> None:
    """What aot_fn.save_compiled_function(path) writes, written atomically (torch 2.11's opens
    the file before serializing: a failure left a truncated file behind)."""
    data = type(aot_fn).serialize(aot_fn).serialized_data
    disk_cache.write_atomic(pathlib.Path(path), data)


def _check_no_hooks(module: torch.nn.Module) -> None:
    """Calling the module runs its own forward hooks around forward (its submodules' hooks are
    traced with them); precompiling forward alone would drop them."""
    if module._forward_pre_hooks or module._forward_hooks:
        raise ValueError(f"tritonize.precompile compiles {type(module).__name__}.forward, and the module's "
                         "forward hooks would not run: remove them, or precompile a function that calls the module")


def load_precompiled(path, module: torch.nn.Module | None = None, **torch_kwargs):
    """The function saved by precompile(), ready to call: Dynamo does not trace it again and
    nothing is compiled. Pass the module (built as when it was saved) for a precompiled module.
    `torch_kwargs` go to torch.compiler.load_compiled_function (f_globals, external_data)."""
    try:
        with open(path, "rb") as file:
            aot_fn = torch.compiler.load_compiled_function(file, **torch_kwargs)
    except (PrecompiledArtifactError, FileNotFoundError):
        raise
    except Exception as err:  # torch's part of the file: truncated, not a pickle, other versions
        raise PrecompiledArtifactError(f"{path} cannot be loaded: {type(err).__name__}: {err}") from err
    return functools.partial(aot_fn, module) if module is not None else aot_fn


def _aot_compile_enabled():
    config = torch._dynamo.config
    if hasattr(config, "enable_aot_compile"):
        return config.patch(enable_aot_compile=True)
    return contextlib.nullcontext()


# ----------------------------------------------------------------------------- the backend's side


def under_aot_compile() -> bool:
    """Whether the backend is being called by torch's aot_compile (not by a plain torch.compile)."""
    config = torch._functorch.config
    return all(getattr(config, flag, False) for flag in AOT_COMPILE_FLAGS)


def plain_aot_autograd(precompiling: bool):
    """AOTAutograd as a plain torch.compile runs it: without its cache's bundling flags (they
    expect Inductor's compiled graphs); under aot_compile also without the eager backward
    lowering it asks for (inference graphs only get this far)."""
    config = torch._functorch.config
    flags = {flag: False for flag in CACHE_FLAGS if getattr(config, flag, False)}
    if precompiling and getattr(config, "force_non_lazy_backward_lowering", False):
        flags["force_non_lazy_backward_lowering"] = False
    return config.patch(flags) if flags else contextlib.nullcontext()


def check_inference_graph(gm: torch.fx.GraphModule, example_inputs) -> None:
    """Under aot_compile: a CompileError now, before AOTAutograd, for a graph that needs autograd."""
    if not torch.is_grad_enabled():
        return
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    needing = [node.name for node, x in zip(placeholders, example_inputs)
               if isinstance(x, torch.Tensor) and x.requires_grad]
    if needing:
        shown = ", ".join(needing[:4]) + (f" and {len(needing) - 4} more" if len(needing) > 4 else "")
        raise cannot_precompile(gm, f"it is a training graph: grad mode is on and {len(needing)} of its inputs "
                                    f"require grad ({shown}). Only inference graphs are precompiled: call "
                                    "precompile under torch.no_grad(), or set requires_grad_(False) on the parameters")


def cannot_precompile(gm: torch.fx.GraphModule, reason: str) -> CompileError:
    """The error for a graph aot_compile cannot save: which graph, where it was traced, why."""
    name = getattr(gm, "_backend_id", None)
    message = f"the graph Dynamo captured{f' ({name})' if name else ''} cannot be precompiled: {reason}"
    node = next((n for n in gm.graph.nodes if n.op != "placeholder" and n.meta.get("stack_trace")), None)
    where = user_source_line(node)
    return CompileError("precompile", message + (f"\n  traced from: {where}" if where else ""))


# ----------------------------------------------------------------------------- the artifact


def versions() -> dict:
    torch_version, triton_version, python_version, tritonize_version = graph_cache.versions()
    return {"torch": torch_version, "triton": triton_version, "python": python_version,
            "tritonize": tritonize_version}


def dump_inference(runner: CachedInference) -> bytes:
    """The self-contained bytes of one compiled inference graph (the module docstring's format)."""
    graph = graph_cache.serialize_graph(runner.compiled)
    if graph is None:
        reason = graph_cache.unstorable_reason(runner.compiled) or "its constants have no stored form"
        raise CompileError("precompile", f"the compiled graph cannot be saved: {reason}")
    header = {"format": FORMAT, "versions": versions(), "gpus": runner.gpus,
              "disable_autocast": runner.disable_autocast}
    return disk_cache.frame(json.dumps(header, sort_keys=True).encode() + b"\n" + graph)


def load_inference(data: bytes) -> CachedInference:
    """The graph dump_inference saved, ready to run; PrecompiledArtifactError if it cannot be."""
    try:
        header_line, _, graph = disk_cache.unframe(bytes(data)).partition(b"\n")
        header = json.loads(header_line)
        if not isinstance(header, dict):
            raise ValueError("no header")
    except ValueError as err:
        raise PrecompiledArtifactError(f"the compiled graph is damaged ({err}): a truncated or corrupt "
                                       "file; precompile it again") from err
    check_header(header)
    try:
        compiled = graph_cache.load_graph(graph)
    except Exception as err:
        raise PrecompiledArtifactError(f"the compiled graph does not load: {type(err).__name__}: {err}") from err
    return CachedInference(compiled, bool(header["disable_autocast"]), header["gpus"])


def check_header(header: dict) -> None:
    if header.get("format") != FORMAT:
        raise PrecompiledArtifactError(f"the compiled graph has format {header.get('format')!r}; this tritonize "
                                       f"reads {FORMAT!r}: precompile it again")
    saved, current = header.get("versions") or {}, versions()
    different = [f"{name} {saved.get(name)} (now {value})" for name, value in current.items()
                 if saved.get(name) != value]
    if different:
        raise PrecompiledArtifactError("the compiled graph was made with other versions: " + ", ".join(different)
                                       + "; generated code is only used with the versions that made it: "
                                         "precompile it again")
    for device, name, capability in header.get("gpus") or []:
        if not torch.cuda.is_available():
            raise PrecompiledArtifactError(f"the compiled graph runs on {device} ({name}), and this process "
                                           "has no CUDA GPU")
        here = [torch.cuda.get_device_name(device), list(torch.cuda.get_device_capability(device))]
        if here != [name, list(capability)]:
            raise PrecompiledArtifactError(f"the compiled graph was made for {device} = {name} (capability "
                                           f"{capability}); here it is {here[0]} (capability {here[1]})")
