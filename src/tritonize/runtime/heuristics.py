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
    """Measured on an H100 (bench/pointwise_configs.py, docs/benchmarks.md): 1-D kernels peak at
    XBLOCK=2048 with 4 warps (16 elements a thread); transposing 2-D tiles at 64x128, 4 warps.
    On the CPU (interpreter), bigger blocks mean fewer interpreted programs."""
    if ynumel > 1:
        ylimit, xlimit = (64, 128) if on_gpu else (128, 128)
        xblock = min(xlimit, triton.next_power_of_2(xnumel))
        yblock = min(ylimit, triton.next_power_of_2(ynumel))
        grid = (triton.cdiv(xnumel, xblock) * triton.cdiv(ynumel, yblock),)
        return LaunchConfig({"YBLOCK": yblock, "XBLOCK": xblock}, 4, grid)
    limit = 2048 if on_gpu else MAX_BLOCK_1D
    xblock = min(limit, triton.next_power_of_2(xnumel))
    num_warps = 4 if xblock >= 1024 else (2 if xblock >= 256 else 1)
    return LaunchConfig({"XBLOCK": xblock}, num_warps, (triton.cdiv(xnumel, xblock),))
