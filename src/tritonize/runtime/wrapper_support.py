"""Functions generated wrappers call: allocation, layout checks, views, and the script benchmark."""
from __future__ import annotations

import sys
import time

import torch

from .launcher import load_kernel  # noqa: F401  (re-exported for wrappers)

empty_strided = torch.empty_strided


def reinterpret_tensor(tensor: torch.Tensor, size, stride, offset: int = 0) -> torch.Tensor:
    return tensor.as_strided(size, stride, tensor.storage_offset() + offset)


def assert_size_stride(tensor: torch.Tensor, size, stride, name: str) -> None:
    if tensor is None:  # AOTAutograd passes None for inputs the graph does not read
        return
    if tuple(tensor.shape) != tuple(size) or not _same_strides(tensor.shape, tensor.stride(), stride):
        raise AssertionError(
            f"tritonize: input {name} has size {tuple(tensor.shape)} and stride {tensor.stride()}, "
            f"but the graph was compiled for size {tuple(size)} and stride {tuple(stride)}")


def _same_strides(size, actual, expected) -> bool:
    return all(a == e or s <= 1 for s, a, e in zip(size, actual, expected))


def ensure_layout(tensor: torch.Tensor, size, stride) -> torch.Tensor:
    """An aten result with the strides the generated code assumes (copied only if they differ)."""
    if tensor is None:  # an optional result the op did not produce (nothing reads it)
        return None
    if tuple(tensor.shape) == tuple(size) and _same_strides(size, tensor.stride(), stride):
        return tensor
    fixed = torch.empty_strided(size, stride, dtype=tensor.dtype, device=tensor.device)
    fixed.copy_(tensor)
    return fixed


def random_input(size, stride, dtype, device) -> torch.Tensor:
    out = torch.empty_strided(size, stride, dtype=dtype, device=device)
    if dtype.is_floating_point:
        out.copy_(torch.randn(out.shape, device=device, dtype=dtype))
    elif dtype == torch.bool:
        out.copy_(torch.rand(out.shape, device=device) > 0.5)
    else:
        out.copy_(torch.randint(0, 8, out.shape, device=device, dtype=dtype))
    return out


def benchmark_main(call, input_specs, repeat: int = 20) -> None:
    """Run `call` on random inputs and print the median time (used when a wrapper runs as a script)."""
    def make_args():
        return [random_input(*spec) for spec in input_specs]

    call(make_args())
    on_gpu = any(spec[3] != "cpu" for spec in input_specs)
    times = []
    for _ in range(repeat):
        args = make_args()
        if on_gpu:
            torch.cuda.synchronize()
        start = time.perf_counter()
        call(args)
        if on_gpu:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    print(f"median {times[len(times) // 2] * 1e3:.3f} ms over {repeat} runs", file=sys.stdout)
