"""Which buffers join a scan kernel.

A scan kernel iterates over a row space (schedule/rows.py): x = the dims a scan keeps, r = the
scanned dim. Every member is shaped like the scanned tensor (role "full"): the ScanBuffers
themselves and pointwise buffers computed at the same element, before a scan (a stored
prologue) or after it (an epilogue). They all run in one pass over each row, chunk by chunk, so
a member may read the group's buffers only at the element it computes. Reductions and
row-shaped buffers start their own kernels (a scan's carry is not a reduction stage).

Not responsible for: rendering the kernel (codegen/scan_kernel.py).
"""
from __future__ import annotations

from ..ir.nodes import ComputedBuffer, ReductionBuffer, ScanBuffer
from .rows import RowSpace


def scan_row_space(buffer: ScanBuffer) -> RowSpace:
    sizes = buffer.layout.size
    source = tuple((s, k == buffer.scan_dim) for k, s in enumerate(sizes) if s != 1)
    x_sizes = tuple(s for k, s in enumerate(sizes) if s != 1 and k != buffer.scan_dim)
    return RowSpace(x_sizes, (sizes[buffer.scan_dim],), source)


def is_scan_group(group) -> bool:
    return any(isinstance(b, ScanBuffer) for b in group.buffers)


def fits_scan_space(rows: RowSpace, buffer: ComputedBuffer) -> bool:
    """buffer can be a member of a scan kernel over rows (before checking what it reads)."""
    if isinstance(buffer, ReductionBuffer):
        return False
    if isinstance(buffer, ScanBuffer) and scan_row_space(buffer) != rows:
        return False
    return rows.role(buffer) == "full"


def scan_joins(group, op: ComputedBuffer, reads_in_place) -> bool:
    """op joins group (a pointwise or scan group). A pointwise group that a scan joins becomes
    the scan's prologue (group.rows is set). reads_in_place(buffers, rows) is schedule/fusion.py's
    check that each buffer reads the ones before it only at its own element."""
    if group.rows is not None and not is_scan_group(group):
        return False  # a reduction kernel
    rows = group.rows if group.rows is not None else scan_row_space(op)
    members = group.buffers + [op]
    if not all(fits_scan_space(rows, b) for b in members) or not reads_in_place(members, rows):
        return False
    group.rows = rows
    return True
