"""Profiling a function or a script: compile, count from the IR, and on a GPU time the kernels."""
from __future__ import annotations

import runpy
import sys

import torch
import torch.utils._pytree as pytree

from ..backend import recording_graphs
from ..fresh_compile import compile_and_run
from .rows import Profile, profile_from_artifacts
from .roofs import device_roofs
from .timing import join_times, profile_kernels

DEFAULT_RUNS = 10


def profile_function(fn, *args, options: dict | None = None, dynamic: bool | None = None,
                     runs: int = DEFAULT_RUNS, **kwargs) -> Profile:
    """Compile `fn` afresh and run it once; count each kernel's and library call's bytes and
    operations; with CUDA tensors, time `runs` more runs (the kernels' times per run, the wall
    time, the launches) and measure the device's roofs. Backward graphs are compiled, counted and
    not run (a run is `fn`'s forward)."""
    outputs, recorder, compiled = compile_and_run(fn, args, kwargs, options, dynamic)
    prof = profile_from_artifacts([a for a in recorder if a != "graph"])
    device = cuda_device_of((args, kwargs, outputs))
    if device is None or runs < 1:
        return prof
    return with_times(prof, lambda: compiled(*args, **kwargs), runs, device)


def profile_script(path: str, argv: list[str]) -> Profile:
    """The graphs a script compiles with tritonize, counted; on a machine with CUDA the script
    runs a second time, timed (the first compiles and autotunes, which launch kernels of their
    own)."""
    def run():
        saved = sys.argv
        sys.argv = [path] + list(argv)
        try:
            runpy.run_path(path, run_name="__main__")
        finally:
            sys.argv = saved

    with recording_graphs() as recorder:
        run()
    prof = profile_from_artifacts([a for a in recorder if a != "graph"])
    if not torch.cuda.is_available() or not any(a.costs for a in recorder if a != "graph"):
        return prof
    return with_times(prof, run, 1, torch.cuda.current_device())


def with_times(prof: Profile, run, runs: int, device) -> Profile:
    kernels, op_kernels, step_s, launches = profile_kernels(run, runs)
    prof.rows = join_times(prof.rows, kernels, op_kernels, runs)
    prof.runs, prof.step_s, prof.launches = runs, step_s, launches
    prof.roofs = device_roofs(device)
    return prof


def cuda_device_of(values):
    """The device of the first CUDA tensor among `values` (nested), or None."""
    for leaf in pytree.tree_leaves(values):
        if isinstance(leaf, torch.Tensor) and leaf.is_cuda:
            return leaf.device
    return None
