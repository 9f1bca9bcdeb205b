"""Dtype semantics of generated kernels against eager, one test per class of rule: integer
division and remainder, shifts, bitwise ops, type promotion, integer wrap-around and large int64
values, fp64 precision, fp16/bf16 rounding, comparisons and where/clamp across dtypes, pow with
integers, 0-d operands. Every case must compile to kernels with no fallback."""
import pytest
import sympy
import torch

from helpers import check

INTS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]
SIGNED = [torch.int8, torch.int16, torch.int32, torch.int64]
EXACT = {"atol": 0, "rtol": 0}
FP64_TIGHT = {"atol": 1e-13, "rtol": 1e-13}


def ints(dtype, device, shape=(4, 9), low=None, high=None, seed=0):
    info = torch.iinfo(dtype)
    low = max(info.min, -100) if low is None else low
    high = min(info.max, 100) if high is None else high
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high + 1, shape, generator=g, dtype=torch.int64).to(device=device, dtype=dtype)


def no_fallback(fn, *args, **tol):
    report = check(fn, *args, **tol)
    assert not report.fallbacks, report
    return report


# --- integer division and remainder -------------------------------------------------------


@pytest.mark.parametrize("dtype", SIGNED, ids=str)
def test_integer_division_rounds_like_torch_for_every_sign(device, dtype):
    a = torch.tensor([7, -7, 7, -7, 0, 1, -1, 6, -6], dtype=dtype, device=device)
    b = torch.tensor([2, 2, -2, -2, 3, -3, 3, 3, -3], dtype=dtype, device=device)
    no_fallback(lambda x, y: (x // y, torch.div(x, y, rounding_mode="trunc"),
                              torch.div(x, y, rounding_mode="floor"), x % y, torch.fmod(x, y),
                              torch.remainder(x, 3), torch.remainder(-5, y)), a, b)


