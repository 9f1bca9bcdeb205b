"""Profiling a function or a script: compile, count from the IR, and on a GPU time the kernels."""
from __future__ import annotations

import os
import runpy
import sys
import traceback

import torch
import torch.utils._pytree as pytree

from ..backend import recording_graphs
from ..fresh_compile import compile_and_run
from .rows import Profile, profile_from_artifacts
from .roofs import device_roofs
from .timing import graph_calls, join_times, profile_kernels

DEFAULT_RUNS = 10


def profile_function(fn, *args, options: dict | None = None, dynamic: bool | None = None,
                     profile_runs: int = DEFAULT_RUNS, **kwargs) -> Profile:
    """Compile `fn` afresh and run it once; count each kernel's and library call's bytes and
    operations; with CUDA tensors, time `profile_runs` more runs (the kernels' times per run, the
    wall time, the launches) and measure the device's roofs. Backward graphs are compiled with
    the forward: without times (the CPU) they are counted; timed, a graph counts as often as the
    runs ran it (a backward `fn` does not call: not at all, named in the summary; timing.graph_calls).
    Other keyword arguments go to `fn`."""
    outputs, recorder, compiled = compile_and_run(fn, args, kwargs, options, dynamic)
    artifacts = [a for a in recorder if a != "graph"]
    device = cuda_device_of((args, kwargs, outputs))
    if device is None or profile_runs < 1:
        return profile_from_artifacts(artifacts)
    return with_times(artifacts, lambda: compiled(*args, **kwargs), profile_runs, device)


def profile_script(path: str, argv: list[str]) -> tuple[Profile, int]:
    """(the profile of the graphs a script compiles with tritonize, the script's exit code). With
    CUDA the script runs a second time under torch.profiler: that run loads what the first
    compiled from the caches (the first also autotunes, which launches kernels of its own). A
    script's run has no wall time in the profile (its own setup would count as time outside
    kernels). A script that fails still gets the profile of what it compiled."""
    with recording_graphs() as recorder:
        code = run_script(path, argv)
    artifacts = [a for a in recorder if a != "graph"]
    if code != 0 or not torch.cuda.is_available() or not any(a.costs for a in artifacts):
        return profile_from_artifacts(artifacts), code
    device = torch.cuda.current_device()
    return with_times(artifacts, lambda: run_script(path, argv), 1, device, warm_up=False, wall=False), code


def run_script(path: str, argv: list[str]) -> int:
    """Runs a script as `python path argv...` would (its folder first on sys.path); its exit code."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [path] + list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        runpy.run_path(path, run_name="__main__")
        return 0
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except Exception:  # noqa: BLE001 (the script's failure is reported, the profile still made)
        traceback.print_exc()
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def with_times(artifacts: list, run, runs: int, device, warm_up: bool = True, wall: bool = True) -> Profile:
    """The profile of `runs` runs of `run`: the rows of the graphs as often as each ran, timed."""
    kernels, op_kernels, step_s, launches = profile_kernels(run, runs, device, warm_up, wall)
    calls = graph_calls(artifacts, kernels, op_kernels, runs)
    if calls is None:  # the compiled graphs ran on the CPU: bytes and operations only
        return profile_from_artifacts(artifacts)
    prof = profile_from_artifacts(artifacts, calls)
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
