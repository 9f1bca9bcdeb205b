"""Data movement beyond single views (lower/movement.py) and the pointwise ops added with it:
split/unbind, repeat, unfold, slice/select/diagonal scatter, the *_copy variants of views, and
angle, ldexp and the special functions (erfcx, i1, i0e, i1e, Bessel, K0 and K1, ndtri, digamma, polygamma,
zeta, the orthogonal polynomials). Eager's values, no fallbacks."""
import pytest
import torch

import tritonize

from helpers import check


def _x(device, *shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(shape, generator=g) * 5).to(device=device, dtype=dtype)


def no_fallback(fn, *args, **tol):
    report = check(fn, *args, **tol)
    assert not report.fallbacks, report
    return report


def test_split_chunk_unbind(device):
    def fn(x):
        a, b, c = x.split([2, 3, 4], dim=1)
        d, e = x.chunk(2, dim=0)
        rows = x.unbind(0)
        return a * 2, b + c[:, :3], d - e[:1], rows[0] + rows[-1], x.split(4, dim=1)[-1] + 0

    no_fallback(fn, _x(device, 4, 9))


def test_repeat_and_unfold(device):
    def fn(x, s):
        return (x.repeat(2, 3) + 1, x.repeat(2, 1, 1) * 2, x.unfold(1, 3, 2) - 1, x.unfold(0, 2, 1) * 3,
                s.unfold(0, 1, 1) + 1)

    no_fallback(fn, _x(device, 3, 7), _x(device))


def test_slice_select_diagonal_scatter(device):
    def fn(x, rows, cols, diag, sub):
        return (torch.slice_scatter(x, rows, 0, 1, 7, 2), torch.slice_scatter(x, cols, 1, -5, None, 1),
                torch.select_scatter(x, x[0] * 10, 0, -1), torch.diagonal_scatter(x, diag, 1),
                torch.diagonal_scatter(x, sub, -2), torch.slice_scatter(x, x * 3, 0))

    x = _x(device, 8, 6)
    no_fallback(fn, x, _x(device, 3, 6), _x(device, 8, 5), _x(device, 5), _x(device, 6))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=str)
def test_copy_variants_of_views(device, dtype):
    def fn(x):
        return (torch.permute_copy(x, (1, 0)), torch.t_copy(x), torch.transpose_copy(x, 0, 1),
                torch.view_copy(x, (6, 4)), torch.unsqueeze_copy(x, 1), torch.squeeze_copy(x[:1]),
                torch.slice_copy(x, 1, 1, 5, 2), torch.select_copy(x, 0, 2), torch.diagonal_copy(x, 1),
                torch.narrow_copy(x, 1, 2, 3), torch.expand_copy(x[:1], (3, 6)),
                torch.as_strided_copy(x, (2, 2), (6, 1), 1), torch.alias_copy(x), torch.detach_copy(x),
                torch.unbind_copy(x, 1)[2], torch.split_with_sizes_copy(x, [1, 3], 0)[1])

    x = _x(device, 4, 6, dtype=torch.float32).to(dtype) if dtype != torch.bool else _x(device, 4, 6) > 0
    no_fallback(fn, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32], ids=str)
def test_angle_ldexp_erfcx_i1(device, dtype):
    x = torch.tensor([-2.5, -1.0, 0.0, 0.5, 3.0, 7.0, -0.0, float("nan")], device=device)
    if not dtype.is_floating_point:
        x = x[:-1]
    x = x.to(dtype)
    e = torch.tensor([1, -3, 0, 4, 2, -1, 5, 0][:x.numel()], device=device)
    no_fallback(lambda a, b: (torch.angle(a), torch.ldexp(a, b), torch.special.erfcx(a), torch.special.i1(a)),
                x, e, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_libdevice_special_functions(device, dtype):
    x = torch.cat([torch.linspace(-12, 12, 49), torch.tensor([0.0, 1e-3, float("inf"), float("nan")])])
    x = x.to(device=device, dtype=dtype)
    p = torch.linspace(0.01, 0.99, 25, device=device, dtype=dtype)
    special = torch.special
    report = check(lambda t, q: (special.bessel_j0(t), special.bessel_j1(t), special.bessel_y0(t.abs()),
                                 special.bessel_y1(t.abs() + 0.5), special.modified_bessel_i0(t),
                                 special.modified_bessel_i1(t), special.spherical_bessel_j0(t),
                                 special.ndtri(q)),
                   x, p, atol=1e-5, rtol=1e-5)
    # eager CUDA's Bessel j/y are its own Cephes code, which libdevice does not match: aten runs them
    expected = {"aten.special_bessel_j0.default", "aten.special_bessel_j1.default",
                "aten.special_bessel_y0.default", "aten.special_bessel_y1.default"}
    assert set(report.fallbacks) == (expected if x.is_cuda else set()), report.fallbacks
    if x.is_cuda:
        assert all("libdevice" in reason for reason in report.fallback_reasons.values())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_modified_bessel_at_infinity(device, dtype):
    """torch's i0 and i1 (CPU and CUDA) give nan at +-inf, where libdevice gives the limit."""
    x = torch.tensor([float("inf"), float("-inf"), float("nan"), 3.0], device=device, dtype=dtype)
    special = torch.special
    no_fallback(lambda t: (torch.i0(t), special.i1(t), special.modified_bessel_i0(t),
                           special.modified_bessel_i1(t)), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64], ids=str)
