"""tritonize: a torch.compile back end that generates fused Triton kernels.

    model = torch.compile(model, backend="tritonize")
    model = tritonize.compile(model, mode="default")
    report = tritonize.explain(fn, *args)
    prof = tritonize.profile(fn, *args)               # each kernel's bytes, operations (and GPU time)
    outputs, report = tritonize.run_and_explain(fn, *args)
    tritonize.wrap_triton(kernel)[grid](*args)        # a user Triton kernel that graphs capture
    tritonize.mutated_arguments(kernel, *args)        # which arguments it writes
    tritonize.precompile(model, (x,), path)           # AOT precompile, saved (caching/precompiled.py)
    fn = tritonize.load_precompiled(path, model)      # another process: no Dynamo trace, no compile
"""
from __future__ import annotations

import torch

from . import config
from . import profile  # a module that is also the function tritonize.profile(fn, *args)
from .backend import make_backend, tritonize_backend
from .config import Options, make_options
from .errors import CompileError, FrozenInputChanged, PrecompiledArtifactError
from .caching.precompiled import load_precompiled, precompile
from .fresh_compile import compile_and_run
from .profile.rows import Profile
from .report import Report
from .user_kernels import analyze_kernel, mutated_arguments, read_arguments, wrap_triton

__all__ = ["compile", "explain", "run_and_explain", "profile", "Profile", "config", "Options", "CompileError", "FrozenInputChanged", "Report",
           "wrap_triton", "mutated_arguments", "read_arguments", "analyze_kernel", "precompile",
           "load_precompiled", "PrecompiledArtifactError"]


def compile(model_or_fn, mode: str = "default", dynamic=None, options: dict | None = None):
    """torch.compile with the tritonize back end and tritonize's own options (see config)."""
    opts = make_options(options, mode=mode)
    return torch.compile(model_or_fn, backend=make_backend(opts), dynamic=dynamic)


def explain(fn, *args, options: dict | None = None, **kwargs) -> Report:
    """Compile `fn` afresh, run it once on the arguments, and report what tritonize generated.

    Resets Dynamo's caches first (torch._dynamo.reset()), so every graph is compiled again.
    When outputs need gradients, the backward graphs are compiled right away too (not when
    backward first runs), so the report shows their kernels and fallbacks: backward does not run.
    """
    return run_and_explain(fn, *args, options=options, **kwargs)[1]


def run_and_explain(fn, *args, options: dict | None = None, dynamic: bool | None = None, **kwargs):
    """explain(), also returning what the compiled `fn` returned: (outputs, Report). dynamic: as
    torch.compile's (True: every size symbolic)."""
    outputs, recorder, _ = compile_and_run(fn, args, kwargs, options, dynamic)
    artifacts = [a for a in recorder if a != "graph"]
    return outputs, Report.from_artifacts(artifacts, graphs=recorder.count("graph"))


def _register() -> None:
    from torch._dynamo.backends import registry

    # When Dynamo found our entry point first, it registers us itself while loading it.
    if "tritonize" not in registry._BACKENDS and "tritonize" not in registry._COMPILER_FNS:
        registry.register_backend(tritonize_backend, name="tritonize")


_register()
