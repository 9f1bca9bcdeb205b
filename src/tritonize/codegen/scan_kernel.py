"""render_scan_kernel: one scan KernelGroup -> a persistent or looped Triton scan kernel.

A scan kernel works on [XBLOCK, RBLOCK] tiles like a reduction kernel (codegen/reduction_kernel.py,
whose writer this one extends): XBLOCK rows, RBLOCK positions along the scanned dim. Every member
is shaped like the scanned tensor (schedule/scans.py) and is computed on the same tile, in order:
pointwise members as expressions, ScanBuffers with `tl.associative_scan` over the tile's rows
(runtime/triton_helpers.py holds the combine functions).

* persistent ("scan"): the whole row is one tile; one scan a member.
* looped ("looped_scan"): the row is walked RBLOCK positions at a time; each chunk is scanned
  and combined with a carry, the scan's value at the end of the previous chunk, which is
  ([XBLOCK, 1]) taken from the chunk's last lane. cummax/cummin carry the value and its index.

cummax's values and indices over the same input share one (value, index) scan. Masked lanes
(past the row's end) only ever follow the valid ones, so they never change a valid result.
"""
from __future__ import annotations

import torch
import triton

from ..errors import CompileError
from ..ir import expr as ex
from ..ir.nodes import ScanBuffer
from ..runtime.heuristics import MAX_PERSISTENT_SCAN_RBLOCK
from .kernel import RenderedKernel, kernel_source
from .ops_table import render_constant, triton_dtype
from ..ir.sizes import SizeOracle, is_symbolic
from .reduction_kernel import (Member, RowIteration, Stage, _head_lines, _member, _ReductionWriter, plan_rows,
                               rows_are_contiguous)
from .reduction_ops import neutral_value

SCAN_FUNCTIONS = {"sum": "helpers.cumsum", "prod": "helpers.cumprod", "max": "helpers.cummax",
                  "min": "helpers.cummin", "logsumexp": "helpers.logcumsumexp"}
CARRY_COMBINES = {"sum": "({0} + {1})", "prod": "({0} * {1})", "max": "helpers.maximum({0}, {1})",
                  "min": "helpers.minimum({0}, {1})", "logsumexp": "helpers.logaddexp({0}, {1})"}


def render_scan_kernel(group, buffers: dict, name: str, sizes: SizeOracle | None = None) -> RenderedKernel:
    """sizes: the graph's SizeOracle when its sizes are symbolic; a row of symbolic length gets
    the looped kernel, right for any length."""
    members = [_member(group.rows, b) for b in group.buffers]
    plan = plan_rows(group, members, buffers, sizes)
    space = plan.space
    rblock = triton.next_power_of_2(max(plan.hints[1], 1))
    persistent = not is_symbolic(space.rnumel) and rblock <= MAX_PERSISTENT_SCAN_RBLOCK
    writer = _ScanWriter(space, buffers, group, members, persistent, plan.use_int64)
    writer.size_renames = plan.size_params.renames if plan.size_params is not None else {}
    writer.write_all([Stage(full_stores=members)])
    stored = [m.buffer.name for m in members if m.buffer.name not in group.internal]
    params = [writer.pointer(n) for n in writer.loaded] + [writer.pointer(n, stored=True) for n in stored]
    params, arg_names = plan.parameters(params, writer.loaded_arguments() + stored)
    source = kernel_source(name, params, ["XBLOCK"] if persistent else ["XBLOCK", "RBLOCK"],
                           _head_lines(space, writer, group, rblock if persistent else None) + writer.lines)
    kind = "scan" if persistent else "looped_scan"
    hint = "outer" if _scans_along_rows(space, members) else "inner"
    return RenderedKernel(name, source, kind, arg_names, plan.hints[0], 1, group.origins(),
                          rnumel=plan.hints[1], hint=hint, numel_exprs=plan.numel_exprs)


def _scans_along_rows(space: RowIteration, members) -> bool:
    """True when the scans' inputs are contiguous along rows (x), not along the scanned dim."""
    return rows_are_contiguous(space, [m for m in members if isinstance(m.buffer, ScanBuffer)])


def _lowest(dtype: torch.dtype):
    return float("-inf") if dtype.is_floating_point else torch.iinfo(dtype).min


def _typed_constant(value, dtype: torch.dtype) -> str:
    """A scalar of exactly dtype (an int literal such as -2**31 could otherwise widen)."""
    if dtype.is_floating_point:
        return render_constant(value, dtype)
    return f"tl.full([], {int(value)}, {triton_dtype(dtype)})"


def _neutral(family: str, dtype: torch.dtype):
    return float("-inf") if family == "logsumexp" else neutral_value(family, dtype)