def test_digamma_and_polygamma_order_0(device, dtype):
    values = [0.0, -0.0, -1.0, -2.5, 1e-8, 1.4616321, 3.3, 12.0, 1e6, -7.9999, -19.95, 0.25,
              float("inf"), float("-inf"), float("nan")]
    if not dtype.is_floating_point:
        values = [0, -1, 1, 2, 7, 100, -3]
    x = torch.cat([torch.tensor(values), torch.linspace(-20, 30, 101)]).to(device=device, dtype=dtype) \
        if dtype.is_floating_point else torch.tensor(values, device=device, dtype=dtype)
    no_fallback(lambda t: (torch.digamma(t), torch.polygamma(0, t), torch.special.psi(t)), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64], ids=str)
def test_scaled_modified_bessel_i0e_i1e(device, dtype):
    """exp(-|x|) i0(x) and i1(x): the product below 700, the asymptotic series above (where i0
    overflows), 0 at infinity."""
    values = [0.0, -0.0, 1e-3, -2.5, 5.0, 30.0, 95.0, 699.9, 700.0, 701.0, 1e4, -1e6, 3e38,
              float("inf"), float("-inf"), float("nan")]
    if not dtype.is_floating_point:
        values = [0, -1, 3, 100, -1000]
    x = torch.tensor(values, device=device, dtype=dtype)
    no_fallback(lambda t: (torch.special.i0e(t), torch.special.i1e(t)), x)


BESSEL_K = {"k0": torch.special.modified_bessel_k0, "k1": torch.special.modified_bessel_k1,
            "scaled_k0": torch.special.scaled_modified_bessel_k0, "scaled_k1": torch.special.scaled_modified_bessel_k1}
BESSEL_K_EDGES = [0.0, -0.0, -1.0, -1e-30, 5e-324, 1e-310, 1e-300, 1e-30, 1e-5, 0.5, 1.0, 1.5, 1.999, 2.0, 2.001,
                  3.0, 10.0, 100.0, 700.0, 708.5, 710.0, 740.0, 750.0, 1e4, 1e300, float("inf"), float("-inf"),
                  float("nan")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64], ids=str)
def test_modified_bessel_k0_k1(device, dtype):
    """K0, K1, exp(x) K0 and exp(x) K1 (our own Chebyshev tables, lower/special.py): eager's values,
    in float64 to 1e-13 on both sides of the change of formula at 2 and where exp(-x) underflows
    (atol: a subnormal result has few digits); +inf at +-0, NaN below 0 and at NaN, 0 at +inf
    (scaled too), eager's inf and NaN at the smallest subnormal. No fallback."""
    values = torch.cat([torch.tensor(BESSEL_K_EDGES, dtype=torch.float64), torch.linspace(0.01, 40, 89).double()])
    x = values.to(device=device, dtype=dtype) if dtype.is_floating_point else \
        torch.tensor([0, -1, 1, 2, 3, 50, 800], device=device, dtype=dtype)
    tol = {"rtol": 1e-13, "atol": 1e-320} if dtype == torch.float64 else {}
    no_fallback(lambda t: tuple(f(t) for f in BESSEL_K.values()), x, **tol)


@pytest.mark.parametrize("name", sorted(BESSEL_K))
def test_modified_bessel_k_against_mpmath(device, name):
    """Within 4e-15 (relative) of the exact values, in float64, over (0, 1e3]."""
    mpmath = pytest.importorskip("mpmath")
    order, scaled = int(name[-1]), name.startswith("scaled")
    points = [1e-300, 1e-20, 1e-3, 0.1, 0.7, 1.2, 1.6, 1.9, 1.99999, 2.0, 2.00001, 2.1, 2.5, 3.7, 5.0, 8.0, 13.0,
              21.0, 40.0, 99.0, 250.0, 600.0, 1000.0]
    exact = torch.tensor([float(mpmath.besselk(order, v) * (mpmath.exp(v) if scaled else 1)) for v in points],
                         dtype=torch.float64)
    torch._dynamo.reset()
    actual = torch.compile(BESSEL_K[name], backend="tritonize")(torch.tensor(points, dtype=torch.float64,
                                                                             device=device))
    torch.testing.assert_close(actual.cpu(), exact, rtol=4e-15, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_polygamma_orders_and_zeta(device, dtype):
    """polygamma of orders 1 (trigamma) to 3 and the Hurwitz zeta function, by torch's methods:
    poles, negative arguments, infinities and NaN."""
    values = [0.0, -0.0, -1.0, -2.3, 1e-8, 0.3, 3.3, 12.0, 1e6, -7.9, float("inf"), float("-inf"),
              float("nan")]
    x = torch.cat([torch.tensor(values), torch.linspace(-9, 9, 37)]).to(device=device, dtype=dtype)
    no_fallback(lambda t: (torch.polygamma(1, t), torch.polygamma(2, t), torch.special.polygamma(3, t)), x,
                rtol=2e-5 if dtype == torch.float32 else 1e-7, atol=1e-6 if dtype == torch.float32 else 1e-7)
    s = torch.tensor([2.0, 1.0, 0.5, 3.0, 3.5, 4.0, 1.5, 2.0, 2.0, 7.0], device=device, dtype=dtype)
    q = torch.tensor([1.0, 2.0, 0.5, -1.0, -2.5, 0.0, 30.0, float("nan"), float("inf"), -3.7], device=device,
                     dtype=dtype)
    no_fallback(lambda a, b: (torch.special.zeta(a, b), torch.special.zeta(a, 2.0)), s, q)


CHEBYSHEV_OPS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                 "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
                 "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w"]
