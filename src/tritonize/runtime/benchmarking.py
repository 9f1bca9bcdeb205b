"""Timing candidate configs on the real arguments without changing them.

* `written_params(source, params)`: which kernel parameters the kernel stores to (from the
  source: `tl.store(name + ...)`, `tl.atomic_*(name + ...)`); every parameter when a store goes
  through something else.
* `WrittenArgs`: around the timing runs, the arguments a kernel writes are replaced by clones
  (same sizes and strides); if cloning runs out of memory they are copied to the host instead
  and restored afterwards. Either way autotuning never changes results: the real call runs after.
* `time_on_gpu_interleaved(launches)`: per launch the median of CUDA-event timings, the launches
  taking turns run by run (so a slow spell of a shared GPU weighs on all of them alike), the L2
  cache flushed before each run, the number of runs adapted to the kernels' duration.
"""
from __future__ import annotations

import re
import statistics

import torch

OUT_OF_MEMORY = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
STORE_TARGET = re.compile(r"\btl\.(store|atomic_\w+)\(\s*([A-Za-z_]\w*)")


def written_params(source: str, params: list[str]) -> list[str]:
    targets = {m.group(2) for m in STORE_TARGET.finditer(source)}
    if not targets <= set(params):
        return list(params)  # stores through a local pointer: assume every argument is written
    return [p for p in params if p in targets]


def clone_preserving_strides(tensor: torch.Tensor) -> torch.Tensor:
    out = torch.empty_strided(tensor.size(), tensor.stride(), dtype=tensor.dtype, device=tensor.device)
    out.copy_(tensor)
    return out


class WrittenArgs:
    """with WrittenArgs(args, indices) as safe_args: time kernels on safe_args."""

    def __init__(self, args, written):
        self.args = list(args)
        self.indices = [i for i in written if isinstance(self.args[i], torch.Tensor)]
        self.saved: dict = {}
        self.mode = "none"

    def __enter__(self) -> list:
        safe = list(self.args)
        try:
            with torch.no_grad():
                for i in self.indices:
                    safe[i] = clone_preserving_strides(self.args[i])
            self.mode = "cloned" if self.indices else "none"
            return safe
        except OUT_OF_MEMORY:
            safe = None
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        with torch.no_grad():
            for i in self.indices:
                self.saved[i] = self.args[i].detach().to("cpu", copy=True)
        self.mode = "saved"
        return list(self.args)

    def __exit__(self, *exc) -> None:
        with torch.no_grad():
            for i, copy in self.saved.items():
                self.args[i].copy_(copy)
        self.saved.clear()


def time_on_gpu(launch, target_ms: float = 15.0, min_reps: int = 5, max_reps: int = 100) -> float:
    """Seconds one `launch()` takes on the current CUDA stream (median over runs)."""
    return time_on_gpu_interleaved([launch], target_ms, min_reps, max_reps)[0]


def time_on_gpu_interleaved(launches, target_ms: float = 15.0, min_reps: int = 5,
                            max_reps: int = 100) -> list[float]:
    """Seconds each of `launches` takes on the current CUDA stream: the median over runs in which
    the launches take turns (A B C A B C ...), the L2 cache flushed before each. A shared GPU has
    slow spells (every kernel about 2x slower for ~100 ms, seen on the H100): taking turns puts
    the same share of any spell into every candidate's runs, where timing one candidate after
    another could hand a spell to one of them and the choice to another."""
    device = torch.cuda.current_device()
    l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20) or (50 << 20)
    flush = torch.empty(2 * l2_bytes // 4, dtype=torch.int32, device="cuda")
    for launch in launches:
        launch()  # warm-up: loads the module, first-touch effects
    torch.cuda.synchronize()
    estimates = []
    for launch in launches:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(3):
            launch()
        end.record()
        torch.cuda.synchronize()
        estimates.append(max(start.elapsed_time(end) / 3, 1e-3))
    reps = int(min(max_reps, max(min_reps, target_ms / max(estimates))))
    events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
               for _ in range(reps)] for _ in launches]
    for rep in range(reps):
        for launch, pairs in zip(launches, events):
            begin, finish = pairs[rep]
            flush.zero_()
            begin.record()
            launch()
            finish.record()
    torch.cuda.synchronize()
    del flush
    return [statistics.median(b.elapsed_time(f) for b, f in pairs) / 1e3 for pairs in events]