class _ScanWriter(_ReductionWriter):
    """Writes every member on one tile (or chunk); ScanBuffers become scans, the rest is
    inherited: loads with per-dim masks, in-group values in registers, stores."""

    even_masks = False  # scans launch without EVEN (a carry crosses chunks: not measured)

    def __init__(self, *args):
        super().__init__(*args)
        self.before_loop: list[str] = []  # carry initializations (looped kernels)
        self.carries = 0

    def _store_full(self, member: Member) -> None:
        if not isinstance(member.buffer, ScanBuffer):
            super()._store_full(member)
            return
        values, indices = self._scan(member)
        value = indices if member.buffer.scan_type.startswith("arg") else values
        index = self.space.rewrite.get(member.store_index, member.store_index)
        self.stored_values[(member.buffer.name, index)] = value
        if member.buffer.name not in self.group.internal:
            self.store_at(member, index, value)

    def _load(self, e: ex.Expr, mask):
        name, index = e.args
        member = self.members.get(name)
        rewritten = self.space.rewrite.get(index, index)
        is_scan = member is not None and isinstance(member.buffer, ScanBuffer)
        if is_scan and (name, rewritten) not in self.stored_values:
            # The inherited fallback recomputes a member from its body, which for a scan is its input.
            raise CompileError("codegen", f"scan kernel reads {name} at {index}, "
                               "not at an element it computed")
        return super()._load(e, mask)

    def _looped_stage(self, stage: Stage) -> list[str]:
        results = super()._looped_stage(stage)
        loop_at = max(i for i, line in enumerate(self.lines) if line.startswith("for roffset in range("))
        self.lines[loop_at:loop_at] = self.before_loop
        self.before_loop = []
        return results

    def _scan(self, member: Member) -> tuple[str, str | None]:
        """(values, indices) of the scan of member's body; indices only for cummax/cummin."""
        family = member.buffer.scan_type.removeprefix("arg")
        paired = family in ("max", "min") and any(
            isinstance(m.buffer, ScanBuffer) and m.buffer.scan_type == f"arg{family}"
            and m.body == member.body for m in self.members.values())
        key = ("scan", member.body, family, paired)  # lives in the render cache: reset per loop
        if key not in self.cache:
            dtype = member.body.dtype
            tile = self.tile(self.render(member.body, self.full_mask), dtype)
            if paired:
                self.cache[key] = self._paired_scan(family, tile, dtype)
            else:
                self.cache[key] = (self._single_scan(family, tile, dtype), None)
        return self.cache[key]

    def _single_scan(self, family: str, tile: str, dtype: torch.dtype) -> str:
        scanned = self.new_var(f"{SCAN_FUNCTIONS[family]}({tile}, 1)")
        if self.persistent:
            return scanned
        carry = self._carry(_neutral(family, dtype), dtype)
        result = self.new_var(CARRY_COMBINES[family].format(carry, scanned))
        self.lines.append(f"{carry} = {self._last_lane(result, dtype)}")
        return result

    def _paired_scan(self, family: str, tile: str, dtype: torch.dtype) -> tuple[str, str]:
        positions = self.new_var("tl.broadcast_to(rindex, [XBLOCK, RBLOCK]).to(tl.int64)")
        values, indices = self._pair_names()
        self.lines.append(f"{values}, {indices} = helpers.cum{family}_index({tile}, {positions}, 1)")
        if self.persistent:
            return values, indices
        carry_value = self._carry(_neutral(family, dtype), dtype)
        carry_index = self._carry(0, torch.int64)
        result_values, result_indices = self._pair_names()
        self.lines.append(f"{result_values}, {result_indices} = helpers.cum{family}_combine("
                          f"{carry_value}, {carry_index}, {values}, {indices})")
        self.lines.append(f"{carry_value} = {self._last_lane(result_values, dtype)}")
        self.lines.append(f"{carry_index} = {self._last_lane(result_indices, torch.int64)}")
        return result_values, result_indices

    def _pair_names(self) -> tuple[str, str]:
        names = f"tmp{self.counter}", f"tmp{self.counter + 1}"
        self.counter += 2
        return names

    def _carry(self, initial, dtype: torch.dtype) -> str:
        name = f"carry{self.carries}"
        self.carries += 1
        if not self.before_loop:
            self.before_loop.append("rlast = tl.arange(0, RBLOCK)[None, :] == RBLOCK - 1")
        self.before_loop.append(f"{name} = tl.full([XBLOCK, 1], {_typed_constant(initial, dtype)}, "
                                f"{triton_dtype(dtype)})")
        return name

    def _last_lane(self, tile: str, dtype: torch.dtype) -> str:
        """The tile's last column as [XBLOCK, 1] (a max over the row with the others at the lowest
        value: Triton's reductions may combine lanes in any order, so no "take the right one")."""
        return f"helpers.max2(tl.where(rlast, {tile}, {_typed_constant(_lowest(dtype), dtype)}), 1)"
