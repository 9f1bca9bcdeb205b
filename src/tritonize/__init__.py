"""tritonize: a torch.compile back end that generates fused Triton kernels.

    model = torch.compile(model, backend="tritonize")
    model = tritonize.compile(model, mode="default")
    report = tritonize.explain(fn, *args)
    tritonize.wrap_triton(kernel)[grid](*args)        # a user Triton kernel that graphs capture
    tritonize.mutated_arguments(kernel, *args)        # which arguments it writes
"""
from __future__ import annotations

import torch

from . import config
from .backend import make_backend, tritonize_backend
from .config import Options, make_options
from .errors import CompileError
from .report import Report
from .user_kernels import analyze_kernel, mutated_arguments, read_arguments, wrap_triton

__all__ = ["compile", "explain", "config", "Options", "CompileError", "Report", "wrap_triton",
           "mutated_arguments", "read_arguments", "analyze_kernel"]


def compile(model_or_fn, mode: str = "default", dynamic=None, options: dict | None = None):
    """torch.compile with the tritonize back end and tritonize's own options (see config)."""
    opts = make_options(options, mode=mode)
    return torch.compile(model_or_fn, backend=make_backend(opts), dynamic=dynamic)


def explain(fn, *args, options: dict | None = None, **kwargs) -> Report:
    """Compile `fn` afresh, run it once on the arguments, and report what tritonize generated.

    Resets Dynamo's caches first (torch._dynamo.reset()), so every graph is compiled again.
    """
    torch._dynamo.reset()
    recorder: list = []
    compiled = torch.compile(fn, backend=make_backend(make_options(options), recorder))
    compiled(*args, **kwargs)
    artifacts = [a for a in recorder if a != "graph"]
    return Report.from_artifacts(artifacts, graphs=recorder.count("graph"))


def _register() -> None:
    from torch._dynamo.backends import registry

    # When Dynamo found our entry point first, it registers us itself while loading it.
    if "tritonize" not in registry._BACKENDS and "tritonize" not in registry._COMPILER_FNS:
        registry.register_backend(tritonize_backend, name="tritonize")


_register()
