"""Launch configurations for generated kernels, from their kind and sizes.

A simple size-based rule for now (the autotuner is its own piece of work). Block sizes are powers
of two no larger than MAX_BLOCK_1D / MAX_BLOCK_2D; codegen relies on that bound to leave masks
out when a size is a multiple of it.
"""
from __future__ import annotations

import dataclasses

import triton

MAX_BLOCK_1D = 8192
MAX_BLOCK_2D = 256


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    blocks: dict  # {"XBLOCK": .., "YBLOCK": ..}
    num_warps: int
    grid: tuple


def pointwise_config(xnumel: int, ynumel: int, on_gpu: bool) -> LaunchConfig:
    if ynumel > 1:
        limit = 64 if on_gpu else 128
        xblock = min(limit, triton.next_power_of_2(xnumel))
        yblock = min(limit, triton.next_power_of_2(ynumel))
        grid = (triton.cdiv(xnumel, xblock) * triton.cdiv(ynumel, yblock),)
        return LaunchConfig({"YBLOCK": yblock, "XBLOCK": xblock}, 4, grid)
    limit = 1024 if on_gpu else MAX_BLOCK_1D
    xblock = min(limit, triton.next_power_of_2(xnumel))
    num_warps = 4 if xblock >= 512 else (2 if xblock >= 128 else 1)
    return LaunchConfig({"XBLOCK": xblock}, num_warps, (triton.cdiv(xnumel, xblock),))
