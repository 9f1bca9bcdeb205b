"""Ops lowered through decompositions (lower/own_decompositions.py and torch's, added to our
table): adaptive pooling with uneven windows, 3-D max pooling, searchsorted and bucketize, bilinear,
3-D grid sampling, against eager (values, indices, dtypes, strides), with no fallbacks."""
import pytest
import torch
import torch.nn.functional as F

import tritonize
from conftest import DEVICE
from helpers import assert_same

NAN = float("nan")


def _check(fn, *args, allowed_fallbacks=(), **tol):
    expected = fn(*args)
    actual, report = tritonize.run_and_explain(fn, *args)
    assert set(report.fallbacks) <= set(allowed_fallbacks), report.fallback_reasons
    assert_same(actual, expected, **tol)
    for a, e in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)):
        assert a.dtype == e.dtype and a.stride() == e.stride()


def _with_nans_and_ties(shape, dtype=torch.float32):
    x = torch.randint(-2, 3, shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    if dtype.is_floating_point:
        x.view(-1)[::7] = NAN
    return x.to(DEVICE)


@pytest.mark.parametrize("out", [(3, 2), (4, 5), (1, 1), (7, 6)])
def test_adaptive_max_pool2d_uneven_windows(out):
    x = _with_nans_and_ties((2, 3, 7, 6))
    _check(lambda t: F.adaptive_max_pool2d(t, out, return_indices=True), x)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_adaptive_max_pool_dtypes_1d_3d(dtype):
    _check(lambda t: F.adaptive_max_pool1d(t, 3, return_indices=True), _with_nans_and_ties((2, 5, 8), dtype))
    _check(lambda t: F.adaptive_max_pool3d(t, (2, 3, 2), return_indices=True),
           _with_nans_and_ties((1, 2, 5, 4, 3), dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_adaptive_avg_pool3d_uneven_windows(dtype):
    x = torch.randn(2, 3, 5, 4, 7).to(dtype).to(DEVICE)
    _check(lambda t: F.adaptive_avg_pool3d(t, (3, 3, 2)), x)


# eager has no integer max_pool3d on CUDA
@pytest.mark.parametrize("dtype", [torch.float32] + ([torch.int32] if DEVICE == "cpu" else []))
def test_max_pool3d_with_indices(dtype):
    x = _with_nans_and_ties((1, 2, 5, 6, 4), dtype)
    x[..., :2, :2, :2] = float("-inf") if dtype.is_floating_point else torch.iinfo(dtype).min
    _check(lambda t: F.max_pool3d(t, 2, stride=(2, 1, 2), padding=1, return_indices=True), x)
    _check(lambda t: F.max_pool3d(t, 3, dilation=2, ceil_mode=True, return_indices=True), x)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_1d_and_rows(right):
    boundaries = torch.tensor([-1.0, 0.0, 0.0, 2.5, NAN], device=DEVICE)
    values = torch.tensor([[-2.0, 0.0, 1.0, 2.5, 3.0, NAN]], device=DEVICE).expand(3, 6)
    _check(lambda b, v: torch.searchsorted(b, v, right=right), boundaries, values)
    rows = torch.sort(torch.randn(3, 4), dim=-1).values.to(DEVICE)
    _check(lambda b, v: torch.searchsorted(b, v, side="right" if right else "left", out_int32=True),
           rows, values)


def test_searchsorted_sorter_scalar_empty_and_ints():
    boundaries = torch.tensor([5, 1, 3, 3, 9], device=DEVICE)
    sorter = torch.argsort(boundaries.cpu(), stable=True).to(DEVICE)
    values = torch.arange(-1, 11, device=DEVICE).reshape(3, 4)
    _check(lambda b, v, s: torch.searchsorted(b, v, sorter=s), boundaries, values, sorter)
    _check(lambda b: torch.searchsorted(b, 3, right=True), boundaries.sort().values)
    _check(lambda b, v: torch.searchsorted(b, v), boundaries[:0], values)


def test_bucketize():
    boundaries = torch.tensor([-1.0, 0.0, 0.0, 2.5], device=DEVICE)
    values = torch.tensor([[-2.0, 0.0, 1.0], [2.5, 3.0, NAN]], device=DEVICE)
    _check(lambda v, b: torch.bucketize(v, b, right=True), values, boundaries)
    _check(lambda v, b: torch.bucketize(v, b, out_int32=True), values, boundaries)


@pytest.mark.parametrize("kwargs", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                    dict(kernel_size=(3, 2, 2), padding=1, count_include_pad=False),
                                    dict(kernel_size=2, padding=1, divisor_override=3)])
def test_avg_pool3d(kwargs):
    x = torch.randn(1, 2, 5, 6, 4).to(DEVICE)
    _check(lambda t: F.avg_pool3d(t, **kwargs), x)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample(mode, padding_mode):
    x = torch.randn(1, 2, 4, 5).to(DEVICE)
    grid = (torch.rand(1, 3, 6, 2) * 2.4 - 1.2).to(DEVICE)
    grid[0, 0, 0] = NAN
    # on CUDA, bilinear with zero padding runs through aten (own_decompositions.grid_sampler_2d)
    # (F.grid_sample calls cudnn's sampler for that case when cuDNN takes it)
    aten_on_cuda = ("aten.grid_sampler_2d.default", "aten.cudnn_grid_sampler.default") if DEVICE == "cuda" and (
        mode, padding_mode) == ("bilinear", "zeros") else ()
    for align_corners in (False, True):
        _check(lambda t, g: F.grid_sample(t, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners),
               x, grid, allowed_fallbacks=aten_on_cuda)


# ----------------------------------------------------------------------------- indexing, compositions

@pytest.mark.parametrize("accumulate", [False, True])
def test_put_into_a_transposed_tensor_with_negative_and_repeated_indices(accumulate):
    x = torch.randn(4, 5, device=DEVICE).t()
    index = torch.tensor([0, -1, 7, 19, 3], device=DEVICE)
    if accumulate:
        index = torch.tensor([0, -1, 7, 7, -1], device=DEVICE)
    source = torch.randn(5, device=DEVICE)
    _check(lambda t, i, s: t.put(i, s, accumulate=accumulate), x, index, source)


def test_put_in_place_writes_the_callers_tensor():
    def fn(t, i, s):
        t.put_(i, s)
        return t * 2

    x, index, source = torch.randn(3, 4, device=DEVICE), torch.tensor([1, 5, -2], device=DEVICE), torch.randn(3, device=DEVICE)
    x_eager = x.clone()
    actual, report = tritonize.run_and_explain(fn, x, index, source)
    assert_same(actual, fn(x_eager, index, source))
    assert_same(x, x_eager)
    assert not report.fallbacks


@pytest.mark.parametrize("op", ["index_add", "index_copy", "index_fill"])
def test_index_ops_on_a_zero_dim_tensor(op):
    x, index = torch.tensor(1.5, device=DEVICE), torch.tensor([0], device=DEVICE)
    if op == "index_add":
        _check(lambda t, i, s: t.index_add(0, i, s, alpha=-2), x, index, torch.tensor(4.0, device=DEVICE))
    elif op == "index_copy":
        _check(lambda t, i, s: t.index_copy(0, i, s), x, index.reshape(()), torch.tensor(4.0, device=DEVICE))
    else:
        _check(lambda t, i: t.index_fill(-1, i, 2.5), x, index)


@pytest.mark.parametrize("keepdim", [False, True])
def test_sums_and_products_over_an_empty_dim(keepdim):
    x = torch.randn(3, 0, 4, device=DEVICE)
    ints = torch.ones(0, 5, dtype=torch.int32, device=DEVICE)
    _check(lambda t: (t.sum(1, keepdim=keepdim), t.prod(1, keepdim=keepdim)), x)
    _check(lambda t: (t.sum(0, keepdim=keepdim), t.prod(0, keepdim=keepdim)), ints)
    _check(lambda a, b: torch.linalg.vecdot(a, b), torch.randn(0, device=DEVICE), torch.randn(0, device=DEVICE))


def test_addmv_dist_and_batch_norm_with_running_statistics():
    m, v, y = torch.randn(6, 10, device=DEVICE), torch.randn(10, device=DEVICE), torch.randn(6, device=DEVICE)
    _check(lambda a, b, c: torch.addmv(c, a, b, beta=0.5, alpha=2.0), m, v, y, atol=1e-5, rtol=1e-5)
    _check(lambda a, b: (torch.dist(a, b), torch.dist(a, b, 3.0)), torch.randn(4, 5, device=DEVICE),
           torch.randn(4, 5, device=DEVICE), atol=1e-5, rtol=1e-5)

    def bn(x, w, b, mean, var):
        return torch.ops.aten._batch_norm_with_update(x, w, b, mean, var, 0.1, 1e-5)

    args = [torch.randn(4, 3, 5, device=DEVICE), torch.randn(3, device=DEVICE), torch.randn(3, device=DEVICE),
            torch.randn(3, device=DEVICE), torch.rand(3, device=DEVICE) + 0.5]
    eager_args = [a.clone() for a in args]
    actual, report = tritonize.run_and_explain(bn, *args)
    expected = bn(*eager_args)
    assert not report.fallbacks
    assert_same(actual[0], expected[0], atol=1e-5, rtol=1e-5)
    assert_same(args[3], eager_args[3], atol=1e-5, rtol=1e-5)  # the running statistics, updated in place
    assert_same(args[4], eager_args[4], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("beta", [1, 0.5, 0])
def test_addbmm_is_one_matrix_product(beta):
    x = torch.randn(4, 6, device=DEVICE)
    if beta == 0:
        x[0, 0] = NAN  # ignored, as in eager
    b1, b2 = torch.randn(3, 4, 5, device=DEVICE), torch.randn(3, 5, 6, device=DEVICE)
    _check(lambda a, b, c: torch.addbmm(a, b, c, beta=beta, alpha=2), x, b1, b2, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, float("inf")])
def test_cdist_and_pdist(p):
    x1, x2 = torch.randn(2, 5, 3, device=DEVICE), torch.randn(2, 7, 3, device=DEVICE)
    x2[0, 1] = x1[0, 2]  # a zero distance
    _check(lambda a, b: torch.cdist(a, b, p=p), x1, x2, atol=1e-4, rtol=1e-4)
    _check(lambda a: F.pdist(a, p=p), torch.randn(6, 4, device=DEVICE), atol=1e-4, rtol=1e-4)


def test_masked_scatter_broadcast_mask_and_layout():
    x = torch.randn(5, 4, device=DEVICE).t()  # eager's result keeps this layout
    mask = torch.rand(5, device=DEVICE) > 0.4
    source = torch.randn(30, device=DEVICE)
    _check(lambda t, m, s: t.masked_scatter(m, s), x, mask, source)
    _check(lambda t, m, s: t.masked_scatter(m, s), x, torch.zeros(5, dtype=torch.bool, device=DEVICE),
           torch.randn(0, device=DEVICE))


def test_median_nanmedian_and_kthvalue_through_a_sort():
    x = torch.randn(5, 7, device=DEVICE)
    with_nans = x.clone()
    with_nans[1, 2] = NAN
    with_nans[3] = NAN  # a row of NaNs
    _check(lambda t: (t.median(), t.nanmedian()), x)
    _check(lambda t: (t.median(), t.nanmedian()), with_nans)
    one_nan = x.clone()
    one_nan[1, 2] = NAN  # (among equal values, NaNs included, eager's index is its algorithm's)
    _check(lambda t: torch.kthvalue(t, 3, 1), one_nan)
    _check(lambda t: torch.kthvalue(t, 7, 1), one_nan)
    _check(lambda t: torch.kthvalue(t, 2, 0, keepdim=True), x)
    _check(lambda t: (t.median(), t.nanmedian()), torch.full((4,), NAN, device=DEVICE))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_frexp_of_special_and_boundary_values(dtype):
    tiny = torch.finfo(dtype).tiny
    values = [0.0, -0.0, float("inf"), -float("inf"), NAN, 1.0, 0.5, -2.0, 3.0, 1023.9, 1024.0,
              torch.finfo(dtype).max, tiny, 0.1, -7.5e-3]
    if dtype != torch.bfloat16 or DEVICE != "cpu":  # (Triton's interpreter flushes bf16 subnormals)
        values += [tiny / 8, -tiny / 2]
    x = torch.tensor(values, dtype=dtype, device=DEVICE)
    _check(torch.frexp, x)


@pytest.mark.parametrize("size", [0, 3])
def test_nonzero_static_dimension_major_layout(monkeypatch, cache, size):
    """CUDA's layout, whatever the device: strides (1, size), (1, 1) when empty, and for a 0-d
    input (size, 0) with strides (1, size). (Its own cache: the compile differs from the CPU's.)"""
    from tritonize.lower import own_decompositions

    monkeypatch.setattr(own_decompositions, "dimension_major_nonzero", lambda device: True)
    x = torch.tensor([[0, 2, 0, 1], [3, 0, 0, 0], [0, 0, 5, 6]], device=DEVICE)
    for t, dims in ((x, 2), (torch.tensor(2.0, device=DEVICE), 0)):
        actual, report = tritonize.run_and_explain(lambda t: torch.nonzero_static(t, size=size, fill_value=-7), t)
        assert not report.fallbacks
        assert torch.equal(actual, torch.nonzero_static(t, size=size, fill_value=-7))
        assert actual.shape == (size, dims) and actual.stride() == (1, max(size, 1))


@pytest.mark.parametrize("size", [0, 3, 9, 40])
def test_nonzero_static_pads_and_cuts(size):
    x = torch.tensor([[0, 2, 0, 1], [3, 0, 0, 0], [0, 0, 5, 6]], device=DEVICE)
    _check(lambda t: torch.nonzero_static(t, size=size, fill_value=-7), x)
    _check(lambda t: torch.nonzero_static(t, size=size), (torch.randn(2, 3, 4, device=DEVICE) > 0.3))
    _check(lambda t: torch.nonzero_static(t, size=size), torch.tensor(2.0, device=DEVICE))


# ----------------------------------------------------------------------------- bilinear, 3-D grid sampling

def _check_inputs_unchanged(fn, *args, **tol):
    """_check, and the inputs after the compiled call are the inputs before it."""
    before = [a.clone() for a in args]
    _check(fn, *args, **tol)
    for a, b in zip(args, before):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("batch", [(), (5,), (2, 3), (0,)])
@pytest.mark.parametrize("bias", [False, True])
def test_bilinear_is_a_reduction_of_the_product(device, batch, bias):
    x1, x2 = torch.randn(*batch, 3, device=device), torch.randn(*batch, 4, device=device)
    weight, b = torch.randn(6, 3, 4, device=device), torch.randn(6, device=device)
    if bias:
        _check_inputs_unchanged(F.bilinear, x1, x2, weight, b, atol=1e-5, rtol=1e-5)
    else:
        _check_inputs_unchanged(F.bilinear, x1, x2, weight, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.int32])
def test_bilinear_dtypes(device, dtype):
    if dtype == torch.int32 and device == "cuda":
        pytest.skip("eager has no integer bilinear on CUDA")
    make = (lambda *s: torch.randint(-4, 5, s, device=device).to(dtype)) if not dtype.is_floating_point else (
        lambda *s: torch.randn(*s, device=device).to(dtype))
    _check_inputs_unchanged(F.bilinear, make(4, 2, 5), make(4, 2, 3), make(7, 5, 3), make(7))


def test_trilinear_other_expansions_and_sums(device):
    """_trilinear as its own op: other expand/sum patterns (bilinear's backward uses them), a
    negative dim, no sum at all, and eager's empty dim where no input has a size."""
    x, y, z = torch.randn(3, 4, device=device), torch.randn(4, 5, device=device), torch.randn(3, 5, device=device)
    for expand, sumdim in (([[2], [0], [1]], [1]), ([[2], [0], [1]], [0, 2]), ([[-1], [0], [1]], [-2]),
                           ([[2], [0], [1]], []), ([[2], [0], [1]], [0, 1, 2])):
        _check(lambda a, b, c: torch.ops.aten._trilinear(a, b, c, *expand, sumdim), x, y, z, atol=1e-5, rtol=1e-5)
    v = torch.randn(3, device=device)
    _check(lambda a, b, c: torch.ops.aten._trilinear(a, b, c, [0], [0], [0], [1]), v, v * 2, v * 3)


def _sampling_grid(device, n=2, points=(3, 4, 5)):
    """Grid points on exact multiples of 1/8 in [-2.5, 2.5] (positions whose unnormalized values
    are exact, half-way points included, so nearest sampling rounds ties), the edges -1 and 1
    exactly, and arbitrary values."""
    generator = torch.Generator().manual_seed(0)
    grid = torch.randint(-20, 21, (n, *points, 3), generator=generator) / 8
    flat = grid.view(-1, 3)
    flat[:6] = torch.tensor([[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0], [-1.0, 1.0, 0.0], [1.0, -1.0, 0.5],
                             [0.5, 0.0, -0.5], [1.5, -1.5, 3.0]])
    flat[-20:] = torch.rand(20, 3, generator=generator) * 3 - 1.5
    return grid.to(device)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_3d(device, mode, padding_mode, align_corners):
    x = torch.randn(2, 3, 4, 5, 8, device=device)
    x[0, 0, 0, 0, 0] = float("inf")  # a corner outside the input never reads it (nor multiplies it by 0)
    _check_inputs_unchanged(
        lambda t, g: F.grid_sample(t, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners),
        x, _sampling_grid(device))


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_3d_non_finite_and_far_coordinates(device, padding_mode):
    """NaN, infinite and far coordinates: eager's answers on this device (a NaN coordinate is
    clipped to the last element on the CPU and to the first on CUDA; far points reflect, past
    2**31 spans with the parity eager's int conversion gives on the device)."""
    x = torch.randn(1, 2, 3, 4, 5, device=device)
    grid = _sampling_grid(device, n=1)
    # (far values whose unnormalized products are exact: eager's CUDA kernel may fuse them into an fma)
    specials = torch.tensor([float("nan"), float("inf"), -float("inf"), 2.0 ** 33, -1.5 * 2 ** 31, 2.0 ** 100,
                             123.375, -77.25])
    grid.view(-1, 3)[:8, 0] = specials.to(device)
    grid.view(-1, 3)[8:16, 1] = specials.to(device)
    grid.view(-1, 3)[16:24, 2] = specials.to(device)
    for mode in ("bilinear", "nearest"):
        for align_corners in (False, True):
            _check_inputs_unchanged(
                lambda t, g: F.grid_sample(t, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners),
                x, grid)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_grid_sample_3d_dtypes_and_layout(device, dtype):
    """float64; bf16 computed in fp32 (eager on the CPU rounds every step to bf16: compared
    with eager's fp32 answer, rounded); a channels-last input gives a contiguous result."""
    x = torch.randn(2, 3, 4, 5, 8, device=device).to(memory_format=torch.channels_last_3d)
    grid = _sampling_grid(device)
    for mode in ("bilinear", "nearest"):
        fn = lambda t, g: F.grid_sample(t, g, mode=mode, padding_mode="reflection", align_corners=False)
        if dtype == torch.float64:
            _check_inputs_unchanged(fn, x.double(), grid.double())
            continue
        actual, report = tritonize.run_and_explain(fn, x.to(dtype), grid.to(dtype))
        assert not report.fallbacks
        expected = fn(x.to(dtype).float(), grid.to(dtype).float()).to(dtype)
        assert actual.dtype == dtype and actual.stride() == expected.stride()
        assert_same(actual, expected)


def test_a_large_bilinear_layer_stays_with_eager(device):
    """Past MAX_TRILINEAR_MACS multiply-adds _trilinear is left to eager (its bmm runs on tensor
    cores); the result is eager's and the fallback is reported."""
    from tritonize.lower.own_decompositions import MAX_TRILINEAR_MACS

    layer = torch.nn.Bilinear(128, 128, 64).to(device)
    x1, x2 = torch.randn(1025, 128, device=device), torch.randn(1025, 128, device=device)
    assert 1025 * 128 * 128 * 64 > MAX_TRILINEAR_MACS
    with torch.no_grad():
        _check(layer, x1, x2, allowed_fallbacks=["aten._trilinear.default"], atol=1e-4, rtol=1e-4)
        _, report = tritonize.run_and_explain(layer, x1, x2)
    assert set(report.fallbacks) == {"aten._trilinear.default"}, report.fallback_reasons
