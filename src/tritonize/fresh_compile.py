"""Compile a function afresh and run it once, recording every graph's artifacts: what
tritonize.explain and tritonize.profile start from."""
from __future__ import annotations

import contextlib

import torch

from .backend import make_backend
from .config import make_options


def compile_and_run(fn, args, kwargs, options, dynamic) -> tuple:
    """(outputs, recorder, compiled fn) of `fn` compiled afresh and run once. The recorder holds
    "graph" for each Dynamo graph and each aten graph's GraphArtifacts."""
    torch._dynamo.reset()
    recorder: list = []
    compiled = torch.compile(fn, backend=make_backend(make_options(options), recorder), dynamic=dynamic)
    with backward_compiled_with_forward():
        outputs = compiled(*args, **kwargs)
    return outputs, recorder, compiled


def backward_compiled_with_forward():
    """AOTAutograd compiles a backward graph when backward first runs, unless told otherwise."""
    functorch_config = torch._functorch.config
    if not hasattr(functorch_config, "force_non_lazy_backward_lowering"):
        return contextlib.nullcontext()  # older torch: backward graphs show once backward runs
    return functorch_config.patch(force_non_lazy_backward_lowering=True)
