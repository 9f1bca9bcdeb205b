"""Scans: values against eager across ops, dims and dtypes; kernel counts and kinds (persistent
"scan", "looped_scan" with a carry); fusion of prologues and epilogues; backward."""
import pytest
import torch
import torch.utils._pytree as pytree

from helpers import assert_same, check
from tritonize.runtime.loader import load_source_module


def _rand(*shape, device, dtype=torch.float32):
    return torch.randn(*shape, device=device, dtype=dtype)


def _integers(*shape, device, low=-3, high=4, dtype=torch.float32):
    """Integer-valued floats: partial sums are exact, so results match eager in any order."""
    return torch.randint(low, high, shape, device=device).to(dtype)


def _kinds(report) -> list[str]:
    assert not report.fallbacks, report.fallbacks
    return [k.kind for k in report.kernels]


SCANS = {
    "cumsum": lambda x, d: x.cumsum(d),
    "cumprod": lambda x, d: (x * 0.2 + 1).cumprod(d),
    "cummax": lambda x, d: torch.cummax(x, d),
    "cummin": lambda x, d: torch.cummin(x, d),
    "cummax_values": lambda x, d: torch.cummax(x, d).values,
    "cummin_indices": lambda x, d: torch.cummin(x, d).indices,
    "logcumsumexp": lambda x, d: torch.logcumsumexp(x, d),
}


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("name", sorted(SCANS))
def test_scan_matches_eager(device, name, dim):
    report = check(lambda x: SCANS[name](x, dim), _rand(5, 12, 37, device=device))
    assert _kinds(report) == ["scan"]


def test_cumsum_is_one_scan_kernel(device):
    report = check(lambda x: x.cumsum(-1), _rand(64, 300, device=device))
    assert _kinds(report) == ["scan"]


def test_prologue_and_epilogue_fuse_into_the_scan(device):
    x, y = _rand(16, 100, device=device), _rand(16, 100, device=device)
    assert _kinds(check(lambda x, y: (x * y + 2).cumsum(-1), x, y)) == ["scan"]
    assert _kinds(check(lambda x: torch.sigmoid(x.cumsum(1) * 2), x)) == ["scan"]
    # a prologue that is also an output is stored by the scan kernel itself
    assert _kinds(check(lambda x: (x * 2, (x * 2).cumsum(-1)), x)) == ["scan"]


def test_cummax_values_and_indices_share_one_kernel(device):
    report = check(lambda x: torch.cummax(x, -1), _integers(8, 50, device=device))
    assert _kinds(report) == ["scan"]
    assert report.kernels[0].source.count("helpers.cummax_index(") == 1


def test_scan_of_a_scan_and_two_dims(device):
    x = _integers(6, 20, device=device)
    assert _kinds(check(lambda x: x.cumsum(-1).cumsum(-1), x)) == ["scan"]
    assert _kinds(check(lambda x: (x.cumsum(0), x.cumsum(1)), x)) == ["scan", "scan"]


def test_scans_next_to_reductions(device):
    """A scan never runs inside a reduction kernel (or the other way round); values stay right."""
    x = _rand(8, 40, device=device)
    check(lambda x: x.cumsum(-1).sum(-1), x)
    check(lambda x: torch.softmax(x, -1).cumsum(-1), x)
    check(lambda x: torch.softmax(x.cumsum(-1), -1), x)
    check(lambda x: x - torch.logcumsumexp(x, -1).amax(-1, keepdim=True), x)


def test_integer_and_bool_cumsum_give_int64(device):
    x = torch.randint(-100, 100, (7, 33), device=device, dtype=torch.int32)
    expected = x.cumsum(-1)
    actual = torch.compile(lambda x: x.cumsum(-1), backend="tritonize")(x)
    assert actual.dtype == expected.dtype == torch.int64
    assert torch.equal(actual, expected)
    report = check(lambda x: ((x > 0).cumsum(0), (x % 3 + 1).cumprod(-1), torch.cummax(x, 1),
                              torch.cummin(x > 10, 1)), x)
    assert not report.fallbacks


