"""GPU times of a profiled function's kernels (torch.profiler), joined to the profile's rows.

A generated kernel's row takes the time of the GPU kernels of its name, and its bytes and
operations are scaled to the launches the profiler saw (the counts are per call of each graph; a
graph may run several times a run). A library call's row (`aten.mm.default`) takes the time of
the GPU kernels launched inside the matching profiler op (`aten::mm`), looked up from the
innermost op outwards (cuDNN's kernels run inside `aten::cudnn_convolution`, within
`aten::convolution`); rows of one op (two overloads) share its time in proportion to their bytes.
A GPU kernel no row claims (a memset, runtime copies) becomes a row of its own, kind "other",
with no bytes or operations counted. Each profiled run starts with a cold L2 cache (a buffer
larger than it is zeroed first, as bench/kernels.py's do_bench does), so a kernel's bytes are
DRAM traffic, the roof they are compared with; the flush's kernel (profile/flush.py) is left
out. Known limits: kernels of one name in two graphs are one row; an op the program also calls
outside compiled graphs (eager code around them) is counted with the library call's row.
"""
from __future__ import annotations

import collections
import time

from .flush import KERNEL_NAME as FLUSH_KERNEL, flush_bytes, flush_l2
from .rows import KernelRow

# GPU activity that is not a kernel launch (not counted in a run's launches)
NOT_LAUNCHES = ("Memset", "Memcpy")

# rows timed through the profiler op around their GPU kernels (library calls, collectives)
LIBRARY_KINDS = ("extern", "collective", "fallback")


def profiler_op_name(row_name: str) -> str:
    """The profiler's name of a library call's op: aten.mm.default -> aten::mm."""
    parts = row_name.split(".")
    return f"{parts[0]}::{parts[1]}" if len(parts) >= 2 else row_name


def graph_calls(artifacts: list, kernels: list, op_kernels: list, runs: int) -> list[int] | None:
    """How often each graph ran in a run, from the launches the profiler saw of the generated
    kernels whose name no other graph has (a graph's kernel launched twice per call and seen 8
    times in 2 runs: 2 calls; seen at all, at least 1). A graph whose kernels all share names
    with other graphs' counts 1 if any was seen, else 0; a graph of library calls only counts 1
    (its calls are not told apart from eager code's, nor from a backward's not run). None when
    the GPU ran none of the graphs' work, neither a generated kernel nor a kernel inside one of
    their library calls' ops (graphs on the CPU). Known limit: a script's CPU graphs beside GPU
    graphs count 0, as if not run."""
    seen = collections.Counter(name for name, _ in kernels)
    owners = collections.Counter(name for art in artifacts for name in {k.name for k in art.kernels})
    library_ops = {profiler_op_name(c[0]) for art in artifacts for c in art.costs if c[1] in LIBRARY_KINDS}
    if not any(seen[name] for name in owners) and not any(set(ops) & library_ops for ops, _, _ in op_kernels):
        return None
    calls = []
    for art in artifacts:
        per_call = collections.Counter(c[0] for c in art.costs if c[0] in {k.name for k in art.kernels})
        if not per_call:
            calls.append(1)
            continue
        own = [-(-seen[n] // (runs * per_call[n])) for n in per_call if owners[n] == 1]
        calls.append(max(own) if own else int(any(seen[n] for n in per_call)))
    return calls


def join_times(rows: list[KernelRow], kernels: list, op_kernels: list, runs: int) -> list[KernelRow]:
    """Rows with `time_s` per run set, plus "other" rows for unclaimed GPU kernels, most time first.
    kernels: (GPU kernel name, seconds) for every launch; op_kernels: (the profiler ops around
    the launch, innermost first; GPU kernel name, seconds) for launches inside an op."""
    by_name, count = collections.defaultdict(float), collections.Counter()
    for name, seconds in kernels:
        by_name[name] += seconds
        count[name] += 1
    named = {r.name for r in rows}
    extern_rows = collections.defaultdict(list)
    for r in rows:
        if r.kind in LIBRARY_KINDS:
            extern_rows[profiler_op_name(r.name)].append(r)
    claimed, op_time = collections.defaultdict(float), collections.defaultdict(float)
    for ops, name, seconds in op_kernels:
        op = next((o for o in ops if o in extern_rows), None)
        if op is not None and name not in named:
            op_time[op] += seconds
            claimed[name] += seconds
    for op, members in extern_rows.items():
        total = sum(r.bytes for r in members) or len(members)
        for r in members:
            r.time_s = op_time.get(op, 0.0) / runs * ((r.bytes or 1) / total)
    for row in rows:
        if row.kind not in LIBRARY_KINDS and row.name in by_name:
            _scale_to_launches(row, count[row.name] / runs)
            row.time_s = by_name[row.name] / runs
    others = [KernelRow(name, "other", round(count[name] / runs), 0, 0, 0, time_s=(seconds - claimed[name]) / runs)
              for name, seconds in by_name.items() if name not in named and seconds - claimed[name] > 1e-9]
    return sorted(rows + others, key=lambda r: (-(r.time_s or 0.0), -r.bytes, r.name))


def _scale_to_launches(row: KernelRow, launches: float) -> None:
    """The row's counts (per call of each graph) scaled to the launches of a run."""
    if row.launches and launches and launches != row.launches:
        factor = launches / row.launches
        row.bytes_read, row.bytes_written = round(row.bytes_read * factor), round(row.bytes_written * factor)
        row.flops = round(row.flops * factor)
        row.launches = round(launches)


def profile_kernels(run, runs: int, device, warm_up: bool = True, wall: bool = True) -> tuple:
    """`run` once to warm up (unless warm_up is False), `runs` times under torch.profiler, each
    after an L2 flush, then `runs` times alone for the wall time (unless wall is False: None).
    (kernels, op_kernels as join_times takes them, wall seconds of one run or None, kernel
    launches of one run)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    if warm_up:
        run()
        torch.cuda.synchronize(device)
    flush_buffer = torch.empty(flush_bytes(device) // 4, dtype=torch.int32, device=device)
    flush_l2(flush_buffer)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            flush_l2(flush_buffer)
            run()
        torch.cuda.synchronize(device)
    del flush_buffer
    kernels, op_kernels = [], []
    for event in prof.events():
        if event.device_type == DeviceType.CUDA and event.name != FLUSH_KERNEL:
            kernels.append((event.name, event.time_range.elapsed_us() * 1e-6))
        elif event.device_type == DeviceType.CPU and event.kernels:
            ops = _enclosing_ops(event)
            op_kernels += [(ops, k.name, k.duration * 1e-6) for k in event.kernels]
    launches = sum(1 for name, _ in kernels if not name.startswith(NOT_LAUNCHES)) // runs
    return kernels, op_kernels, _wall_seconds(run, runs, device) if wall else None, launches


def _enclosing_ops(event) -> tuple:
    """The names of the event and of the CPU ops around it, innermost first."""
    names = []
    while event is not None:
        names.append(event.name)
        event = event.cpu_parent
    return tuple(names)


def _wall_seconds(run, runs: int, device) -> float:
    import torch

    start = time.perf_counter()
    for _ in range(runs):
        run()
    torch.cuda.synchronize(device)
    return (time.perf_counter() - start) / runs
