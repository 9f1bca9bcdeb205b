"""Elementwise ops and casts against eager: dtypes, integer semantics, special values."""
import pytest
import torch

from helpers import check

ALL_DTYPES = [torch.bool, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
              torch.float16, torch.bfloat16, torch.float32, torch.float64]


def _sample(dtype, device, shape=(6, 10)):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return (torch.rand(shape, generator=g) > 0.5).to(device)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 10).to(device=device, dtype=dtype)
    low = 0 if dtype == torch.uint8 else -50
    return torch.randint(low, 50, shape, generator=g).to(device=device, dtype=dtype)


@pytest.mark.parametrize("src", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("dst", ALL_DTYPES, ids=str)
def test_casts_between_all_dtypes(device, src, dst):
    x = _sample(src, device)
    if src.is_floating_point and dst in (torch.uint8,):
        x = x.abs()  # negative float -> uint8 is undefined behaviour in C and in torch
    report = check(lambda t: (t.to(dst),), x)
    assert not report.fallbacks


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32, torch.float64], ids=str)
def test_division_modes_and_remainder(device, dtype):
    a = _sample(dtype, device)
    b = _sample(dtype, device)
    b = torch.where(b == 0, torch.ones_like(b), b)

    def fn(x, y):
        return (torch.div(x, y, rounding_mode="floor"), torch.div(x, y, rounding_mode="trunc"),
                torch.remainder(x, y), torch.fmod(x, y), x // y, x / y)

    report = check(fn, a, b)
    assert not report.fallbacks


def test_bool_arithmetic_and_logic(device):
    a, b = _sample(torch.bool, device), _sample(torch.bool, device)
    report = check(lambda x, y: (x + y, x * y, x & y, x | y, x ^ y, ~x, torch.logical_xor(x, y)), a, b)
    assert not report.fallbacks


def test_bitwise_and_shifts(device):
    a = _sample(torch.int32, device)
    s = torch.randint(0, 8, a.shape).to(device=device, dtype=torch.int32)
    report = check(lambda x, y: (x & y, x | 3, x ^ y, ~x, x << s, x >> s), a, s)
    assert not report.fallbacks


UNARY = ["abs", "neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
         "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
         "atanh", "erf", "erfc", "erfinv", "sigmoid", "floor", "ceil", "round", "trunc", "frac",
         "sign", "sgn", "relu", "reciprocal", "lgamma", "isnan", "isinf", "isfinite", "signbit",
         "logical_not", "square"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_float_ops_with_special_values(device, name):
    x = torch.tensor([-2.5, -1.0, -0.5, -0.0, 0.0, 0.3, 0.5, 1.0, 1.5, 2.5, 7.0, float("inf"),
                      float("-inf"), float("nan")], device=device)
    fn = getattr(torch, name)
    report = check(lambda t: fn(t), x, atol=1e-5, rtol=1e-5)
    assert not report.fallbacks


BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "fmax", "fmin", "atan2", "hypot",
          "copysign", "nextafter", "pow", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
          "logical_or", "remainder", "fmod"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_float_ops(device, name):
    g = torch.Generator().manual_seed(1)
    a = (torch.rand(5, 7, generator=g) * 4 - 2).to(device)
    b = (torch.rand(7, generator=g) * 4 - 2).to(device)
    a[0, 0], b[1] = float("nan"), float("nan")
    fn = getattr(torch, name)
    if name == "pow":
        a = a.abs()
    report = check(lambda x, y: fn(x, y), a, b, atol=1e-5, rtol=1e-5)
    assert not report.fallbacks


def test_scalar_operands_and_clamp(device):
    x = _sample(torch.float32, device)
    report = check(lambda t: (t.clamp(-3, 4), t.clamp(min=0.5), torch.clamp(t, max=1), 2 - t, t ** 2,
                              t.pow(3), t ** 0.5, torch.where(t > 0, t, 0.0)), x)
    assert not report.fallbacks


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_computes_in_fp32(device, dtype):
    x = _sample(dtype, device)
    report = check(lambda t: torch.nn.functional.gelu(t) * t + 1, x)
    assert "tl.float32" in report.kernels[0].source


def test_factories(device):
    def fn(x):
        return (x + torch.arange(10, device=x.device), torch.zeros(3, 4, device=x.device),
                torch.ones_like(x) * 2, torch.full((2, 2), 7, device=x.device, dtype=torch.int64),
                torch.arange(0, 5, 0.5, device=x.device))

    report = check(fn, _sample(torch.float32, device))
    assert not report.fallbacks
