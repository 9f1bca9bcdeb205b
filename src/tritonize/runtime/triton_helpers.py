"""Small @triton.jit functions that generated kernels call as `helpers.NAME(...)`.

They give torch's semantics where Triton's operators differ: Python-style floor division and
remainder (Triton's // and % truncate toward zero), max/min that propagate NaN like torch.maximum,
fmax/fmin that ignore NaN, sign, shifts by any amount (Triton's are undefined past the bit
width), integer pow and gcd, digamma, trigamma, Hurwitz zeta; combine functions of reductions and scans (cumsum, cummax with
its index, logcumsumexp...); Philox random numbers; and the wait every kernel starts with when
launched with programmatic dependent launch. The CPU path loads this same file a
second time under Triton's interpreter (runtime/loader.py).
"""
import triton
import triton.language as tl
from triton.language.extra import libdevice  # CPU modules get runtime/interpreter_libdevice.py

try:  # Hopper's grid dependency control (triton >= 3.4); see wait_for_previous_grid
    from triton.language.extra.cuda import gdc_wait
except ImportError:  # pragma: no cover - older triton: the runtime never sets PDL there
    gdc_wait = None


@triton.jit
def wait_for_previous_grid(PDL: tl.constexpr):
    # Every generated kernel starts here. With PDL the runtime launched it with programmatic
    # dependent launch (runtime/launcher.py): it may start while the previous kernel in the
    # stream is still finishing, and must not touch memory before that kernel is done.
    if PDL:
        gdc_wait()


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
    # like torch: (0 < x) - (x < 0), so sign(nan) is 0. Formed in fp32 and cast once: an integer
    # where() cast straight to bf16 gave -1 for positive inputs on sm_90 (Triton 3.6)
    return (tl.where(x > 0, 1.0, 0.0) - tl.where(x < 0, 1.0, 0.0)).to(x.dtype)


@triton.jit
def nan_at_infinity(x, value):
    # torch's i0 and i1 give nan at +-inf on the CPU and on CUDA; libdevice gives the limit
    return tl.where(tl.abs(x) == float("inf"), float("nan"), value)


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


# Triton's reduce and scan builtins. CPU modules get tile-at-a-time twins that call the same
# combine functions (runtime/interpreter_tiles.py, bound by runtime/loader.py).
reduce_along = tl.reduce
scan_along = tl.associative_scan


# --- reductions: combine functions for tl.reduce, and the per-lane updates of looped kernels ---

@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def sum2(x, axis):
    """tl.sum without dtype promotion (tl.sum is a library @jit function the interpreter cannot
    call from our scoped-interpreter kernels; tl.reduce is a builtin)."""
    return reduce_along(x, axis, _add, keep_dims=True)


