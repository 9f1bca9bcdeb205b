"""Lowerings of elementwise functions built from several ops or a helper: gcd and lcm, ldexp,
angle, spherical_bessel_j0, digamma, polygamma (trigamma, Hurwitz zeta), the scaled Bessel functions i0e
and i1e, the modified Bessel functions of the second kind K0 and K1 (plain and scaled; their
coefficient tables are in lower/bessel_k_coefficients.py). The table-driven ones (libdevice
functions, arithmetic) live in lower/pointwise.py."""
from __future__ import annotations

import math

import torch

from ..errors import Unsupported
from ..ir import expr as ex
from . import bessel_k_coefficients as k_tables
from .pointwise import output_of, pointwise
from .registry import lowering

aten = torch.ops.aten


def c_promoted(dtype: torch.dtype) -> torch.dtype:
    """The type C++ computes a narrow integer expression in (torch's CPU kernels for gcd/lcm do
    their arithmetic so: |-128| is 128 before the result is cast back)."""
    return torch.int32 if dtype.itemsize < 4 else dtype


@lowering(aten.gcd.default)
def lower_gcd(ctx, node, a, b):
    return pointwise(ctx, node, [a, b], lambda x, y: ex.op("gcd", x, y, dtype=x.dtype), c_promoted(output_of(node)[1]))


@lowering(aten.lcm.default)
def lower_lcm(ctx, node, a, b):
    # torch: |a / gcd(a, b) * b| (in the C-promoted type), and 0 when both are 0
    def build(x, y):
        t = x.dtype
        divisor = ex.op("gcd", x, y, dtype=t)
        is_zero = ex.op("eq", divisor, ex.constant(0, t), dtype=torch.bool)
        safe = ex.op("where", is_zero, ex.constant(1, t), divisor, dtype=t)
        multiple = ex.op("abs", ex.op("mul", ex.op("truncdiv", x, safe, dtype=t), y, dtype=t), dtype=t)
        return ex.op("where", is_zero, ex.constant(0, t), multiple, dtype=t)

    return pointwise(ctx, node, [a, b], build, c_promoted(output_of(node)[1]))


@lowering(aten.ldexp.Tensor)
def lower_ldexp(ctx, node, x, other):
    # torch: x * 2.0 ** other
    return pointwise(ctx, node, [x, other], lambda a, e: ex.op(
        "mul", a, ex.op("pow", ex.constant(2.0, e.dtype), e, dtype=e.dtype), dtype=a.dtype))


@lowering(aten.angle.default)
def lower_angle(ctx, node, x):
    if x.dtype.is_complex:
        raise Unsupported("angle of a complex tensor")

    def build(a):
        f = a.dtype
        half_turn = ex.op("where", ex.op("lt", a, ex.constant(0, f), dtype=torch.bool), ex.constant(math.pi, f),
                          ex.constant(0, f), dtype=f)
        return ex.op("where", ex.op("isnan", a, dtype=torch.bool), a, half_turn, dtype=f)

    return pointwise(ctx, node, [x], build)


BESSEL_FUNCTIONS = {aten.special_bessel_j0: "j0", aten.special_bessel_j1: "j1",
                    aten.special_bessel_y0: "y0", aten.special_bessel_y1: "y1"}


def _bessel(name):
    def lower(ctx, node, x):
        # On CUDA eager runs its own Cephes code: libdevice's versions differ by ~3e-7 in fp64 and
        # give nan where eager gives 0 at infinity. The CPU interpreter calls torch's own.
        if output_of(node)[2].type == "cuda":
            raise Unsupported(f"bessel_{name} on CUDA: libdevice's {name} is not as accurate as "
                              "eager's (runs through aten)")
        return pointwise(ctx, node, [x], lambda a: ex.op(name, a, dtype=a.dtype))
    return lower


for _target, _name in BESSEL_FUNCTIONS.items():
    lowering(_target)(_bessel(_name))