def test_unsigned_division_and_remainder(device):
    a = ints(torch.uint8, device, low=0, high=255)
    b = ints(torch.uint8, device, low=1, high=255, seed=1)
    no_fallback(lambda x, y: (x // y, x % y, torch.fmod(x, y), torch.div(x, y, rounding_mode="trunc")), a, b)


INTEGER_DIVISIONS = {
    "floor_divide": lambda x, y: x // y, "trunc": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
    "floor": lambda x, y: torch.div(x, y, rounding_mode="floor"), "remainder": torch.remainder,
    "fmod": torch.fmod, "by_scalar_zero": lambda x, y: torch.fmod(x, 0) + y,
    "in_a_reduction": lambda x, y: (x % y).sum(-1), "in_a_cat": lambda x, y: torch.cat([x, x // y]),
}


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("op", sorted(INTEGER_DIVISIONS))
def test_integer_division_by_zero(device, dtype, op):
    """Eager raises on the CPU (a RuntimeError saying ZeroDivisionError), and so does the compiled
    code; eager's CUDA kernels do not check (the value is unspecified), nor do ours."""
    fn = INTEGER_DIVISIONS[op]
    a = ints(dtype, device, shape=(5, 7), low=0, high=50)
    b = ints(dtype, device, shape=(5, 7), low=1, high=9, seed=1)
    b[3, 4] = 0
    compiled = torch.compile(fn, backend="tritonize")
    if device != "cpu":
        compiled(a, b)
        return
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(a, b)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        compiled(a, b)
    if op == "by_scalar_zero":
        return
    b[3, 4] = 1  # the same kernels, no zero divisor: no error, eager's values
    torch._dynamo.reset()
    no_fallback(fn, a, b)


def test_integer_true_division_gives_float(device):
    a, b = ints(torch.int64, device), ints(torch.int64, device, low=1, seed=1)
    no_fallback(lambda x, y: (x / y, torch.true_divide(x, 4), x / 2.5), a, b)


# --- shifts and bitwise ops ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_shifts_by_any_amount(device, dtype):
    """Shifts by a negative amount or by at least the bit width: 0 left, sign fill right."""
    bits = torch.iinfo(dtype).bits
    a = ints(dtype, device, shape=(12,))
    shifts = [0, 1, 3, bits - 1, bits, bits + 5, 70, -1, -9, 2, 5, 1]
    if dtype == torch.uint8:
        shifts = [s % 256 for s in shifts]
    s = torch.tensor(shifts, dtype=torch.int64).to(device=device, dtype=dtype)
    no_fallback(lambda x, y: (x << y, x >> y, torch.bitwise_left_shift(x, 2),
                              torch.bitwise_right_shift(x, 1)), a, s)


@pytest.mark.parametrize("dtype", INTS + [torch.bool], ids=str)
def test_bitwise_ops(device, dtype):
    if dtype == torch.bool:
        a = torch.tensor([True, False, True, False], device=device)
        b = torch.tensor([True, True, False, False], device=device)
    else:
        a, b = ints(dtype, device), ints(dtype, device, seed=1)
    no_fallback(lambda x, y: (x & y, x | y, x ^ y, ~x, torch.bitwise_and(x, True if dtype == torch.bool else 5)),
                a, b)


# --- type promotion ------------------------------------------------------------------------


def test_promotion_between_integer_and_float_dtypes(device):
    i8, u8 = ints(torch.int8, device), ints(torch.uint8, device, low=0, high=255)
    i32, i64 = ints(torch.int32, device), ints(torch.int64, device)
    f16 = torch.randn(4, 9, device=device).to(torch.float16)
    b = i8 > 0
    no_fallback(lambda a, c, d, e, h, m: (a + c, a * c, d + e, a + h, c * 1.5, m + a, m + m, m * 2,
                                          e + 2.5, h + d, a - c), i8, u8, i32, i64, f16, b)


def test_integer_scalars_keep_tensor_dtype(device):
    a = ints(torch.int8, device)
    u = ints(torch.uint8, device, low=0, high=255)
    no_fallback(lambda x, y: (x + 100, x * 3, y - 1, y * -1, y + 300, torch.add(y, -2)), a, u)


# --- wrap-around and large int64 values ----------------------------------------------------


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_integer_overflow_wraps(device, dtype):
    info = torch.iinfo(dtype)
    a = torch.tensor([info.max, info.min, info.max - 1, 0, 1], dtype=dtype, device=device)
    b = torch.tensor([1, -1 if info.min < 0 else 1, 3, info.max, info.max], dtype=dtype, device=device)
    no_fallback(lambda x, y: (x + y, x - y, x * y, x * 2, -x, x.abs()), a, b)


def test_int64_beyond_float_precision(device):
    big = 2**53 + 1
    a = torch.tensor([big, -big, 2**62, 3 * 2**40 + 7], dtype=torch.int64, device=device)
    no_fallback(lambda x: (x + 1, x * 3, x // 7, x % 1000003, x + big, x == big, torch.where(x > 0, x, big),
                           x.clamp(min=-2**60, max=2**61)), a)


def test_int64_arange_and_full_beyond_int32(device):
    no_fallback(lambda x: (x + torch.arange(2**31, 2**31 + 9, device=x.device),
                           torch.full((9,), 2**40, dtype=torch.int64, device=x.device) + x),
                torch.arange(9, device=device))


# --- fp64 precision ------------------------------------------------------------------------


def test_fp64_math_is_not_rounded_to_fp32(device):
    x = torch.linspace(0.1, 3.0, 37, dtype=torch.float64, device=device)
    no_fallback(lambda t: (t.exp(), t.log(), t.sin(), t.cos(), t.sqrt(), t.rsqrt(), t.tanh(), t.sigmoid(),
                           t.erf(), t.log1p(), t.expm1(), t.atan(), t * 0.1, t / 3, t ** 1.7, t ** 2,
                           torch.nn.functional.gelu(t), torch.nn.functional.silu(t), t.reciprocal()),
                x, **FP64_TIGHT)


def test_fp64_constants_and_arange_are_exact(device):
    no_fallback(lambda t: (t + 0.1, t * (1 / 3), torch.arange(0, 1, 0.1, dtype=torch.float64, device=t.device),
                           torch.full((3,), 1e-300, dtype=torch.float64, device=t.device) * 1e-10),
                torch.arange(10, dtype=torch.float64, device=device), atol=0, rtol=1e-15)


# --- fp16 / bf16 ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_casts_round_like_torch(device, dtype):
    x = torch.tensor([1 / 3, 1e-8, 65504.0, 70000.0, -2.5e-5, 3.14159, float("inf"), float("nan"), 1e10],
                     device=device)
    i = torch.tensor([2049, -70001, 16777217, 3, 0, 1, 2**31 - 1, -(2**31), 255], device=device)
    h = (torch.randn(9) * 100).to(device=device, dtype=dtype)
    no_fallback(lambda a, b, c: (a.to(dtype), b.to(dtype), c.to(torch.int32), c.to(torch.float64), c.float(),
                                 c.to(torch.float16 if dtype == torch.bfloat16 else torch.bfloat16)),
                x, i, h, **EXACT)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_arithmetic_rounds_once_per_op(device, dtype):
    a = (torch.randn(64) * 10).to(device=device, dtype=dtype)
    b = (torch.randn(64) * 10).to(device=device, dtype=dtype)
    no_fallback(lambda x, y: (x + y, x * y, x - y, x / y, torch.maximum(x, y), (x > y)), a, b, **EXACT)
    # exp is computed in float32 by both, by different libraries: one float32 ulp apart can round
    # to neighbouring half-precision values (seen once in bfloat16: 1 ulp at 943)
    no_fallback(lambda x: x.exp(), a)


# --- comparisons, where, clamp across dtypes -----------------------------------------------


def test_comparisons_across_dtypes(device):
    i = ints(torch.int32, device)
    u = ints(torch.uint8, device, low=0, high=255)
    f = torch.randn(4, 9, device=device) * 50
    no_fallback(lambda a, b, c: (a < 2.5, a == 3.0, u_ge(b), b > -1, b == 255, a >= c, c < a, b != a,
                                 a.bool() & (c > 0)), i, u, f)


def u_ge(b):
    return b >= 200


def test_where_and_clamp_with_mixed_dtypes(device):
    i = ints(torch.int64, device)
    f = torch.randn(4, 9, device=device, dtype=torch.float64)
    h = torch.randn(4, 9, device=device).to(torch.float16)
    no_fallback(lambda a, b, c: (torch.where(a > 0, a, 0.5), torch.where(a > 0, a, b), torch.where(b > 0, c, a),
                                 torch.where(a > 0, 7, -3), a.clamp(-2.5, 3.5), a.clamp(min=0), c.clamp(-0.5, 1.0),
                                 torch.clamp(a, b, None), torch.where(c > 0, c, 2)), i, f, h)


# --- pow with integers ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8], ids=str)
def test_integer_pow(device, dtype):
    base = ints(dtype, device, low=0 if dtype == torch.uint8 else -9, high=9)
    exponent = ints(dtype, device, low=0, high=9, seed=1)
    no_fallback(lambda b, e: (b ** e, b ** 3, 2 ** e, torch.pow(b, 0), b ** 2.5, b ** 40,
                              torch.pow(b, e).to(torch.float32) / 3, b.float() ** e), base, exponent)


def test_integer_pow_with_negative_exponents(device):
    base = torch.tensor([2, -2, 1, -1, 0, 3, -1, 0, 5, -1], dtype=torch.int64, device=device)
    exponent = torch.tensor([-1, -1, -3, -3, -2, 0, -4, 0, 40, 63], dtype=torch.int64, device=device)
    no_fallback(lambda b, e: (b ** e, torch.pow(b.to(torch.int8), e.to(torch.int8))), base, exponent)


def test_float_pow_with_integer_exponent_tensor(device):
    base = torch.randn(4, 9, device=device).abs() + 0.5
    exponent = ints(torch.int64, device, low=-4, high=4)
    no_fallback(lambda b, e: (b ** e, b.double() ** e, e ** 2.0), base, exponent, atol=1e-5, rtol=1e-5)


# --- other unary ops on integers and bools -------------------------------------------------


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_integer_unary_ops(device, dtype):
    a = ints(dtype, device)
    no_fallback(lambda x: (x.abs(), x.sign(), torch.signbit(x), x.floor(), x.ceil(), x.round(), x.trunc(),
                           torch.isnan(x), torch.isinf(x), torch.isfinite(x), x.square(), torch.logical_not(x),
                           x.exp() if dtype != torch.uint8 else x.sqrt(), x.float().sigmoid()), a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_float_sign_and_sgn(device, dtype):
    """sign is (x > 0) - (x < 0): -0.0 and nan give 0. (bf16 once gave -1 for positives on sm_90.)"""
    x = torch.tensor([-3.5, -1e-3, -0.0, 0.0, 2e-3, 7.0, float("inf"), float("-inf"), float("nan")],
                     device=device).to(dtype)
    x = torch.cat([x, torch.randn(200, device=device, dtype=dtype)])
    no_fallback(lambda t: (t.sign(), torch.sgn(t), t.sign() * t), x)


def test_bool_arithmetic(device):
    a = torch.tensor([True, False, True, False], device=device)
    b = torch.tensor([True, True, False, False], device=device)
    no_fallback(lambda x, y: (x + y, x * y, x + 1, x * 2.5, x | y,
                              torch.maximum(x, y), torch.minimum(x, y), x.sign(), x.float() + y), a, b)


# --- 0-d operands --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64], ids=str)
def test_zero_dim_operands_mixed_with_blocks(device, dtype):
    s = torch.tensor(3, device=device).to(dtype)
    t = torch.tensor(1, device=device).to(dtype)
    x = torch.arange(12, device=device).to(dtype)
    no_fallback(lambda a, b, c: (torch.maximum(a, c), torch.minimum(c, a), ((a > b) & (a > 0)) | (c > 5),
                                 torch.where(a > b, c, a), torch.logical_and(a, c), torch.fmax(b, c)), s, t, x)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64], ids=str)
def test_gcd_and_lcm(device, dtype):
    a = ints(dtype, device, shape=(40,), low=-60 if dtype != torch.uint8 else 0, high=60)
    b = ints(dtype, device, shape=(40,), low=-60 if dtype != torch.uint8 else 0, high=60, seed=3)
    a[:3] = 0
    b[1:4] = 0
    no_fallback(lambda x, y: (torch.gcd(x, y), torch.lcm(x, y)), a, b)


def test_gcd_of_large_int64_values(device):
    fib = [1, 1]
    while len(fib) < 92:
        fib.append(fib[-1] + fib[-2])
    a = torch.tensor([fib[-1], 2**62, -(2**40) * 3, 123456789012345], dtype=torch.int64, device=device)
    b = torch.tensor([fib[-2], 2**61 + 2**30, 2**20 * 9, 987654321098], dtype=torch.int64, device=device)
    no_fallback(lambda x, y: torch.gcd(x, y), a, b)


def test_an_upcast_sees_through_where_and_gather_to_the_unrounded_value():
    """to_dtype(float32) of a bf16 where() or indirect load (gather) whose value was computed in
    float32 and rounded to bf16 keeps the float32 value, as for a plain chain (ir/expr.to_dtype):
    nll_loss's product of input and weight, masked and gathered before its sum, is not rounded per
    element."""
    from tritonize.ir import expr as ex

    f32, bf16 = torch.float32, torch.bfloat16
    product = ex.op("mul", ex.to_dtype(ex.load("a", sympy.Integer(0), bf16), f32),
                    ex.to_dtype(ex.load("b", sympy.Integer(0), bf16), f32), dtype=f32)
    condition = ex.op("ne", ex.load("t", sympy.Integer(0), torch.int64), ex.constant(-100, torch.int64), dtype=torch.bool)
    masked = ex.op("where", condition, ex.to_dtype(product, bf16), ex.constant(0.0, bf16), dtype=bf16)
    gathered = ex.indirect(ex.load("t", sympy.Integer(0), torch.int64), 3, False, "gather", lambda s: masked)
    for value in (masked, gathered):
        upcast = ex.to_dtype(value, f32)
        assert upcast.dtype == f32
        assert not any(e.op == "to_dtype" and e.dtype == bf16 for e in ex.walk(upcast)), upcast


def test_nll_loss_in_bfloat16_is_as_accurate_as_eager():
    """An OpInfo sample (nll_loss with weights, bf16) where rounding each product to bf16 gave
    three times eager's error against float64."""
    x = torch.tensor([[[[-8.5, -1.765625], [-4.3125, -2.40625]], [[-7.9375, 3.609375], [-8.0625, -0.57421875]],
                       [[3.125, -3.03125], [5.09375, 1.1328125]]],
                      [[[4.9375, 5.78125], [-3.96875, 3.265625]], [[-3.890625, 2.828125], [-4.6875, 4.15625]],
                       [[1.8203125, -3.515625], [-4.40625, 2.328125]]]], dtype=torch.bfloat16)
    target = torch.tensor([[[2, 0], [1, 0]], [[0, 0], [2, 2]]])
    weight = torch.tensor([7.09375, 2.890625, 4.71875], dtype=torch.bfloat16)
    fn = lambda x, t, w: torch.nn.functional.nll_loss(x, t, weight=w)
    reference = fn(x.double(), target, weight.double())
    compiled = torch.compile(fn, backend="tritonize")(x, target, weight)
    assert compiled.dtype == torch.bfloat16
    assert (compiled.double() - reference).abs() <= (fn(x, target, weight).double() - reference).abs()


def test_comparisons_read_low_precision_operands_rounded(device):
    """A bf16 sum fused into a comparison is compared as eager rounds it (not its float32 value):
    eager's `(a + b) == (a + b)` against a stored sum is all True."""
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(4096, generator=g).to(device=device, dtype=torch.bfloat16) for _ in range(2))
    stored = a + b
    report = check(lambda a, b, s: ((a + b) == s, (a + b) > s), a, b, stored)
    assert not report.fallbacks
    assert bool((torch.compile(lambda a, b, s: (a + b) == s, backend="tritonize")(a, b, stored)).all())
