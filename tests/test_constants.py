"""Float constants in generated kernels against eager: the sign of zero, NaN and the infinities
keep their identity through CSE and printing in every float dtype, and a Python scalar meets a
low-precision tensor the way eager's kernels take it (rounded to the tensor's dtype on the CPU
where eager rounds it, unrounded on CUDA). Every value is compared exactly, sign of zero included."""
import pytest
import torch

import tritonize

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def assert_identical(actual, expected, ulps=0):
    """Same dtype, same values (NaN where eager has NaN) and the same sign bit, zeros included
    (a NaN's sign is the hardware's choice, not torch's: not compared)."""
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(actual) == len(expected)
    for k, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == e.dtype, (k, a.dtype, e.dtype)
        rtol = ulps * torch.finfo(e.dtype).eps if e.dtype.is_floating_point else 0
        torch.testing.assert_close(a, e, rtol=rtol, atol=0, equal_nan=True, msg=f"output {k}")
        if e.dtype.is_floating_point:
            numbers = ~torch.isnan(e)
            assert torch.equal(torch.signbit(a)[numbers], torch.signbit(e)[numbers]), (k, a, e)


def compile_and_compare(fn, *args, ulps=0):
    expected = fn(*args)
    report = tritonize.explain(fn, *args)
    assert not report.fallbacks, report
    torch._dynamo.reset()
    assert_identical(torch.compile(fn, backend="tritonize")(*args), expected, ulps)


def signed_values(dtype, device):
    """Both zeros, both infinities, NaN and ordinary values of both signs."""
    values = [0.0, -0.0, 1.5, -1.5, float("inf"), float("-inf"), float("nan"), 3.0, -2.25, 0.5]
    return torch.tensor(values, dtype=dtype, device=device)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_negative_zero_constant_keeps_its_sign(device, dtype):
    # x / -0.0 and x / -zeros_like(x) in one kernel: both zeros must print as themselves
    compile_and_compare(lambda x: (x / -0.0, x / -torch.zeros_like(x), x * -0.0, x + -0.0,
                                   torch.where(x > 0, -0.0, 0.0), torch.where(x > 0, 0.0, -0.0),
                                   torch.full_like(x, -0.0), x.masked_fill(x > 0, -0.0),
                                   torch.copysign(x, -0.0), torch.copysign(torch.ones_like(x), 0.0)),
                        signed_values(dtype, device))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_nan_and_infinity_constants(device, dtype):
    compile_and_compare(lambda x: (x + float("inf"), x * float("nan"), x - float("-inf"),
                                   torch.where(x > 0, float("nan"), float("-inf")),
                                   torch.full_like(x, float("-inf")), x.masked_fill(x < 0, float("nan")),
                                   torch.clamp(x, float("-inf"), float("inf")),
                                   x == float("inf"), x != float("nan"), x < float("inf"),
                                   torch.pow(x, float("inf")), torch.pow(x, float("nan"))),
                        signed_values(dtype, device))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_scalar_comparisons_with_low_precision_tensors(device, dtype):
    """bf16 == 3.14: on the CPU eager rounds 3.14 to the tensor's dtype first (3.140625 in both
    fp16 and bf16 is then equal to it); on CUDA it compares in fp32 with 3.14 itself."""
    x = torch.tensor([3.14, 1.0, 3.140625, 0.0, -3.140625, 3.15], dtype=dtype, device=device)
    compile_and_compare(lambda x: (x == 3.14, x != 3.14, x < 3.14, x <= 3.14, x > 3.14, x >= 3.14,
                                   x == -3.14, torch.eq(x, 3.14), torch.lt(x, 3.14)), x)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_scalar_arithmetic_with_low_precision_tensors(device, dtype):
    """Each op takes its scalar as eager's kernel for it does (on the CPU add/sub round it to the
    tensor's dtype, mul/div do not), so the results agree bit for bit on the CPU. CUDA's kernels
    divide by a scalar as a multiplication by its reciprocal and may contract x + alpha * y into
    an fma: one rounding of the result apart at most."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(512, generator=g) * 4).to(dtype=dtype, device=device)
    compile_and_compare(lambda x: (x + 3.14159, x - 3.14159, 3.14159 - x, x * 3.14159, x / 3.14159,
                                   torch.add(x, x, alpha=3.14159), torch.clamp(x, -3.14159, 3.14159),
                                   torch.where(x > 0, x, 3.14159), x.masked_fill(x > 1, 3.14159)), x,
                        ulps=0 if device == "cpu" else 1)


def test_fp16_scalar_that_overflows_the_dtype(device):
    x = torch.tensor([65504.0, float("inf"), 1.0], dtype=torch.float16, device=device)
    compile_and_compare(lambda x: (x == 70000.0, x < 70000.0, x + 70000.0), x)