@triton.jit
def _add_pairs(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


@triton.jit
def sum_pair(x, y, axis):
    """The sums of two tiles in one reduction (one exchange between threads, not two)."""
    return reduce_along((x, y), axis, _add_pairs, keep_dims=True)


@triton.jit
def _product(a, b):
    return a * b


@triton.jit
def prod(x, axis):
    return reduce_along(x, axis, _product, keep_dims=True)


@triton.jit
def max2(x, axis):
    """Row maximum that propagates NaN (tl.max does not)."""
    return reduce_along(x, axis, maximum, keep_dims=True)


@triton.jit
def min2(x, axis):
    return reduce_along(x, axis, minimum, keep_dims=True)


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
    return reduce_along((value, index), axis, _argmax_combine, keep_dims=True)


@triton.jit
def argmin(value, index, axis):
    return reduce_along((value, index), axis, _argmin_combine, keep_dims=True)


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
    return reduce_along((mean, m2, count), axis, _welford_combine, keep_dims=True)


# --- scans: combine functions for tl.associative_scan, and the carry between chunks of a row ---

@triton.jit
def cumsum(x, axis):
    return scan_along(x, axis, _add)


@triton.jit
def cumprod(x, axis):
    return scan_along(x, axis, _product)


@triton.jit
def cummax(x, axis):
    """Running maximum; NaN propagates (torch.cummax's values)."""
    return scan_along(x, axis, maximum)


@triton.jit
def cummin(x, axis):
    return scan_along(x, axis, minimum)


@triton.jit
def logaddexp(a, b):
    """log(exp(a) + exp(b)) without overflow; -inf is the identity, NaN propagates."""
    top = maximum(a, b)
    bottom = minimum(a, b)
    t = tl.exp(bottom - top)
    # log1p(t) without libdevice: log(u) * t / (u - 1) with u = 1 + t is exact to rounding.
    u = 1.0 + t
    log1p_t = tl.where(u == 1.0, t, tl.log(u) * (t / tl.where(u == 1.0, 1.0, u - 1.0)))
    finite = (top == top) & (top != float("inf")) & (bottom != float("-inf"))
    return tl.where(finite, top + log1p_t, top)


@triton.jit
def logcumsumexp(x, axis):
    return scan_along(x, axis, logaddexp)


@triton.jit
def cummax_combine(value_a, index_a, value_b, index_b):
    """b comes after a: b wins ties and when it is NaN, so the index is the last maximum and
    NaN counts as the largest value (torch.cummax). Associative: it keeps the larger of the keys
    (is NaN, value, index)."""
    take_b = (value_b != value_b) | ((value_a == value_a) & (value_b >= value_a))
    return tl.where(take_b, value_b, value_a), tl.where(take_b, index_b, index_a)


@triton.jit
def cummin_combine(value_a, index_a, value_b, index_b):
    take_b = (value_b != value_b) | ((value_a == value_a) & (value_b <= value_a))
    return tl.where(take_b, value_b, value_a), tl.where(take_b, index_b, index_a)


@triton.jit
def cummax_index(value, index, axis):
    """(running maximum, index of its last occurrence) along axis."""
    return scan_along((value, index), axis, cummax_combine)


@triton.jit
def cummin_index(value, index, axis):
    return scan_along((value, index), axis, cummin_combine)


# --- random numbers: Philox4x32-10 (Salmon et al., SC'11) from a seed, an element offset and a
# stream id, so every element of every random op in a graph draws from its own counter ---

@triton.jit
def _mul_hi_lo(a, multiplier):
    product = a.to(tl.uint64) * multiplier
    return (product >> 32).to(tl.uint32), product.to(tl.uint32)


@triton.jit
def philox4x32(c0, c1, c2, c3, k0, k1):
    """Ten rounds of Philox4x32 on the 128-bit counter (c0..c3) with the 64-bit key (k0, k1)."""
    for _ in tl.static_range(10):
        hi0, lo0 = _mul_hi_lo(c0, 0xD2511F53)
        hi1, lo1 = _mul_hi_lo(c2, 0xCD9E8D57)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = k0 + 0x9E3779B9  # the Weyl sequence of the key schedule (wraps mod 2**32)
        k1 = k1 + 0xBB67AE85
    return c0, c1, c2, c3


@triton.jit
def random_bits(seed, offset, stream):
    """Four uint32 words for each element offset: key = the 64-bit seed, counter = (offset low
    word, offset high word, stream, 0)."""
    wide = offset.to(tl.int64)
    zero = (wide * 0).to(tl.uint32)
    c0 = wide.to(tl.uint32)
    c1 = (wide >> 32).to(tl.uint32)
    c2 = zero + stream
    seed = seed.to(tl.int64)
    k0 = seed.to(tl.uint32)
    k1 = (seed >> 32).to(tl.uint32)
    return philox4x32(c0, c1, c2, zero, k0, k1)


@triton.jit
def _uniform_from_bits(bits):
    """The top 24 bits as a float32 in [0, 1), every value a multiple of 2**-24."""
    return (bits >> 8).to(tl.float32) * 5.9604644775390625e-08


@triton.jit
def rand(seed, offset, stream):
    """Uniform float32 in [0, 1)."""
    r0, r1, r2, r3 = random_bits(seed, offset, stream)
    return _uniform_from_bits(r0)


@triton.jit
def randn(seed, offset, stream):
    """Standard normal float32 (Box-Muller on two uniforms; 1 - u is never 0)."""
    r0, r1, r2, r3 = random_bits(seed, offset, stream)
    radius = tl.sqrt(-2.0 * tl.log(1.0 - _uniform_from_bits(r0)))
    angle = 6.283185307179586 * _uniform_from_bits(r1)
    return radius * tl.cos(angle)


@triton.jit
def online_softmax_update(total, running_max, value, tile_max):
    """One tile of a looped sum(exp(x - max(x))) that reads x once (Milakov and Gimelshein's
    online softmax): rows keep a running max and the sum of exp(x - running max), rescaled when
    the tile raises the max. total and running_max are [rows, 1]; value is the tile."""
    new_max = maximum(running_max, tile_max)
    empty = new_max == float("-inf")
    scale = tl.where(empty, 0.0, tl.exp(running_max - new_max))
    added = sum2(tl.where(empty, 0.0, tl.exp(value - new_max)), 1)
    return total * scale + added, new_max


# --- integer semantics: shifts, pow, gcd ---


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


# --- special functions ---


@triton.jit
def digamma_positive(y):
    # digamma for y >= 0: digamma(y) = digamma(y + 1) - 1/y until y >= 10, then the asymptotic
    # series ln y - 1/(2y) - sum_k B_2k / (2k y^2k), through y^-14 (error below 1e-16 there)
    shift = tl.full(y.shape, 0.0, y.dtype)
    for _ in range(10):
        small = y < 10.0
        shift = tl.where(small, shift - 1.0 / y, shift)
        y = tl.where(small, y + 1.0, y)
    t = 1.0 / (y * y)
    series = t * (1.0 / 12 - t * (1.0 / 120 - t * (1.0 / 252 - t * (1.0 / 240 - t * (
        1.0 / 132 - t * (691.0 / 32760 - t / 12.0))))))
    return tl.log(y) - 0.5 / y - series + shift


@triton.jit
def trigamma(x):
    # torch's trigamma: reflected below 1/2 (-pi^2 / sin^2(pi x), x -> 1 - x), six steps of
    # 1/x^2 up, then the asymptotic series
    # pi in x's dtype (Triton makes a float literal float32)
    pi = tl.full(x.shape, 3.141592653589793, x.dtype)
    reflect = x < 0.5
    sin_pi_x = tl.sin(pi * x)
    result = tl.where(reflect, -(pi * pi) / (sin_pi_x * sin_pi_x), 0.0)
    x = tl.where(reflect, 1.0 - x, x)
    for _ in range(6):
        result += 1.0 / (x * x)
        x += 1.0
    ixx = 1.0 / (x * x)
    result += (1.0 + 1.0 / (2.0 * x) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / x
    return tl.where(reflect, -result, result)


@triton.jit
def _count(mask):
    # how many lanes of a tile of any rank are set (a scalar: the loop condition of the tile)
    lanes = mask.to(tl.int32) + tl.full([1], 0, tl.int32)  # a scalar becomes one lane
    return reduce_along(tl.reshape(lanes, (lanes.numel,)), 0, _add)


@triton.jit
def _power(a, minus_x, x_is_odd):
    # a ** minus_x; a < 0 only where x is an integer (zeta returned NaN otherwise)
    magnitude = libdevice.pow(tl.abs(a), minus_x)
    return tl.where((a < 0) & x_is_odd, -magnitude, magnitude)


@triton.jit
def _zeta_tail_step(s, a, b, k, x, w, coefficient, done):
    # one term of the Euler-Maclaurin tail: coefficient is (2j)! / B_2j
    a = a * (x + k)
    b = b / w
    t = a * b / coefficient
    s = tl.where(done, s, s + t)
    done = done | (tl.abs(t / s) < 1.11022302462515654042e-16)
    k = k + 1.0
    a = a * (x + k)
    b = b / w
    k = k + 1.0
    return s, a, b, k, done


@triton.jit
def zeta(x, q):
    # the Hurwitz zeta function sum_k (k + q)^-x, by torch's (Cephes') method: terms summed
    # directly until q + i > 9 (and at least 9 of them), then the Euler-Maclaurin tail; each
    # element stops where torch's loop returns (`done`)
    machep = 1.11022302462515654042e-16
    x = tl.where(q == q, x, x)  # both in the shape of the tile
    q = tl.where(x == x, q, q)
    x_is_odd = (x - 2.0 * tl.floor(x * 0.5)) == 1.0
    s = _power(q, -x, x_is_odd)
    a = q
    b = q * 0.0
    # torch's checks before the sums (applied at the end): x <= 1, and q <= 0 a pole or with x
    # not an integer, return before the loop
    nonpositive = q <= 0.0
    special = (x <= 1.0) | (nonpositive & ((q == tl.floor(q)) | (x != tl.floor(x))))
    returned = special  # where torch's loop returned early
    pending = ~returned
    i = 0
    while _count(pending) > 0:
        a = tl.where(pending, a + 1.0, a)
        b = tl.where(pending, _power(a, -x, x_is_odd), b)
        s = tl.where(pending, s + b, s)
        returned = returned | (pending & (-machep * s < b) & (b < machep * s))
        i += 1
        pending = ~returned & ((a <= 9.0) | (i < 9))
    w = a
    s = tl.where(returned, s, s + b * w / (x - 1.0))
    s = tl.where(returned, s, s - 0.5 * b)
    a = x * 0.0 + 1.0
    k = x * 0.0
    done = returned
    s, a, b, k, done = _zeta_tail_step(s, a, b, k, x, w, 12.0, done)
    s, a, b, k, done = _zeta_tail_step(s, a, b, k, x, w, -720.0, done)
    s, a, b, k, done = _zeta_tail_step(s, a, b, k, x, w, 30240.0, done)
    s, a, b, k, done = _zeta_tail_step(s, a, b, k, x, w, -1209600.0, done)
    s, a, b, k, done = _zeta_tail_step(s, a, b, k, x, w, 47900160.0, done)
    s, a, b, k, done = _zeta_tail_step(s, a, b, k, x, w, -1892437580.3183792, done)
    s, a, b, k, done = _zeta_tail_step(s, a, b, k, x, w, 74724249600.0, done)
    s, a, b, k, done = _zeta_tail_step(s, a, b, k, x, w, -2950130727918.164, done)
    s, a, b, k, done = _zeta_tail_step(s, a, b, k, x, w, 116467828143500.67, done)
    s, a, b, k, done = _zeta_tail_step(s, a, b, k, x, w, -4597978722407473.0, done)
    s, a, b, k, done = _zeta_tail_step(s, a, b, k, x, w, 1.8152105401943546e+17, done)
    s, a, b, k, done = _zeta_tail_step(s, a, b, k, x, w, -7.166165256175667e+18, done)
    # the first check that holds wins: x == 1, x < 1, q a pole, q <= 0 with x not an integer
    s = tl.where(nonpositive & (x != tl.floor(x)), float("nan"), s)
    s = tl.where(nonpositive & (q == tl.floor(q)), float("inf"), s)
    s = tl.where(x < 1.0, float("nan"), s)
    return tl.where(x == 1.0, float("inf"), s)


@triton.jit
def _largest(values):
    # the largest integer of a tile of any rank (a scalar: the bound of a loop over the tile)
    lanes = values + tl.full([1], 0, values.dtype)  # a scalar becomes one lane
    return reduce_along(tl.reshape(lanes, (lanes.numel,)), 0, maximum)


@triton.jit
def truncate_like_eager(n):
    # torch's kernels cast a float degree to int64 as their device does: CUDA's conversion (the
    # one these libdevice calls make) saturates infinities and gives INT64_MIN for NaN, the CPU's
    # gives INT64_MIN for both; the interpreter's twin (runtime/interpreter_libdevice.py) does that.
    if n.dtype == tl.float64:
        return libdevice.double2ll_rz(n)
    return libdevice.float2ll_rz(n.to(tl.float32))


@triton.jit
def chebyshev(x, n, KIND: tl.constexpr, TRIG_ABOVE: tl.constexpr, SHIFTED: tl.constexpr):
    # torch's Chebyshev polynomials T (KIND 0), U (1), V (2), W (3) of degree n (truncated to an
    # integer), in torch's order of cases: 0 below degree 0; fixed values at |x| = 1; the
    # trigonometric form for |x| < 1 above degree TRIG_ABOVE; 1 and the first polynomial at
    # degrees 0 and 1; else the three-term recurrence, each lane stopping at its own degree.
    # SHIFTED: the polynomials of 2x - 1, whose fixed values are those of the unshifted at +-1.
    x = tl.where(n == n, x, x)  # both in the shape of the tile
    n = tl.where(x == x, n, n)
    if SHIFTED:
        x = x + x - 1.0
    degree = n.to(tl.int64)
    nf = degree.to(x.dtype)
    even = (degree % 2) == 0
    two_x = x + x
    if KIND == 0:
        first = x
    elif KIND == 1:
        first = two_x
    elif KIND == 2:
        first = two_x - 1.0
    else:
        first = two_x + 1.0
    p = x * 0.0 + 1.0
    q = first
    top = _largest(degree)
    for k in range(2, top + 1):
        active = k <= degree
        r = two_x * q - p
        p = tl.where(active, q, p)
        q = tl.where(active, r, q)
    angle = libdevice.acos(x)
    twice_plus_one = nf + nf + 1.0
    if KIND == 0:
        at_one = tl.where((x > 0.0) | even, 1.0, -1.0)
        trig = tl.cos(nf * angle)
    elif KIND == 1:
        at_one = tl.where((x > 0.0) | even, nf + 1.0, -(nf + 1.0))
        sine = tl.sin(angle)
        trig = tl.where(sine != 0.0, tl.sin((nf + 1.0) * angle) / sine, (nf + 1.0) * tl.cos((nf + 1.0) * angle) / x)
    elif KIND == 2:
        at_one = tl.where(x > 0.0, 1.0, tl.where(even, twice_plus_one, -twice_plus_one))
        trig = tl.where(tl.sin(angle / 2.0) != 1.0, tl.cos((nf + 0.5) * angle) / tl.cos(angle / 2.0),
                        tl.where(even, twice_plus_one, -twice_plus_one))
    else:
        at_one = tl.where(x > 0.0, twice_plus_one, tl.where(even, 1.0, -1.0))
        if SHIFTED:
            flat = tl.where(even, 1.0, -1.0)
        else:
            flat = at_one
        trig = tl.where(tl.cos(angle / 2.0) != 1.0, tl.sin((nf + 0.5) * angle) / tl.sin(angle / 2.0), flat)
    result = tl.where(degree == 1, first, q)
    result = tl.where(degree == 0, 1.0, result)
    result = tl.where((degree > TRIG_ABOVE) & (tl.abs(x) < 1.0), trig, result)
    result = tl.where(tl.abs(x) == 1.0, at_one, result)
    return tl.where(degree < 0, 0.0, result).to(x.dtype)


@triton.jit
def orthogonal_polynomial(x, n, KIND: tl.constexpr):
    # torch's Hermite H (KIND 0) and He (1), Laguerre (2) and Legendre (3) polynomials of degree
    # n (truncated to an integer), in torch's order of cases; the recurrence runs its steps
    # m = 1 .. n - 1 per element. Hermite: NaN above degree 128 (512 in float64), as torch.
    x = tl.where(n == n, x, x)  # both in the shape of the tile
    n = tl.where(x == x, n, n)
    degree = truncate_like_eager(n)
    even = (degree % 2) == 0
    if KIND == 0:
        first = x + x
    elif KIND == 2:
        first = 1.0 - x
    else:
        first = x
    if x.dtype == tl.float64:
        limit = 512
    else:
        limit = 128
    p = x * 0.0 + 1.0
    q = first
    top = _largest(degree)
    if KIND <= 1:
        top = tl.minimum(top, limit)
    for m in range(1, top):
        active = m < degree
        step = x * 0.0 + m
        if KIND == 0:
            r = (x + x) * q - (step + step) * p
        elif KIND == 1:
            r = x * q - step * p
        elif KIND == 2:
            r = ((step + step + (1.0 - x)) * q - step * p) / (step + 1.0)
        else:
            r = ((step + step + 1.0) * x * q - step * p) / (step + 1.0)
        p = tl.where(active, q, p)
        q = tl.where(active, r, q)
    result = tl.where(degree == 1, first, q)
    if KIND <= 1:
        result = tl.where(degree > limit, float("nan"), result)
    result = tl.where(degree == 0, 1.0, result)
    if KIND == 2:
        result = tl.where(tl.abs(x) == 0.0, 1.0, result)
    if KIND == 3:
        result = tl.where(tl.abs(x) == 1.0, tl.where((x > 0.0) | even, 1.0, -1.0), result)
    return tl.where(degree < 0, 0.0, result).to(x.dtype)
