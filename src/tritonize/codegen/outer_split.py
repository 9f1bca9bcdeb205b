"""Outer reductions of few columns, split along their rows inside one kernel.

A looped outer reduction runs one program per XBLOCK columns. A training step's weight and bias
gradients sum few columns over many rows (GPT-2: 768 columns of 1048 rows, 12 programs of 64
columns, or 96 of 8), so most SMs idle: 12-22 us a kernel on the H100 against 2-6 us of
bandwidth. Splitting the reduction at lowering (lower/reductions.py's split reductions) would
cut the kernel from what it is fused with (the layer norm's dx, stored in the same loop) and add
kernels. Here the kernel keeps its fusion and gets SPLIT programs per column block instead:

* program p works on column block `p % xprograms` and on rows [rstart, rend) of chunk
  `p // xprograms` (`rsplit`); stores along the rows (dx) happen in the loop as before;
* after the loop each program writes its partial results to a workspace
  `[reductions, SPLIT, xnumel]` (fp32), then adds one to its column block's counter;
* the program that brings the counter to SPLIT reduces the SPLIT partials of its columns,
  resets the counter to 0 and runs the rest of the kernel (the stores of the results).

The counters (`runtime.wrapper_support.split_counters`) are zeros kept per device and stream:
every launch leaves them at zero. The workspace is allocated per call. SPLIT is chosen when the
kernel is generated, from the example sizes, and baked in; the runtime multiplies the grid by it
(`KernelShape.split`). A kernel of symbolic row length keeps its persistent body for short rows,
run by the programs of chunk 0 only.

Only single-pass kernels whose reductions are fp32 sums, products, maxima or minima split (no
var, no argmax, no online softmax, no second pass over the rows).
"""
from __future__ import annotations

import torch
import triton

from .reduction_ops import LANE_REDUCERS, neutral_value
from .ops_table import render_constant

TARGET_PROGRAMS = 256  # about two programs an SM on an H100 (132 SMs)
MAX_SPLIT = 32
MIN_CHUNK_ROWS = 64  # rows a program reduces, at the fewest
MIN_ELEMENTS = 1 << 18  # smaller inputs take a few microseconds in one program a column block
COLUMN_BLOCK = 64  # columns a program of an outer reduction reads (heuristics' first pick)
SPLITTABLE = tuple(LANE_REDUCERS)


def choose_split(xnumel_hint: int, rnumel_hint: int, members, online_pairs: bool, passes: int) -> int:
    """SPLIT for an outer looped reduction kernel at the example sizes (1: no split).
    online_pairs: it computes an online softmax (partial sums relative to partial maxima: not
    split); passes: its loops over the rows (one only)."""
    if online_pairs or passes != 1 or not _splittable(members):
        return 1
    if xnumel_hint * rnumel_hint < MIN_ELEMENTS:
        return 1
    column_blocks = triton.cdiv(xnumel_hint, COLUMN_BLOCK)
    limit = min(MAX_SPLIT, TARGET_PROGRAMS // column_blocks, rnumel_hint // MIN_CHUNK_ROWS)
    split = 1
    while split * 2 <= limit:
        split *= 2
    return split if split > 1 else 1


def _splittable(members) -> bool:
    reductions = [m for m in members if m.role == "reduction"]
    return bool(reductions) and all(
        m.buffer.reduction_type in SPLITTABLE and m.body.dtype == torch.float32 for m in reductions)


def head_lines(split: int, xnumel_text: str, program: str) -> list[str]:
    """The program's column block and row chunk (before xindex)."""
    return [f"SPLIT: tl.constexpr = {split}",
            f"xprograms = ({xnumel_text} + XBLOCK - 1) // XBLOCK",
            f"rsplit = {program} // xprograms",
            f"xprogram = {program} % xprograms"]


def chunk_lines(use_int64: bool) -> list[str]:
    """This program's rows: [rstart, rend)."""
    first = "rsplit.to(tl.int64)" if use_int64 else "rsplit"
    return ["rchunk = (rnumel + SPLIT - 1) // SPLIT",
            f"rstart = {first} * rchunk",
            "rend = tl.minimum(rstart + rchunk, rnumel)"]


def combine_lines(writer, members, results: list[str]) -> tuple[list[str], list[str]]:
    """(lines after the loop, result names for the last program): each partial stored, the
    counter raised, and, under `if` for the last program, the partials reduced."""
    mask = f", {writer.x_mask}" if writer.x_mask else ""
    lines = [f"tl.store(ws_ptr + ({k} * SPLIT + rsplit) * xnumel + xindex, {value}{mask})"
             for k, value in enumerate(results)]
    lines += ["tl.debug_barrier()  # every thread's partials are written before the count",
              "if tl.atomic_add(sem_ptr + xprogram, 1, sem='acq_rel') == SPLIT - 1:",
              "    tl.store(sem_ptr + xprogram, 0)"]
    combined = []
    for k, member in enumerate(members):
        rtype = member.buffer.reduction_type
        other = render_constant(neutral_value(rtype, torch.float32), torch.float32)
        masked = f"{mask}, other={other}" if mask else ""
        parts = (f"tl.load(ws_ptr + ({k} * SPLIT + tl.arange(0, SPLIT)[None, :]) * xnumel + xindex{masked}, "
                 f"cache_modifier='.cg')")
        name = f"tmp{writer.counter}"
        writer.counter += 1
        lines.append(f"    {name} = {LANE_REDUCERS[rtype].format(parts)}")
        combined.append(name)
    return lines, combined
