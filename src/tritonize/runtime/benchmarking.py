"""Timing candidate configs on the real arguments without changing them.

* `written_params(source, params)`: which kernel parameters the kernel stores to (from the
  source: `tl.store(name + ...)`, `tl.atomic_*(name + ...)`); every parameter when a store goes
  through something else.
* `WrittenArgs`: around the timing runs, the arguments a kernel writes are replaced by clones
  (same sizes and strides); if cloning runs out of memory they are copied to the host instead
  and restored afterwards. Either way autotuning never changes results: the real call runs after.
* `time_on_gpu(launch)`: median of CUDA-event timings, the L2 cache flushed before each run,
  the number of runs adapted to the kernel's duration.
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
    device = torch.cuda.current_device()
    l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20) or (50 << 20)
    flush = torch.empty(2 * l2_bytes // 4, dtype=torch.int32, device="cuda")
    launch()  # warm-up: loads the module, first-touch effects
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        launch()
    end.record()
    torch.cuda.synchronize()
    estimate_ms = max(start.elapsed_time(end) / 3, 1e-3)
    reps = int(min(max_reps, max(min_reps, target_ms / estimate_ms)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for begin, finish in events:
        flush.zero_()
        begin.record()
        launch()
        finish.record()
    torch.cuda.synchronize()
    del flush
    return statistics.median(b.elapsed_time(f) for b, f in events) / 1e3