OTHER_POLYNOMIALS = ["hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
                     "legendre_polynomial_p"]


@pytest.mark.parametrize("name", OTHER_POLYNOMIALS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hermite_laguerre_legendre_in_every_case_of_torchs(device, name, dtype):
    """Degrees -1 to 14, 3.7, past the Hermite limit (NaN), infinite and NaN degrees, at 0, +-1
    and elsewhere, NaN included: torch's cases in its order, the recurrence per element."""
    fn = getattr(torch.special, name)
    inf, nan = float("inf"), float("nan")
    points = torch.tensor([-1.0, 1.0, 0.0, 0.5, -0.3, 1.7, -2.0, nan], dtype=dtype)
    degrees = torch.tensor([-1.0, 0.0, 1.0, 2.0, 3.7, 5.0, 9.0, 14.0, 600.0, inf, nan], dtype=dtype)
    if name.startswith("laguerre") or name.startswith("legendre"):
        degrees = degrees[:-3]  # (their loops would run to the degree; torch's too)
        points = points[:-1]  # at NaN torch returns an uninitialized variable from degree 2 on
    x = points.repeat_interleave(len(degrees)).to(device)
    n = degrees.repeat(len(points)).to(device)
    no_fallback(fn, x, n, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", CHEBYSHEV_OPS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_chebyshev_polynomials_in_every_case_of_torchs(device, name, dtype):
    """Each degree from -1 to 14 (and 3.7, truncated) at +-1, 0, 1/2, inside and outside [-1, 1]
    and near 1 (where the trigonometric form meets its fallback): torch's cases, in its order;
    the recurrence stops per element at its own degree. At NaN, torch's U and W return an
    uninitialized variable from degree 2 on; ours are NaN (T's and V's are NaN in torch too)."""
    fn = getattr(torch.special, name)
    points = torch.tensor([-1.0, 1.0, 0.0, 0.5, -0.3, 0.999999, -0.999999, 1.7, -2.0], dtype=dtype)
    degrees = torch.tensor([-1.0, 0.0, 1.0, 2.0, 3.7, 5.0, 7.0, 9.0, 12.0, 14.0], dtype=dtype)
    x = points.repeat_interleave(len(degrees)).to(device)
    n = degrees.repeat(len(points)).to(device)
    no_fallback(fn, x, n, atol=1e-4, rtol=1e-4)
    no_fallback(lambda t: fn(t, 5), x, atol=1e-4, rtol=1e-4)
    nan = torch.full((len(degrees),), float("nan"), dtype=dtype, device=device)
    at_nan = torch.compile(fn, backend="tritonize")(nan, degrees.to(device))
    expected = torch.tensor([0.0, 1.0] + [float("nan")] * (len(degrees) - 2), dtype=dtype, device=device)
    torch.testing.assert_close(at_nan, expected, equal_nan=True)


EDGE_SAMPLES = {  # found by the OpInfo sweep over all samples (--samples 0), each an exception before
    "masked_scatter_broadcast_input": (lambda x, m, s: x.masked_scatter(m, s),
                                       lambda d: (torch.randn(5, device=d), torch.rand(5, 5, device=d) > 0.5,
                                                  torch.randn(5, 5, device=d))),
    "repeat_empty": (lambda x: x.repeat((0,)), lambda d: (torch.randn(0, device=d),)),
    "repeat_of_an_empty_dim": (lambda x: x.repeat(1, 3) + 1, lambda d: (torch.randn(2, 0, device=d),)),
    "tile_empty": (lambda x: x.tile(()), lambda d: (torch.randn(0, device=d),)),
    "transpose_0d": (lambda x: x.transpose(0, -1) * 2, lambda d: (torch.tensor(1.5, device=d),)),
    "nonzero_static_of_an_empty_dim": (lambda x: torch.nonzero_static(x, size=3, fill_value=-2),
                                       lambda d: (torch.randn(5, 0, 5, device=d),)),
}


@pytest.mark.parametrize("name", sorted(EDGE_SAMPLES))
def test_empty_and_broadcast_edge_samples(device, name):
    fn, make = EDGE_SAMPLES[name]
    args = make(device)
    actual, report = tritonize.run_and_explain(fn, *args)
    expected = fn(*args)
    assert not report.fallbacks
    assert actual.shape == expected.shape and actual.stride() == expected.stride()
    assert torch.equal(actual, expected)