@lowering(aten.special_spherical_bessel_j0.default)
def lower_spherical_bessel_j0(ctx, node, x):
    # sin(x) / x; its Taylor series (terms through x**14) near 0, where the division loses digits
    def build(a):
        f = a.dtype
        square = ex.op("mul", a, a, dtype=f)
        series = ex.constant((-1) ** 7 / math.factorial(15), f)
        for k in range(6, -1, -1):
            series = ex.op("add", ex.constant((-1) ** k / math.factorial(2 * k + 1), f),
                           ex.op("mul", square, series, dtype=f), dtype=f)
        ratio = ex.op("truediv", ex.op("sin", a, dtype=f), a, dtype=f)
        small = ex.op("lt", ex.op("abs", a, dtype=f), ex.constant(0.5, f), dtype=torch.bool)
        finite = ex.op("where", small, series, ratio, dtype=f)
        return ex.op("where", ex.op("isinf", a, dtype=torch.bool), ex.constant(0.0, f), finite, dtype=f)

    return pointwise(ctx, node, [x], build)


def _digamma(a: ex.Expr) -> ex.Expr:
    """digamma from helpers.digamma_positive, reflected for x < 0: digamma(1 - x) - pi / tan(pi r),
    r the fractional part of x (tan has period pi; pi * x would round away the digits that matter
    near the poles), computed in fp64 as torch's CPU kernel does. Like torch: -inf at +0, +inf at
    -0, NaN at the negative integers and -inf."""
    f = a.dtype

    def c(value):
        return ex.constant(value, f)

    negative = ex.op("lt", a, c(0), dtype=torch.bool)
    reflected = ex.op("where", negative, ex.op("sub", c(1), a, dtype=f), a, dtype=f)
    positive = ex.op("digamma_positive", reflected, dtype=f)
    d = torch.float64
    fraction = ex.to_dtype(ex.op("sub", a, ex.op("trunc", a, dtype=f), dtype=f), d)
    tangent = ex.op("tan", ex.op("mul", ex.constant(math.pi, d), fraction, dtype=d), dtype=d)
    cotangent = ex.to_dtype(ex.op("truediv", ex.constant(math.pi, d), tangent, dtype=d), f)
    value = ex.op("where", negative, ex.op("sub", positive, cotangent, dtype=f), positive, dtype=f)
    at_zero = ex.op("where", ex.op("signbit", a, dtype=torch.bool), c(math.inf), c(-math.inf), dtype=f)
    value = ex.op("where", ex.op("eq", a, c(0), dtype=torch.bool), at_zero, value, dtype=f)
    integer = ex.op("eq", a, ex.op("floor", a, dtype=f), dtype=torch.bool)
    pole = ex.op("logical_and", negative, integer, dtype=torch.bool)
    return ex.op("where", pole, c(math.nan), value, dtype=f)


@lowering(aten.digamma.default)
def lower_digamma(ctx, node, x):
    return pointwise(ctx, node, [x], _digamma)


@lowering(aten.polygamma.default)
def lower_polygamma(ctx, node, n, x):
    """torch's rule: digamma for n = 0, its trigamma for n = 1, else
    (-1)^(n+1) n! zeta(n + 1, x) (helpers.trigamma and helpers.zeta follow torch's kernels)."""
    if n < 0:
        raise Unsupported(f"polygamma of negative order {n}")  # eager raises
    if n == 0:
        return pointwise(ctx, node, [x], _digamma)
    if n == 1:
        return pointwise(ctx, node, [x], lambda a: ex.op("trigamma", a, dtype=a.dtype))

    def build(a):
        f = a.dtype
        factor = ex.constant((-1) ** (n + 1) * float(math.factorial(n)), f)
        return ex.op("mul", factor, ex.op("zeta", ex.constant(float(n + 1), f), a, dtype=f), dtype=f)

    return pointwise(ctx, node, [x], build)


@lowering(aten.special_zeta.default, aten.special_zeta.self_scalar, aten.special_zeta.other_scalar)
def lower_zeta(ctx, node, x, q):
    """The Hurwitz zeta function sum_k (k + q)^-x (helpers.zeta, torch's method)."""
    return pointwise(ctx, node, [x, q], lambda a, b: ex.op("zeta", a, b, dtype=a.dtype))


POLYNOMIALS = {  # aten op packet -> op name (codegen/ops_table.py: helpers.chebyshev, orthogonal_polynomial)
    aten.special_chebyshev_polynomial_t: "chebyshev_t", aten.special_chebyshev_polynomial_u: "chebyshev_u",
    aten.special_chebyshev_polynomial_v: "chebyshev_v", aten.special_chebyshev_polynomial_w: "chebyshev_w",
    aten.special_shifted_chebyshev_polynomial_t: "shifted_chebyshev_t",
    aten.special_shifted_chebyshev_polynomial_u: "shifted_chebyshev_u",
    aten.special_shifted_chebyshev_polynomial_v: "shifted_chebyshev_v",
    aten.special_shifted_chebyshev_polynomial_w: "shifted_chebyshev_w",
    # (helpers.orthogonal_polynomial)
    aten.special_hermite_polynomial_h: "hermite_h", aten.special_hermite_polynomial_he: "hermite_he",
    aten.special_laguerre_polynomial_l: "laguerre_l", aten.special_legendre_polynomial_p: "legendre_p",
}


