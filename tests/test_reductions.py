"""Reductions: values against eager, kernel counts and kinds (persistent, looped, outer)."""
import pytest
import torch
import torch.nn.functional as F

from conftest import DTYPES
from helpers import check


def _rand(*shape, device, dtype=torch.float32):
    return torch.randn(*shape, device=device, dtype=dtype)


def _one_kernel(report, kind=None):
    assert not report.fallbacks, report.fallbacks
    assert len(report.kernels) == 1, [k.name for k in report.kernels]
    if kind is not None:
        assert report.kernels[0].kind == kind


REDUCTIONS = {
    "sum_last": lambda x: x.sum(-1),
    "sum_first": lambda x: x.sum(0),
    "sum_all": lambda x: x.sum(),
    "sum_keepdim": lambda x: x.sum(1, keepdim=True),
    "mean_dims": lambda x: x.mean((0, 2)),
    "prod": lambda x: (x * 0.1 + 1).prod(1),
    "amax": lambda x: x.amax(-1),
    "amin_two_dims": lambda x: x.amin((1, 2)),
    "max_dim": lambda x: x.max(1),
    "min_dim_keepdim": lambda x: x.min(0, keepdim=True),
    "max_all": lambda x: x.max(),
    "argmax": lambda x: x.argmax(-1),
    "argmin_first": lambda x: x.argmin(0),
    "argmax_flat": lambda x: x.argmax(),
    "var": lambda x: x.var(-1),
    "var_unbiased_dims": lambda x: x.var((0, 2), correction=0),
    "std": lambda x: x.std(1),
    "var_mean": lambda x: torch.var_mean(x, -1),
    "logsumexp": lambda x: torch.logsumexp(x, 1),
    "norm": lambda x: torch.linalg.vector_norm(x, 2, -1),
    "any": lambda x: (x > 1.5).any(1),
    "all": lambda x: (x > -2.5).all(-1),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_matches_eager(device, name):
    report = check(REDUCTIONS[name], _rand(6, 20, 37, device=device))
    assert not report.fallbacks, report.fallbacks
    assert all(k.kind.endswith("reduction") for k in report.kernels)


@pytest.mark.parametrize("dtype", DTYPES + [torch.float16, torch.float64])
def test_sum_and_max_in_other_dtypes(device, dtype):
    if dtype == torch.float16 and device == "cpu":
        pytest.skip("fp16 math is exercised on the GPU run")
    check(lambda x: (x.sum(-1), x.amax(0), x.mean(1)), _rand(40, 70, device=device, dtype=dtype))


def test_integer_and_bool_reductions(device):
    x = torch.randint(-50, 50, (9, 31), device=device, dtype=torch.int32)
    report = check(lambda x: (x.sum(1), x.amax(0), x.argmin(1), x.prod(1), (x > 0).sum(0), (x > 0).all(1)), x)
    assert not report.fallbacks


def test_nan_propagates_like_eager(device):
    x = _rand(5, 64, device=device)
    x[1, 7] = float("nan")
    x[3, :] = float("-inf")
    check(lambda x: (x.amax(1), x.argmax(1), x.max(1), x.argmin(1), x.sum(1)), x)


def test_ties_give_the_first_index(device):
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]], device=device).repeat(1, 50)
    check(lambda x: (x.argmax(1), x.argmin(1), x.max(1).indices), x)


def test_softmax_is_one_persistent_kernel(device):
    report = check(lambda x: torch.softmax(x, -1), _rand(64, 1000, device=device))
    _one_kernel(report, "persistent_reduction")


def test_log_softmax_is_one_kernel(device):
    _one_kernel(check(lambda x: torch.log_softmax(x, -1), _rand(64, 1000, device=device)))


def test_layer_norm_is_one_kernel(device):
    w, b = _rand(1000, device=device), _rand(1000, device=device)
    _one_kernel(check(lambda x: F.layer_norm(x, (1000,), w, b), _rand(64, 1000, device=device)))


