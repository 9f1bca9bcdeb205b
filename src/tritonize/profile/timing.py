"""GPU times of a profiled function's kernels (torch.profiler), joined to the profile's rows.

A generated kernel's row takes the time of the GPU kernels of its name. A library call's row
(`aten.mm.default`) takes the time of the GPU kernels launched inside the matching profiler op
(`aten::mm`: cuBLAS's, cuDNN's). A GPU kernel neither claims (a memset, runtime copies) becomes
a row of its own, kind "other", with no bytes or operations counted.
"""
from __future__ import annotations

import collections
import time

from .rows import KernelRow


def profiler_op_name(row_name: str) -> str:
    """The profiler's name of a library call's op: aten.mm.default -> aten::mm."""
    parts = row_name.split(".")
    return f"{parts[0]}::{parts[1]}" if len(parts) >= 2 else row_name


def join_times(rows: list[KernelRow], kernels: list, op_kernels: list, runs: int) -> list[KernelRow]:
    """Rows with `time_s` per run set, plus "other" rows for unclaimed GPU kernels, most time first.
    kernels: (GPU kernel name, seconds) for every launch; op_kernels: (profiler op name, GPU
    kernel name, seconds) for launches the profiler attributes to an op."""
    by_name = collections.defaultdict(float)
    for name, seconds in kernels:
        by_name[name] += seconds
    named = {r.name for r in rows}
    extern_ops = {profiler_op_name(r.name) for r in rows if r.kind in ("extern", "fallback")}
    claimed = collections.defaultdict(float)
    extern_time = collections.defaultdict(float)
    for op, name, seconds in op_kernels:
        if op in extern_ops and name not in named:
            extern_time[op] += seconds
            claimed[name] += seconds
    for row in rows:
        if row.kind in ("extern", "fallback"):
            row.time_s = extern_time.get(profiler_op_name(row.name), 0.0) / runs
        elif row.name in by_name:
            row.time_s = by_name[row.name] / runs
    others = [KernelRow(name, "other", 0, 0, 0, 0, time_s=(seconds - claimed[name]) / runs)
              for name, seconds in by_name.items() if name not in named and seconds - claimed[name] > 1e-9]
    return sorted(rows + others, key=lambda r: (-(r.time_s or 0.0), -r.bytes, r.name))


def profile_kernels(run, runs: int) -> tuple[list, list, float, int]:
    """Runs `run` once to warm up, `runs` times under torch.profiler, then `runs` times alone:
    (kernels, op_kernels as join_times takes them, wall seconds of one run, GPU launches of one run)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            run()
        torch.cuda.synchronize()
    kernels, op_kernels = [], []
    for event in prof.events():
        if event.device_type == DeviceType.CUDA:
            kernels.append((event.name, event.time_range.elapsed_us() * 1e-6))
        elif event.device_type == DeviceType.CPU:
            op_kernels += [(event.name, k.name, k.duration * 1e-6) for k in event.kernels]
    start = time.perf_counter()
    for _ in range(runs):
        run()
    torch.cuda.synchronize()
    return kernels, op_kernels, (time.perf_counter() - start) / runs, len(kernels) // runs
