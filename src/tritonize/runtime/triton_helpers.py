"""Small @triton.jit functions that generated kernels call as `helpers.NAME(...)`.

They give torch's semantics where Triton's operators differ: Python-style floor division and
remainder (Triton's // and % truncate toward zero), max/min that propagate NaN like torch.maximum,
fmax/fmin that ignore NaN, and sign. The CPU path loads this same file a second time under
Triton's interpreter (runtime/loader.py).
"""
import triton
import triton.language as tl


@triton.jit
def maximum(a, b):
    # nested wheres, not `|`: the interpreter cannot `|` a scalar mask with a block one
    return tl.where(a != a, a, tl.where(a > b, a, b))


@triton.jit
def minimum(a, b):
    return tl.where(a != a, a, tl.where(a < b, a, b))


@triton.jit
def fmax(a, b):
    return tl.where(b != b, a, tl.where(a >= b, a, b))


@triton.jit
def fmin(a, b):
    return tl.where(b != b, a, tl.where(a <= b, a, b))


@triton.jit
def sign(x):
    # like torch: (0 < x) - (x < 0), so sign(nan) is 0
    return tl.where(x > 0, 1, tl.where(x < 0, -1, 0)).to(x.dtype)


@triton.jit
def floordiv_int(a, b):
    quotient = a // b
    remainder = a % b
    needs_fix = (remainder != 0) & ((remainder < 0) != (b < 0))
    return tl.where(needs_fix, quotient - 1, quotient)


@triton.jit
def remainder_int(a, b):
    remainder = a % b
    needs_fix = (remainder != 0) & ((remainder < 0) != (b < 0))
    return tl.where(needs_fix, remainder + b, remainder)


@triton.jit
def remainder_float(a, b):
    remainder = a % b
    needs_fix = (remainder != 0) & ((remainder < 0) != (b < 0))
    return tl.where(needs_fix, remainder + b, remainder)


@triton.jit
def div_rn(a, b):
    """IEEE-rounded a / b (Triton's float32 `/` is approximate on the GPU; torch's is not)."""
    if a.dtype == tl.float32:
        return tl.div_rn(a, b)
    else:
        return a / b


@triton.jit
def floordiv_float(a, b):
    # torch's div_floor: exact for representable quotients, no double rounding through a / b.
    mod = a % b
    div = div_rn(a - mod, b)
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    floored = tl.floor(div)
    floored = tl.where(div - floored > 0.5, floored + 1.0, floored)
    quotient = div_rn(a, b)
    result = tl.where(div == 0, 0.0 * quotient, floored)
    return tl.where(b == 0, quotient, result)


# --- reductions: combine functions for tl.reduce, and the per-lane updates of looped kernels ---

@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def sum2(x, axis):
    """tl.sum without dtype promotion (tl.sum is a library @jit function the interpreter cannot
    call from our scoped-interpreter kernels; tl.reduce is a builtin)."""
    return tl.reduce(x, axis, _add, keep_dims=True)


@triton.jit
def _product(a, b):
    return a * b


@triton.jit
def prod(x, axis):
    return tl.reduce(x, axis, _product, keep_dims=True)


@triton.jit
def max2(x, axis):
    """Row maximum that propagates NaN (tl.max does not)."""
    return tl.reduce(x, axis, maximum, keep_dims=True)


@triton.jit
def min2(x, axis):
    return tl.reduce(x, axis, minimum, keep_dims=True)


@triton.jit
def _argmax_combine(value_a, index_a, value_b, index_b):
    a_nan = value_a != value_a
    b_nan = value_b != value_b
    tie = (value_a == value_b) | (a_nan & b_nan)
    take_a = (value_a > value_b) | (a_nan & ~b_nan) | (tie & (index_a < index_b))
    return tl.where(take_a, value_a, value_b), tl.where(take_a, index_a, index_b)


@triton.jit
def _argmin_combine(value_a, index_a, value_b, index_b):
    a_nan = value_a != value_a
    b_nan = value_b != value_b
    tie = (value_a == value_b) | (a_nan & b_nan)
    take_a = (value_a < value_b) | (a_nan & ~b_nan) | (tie & (index_a < index_b))
    return tl.where(take_a, value_a, value_b), tl.where(take_a, index_a, index_b)


@triton.jit
def argmax(value, index, axis):
    """(max, index of its first occurrence) along axis; NaN counts as the largest, like torch."""
    return tl.reduce((value, index), axis, _argmax_combine, keep_dims=True)


@triton.jit
def argmin(value, index, axis):
    return tl.reduce((value, index), axis, _argmin_combine, keep_dims=True)


@triton.jit
def argmax_update(best, best_index, value, index):
    """One step of a looped argmax: lanes keep their earlier element on ties."""
    take = (value > best) | ((value != value) & (best == best))
    return tl.where(take, value, best), tl.where(take, index, best_index)


@triton.jit
def argmin_update(best, best_index, value, index):
    take = (value < best) | ((value != value) & (best == best))
    return tl.where(take, value, best), tl.where(take, index, best_index)


@triton.jit
def welford_update(mean, m2, count, value, mask):
    """Add one element to each lane's running (mean, sum of squared deviations, count)."""
    new_count = tl.where(mask, count + 1.0, count)
    delta = value - mean
    new_mean = tl.where(mask, mean + delta / tl.where(mask, new_count, 1.0), mean)
    new_m2 = tl.where(mask, m2 + delta * (value - new_mean), m2)
    return new_mean, new_m2, new_count


@triton.jit
def _welford_combine(mean_a, m2_a, count_a, mean_b, m2_b, count_b):
    count = count_a + count_b
    delta = mean_b - mean_a
    weight_b = tl.where(count == 0.0, 0.0, count_b / tl.where(count == 0.0, 1.0, count))
    mean = mean_a + delta * weight_b
    m2 = m2_a + m2_b + delta * delta * count_a * weight_b
    return mean, m2, count


@triton.jit
def welford(mean, m2, count, axis):
    """Merge per-lane Welford states along axis (Chan et al.'s parallel update)."""
    return tl.reduce((mean, m2, count), axis, _welford_combine, keep_dims=True)
