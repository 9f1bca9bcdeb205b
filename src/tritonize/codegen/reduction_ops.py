"""The Triton text of each reduction type, for persistent and looped reduction kernels.

* persistent: the whole (masked) row tile reduces at once (`helpers.sum2(tile, 1)`),
  NaN-propagating max/min, (value, index) argmax with first-index ties, and var as the mean then
  the sum of squared deviations (two passes over registers, not memory).
* looped: per-lane accumulators of shape [XBLOCK, RBLOCK] are initialized before the loop,
  updated each iteration and reduced across lanes after it; var keeps per-lane Welford states
  and merges them with Chan's parallel formula (runtime/triton_helpers.py).

Results are [XBLOCK, 1] columns in the buffer's dtype (int64 for argmax/argmin).
"""
from __future__ import annotations

import torch

from ..ir.nodes import neutral_value
from .ops_table import render_constant, render_op, triton_dtype

LANE_REDUCERS = {"sum": "helpers.sum2({0}, 1)", "prod": "helpers.prod({0}, 1)",
                 "max": "helpers.max2({0}, 1)", "min": "helpers.min2({0}, 1)"}
LANE_UPDATES = {"sum": "{0} + {1}", "prod": "{0} * {1}", "max": "helpers.maximum({0}, {1})",
                "min": "helpers.minimum({0}, {1})"}


def persistent_lines(writer, buffer, tile: str, dtype: torch.dtype, rnumel, total: str | None = None) -> str:
    """total: the row sum of tile when the caller has it (var's mean reuses it). rnumel: the row
    length, an int or (symbolic sizes) the kernel variable's name."""
    rtype = buffer.reduction_type
    if rtype in LANE_REDUCERS:
        return writer.new_var(LANE_REDUCERS[rtype].format(tile))
    if rtype in ("argmax", "argmin"):
        indices = writer.new_var("tl.broadcast_to(rindex, [XBLOCK, RBLOCK])")
        return _arg_result(writer, rtype, tile, indices)
    total = total or writer.new_var(f"helpers.sum2({tile}, 1)")
    mean = writer.new_var(_divide(total, rnumel, dtype))
    deviation = writer.new_var(f"{tile} - {mean}")
    if writer.apply_r_mask:
        deviation = writer.new_var(f"tl.where(rmask, {deviation}, {render_constant(0, dtype)})")
    m2 = writer.new_var(f"helpers.sum2({deviation} * {deviation}, 1)")
    return writer.new_var(_divide(m2, _dof(rnumel, buffer.correction), dtype))


def init_lines(buffer, state: list[str], dtype: torch.dtype) -> list[str]:
    rtype = buffer.reduction_type
    shape = "[XBLOCK, RBLOCK]"
    if rtype == "var":
        return [f"{s} = tl.full({shape}, 0, {triton_dtype(dtype)})" for s in state]
    neutral = render_constant(neutral_value(rtype, dtype), dtype)
    lines = [f"{state[0]} = tl.full({shape}, {neutral}, {triton_dtype(dtype)})"]
    if rtype in ("argmax", "argmin"):
        lines.append(f"{state[1]} = tl.full({shape}, 0, tl.int64)")
    return lines


def update_lines(writer, buffer, state: list[str], value: str, dtype: torch.dtype) -> None:
    rtype = buffer.reduction_type
    if rtype == "var":
        writer.lines.append(f"{state[0]}, {state[1]}, {state[2]} = helpers.welford_update("
                            f"{state[0]}, {state[1]}, {state[2]}, {value}, rmask)")
        return
    if writer.apply_r_mask:
        neutral = render_constant(neutral_value(rtype, dtype), dtype)
        value = writer.new_var(f"tl.where(rmask, {value}, {neutral})")
    if rtype in LANE_UPDATES:
        writer.lines.append(f"{state[0]} = {LANE_UPDATES[rtype].format(state[0], value)}")
        return
    writer.lines.append(f"{state[0]}, {state[1]} = helpers.{rtype}_update("
                        f"{state[0]}, {state[1]}, {value}, rindex)")


def finalize_lines(writer, buffer, state: list[str], dtype: torch.dtype, rnumel) -> str:
    rtype = buffer.reduction_type
    if rtype in LANE_REDUCERS:
        return writer.new_var(LANE_REDUCERS[rtype].format(state[0]))
    if rtype in ("argmax", "argmin"):
        return _arg_result(writer, rtype, state[0], state[1])
    mean, m2, count = (f"tmp{writer.counter + k}" for k in range(3))
    writer.counter += 3
    writer.lines.append(f"{mean}, {m2}, {count} = helpers.welford({', '.join(state)}, 1)")
    return writer.new_var(_divide(m2, _dof(rnumel, buffer.correction), dtype))


def _arg_result(writer, rtype: str, values: str, indices: str) -> str:
    best, index = f"tmp{writer.counter}", f"tmp{writer.counter + 1}"
    writer.counter += 2
    writer.lines.append(f"{best}, {index} = helpers.{rtype}({values}, {indices}, 1)")
    return writer.new_var(f"{index}.to(tl.int64)")


def _dof(rnumel, correction: float):
    """var's divisor: the row length less the correction, at least 0 (an int, or the kernel's
    text for a symbolic length)."""
    if isinstance(rnumel, str):
        return f"tl.maximum({rnumel} - {float(correction)!r}, 0.0)"
    return max(rnumel - correction, 0)


def _divide(numerator: str, denominator, dtype: torch.dtype) -> str:
    if isinstance(denominator, str):  # computed in the kernel (fp32), cast to the dtype
        divisor = f"({denominator}).to({triton_dtype(dtype)})"
    else:
        divisor = render_constant(float(denominator), dtype)
    return render_op("truediv", [numerator, divisor], [dtype, dtype], dtype)
