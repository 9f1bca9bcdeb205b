"""Small @triton.jit functions that generated kernels call as `helpers.NAME(...)`.

They give torch's semantics where Triton's operators differ: Python-style floor division and
remainder (Triton's // and % truncate toward zero), max/min that propagate NaN like torch.maximum,
fmax/fmin that ignore NaN, sign, shifts by any amount (Triton's are undefined past the bit width),
integer pow and gcd. The CPU path loads this same file a second time under
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


@triton.jit
def shift_left(a, b, BITS: tl.constexpr):
    # torch: a shift by a negative amount or by BITS or more gives 0 (Triton's << is undefined there)
    in_range = (b >= 0) & (b < BITS)
    return tl.where(in_range, a << tl.where(in_range, b, 0), 0)


@triton.jit
def shift_right(a, b, BITS: tl.constexpr):
    # torch: out-of-range shifts fill with the sign (-1 for negative signed values, else 0)
    in_range = (b >= 0) & (b < BITS)
    shifted = a >> tl.where(in_range, b, BITS - 1)
    return tl.where(in_range | (a < 0), shifted, 0)


@triton.jit
def pow_int(base, exponent):
    # torch's integer pow: square and multiply (wrapping like the dtype); a negative exponent gives
    # 1 for base 1, +-1 for base -1 and 0 otherwise
    zero = base * 0 + exponent * 0  # broadcast (either may be a 0-d value or a literal)
    base = base + zero
    exponent = exponent + zero
    result = zero + 1
    square = base
    remaining = exponent
    for _ in range(64):
        result = tl.where((remaining & 1) != 0, result * square, result)
        square = square * square
        remaining = remaining >> 1
    is_minus_one = (base + 1) == 0
    odd = (exponent & 1) != 0
    negative_power = tl.where((base == 1) | (is_minus_one & ~odd), zero + 1, tl.where(is_minus_one, base, zero))
    return tl.where(exponent < 0, negative_power, result)


@triton.jit
def gcd_int(a, b):
    # Euclid's algorithm on |a|, |b|; 96 steps cover any pair of 64-bit values
    zero = a * 0 + b * 0
    x = tl.abs(a + zero)
    y = tl.abs(b + zero)
    for _ in range(96):
        nonzero = x != 0
        remainder = y % tl.where(nonzero, x, 1)
        y = tl.where(nonzero, x, y)
        x = tl.where(nonzero, remainder, x)
    return y
