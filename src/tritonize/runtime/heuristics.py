"""Launch configurations for generated kernels, from their kind and sizes.

Kernel kinds and the block parameters their source declares (`tl.constexpr`):
* "pointwise": XBLOCK (1-D), or YBLOCK and XBLOCK (2-D tiles, flattened 1-D grid);
* "reduction": XBLOCK rows a program, RBLOCK elements of a row an iteration (looped);
* "persistent_reduction": XBLOCK; RBLOCK is baked into the source (the whole row at once);
* "scan": XBLOCK rows a program, RBLOCK baked like a persistent reduction (the whole row);
* "looped_scan": XBLOCK rows a program, RBLOCK positions of a row an iteration (with a carry).
Sizes (xnumel, ynumel, rnumel) are baked into kernels too; the grid is 1-D over programs.

A size-based rule for now (the autotuner is its own piece of work). Block sizes are powers of two
no larger than MAX_BLOCK_1D / MAX_BLOCK_2D / MAX_XBLOCK_REDUCTION; codegen relies on these bounds
to leave masks out when a size is a multiple of them.
"""
from __future__ import annotations

import dataclasses

import triton

MAX_BLOCK_1D = 8192
MAX_BLOCK_2D = 256
MAX_XBLOCK_REDUCTION = 128
MAX_PERSISTENT_RBLOCK = 8192  # rows up to this many elements are reduced in registers
MAX_RBLOCK_LOOPED = 4096  # also bounds looped scans' RBLOCK
MAX_PERSISTENT_SCAN_RBLOCK = 2048  # longer rows are scanned in chunks with a carry


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    blocks: dict  # {"XBLOCK": .., "YBLOCK": .., "RBLOCK": ..}
    num_warps: int
    grid: tuple


def pick_config(kind: str, xnumel: int, ynumel: int, rnumel: int, on_gpu: bool,
                hint: str = "") -> LaunchConfig:
    """hint: for reductions, "outer" when inputs are contiguous along rows (x), not along r."""
    if kind == "pointwise":
        return pointwise_config(xnumel, ynumel, on_gpu)
    if kind in ("persistent_reduction", "scan"):
        return persistent_reduction_config(xnumel, rnumel, on_gpu, hint == "outer")
    if kind == "reduction":
        return looped_reduction_config(xnumel, rnumel, on_gpu, hint == "outer")
    if kind == "looped_scan":
        return looped_scan_config(xnumel, rnumel, on_gpu, hint == "outer")
    raise ValueError(f"unknown kernel kind {kind!r}")


def pointwise_config(xnumel: int, ynumel: int, on_gpu: bool) -> LaunchConfig:
    """Measured on an H100 (bench/pointwise_configs.py, docs/benchmarks.md): 1-D kernels peak at
    XBLOCK=2048 with 4 warps (16 elements a thread); transposing 2-D tiles at 128x128, 4 warps.
    On the CPU (interpreter), bigger blocks mean fewer interpreted programs."""
    if ynumel > 1:
        ylimit, xlimit = 128, 128
        xblock = min(xlimit, triton.next_power_of_2(xnumel))
        yblock = min(ylimit, triton.next_power_of_2(ynumel))
        grid = (triton.cdiv(xnumel, xblock) * triton.cdiv(ynumel, yblock),)
        return LaunchConfig({"YBLOCK": yblock, "XBLOCK": xblock}, 4, grid)
    limit = 2048 if on_gpu else MAX_BLOCK_1D
    xblock = min(limit, triton.next_power_of_2(xnumel))
    num_warps = 4 if xblock >= 1024 else (2 if xblock >= 256 else 1)
    return LaunchConfig({"XBLOCK": xblock}, num_warps, (triton.cdiv(xnumel, xblock),))


def persistent_reduction_config(xnumel: int, rnumel: int, on_gpu: bool, outer: bool = False) -> LaunchConfig:
    """The whole row in registers: about 4096 elements a program on the GPU (8 warps once rows
    pass 2048), several rows a program when rows are short. Outer reductions need at least
    32 rows a program so that loads along the rows coalesce. (16 warps for a plain sum over
    rows of 4096 measured 91.5% of copy bandwidth in one H100 sweep and 71.6% in a later run,
    against a steady 88-89% with 8: not taken.)"""
    rblock = triton.next_power_of_2(rnumel)
    budget = (4096 if rblock >= 2048 else 2048) if on_gpu else 1 << 16
    xblock = max(1, min(MAX_XBLOCK_REDUCTION, budget // rblock, triton.next_power_of_2(xnumel)))
    if outer:
        xblock = min(MAX_XBLOCK_REDUCTION, max(xblock, 32), triton.next_power_of_2(xnumel))
    num_warps = 8 if rblock * xblock >= 4096 and rblock >= 2048 else 4
    if rblock * xblock <= 256:
        num_warps = 2
    return LaunchConfig({"XBLOCK": xblock}, num_warps, (triton.cdiv(xnumel, xblock),))


def looped_reduction_config(xnumel: int, rnumel: int, on_gpu: bool, outer: bool = False) -> LaunchConfig:
    """Long rows: one row a program walking RBLOCK elements at a time. Outer reductions (rows
    contiguous) take 64 rows by 256 reduced elements, so every load is a coalesced row segment
    (sum_first: 78.0% of copy bandwidth, 76.5% with 128).
    Measured on an H100 (bench/reduction_configs.py, docs/benchmarks.md)."""
    if not on_gpu:
        rblock = min(MAX_RBLOCK_LOOPED, triton.next_power_of_2(rnumel))
        xblock = max(1, min(MAX_XBLOCK_REDUCTION, (1 << 16) // rblock, triton.next_power_of_2(xnumel)))
        return LaunchConfig({"XBLOCK": xblock, "RBLOCK": rblock}, 4, (triton.cdiv(xnumel, xblock),))
    if outer:
        rblock, xblock, warps = 256, 64, 8
    else:
        rblock, xblock, warps = 4096, 1, 4
    rblock = min(rblock, triton.next_power_of_2(rnumel))
    xblock = min(xblock, triton.next_power_of_2(xnumel))
    return LaunchConfig({"XBLOCK": xblock, "RBLOCK": rblock}, warps, (triton.cdiv(xnumel, xblock),))


def looped_scan_config(xnumel: int, rnumel: int, on_gpu: bool, outer: bool = False) -> LaunchConfig:
    """Rows longer than MAX_PERSISTENT_SCAN_RBLOCK, a chunk at a time. On the GPU one row a
    program in chunks of 1024 (4 warps), or for scans along a strided dim 64 rows by 32
    positions so loads coalesce along the rows. Not yet tuned on hardware."""
    if not on_gpu:
        rblock = min(1024, triton.next_power_of_2(rnumel))
        xblock = max(1, min(MAX_XBLOCK_REDUCTION, (1 << 16) // rblock, triton.next_power_of_2(xnumel)))
        return LaunchConfig({"XBLOCK": xblock, "RBLOCK": rblock}, 4, (triton.cdiv(xnumel, xblock),))
    rblock, xblock = (32, 64) if outer else (1024, 1)
    rblock = min(rblock, triton.next_power_of_2(rnumel))
    xblock = min(xblock, triton.next_power_of_2(xnumel))
    return LaunchConfig({"XBLOCK": xblock, "RBLOCK": rblock}, 4, (triton.cdiv(xnumel, xblock),))
