"""The L2 flush before each profiled run: one Triton kernel of a name no other kernel has, so the
profile can leave its launches out by name (aten's zero_ is a memset, indistinguishable from the
function's own)."""
from __future__ import annotations

import contextlib
import functools

import triton

from ..runtime.loader import load_source_module

KERNEL_NAME = "tritonize_profile_flush_l2"
BLOCK = 4096
SOURCE = f'''
import triton
import triton.language as tl


@triton.jit
def {KERNEL_NAME}(buffer, size, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(buffer + offsets, tl.full([BLOCK], 0, tl.int32), offsets < size)
'''


@functools.cache
def _kernel_module(interpret: bool):
    return load_source_module(SOURCE, "profile_flush", interpret=interpret)


def flush_bytes(device) -> int:
    """Twice the device's L2 cache (256 MB where the device does not say)."""
    import torch

    l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
    return 2 * l2_bytes if l2_bytes else 256 * 2**20


def flush_l2(buffer) -> None:
    """Writes zeros over `buffer` (int32, larger than the L2 cache): what the cache held is gone.
    (On the CPU it runs in Triton's interpreter, for the tests.)"""
    import torch

    size = buffer.numel()
    kernel = getattr(_kernel_module(buffer.device.type == "cpu"), KERNEL_NAME)
    with torch.cuda.device(buffer.device) if buffer.is_cuda else contextlib.nullcontext():  # the buffer's GPU
        kernel[(triton.cdiv(size, BLOCK),)](buffer, size, BLOCK=BLOCK, num_warps=4)
