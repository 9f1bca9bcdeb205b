"""The Triton text of each reduction type, for persistent and looped reduction kernels.

* persistent: the whole (masked) row tile reduces at once (`helpers.sum2(tile, 1)`),
  NaN-propagating max/min, (value, index) argmax with first-index ties, and var and mean by
  the corrected two-pass form (Chan, Golub and LeVeque): the deviations d from m = sum / n,
  summed with their squares in one reduction, give mean = m + sum(d) / n and var from
  sum(d^2) - sum(d)^2 / n (at least 0, NaN kept). sum / n may be an ulp off a row of equal
  values; the correction is exactly that ulp, so their mean is the value and their var 0, as
  eager's.
* looped: per-lane accumulators of shape [XBLOCK, RBLOCK] are initialized before the loop,
  updated each iteration and reduced across lanes after it; var and mean keep per-lane Welford
  states (one state for both, for the same values) and merge them with Chan's parallel formula
  (runtime/triton_helpers.py).

Results are [XBLOCK, 1] columns in the buffer's dtype (int64 for argmax/argmin).
"""
from __future__ import annotations

import torch

from ..ir.nodes import neutral_value
from .ops_table import render_constant, render_op, triton_dtype

WELFORD_TYPES = ("var", "mean")
LANE_REDUCERS = {"sum": "helpers.sum2({0}, 1)", "prod": "helpers.prod({0}, 1)",
                 "max": "helpers.max2({0}, 1)", "min": "helpers.min2({0}, 1)"}
LANE_UPDATES = {"sum": "{0} + {1}", "prod": "{0} * {1}", "max": "helpers.maximum({0}, {1})",
                "min": "helpers.minimum({0}, {1})"}


def persistent_lines(writer, buffer, tile: str, dtype: torch.dtype) -> str:
    """max, min, prod, argmax, argmin of a whole row tile (sum, var and mean: `moment_lines`)."""
    rtype = buffer.reduction_type
    if rtype in LANE_REDUCERS:
        return writer.new_var(LANE_REDUCERS[rtype].format(tile))
    indices = writer.new_var("tl.broadcast_to(rindex, [XBLOCK, RBLOCK])")
    return _arg_result(writer, rtype, tile, indices)


def moment_lines(writer, tile: str, total: str, dtype: torch.dtype, rnumel, corrections: list[float],
                 mean_wanted: bool) -> tuple[dict, str | None]:
    """var (one per correction) and mean of a row tile whose sum is `total`, from one reduction
    of the deviations and their squares: ({correction: var}, mean or None). rnumel: the row
    length, an int or (symbolic sizes) the kernel variable's name."""
    rough_mean = writer.new_var(_divide(total, rnumel, dtype))
    deviation = writer.new_var(f"{tile} - {rough_mean}")
    if writer.apply_r_mask:
        deviation = writer.new_var(f"tl.where(rmask, {deviation}, {render_constant(0, dtype)})")
    if corrections:
        squares, residue = f"tmp{writer.counter}", f"tmp{writer.counter + 1}"
        writer.counter += 2
        writer.lines.append(f"{squares}, {residue} = helpers.sum_pair({deviation} * {deviation}, {deviation}, 1)")
    else:
        residue = writer.new_var(f"helpers.sum2({deviation}, 1)")
    residue_mean = writer.new_var(_divide(residue, rnumel, dtype))
    variances = {}
    if corrections:
        zero = render_constant(0, dtype)
        # NaN-propagating: a row holding a NaN or an infinity has a NaN variance, as eager's
        m2 = writer.new_var(f"helpers.maximum({squares} - {residue} * {residue_mean}, {zero})")
        variances = {c: writer.new_var(_divide(m2, _dof(rnumel, c), dtype)) for c in corrections}
    return variances, (writer.new_var(f"{rough_mean} + {residue_mean}") if mean_wanted else None)


def init_lines(buffer, state: list[str], dtype: torch.dtype) -> list[str]:
    rtype = buffer.reduction_type
    shape = "[XBLOCK, RBLOCK]"
    if rtype in WELFORD_TYPES:
        return [f"{s} = tl.full({shape}, 0, {triton_dtype(dtype)})" for s in state]
    neutral = render_constant(neutral_value(rtype, dtype), dtype)
    lines = [f"{state[0]} = tl.full({shape}, {neutral}, {triton_dtype(dtype)})"]
    if rtype in ("argmax", "argmin"):
        lines.append(f"{state[1]} = tl.full({shape}, 0, tl.int64)")
    return lines


def update_lines(writer, buffer, state: list[str], value: str, dtype: torch.dtype) -> None:
    rtype = buffer.reduction_type
    if rtype in WELFORD_TYPES:
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


def finalize_lines(writer, buffer, state: list[str], dtype: torch.dtype, rnumel, merged: dict) -> str:
    """merged: the Welford states already merged across lanes in this kernel ({state's first
    name: (mean, m2)}), var and mean of the same values sharing one."""
    rtype = buffer.reduction_type
    if rtype in LANE_REDUCERS:
        return writer.new_var(LANE_REDUCERS[rtype].format(state[0]))
    if rtype in ("argmax", "argmin"):
        return _arg_result(writer, rtype, state[0], state[1])
    if state[0] not in merged:
        mean, m2, count = (f"tmp{writer.counter + k}" for k in range(3))
        writer.counter += 3
        writer.lines.append(f"{mean}, {m2}, {count} = helpers.welford({', '.join(state)}, 1)")
        merged[state[0]] = (mean, m2)
    mean, m2 = merged[state[0]]
    if rtype == "mean":
        return mean
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