def _polynomial_lowering(name: str):
    def lower(ctx, node, x, n):
        """torch's polynomial of x of degree n (the helpers follow its cases)."""
        return pointwise(ctx, node, [x, n], lambda a, b: ex.op(name, a, b, dtype=a.dtype))
    return lower


for _packet, _name in POLYNOMIALS.items():
    lowering(_packet.default, _packet.x_scalar, _packet.n_scalar)(_polynomial_lowering(_name))


SCALED_BESSEL_LIMIT = 700.0  # below it, exp(-x) and i0(x), i1(x) are finite in fp64


def _scaled_bessel(order: int):
    """i0e(x) = exp(-|x|) i0(x), i1e(x) = exp(-|x|) i1(x), in fp64: the product below
    SCALED_BESSEL_LIMIT, the asymptotic series e^-x I_v(x) ~ (2 pi x)^-1/2 sum_k (-1)^k a_k / x^k,
    a_k = prod_{j<=k} (4 v^2 - (2j - 1)^2) / (k! 8^k), above it (ten terms are exact in fp64
    there; at infinity the series gives 0, like eager)."""
    def build(a):
        d = torch.float64
        magnitude = ex.op("abs", a, dtype=d)
        product = ex.op("mul", ex.op("exp", ex.op("neg", magnitude, dtype=d), dtype=d),
                        ex.op("i0" if order == 0 else "i1", magnitude, dtype=d), dtype=d)
        inverse = ex.op("truediv", ex.constant(1.0, d), magnitude, dtype=d)
        series, coefficient = ex.constant(1.0, d), 1.0
        power = ex.constant(1.0, d)
        for k in range(1, 10):
            coefficient *= (4 * order * order - (2 * k - 1) ** 2) / (k * 8)
            power = ex.op("mul", power, inverse, dtype=d)
            series = ex.op("add", series, ex.op("mul", ex.constant((-1) ** k * coefficient, d), power, dtype=d),
                           dtype=d)
        scale = ex.op("rsqrt", ex.op("mul", ex.constant(2 * math.pi, d), magnitude, dtype=d), dtype=d)
        asymptotic = ex.op("mul", scale, series, dtype=d)
        small = ex.op("lt", magnitude, ex.constant(SCALED_BESSEL_LIMIT, d), dtype=torch.bool)
        value = ex.op("where", small, product, asymptotic, dtype=d)
        if order == 1:  # i1 is odd
            value = ex.op("where", ex.op("lt", a, ex.constant(0.0, d), dtype=torch.bool),
                          ex.op("neg", value, dtype=d), value, dtype=d)
        return value
    return lambda ctx, node, x: pointwise(ctx, node, [x], build, torch.float64)


lowering(aten.special_i0e.default)(_scaled_bessel(0))
lowering(aten.special_i1e.default)(_scaled_bessel(1))


def _chebyshev(t: ex.Expr, coefficients) -> ex.Expr:
    """sum_k c_k T_k(t) by Clenshaw's recurrence b_k = c_k + 2 t b_(k+1) - b_(k+2), the sum
    c_0 + t b_1 - b_2 (stable for |t| <= 1)."""
    d = t.dtype
    two_t = ex.op("add", t, t, dtype=d)
    b_next, b_after = ex.constant(coefficients[-1], d), None  # b_(k+1), b_(k+2)
    for c in reversed(coefficients[1:-1]):
        b = ex.op("add", ex.constant(c, d), ex.op("mul", two_t, b_next, dtype=d), dtype=d)
        if b_after is not None:
            b = ex.op("sub", b, b_after, dtype=d)
        b_next, b_after = b, b_next
    total = ex.op("add", ex.constant(coefficients[0], d), ex.op("mul", t, b_next, dtype=d), dtype=d)
    return ex.op("sub", total, b_after, dtype=d) if b_after is not None else total