@pytest.mark.parametrize("hidden", [96, 5000])  # persistent and looped rows
def test_layer_norm_before_a_matmul_is_one_kernel_through_the_row_merging_view(device, hidden):
    """A transformer's layer_norm feeds a linear layer through a view to (batch * tokens,
    hidden): the normalized rows are stored by the statistics kernel, not read again."""
    w, b = _rand(hidden, device=device), _rand(hidden, device=device)
    weight = _rand(8, hidden, device=device)

    def fn(x):
        return F.linear(F.layer_norm(x, (hidden,), w, b), weight)

    report = check(fn, _rand(3, 5, hidden, device=device), atol=1e-4, rtol=1e-4)
    assert len(report.kernels) == 1 and not report.fallbacks, report


def test_rms_norm_chain_is_one_kernel(device):
    w = _rand(1000, device=device)

    def rms_norm(x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    _one_kernel(check(rms_norm, _rand(64, 1000, device=device)))


def test_var_mean_is_one_kernel(device):
    _one_kernel(check(lambda x: torch.var_mean(x, -1), _rand(64, 1000, device=device)))


# A row of equal values: eager's statistics give exactly the value as its mean, so a layer norm
# returns exactly its bias. sum / n can be an ulp off the value, which rstd = 1 / sqrt(eps)
# magnifies (fuzz seeds 95029, 105190, 108396, 109903, 103110: errors up to 1e-4). Rows of 7
# (persistent, masked) and 9000 (looped) elements; before the corrected mean, the rows of 0.1,
# -0.7, 5.9 and -3.3 were off at 7 elements, and -1.7 at 9000.
EQUAL_ROW_VALUES = [0.1, -0.7, 5.9, -3.3, -1.7, 0.3, 3.14159, 1e4 / 3]


@pytest.mark.parametrize("length", [7, 9000])
def test_layer_norm_of_equal_values_returns_exactly_the_bias(device, length):
    x = torch.tensor(EQUAL_ROW_VALUES, device=device)[:, None].expand(-1, length).contiguous()
    w, b = _rand(length, device=device), _rand(length, device=device)
    fn = lambda x: F.layer_norm(x, (length,), w, b)  # noqa: E731
    out = torch.compile(fn, backend="tritonize")(x)
    assert torch.equal(out, b.expand_as(x))
    if device == "cpu":  # eager's CUDA kernel merges Welford states weighing by count * (1 / n),
        assert torch.equal(fn(x), out)  # which can leave the mean an ulp off (times rstd)


@pytest.mark.parametrize("length", [7, 9000])
def test_var_mean_shares_one_pass_and_gives_the_exact_mean_of_equal_values(device, length):
    """var and mean of the same values: one cross-thread reduction of two values after the sum
    (persistent), or one Welford state (looped); equal values have exactly their value as mean
    and 0 as var."""
    x = torch.cat([torch.full((3, length), 0.1, device=device), _rand(3, length, device=device)])
    report = check(lambda x: torch.var_mean(x, -1, correction=0), x, atol=1e-5, rtol=1e-5)
    _one_kernel(report)
    source = report.kernels[0].source
    if length == 7:
        assert source.count("helpers.sum_pair(") == 1 and source.count("helpers.sum2(") == 1
    else:
        assert source.count("helpers.welford_update(") == 1 and source.count("helpers.welford(") == 1
    var, mean = torch.compile(lambda x: torch.var_mean(x, -1, correction=0), backend="tritonize")(x)
    assert torch.equal(mean[:3], torch.full((3,), 0.1, device=device)) and torch.equal(var[:3], torch.zeros(3, device=device))


@pytest.mark.parametrize("length", [7, 9000])
def test_var_of_rows_with_nan_or_infinities_is_nan(device, length):
    """The corrected variance is clamped at 0 (rounding can take it below): the clamp keeps NaN
    (a review of the twenty-fourth session: tl.maximum dropped it, var 0 and rstd 316)."""
    x = _rand(5, length, device=device)
    x[0, 3], x[1, 2], x[2, 1], x[3, :] = float("nan"), float("inf"), float("-inf"), float("inf")
    for fn in (lambda x: x.var(-1), lambda x: torch.var_mean(x, -1, correction=0), lambda x: x.std(-1),
               lambda x: torch.ops.aten.native_layer_norm(x, [length], None, None, 1e-5)):
        check(fn, x, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("case", ["dims_keepdim", "unbiased", "std_mean", "bf16", "mean_only", "two_corrections"])
def test_var_mean_forms_match_eager(device, case):
    x = _rand(6, 20, 37, device=device)
    fns = {
        "dims_keepdim": lambda x: torch.var_mean(x, (0, 2), keepdim=True),
        "unbiased": lambda x: torch.var_mean(x, 1),
        "std_mean": lambda x: torch.std_mean(x, -1),
        "bf16": lambda x: torch.var_mean(x.bfloat16(), -1),
        "mean_only": lambda x: torch.var_mean(x, -1)[1] * 2,
        "two_corrections": lambda x: (torch.var_mean(x, -1), x.var(-1, correction=0)),
    }
    tolerance = dict(atol=1e-2, rtol=1e-2) if case == "bf16" else dict(atol=1e-5, rtol=1e-4)
    report = check(fns[case], x, **tolerance)
    assert not report.fallbacks, report.fallbacks


def test_long_rows_use_a_looped_kernel(device):
    x = _rand(3, 20000, device=device)
    report = check(lambda x: (x.var(-1), x.argmax(-1)), x, atol=1e-5, rtol=1e-4)
    assert [k.kind for k in report.kernels] == ["reduction"]  # both in one pass over x
    assert not report.fallbacks


def test_looped_softmax_is_one_kernel(device):
    # 520 rows: enough programs that the reductions are not split
    x = _rand(520, 8200, device=device)
    x[3, 100:] = float("-inf")  # rows whose running max starts (or stays) at -inf
    x[5, :] = float("-inf")
    for fn in (lambda x: torch.softmax(x, -1), lambda x: torch.log_softmax(x, -1)):
        report = check(fn, x, atol=1e-5, rtol=1e-4)
        _one_kernel(report, "reduction")
        # online softmax: max and sum(exp(x - max)) in one pass, then one pass for the output
        assert report.kernels[0].source.count("for roffset") == 2


def test_looped_welford_is_numerically_stable(device):
    x = _rand(4, 30000, device=device) + 1e4
    expected = x.double().var(-1).float()
    check(lambda x: x.var(-1), x, atol=1e-2, rtol=1e-3)
    torch.testing.assert_close(torch.compile(lambda x: x.var(-1), backend="tritonize")(x), expected,
                               atol=1e-2, rtol=1e-3)


def test_outer_reduction_of_long_columns(device):
    report = check(lambda x: (x.sum(0), x.amax(0)), _rand(3000, 48, device=device), atol=1e-4, rtol=1e-4)
    assert not report.fallbacks
    assert all(k.kind == "reduction" for k in report.kernels)


def test_reduction_of_a_transposed_view(device):
    check(lambda x: (x.t().sum(-1), x.permute(1, 0).softmax(-1)), _rand(50, 70, device=device))


def test_softmax_over_a_middle_dim(device):
    check(lambda x: torch.softmax(x, 1), _rand(4, 33, 12, device=device))


def test_prologue_and_epilogue_fuse(device):
    def fn(x, y):
        return ((x * y).relu().sum(-1) + 1).sqrt()

    _one_kernel(check(fn, _rand(32, 300, device=device), _rand(32, 300, device=device)))


def test_reduction_of_broadcast_value(device):
    check(lambda x: x.expand(8, 5, 40).sum(0), _rand(5, 40, device=device))


def test_scalar_and_single_element_reductions(device):
    check(lambda x: (x.sum(), x.amax(), x.argmax()), torch.tensor(3.5, device=device))
    check(lambda x: (x.sum(1), x.var(1, correction=0), x.argmax(1)), _rand(7, 1, device=device))


def test_empty_reductions(device):
    check(lambda x: x.sum(1), torch.empty(0, 5, device=device))
    report = check(lambda x: (x.sum(0), x.prod(0), x.sum(0, dtype=torch.int32)), torch.empty(0, 5, device=device))
    assert not report.fallbacks  # a sum or product over an empty dim is a constant
    report = check(lambda x: torch.var(x, 0), torch.empty(0, 5, device=device))
    assert report.fallbacks  # (NaN by eager's rule for the correction: through aten, and said so)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm(device, training):
    mean, var = _rand(16, device=device), _rand(16, device=device).abs() + 0.5
    w, b = _rand(16, device=device), _rand(16, device=device)
    report = check(lambda x: F.batch_norm(x, None if training else mean, None if training else var,
                                          w, b, training=training), _rand(8, 16, 5, 5, device=device),
                   atol=1e-4, rtol=1e-4)
    assert not report.fallbacks


def test_group_norm(device):
    w, b = _rand(12, device=device), _rand(12, device=device)
    report = check(lambda x: F.group_norm(x, 3, w, b), _rand(4, 12, 7, 7, device=device), atol=1e-4, rtol=1e-4)
    assert not report.fallbacks


def test_low_precision_softmax_accumulates_in_fp32(device):
    x = _rand(16, 3000, device=device, dtype=torch.bfloat16)
    check(lambda x: torch.softmax(x, -1), x)
    check(lambda x: x.sum(-1), x, atol=1e-1, rtol=2e-2)


@pytest.mark.parametrize("shape,dims", [((300, 300), None), ((70000, 3), 0), ((3, 70001), 1), ((2, 300, 250), (1, 2)),
                                        ((2, 66000, 3), 1)])
def test_split_reductions_use_two_kernels(device, shape, dims):
    x = _rand(*shape, device=device)
    fn = (lambda x: (x.sum(), x.amax())) if dims is None else (lambda x: (x.sum(dims), x.amin(dims, keepdim=True)))
    report = check(fn, x, atol=1e-4, rtol=1e-4)
    assert not report.fallbacks
    assert len(report.kernels) == 4  # a partial and a final kernel for each reduction


@pytest.mark.parametrize("xnumel,rnumel,outer,expected", [
    (4096, 16384, True, 32),  # x.sum(0) of 16384x4096: 64 column blocks x 32 splits = 2048 programs
    (1, 1 << 20, False, 1024),  # a full sum: 1024 partials of 1024 elements
    (2, 70001, False, 64),  # few long inner rows: ~1024 programs, but chunks of >= 1024
    (640, 16384, True, 32),  # 10 column blocks: splits stop at chunks of 512 rows
    (4096, 8000, True, 1),  # rows too short to split
    (1024, 1 << 20, False, 1),  # enough rows already
])
def test_split_factor_targets_programs_by_direction(xnumel, rnumel, outer, expected):
    from tritonize.lower.reductions import split_factor

    assert split_factor(xnumel, rnumel, outer) == expected


def test_sort_and_topk_are_externs_on_purpose(device):
    x = torch.randn(6, 50, device=device)

    def fn(t):
        values, indices = t.sort(dim=-1, descending=True)
        top, where = t.topk(5, dim=-1)
        return values * 2, indices, top + 1, where, torch.argsort(t, dim=0, stable=True)

    report = check(fn, x)
    assert not report.fallbacks, report
    assert {"aten.sort.default", "aten.topk.default", "aten.sort.stable"} <= set(report.externs), report.externs


@pytest.mark.parametrize("fn, policy", [
    (lambda t: t.sum(-1), "evict_first"),            # persistent: the row is read once
    (lambda t: t.mean(-1) * 2, "evict_first"),       # a per-row epilogue adds no second loop
    (lambda t: t.unfold(1, 64, 1).sum(-1), "evict_last"),  # overlapping windows: read again
])
@pytest.mark.parametrize("length", [1000, 12000], ids=["persistent", "looped"])
def test_l2_policy_of_streamed_loads(fn, policy, length):
    x = torch.randn(4, length)
    report = check(fn, x, atol=1e-3, rtol=1e-4)
    (kernel,) = [k for k in report.kernels if k.kind in ("reduction", "persistent_reduction")]
    loads = [line for line in kernel.source.splitlines() if "tl.load(in_ptr0" in line]
    assert loads and all(policy in line for line in loads), kernel.source
    assert kernel.source.count("for roffset") <= 1


def _one_hot_sums(x, target, values):
    one_hot = torch.zeros_like(x).scatter(1, target[:, None], values[:, None])
    return one_hot.sum(1) * 3 + x[:, 0], one_hot.sum(1, keepdim=True) - x


def test_a_row_sum_of_a_one_hot_reads_the_one_element(device):
    """A row holding one nonzero element (one value a row scattered into zeros) sums to that
    element: no loop over the row, pointwise kernels only. A row whose element is -0.0 sums to
    +0.0, as in eager."""
    x = _rand(6, 50, device=device)
    target = torch.randint(0, 50, (6,), device=device)
    values = _rand(6, device=device)
    values[2] = -0.0
    report = check(_one_hot_sums, x, target, values)
    assert all(k.kind == "pointwise" for k in report.kernels), [k.name for k in report.kernels]
    actual = torch.compile(_one_hot_sums, backend="tritonize")(x, target, values)[0]
    assert torch.equal(torch.signbit(actual), torch.signbit(_one_hot_sums(x, target, values)[0]))


def test_a_sum_across_one_hot_rows_still_loops(device):
    """Summing the one-hot along the other dim (its columns) adds several rows' elements: a
    reduction, not a pick."""
    x = _rand(6, 50, device=device)
    target = torch.randint(0, 5, (6,), device=device)
    values = _rand(6, device=device)
    report = check(lambda x, t, v: torch.zeros_like(x).scatter(1, t[:, None], v[:, None]).sum(0), x, target, values)
    assert any(k.kind != "pointwise" for k in report.kernels), [k.kind for k in report.kernels]


@pytest.mark.parametrize("name", ["int32", "bool", "float64"])
def test_a_one_hot_of_another_dtype_summed(device, name):
    """The picked element is a constant cast to the sum's dtype (a review of the twenty-first
    session: the cast was applied to the literal in the kernel, `3.to(tl.int64)`)."""
    fns = {"int32": lambda x, idx: torch.zeros_like(x, dtype=torch.int32).scatter(1, idx, 3).sum(1),
           "bool": lambda x, idx: torch.zeros_like(x, dtype=torch.bool).scatter(1, idx, True).sum(1),
           "float64": lambda x, idx: torch.zeros_like(x).scatter(1, idx, 1.0).sum(1, dtype=torch.float64)}
    x = _rand(4, 6, device=device)
    check(fns[name], x, torch.randint(0, 6, (4, 1), device=device))


def test_a_one_hot_times_an_infinite_factor_sums_to_nan(device):
    """The row's other elements are 0 * factor: NaN for an infinite factor, as in eager."""
    x = torch.zeros(3, 5, device=device)
    idx = torch.tensor([[1], [3], [0]], device=device)
    factor = torch.tensor([[2.0], [float("inf")], [float("nan")]], device=device)
    actual = torch.compile(lambda x, i, g: (torch.zeros_like(x).scatter(1, i, -1.0) * g).sum(1),
                           backend="tritonize")(x, idx, factor)
    expected = (torch.zeros_like(x).scatter(1, idx, -1.0) * factor).sum(1)
    assert torch.equal(actual.isnan(), expected.isnan()) and actual[0] == expected[0]
