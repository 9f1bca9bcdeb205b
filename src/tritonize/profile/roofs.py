"""The device's roofs for a profile: copy bandwidth and bf16 matmul throughput, measured once per
device (and torch version) and kept in the disk cache (`roofs/`)."""
from __future__ import annotations

from ..runtime import disk_cache
from .rows import Roofs

COPY_ELEMENTS = 1 << 28  # 512 MiB of bf16 read and 512 MiB written a copy
MATMUL_SIZE = 8192  # a bf16 8192^3 product: 1.1 TFLOP
REPEATS = 10


def device_roofs(device) -> Roofs:
    """The roofs of a CUDA device, measured on first use, then read from the disk cache."""
    import torch

    name = torch.cuda.get_device_name(device)
    directory = disk_cache.entry_dir("roofs")
    path = directory / f"{disk_cache.stable_hash(name, torch.__version__)}.json" if directory else None
    stored = disk_cache.read_json(path) if path else None
    if isinstance(stored, dict) and stored.get("device") == name:
        return Roofs(name, stored["bytes_per_s"], stored["flops_per_s"])
    roofs = measure_roofs(device, name)
    if path:
        disk_cache.write_json(path, {"device": name, "bytes_per_s": roofs.bytes_per_s, "flops_per_s": roofs.flops_per_s})
    return roofs


def measure_roofs(device, name: str) -> Roofs:
    import torch

    with torch.cuda.device(device):
        copy_s, matmul_s = _copy_seconds(device), _matmul_seconds(device)
    return Roofs(name, 2 * COPY_ELEMENTS * 2 / copy_s, 2 * MATMUL_SIZE ** 3 / matmul_s)


def _copy_seconds(device) -> float:
    import torch

    source = torch.empty(COPY_ELEMENTS, dtype=torch.bfloat16, device=device)
    target = torch.empty_like(source)
    return _fastest(lambda: target.copy_(source))


def _matmul_seconds(device) -> float:
    import torch

    a = torch.randn(MATMUL_SIZE, MATMUL_SIZE, dtype=torch.bfloat16, device=device)
    b = torch.randn_like(a)
    return _fastest(lambda: torch.mm(a, b))


def _fastest(fn) -> float:
    """Seconds of the fastest of REPEATS calls (CUDA events), after one warm-up call."""
    import torch

    fn()
    times = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return min(times)