def test_int64_cumsum_beyond_int32(device):
    x = torch.full((2, 40), 2**30, device=device, dtype=torch.int64)
    check(lambda x: x.cumsum(-1), x)


def _three_scans(x):
    return x.cumsum(-1), torch.cummax(x, 0), torch.logcumsumexp(x, 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scans_in_other_dtypes(device, dtype):
    check(_three_scans, _rand(9, 70, device=device, dtype=dtype))


def test_bf16_scans_accumulate_in_fp32_and_round_each_output(device):
    """Like eager on the CPU. Eager on CUDA adds bf16 partial sums, rounding every one, and drifts
    several ulps from the exact scan over 70 elements; ours stay within one rounding of it."""
    x = _rand(9, 70, device=device, dtype=torch.bfloat16)
    actual = torch.compile(_three_scans, backend="tritonize")(x)
    exact = pytree.tree_map(lambda t: t.to(torch.bfloat16) if t.is_floating_point() else t,
                            _three_scans(x.double()))
    # one bf16 ulp is at most 2**-7 of the value (the interpreter truncates; a GPU rounds to nearest)
    assert_same(actual, exact, atol=1e-3, rtol=2**-7)


def test_low_precision_cumsum_accumulates_in_fp32(device):
    """Summing ones in bf16 would stop at 256; eager accumulates in fp32, and so do we."""
    x = torch.ones(3, 600, device=device, dtype=torch.bfloat16)
    actual = torch.compile(lambda x: x.cumsum(-1), backend="tritonize")(x)
    assert actual.dtype == torch.bfloat16
    assert actual[:, -1].tolist() == [600.0] * 3
    # within one bf16 step of the exact sums (Triton's interpreter truncates fp32 -> bf16)
    torch.testing.assert_close(actual.float(), x.float().cumsum(-1), atol=0, rtol=2**-7)


def test_cumsum_with_dtype_argument(device):
    x = _integers(4, 30, device=device, dtype=torch.bfloat16)
    check(lambda x: (x.cumsum(-1, dtype=torch.float32), x.cumsum(0, dtype=torch.float64)), x)


def test_nan_inf_and_ties_like_eager(device):
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0, nan, 5.0, nan, 1.0],
                      [2.0, 2.0, 1.0, 1.0, 2.0, 1.0, 0.0, 0.0],
                      [-inf, -inf, 1.0, inf, inf, 0.0, -inf, 2.0],
                      [inf, -inf, nan, 1.0, 1.0, -inf, 3.0, 3.0]], device=device)
    check(lambda x: (torch.cummax(x, 1), torch.cummin(x, 1), torch.logcumsumexp(x, 1), x.cumsum(1)), x)


def test_long_rows_use_a_looped_scan(device):
    x = _integers(3, 5000, device=device)
    x[1, 3000] = float("nan")
    report = check(lambda x: (x.cumsum(-1), torch.cummax(x, -1), torch.cummin(x, -1).values), x)
    assert set(_kinds(report)) == {"looped_scan"}
    y = _rand(3, 5000, device=device)
    report = check(lambda x: torch.logcumsumexp(x, -1), y)
    assert _kinds(report) == ["looped_scan"]
    check(lambda x: x.cumsum(-1), y, atol=1e-3, rtol=1e-4)  # 5000 float32 partial sums