def _polynomial(y: ex.Expr, coefficients) -> ex.Expr:
    """sum_k c_k y^k by Horner's rule."""
    d = y.dtype
    value = ex.constant(coefficients[-1], d)
    for c in reversed(coefficients[:-1]):
        value = ex.op("add", ex.constant(c, d), ex.op("mul", y, value, dtype=d), dtype=d)
    return value


def _bessel_k_small(x: ex.Expr, order: int) -> ex.Expr:
    """K0 or K1 on 0 < x <= 2: the logarithmic part with I0 or I1 by its Taylor series, plus the
    smooth rest as a Chebyshev series in t = x^2 / 2 - 1. log(x / 2) is log(0.5 x) like eager's, so
    the smallest subnormal x gives eager's values too (K0 inf, K1 NaN: 0.5 x rounds to 0)."""
    d = x.dtype
    square = ex.op("mul", x, x, dtype=d)
    t = ex.op("sub", ex.op("mul", square, ex.constant(0.5, d), dtype=d), ex.constant(1.0, d), dtype=d)
    y = ex.op("mul", square, ex.constant(0.25, d), dtype=d)
    half_x = ex.op("mul", x, ex.constant(0.5, d), dtype=d)
    log_half_x = ex.op("log", half_x, dtype=d)
    if order == 0:
        logarithmic = ex.op("mul", log_half_x, _polynomial(y, k_tables.I0_TAYLOR), dtype=d)
        return ex.op("sub", _chebyshev(t, k_tables.K0_SMALL_CHEBYSHEV), logarithmic, dtype=d)
    i1 = ex.op("mul", half_x, _polynomial(y, k_tables.I1_TAYLOR), dtype=d)
    rest = ex.op("truediv", _chebyshev(t, k_tables.K1_SMALL_CHEBYSHEV), x, dtype=d)
    return ex.op("add", ex.op("mul", log_half_x, i1, dtype=d), rest, dtype=d)


def _bessel_k_large(x: ex.Expr, order: int, scaled: bool) -> ex.Expr:
    """exp(x) K(x) sqrt(x) on x > 2 as a Chebyshev series in u = 4 / x - 1, divided by sqrt(x);
    unscaled, times exp(-x / 2) twice so that a result below the normal range is rounded once
    (exp(-x) alone is subnormal from x = 708 on). At +inf both give 0."""
    d = x.dtype
    u = ex.op("sub", ex.op("truediv", ex.constant(4.0, d), x, dtype=d), ex.constant(1.0, d), dtype=d)
    table = k_tables.K0_LARGE_CHEBYSHEV if order == 0 else k_tables.K1_LARGE_CHEBYSHEV
    value = ex.op("truediv", _chebyshev(u, table), ex.op("sqrt", x, dtype=d), dtype=d)
    if scaled:
        return value
    half_decay = ex.op("exp", ex.op("mul", x, ex.constant(-0.5, d), dtype=d), dtype=d)
    return ex.op("mul", ex.op("mul", value, half_decay, dtype=d), half_decay, dtype=d)


def _bessel_k(order: int, scaled: bool):
    """K0 or K1 (scaled: exp(x) K(x)) in fp64 from our own tables (tests/make_bessel_k_coefficients.py
    derives them; its --check measures the kernels against mpmath: about 1e-15 relative). Like
    eager: +inf at 0 (either sign), NaN for x < 0 and NaN, 0 at +inf."""
    def build(x):
        d = x.dtype
        small = _bessel_k_small(x, order)
        if scaled:
            small = ex.op("mul", ex.op("exp", x, dtype=d), small, dtype=d)
        value = ex.op("where", ex.op("le", x, ex.constant(2.0, d), dtype=torch.bool), small,
                      _bessel_k_large(x, order, scaled), dtype=d)
        value = ex.op("where", ex.op("eq", x, ex.constant(0.0, d), dtype=torch.bool), ex.constant(math.inf, d),
                      value, dtype=d)
        return ex.op("where", ex.op("lt", x, ex.constant(0.0, d), dtype=torch.bool), ex.constant(math.nan, d),
                     value, dtype=d)
    return lambda ctx, node, x: pointwise(ctx, node, [x], build, torch.float64)


lowering(aten.special_modified_bessel_k0.default)(_bessel_k(0, scaled=False))
lowering(aten.special_modified_bessel_k1.default)(_bessel_k(1, scaled=False))
lowering(aten.special_scaled_modified_bessel_k0.default)(_bessel_k(0, scaled=True))
lowering(aten.special_scaled_modified_bessel_k1.default)(_bessel_k(1, scaled=True))
