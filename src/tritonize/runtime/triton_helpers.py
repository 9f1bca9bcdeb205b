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
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def minimum(a, b):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def fmax(a, b):
    return tl.where((a >= b) | (b != b), a, b)


@triton.jit
def fmin(a, b):
    return tl.where((a <= b) | (b != b), a, b)


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