def test_very_long_row_matches_eager_and_runs_quickly_in_the_interpreter(device, monkeypatch):
    """2**18 positions (a 2**20 cumsum took 30 s in the interpreter): the chunks' carries are
    one numpy reduction each, not log2(RBLOCK) interpreted combine steps."""
    from tritonize.runtime import interpreter_tiles

    steps = []
    combine = interpreter_tiles._combine
    monkeypatch.setattr(interpreter_tiles, "_combine", lambda *a: steps.append(1) or combine(*a))
    x = _integers(1 << 18, device=device)
    x[70000] = float("nan")
    report = check(lambda x: (x.cumsum(0), torch.cummax(x, 0)), x)
    assert set(_kinds(report)) == {"looped_scan"}
    if device == "cpu":  # check() runs it twice; two scans, chunks of 4096: 12 steps a chunk each
        assert 0 < len(steps) <= 2 * 2 * ((1 << 18) // 4096) * 12


def test_looped_scan_without_masks(device):
    """8192 is a multiple of every chunk size: no masks, and the carry crosses many chunks."""
    x = _integers(2, 8192, device=device, low=0, high=3)
    report = check(lambda x: (torch.cummax(x, 1).indices, (x * 2).cumsum(1) + 1), x)
    assert _kinds(report) == ["looped_scan"]
    assert "rmask" not in report.kernels[0].source.split("tl.store")[1]


def test_looped_scan_with_int64_carry(device):
    x = torch.randint(-5, 5, (2, 3000), device=device, dtype=torch.int32)
    report = check(lambda x: (x.cumsum(-1), torch.cummin(x, -1)), x)
    assert set(_kinds(report)) == {"looped_scan"}


def test_scan_along_a_strided_dim(device):
    x = _rand(300, 48, device=device)
    report = check(lambda x: (x.cumsum(0), torch.cummax(x, 0)), x, atol=1e-4, rtol=1e-4)
    assert _kinds(report) == ["scan"]
    check(lambda x: x.t().cumsum(-1), _rand(40, 7, device=device))
    check(lambda x: x.expand(3, 50, 20).cumsum(1), _rand(50, 1, device=device))


def test_degenerate_shapes(device):
    x = _rand(4, 5, device=device)
    check(lambda x: x[:, :1].cumsum(1), x)
    check(lambda x: x[:, :0].cumsum(1), x)
    check(lambda x: (x.sum().cumsum(0), torch.cummax(x.sum(), 0)), x)
    check(lambda x: x.flatten().cumsum(0), x)


def test_backward_through_scans(device):
    x = _rand(6, 20, device=device).requires_grad_()

    def loss(x):
        return (x.cumsum(1) ** 2).sum() + torch.logcumsumexp(x, 0).sum() + torch.cumprod(x, 1).sum()

    expected = torch.autograd.grad(loss(x), x)[0]
    actual = torch.autograd.grad(torch.compile(loss, backend="tritonize")(x), x)[0]
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


LINEAR_RECURRENCE = '''
import triton
import triton.language as tl
from tritonize.runtime import triton_helpers as helpers


@triton.jit
def compose(m_a, c_a, m_b, c_b):
    # x -> m*x + c, applied a then b: associative, not commutative
    return m_a * m_b, c_a * m_b + c_b


@triton.jit
def kernel(m_ptr, c_ptr, out_ptr, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    index = tl.arange(0, XBLOCK)[:, None] * RBLOCK + tl.arange(0, RBLOCK)[None, :]
    m = tl.load(m_ptr + index)
    c = tl.load(c_ptr + index)
    scanned_m, scanned_c = helpers.scan_along((m, c), 1, compose)
    tl.store(out_ptr + index, scanned_c)
'''


def test_scans_keep_the_order_of_a_non_commutative_combine(device):
    """The CPU twin of tl.associative_scan (runtime/interpreter_tiles.py) and Triton's own on
    the GPU call combine(earlier, later): check with a linear recurrence. (Reductions may
    combine in any order on the GPU, so their combine functions are commutative.)"""
    module = load_source_module(LINEAR_RECURRENCE, "test_scan_order", interpret=device == "cpu")
    m = torch.randint(-2, 3, (4, 16), device=device, dtype=torch.int64)
    c = torch.randint(-3, 4, (4, 16), device=device, dtype=torch.int64)
    out = torch.empty_like(c)
    module.kernel[(1,)](m, c, out, 4, 16)
    expected, value = torch.empty_like(c), torch.zeros(4, device=device, dtype=torch.int64)
    for k in range(16):  # x_k = m_k * x_{k-1} + c_k from x = 0
        value = m[:, k] * value + c[:, k]
        expected[:, k] = value
    assert torch.equal(out, expected)
