"""Lowerings of elementwise aten ops: each becomes an Expr over the output's index.

Inputs broadcast by index (a size-1 dim reads index 0), scalars become constants, and every op
computes in its compute dtype (fp16/bf16 in fp32) before casting to the dtype eager gives (taken
from the FX node's metadata, so type promotion is torch's own).
"""
from __future__ import annotations

import math

import sympy
import torch

from ..errors import Unsupported
from ..ir import expr as ex
from ..ir.nodes import TensorValue
from ..ir.symbols import dim_vars
from .dtypes import arithmetic_dtype, meta_value, result_type_of, scalar_as_eager_reads, symbolic_size, upcast
from .registry import lowering

aten = torch.ops.aten
prims = torch.ops.prims


def broadcast_index(value: TensorValue, out_size, sizes=None) -> list:
    """value's index when read as an operand of an output of out_size (sizes: the graph's SizeOracle,
    None for static sizes)."""
    dims = dim_vars(len(out_size))
    lead = len(out_size) - value.rank
    return [sympy.Integer(0) if is_broadcast(sizes, s, out_size[lead + k]) else dims[lead + k]
            for k, s in enumerate(value.size)]


def is_broadcast(sizes, size, out) -> bool:
    """Whether an operand's dim of `size` is read at index 0 against an output dim of `out`: size
    1, or a symbolic size not known equal to the output's, which broadcasting made 1 (guarded
    here, as Dynamo did). Fuzz seed 99669: `gt.expand(s, 1)` of a mask (s // 2 - 1) rows long
    read rows past its one row."""
    if size == 1:
        return True
    if size == out or isinstance(size, int) or sizes is None or sizes.known_equal(size, out):
        return False
    return sizes.guard_equal(size, 1)


def operand(arg, out_size, dtype: torch.dtype, rounded: bool = False, sizes=None) -> ex.Expr:
    """rounded: a low-precision float operand is widened from its rounded value (ex.rounded_to).
    sizes: the graph's SizeOracle, which tells symbolic broadcasts (`is_broadcast`)."""
    if isinstance(arg, TensorValue):
        widen = ex.rounded_to if rounded else ex.to_dtype
        return widen(arg.at(broadcast_index(arg, out_size, sizes)), dtype)
    if isinstance(arg, (bool, int, float)):
        return ex.constant(arg, dtype)
    if isinstance(arg, sympy.Expr):  # a symbolic size used as a number (ir/sizes.py)
        numerator, denominator = sympy.fraction(arg)
        if denominator != 1:  # a ratio of sizes (lower/symbolic.py): a / b in double precision
            ratio = ex.op("truediv", _as_double(numerator),
                          ex.to_dtype(ex.index_expr(denominator, torch.int64), torch.float64), dtype=torch.float64)
            return ex.to_dtype(ratio, dtype)
        return ex.to_dtype(ex.index_expr(arg, torch.int64), dtype)
    raise Unsupported(f"operand of type {type(arg).__name__}")


def _as_double(value: sympy.Expr) -> ex.Expr:
    """A ratio's numerator in double precision: a size, or a float constant (2.0 / (N - 1))."""
    if value.is_Float:
        return ex.constant(float(value), torch.float64)
    if value.free_symbols and any(a.is_Float for a in sympy.Mul.make_args(value)):
        raise Unsupported(f"a float multiple of a size as an operand: {value}")
    return ex.to_dtype(ex.index_expr(value, torch.int64), torch.float64)


def output_of(node):
    val = meta_value(node)
    return symbolic_size(val.shape), val.dtype, val.device


def pointwise(ctx, node, args, build, compute_dtype=None, scalar_dtype=None, scalars_rounded_on_cuda=False,
              rounded_operands=False) -> TensorValue:
    """Lower an elementwise op: build(*operand_exprs) -> Expr in compute_dtype. Python scalars
    among args become constants of the value eager's kernel reads for an op whose inputs it
    converts to scalar_dtype (default: the output's dtype; see `scalar_as_eager_reads`).
    rounded_operands: low-precision operands are read rounded (comparisons; `operand`)."""
    size, out_dtype, device = output_of(node)
    compute_dtype = compute_dtype or arithmetic_dtype(out_dtype)
    scalar_dtype = scalar_dtype or out_dtype
    operands = [operand(scalar_as_eager_reads(a, scalar_dtype, device, scalars_rounded_on_cuda), size, compute_dtype,
                        rounded_operands, ctx.sizes) for a in args]
    body = ex.to_dtype(build(*operands), out_dtype)
    return TensorValue(size, out_dtype, device, body)


def _op(name):
    return lambda *xs: ex.op(name, *xs, dtype=xs[0].dtype)


# --- unary ---------------------------------------------------------------------------------

FLOAT_UNARY = {
    aten.exp: "exp", aten.exp2: "exp2", aten.expm1: "expm1", aten.log: "log", aten.log2: "log2",
    aten.log10: "log10", aten.log1p: "log1p", aten.sqrt: "sqrt", aten.rsqrt: "rsqrt",
    aten.sin: "sin", aten.cos: "cos", aten.tan: "tan", aten.asin: "asin", aten.acos: "acos",
    aten.atan: "atan", aten.sinh: "sinh", aten.cosh: "cosh", aten.tanh: "tanh", aten.asinh: "asinh",
    aten.acosh: "acosh", aten.atanh: "atanh", aten.erf: "erf", aten.erfc: "erfc",
    aten.erfinv: "erfinv", aten.sigmoid: "sigmoid", aten.lgamma: "lgamma",
    aten.reciprocal: "reciprocal", aten.i0: "i0", aten.special_i1: "i1", aten.special_erfcx: "erfcx",
    aten.special_modified_bessel_i0: "i0", aten.special_modified_bessel_i1: "i1",
    aten.special_ndtri: "ndtri",
}

# _neg_view is a view in eager (a flag on the tensor), but in a functional graph it is just the
# negated values; computing them keeps the flag away from the memory our kernels read.
SAME_DTYPE_UNARY = {aten.neg: "neg", aten.abs: "abs", aten.sign: "sign", aten.sgn: "sign",
                    aten.relu: "relu", aten._neg_view: "neg"}

ROUNDING_UNARY = {aten.floor: "floor", aten.ceil: "ceil", aten.trunc: "trunc", aten.frac: "frac"}

for _target, _name in FLOAT_UNARY.items():
    lowering(_target)(lambda ctx, node, x, _n=_name: pointwise(ctx, node, [x], _op(_n)))
for _target, _name in SAME_DTYPE_UNARY.items():
    lowering(_target)(lambda ctx, node, x, _n=_name: pointwise(ctx, node, [x], _op(_n)))


def _rounding(name):
    def lower(ctx, node, x):
        if not x.dtype.is_floating_point:
            return x if name != "frac" else pointwise(ctx, node, [x], lambda a: ex.constant(0, a.dtype))
        return pointwise(ctx, node, [x], _op(name))
    return lower


for _target, _name in ROUNDING_UNARY.items():
    lowering(_target)(_rounding(_name))


@lowering(aten.round.default, aten.round.decimals)
def lower_round(ctx, node, x, decimals=0):
    if not x.dtype.is_floating_point:
        return x

    def build(a):
        if decimals == 0:
            return ex.op("round", a, dtype=a.dtype)
        scale = ex.constant(10.0 ** abs(decimals), a.dtype)
        if decimals > 0:
            return ex.op("truediv", ex.op("round", ex.op("mul", a, scale, dtype=a.dtype), dtype=a.dtype),
                         scale, dtype=a.dtype)
        return ex.op("mul", ex.op("round", ex.op("truediv", a, scale, dtype=a.dtype), dtype=a.dtype),
                     scale, dtype=a.dtype)

    return pointwise(ctx, node, [x], build)


@lowering(aten.positive, aten.alias, aten.lift_fresh_copy, aten.detach, aten.clone)
def lower_identity(ctx, node, x, *args, **kwargs):
    return x


# On integers and bools the float predicates are constants, and signbit is x < 0.
INTEGER_PREDICATES = {
    "isnan": lambda a: ex.constant(False, torch.bool), "isinf": lambda a: ex.constant(False, torch.bool),
    "isfinite": lambda a: ex.constant(True, torch.bool),
    "signbit": lambda a: ex.op("lt", a, ex.constant(0, a.dtype), dtype=torch.bool),
}


def _predicate(name):
    def lower(ctx, node, x):
        if not x.dtype.is_floating_point:
            return pointwise(ctx, node, [x], INTEGER_PREDICATES[name], compute_dtype=x.dtype)
        return pointwise(ctx, node, [x], lambda a: ex.op(name, a, dtype=torch.bool), compute_dtype=upcast(x.dtype))
    return lower


for _target, _name in {aten.isnan: "isnan", aten.isinf: "isinf", aten.isfinite: "isfinite",
                       aten.signbit: "signbit"}.items():
    lowering(_target)(_predicate(_name))


@lowering(aten.logical_not)
def lower_logical_not(ctx, node, x):
    return pointwise(ctx, node, [x], lambda a: ex.op("logical_not", a, dtype=torch.bool), torch.bool)


@lowering(aten.bitwise_not)
def lower_bitwise_not(ctx, node, x):
    name = "logical_not" if x.dtype == torch.bool else "bitwise_not"
    return pointwise(ctx, node, [x], _op(name), x.dtype)


# --- binary --------------------------------------------------------------------------------

ARITHMETIC_BINARY = {
    aten.maximum: "maximum", aten.minimum: "minimum", aten.fmax: "fmax",
    aten.fmin: "fmin", aten.atan2: "atan2", aten.hypot: "hypot", aten.copysign: "copysign",
    aten.nextafter: "nextafter", aten.fmod: "fmod",
}
BITWISE_BINARY = {
    aten.bitwise_and: "bitwise_and", aten.bitwise_or: "bitwise_or", aten.bitwise_xor: "bitwise_xor",
    aten.__and__: "bitwise_and", aten.__or__: "bitwise_or", aten.__xor__: "bitwise_xor",
    aten.bitwise_left_shift: "lshift", aten.__lshift__: "lshift",
    aten.bitwise_right_shift: "rshift", aten.__rshift__: "rshift",
}
COMPARISONS = {aten.eq: "eq", aten.ne: "ne", aten.lt: "lt", aten.le: "le", aten.gt: "gt", aten.ge: "ge"}
LOGICAL_BINARY = {aten.logical_and: "logical_and", aten.logical_or: "logical_or",
                  aten.logical_xor: "logical_xor"}

for _target, _name in ARITHMETIC_BINARY.items():
    lowering(_target)(lambda ctx, node, a, b, _n=_name: pointwise(ctx, node, [a, b], _op(_n)))


def unrounded_scalars(node) -> torch.dtype:
    """scalar_dtype for ops whose eager CPU kernels read a scalar operand unrounded in their
    compute dtype, as CUDA's do (mul and every division: `original_scalar_value`)."""
    return arithmetic_dtype(output_of(node)[1])


@lowering(aten.mul)
def lower_mul(ctx, node, a, b):
    return pointwise(ctx, node, [a, b], _op("mul"), scalar_dtype=unrounded_scalars(node))


def _bitwise(name):
    def lower(ctx, node, a, b):
        out_dtype = output_of(node)[1]
        if out_dtype.is_floating_point:
            raise Unsupported("bitwise op on floats")
        return pointwise(ctx, node, [a, b], _op(name), out_dtype)
    return lower


for _target, _name in BITWISE_BINARY.items():
    lowering(_target)(_bitwise(_name))


def _comparison(name):
    def lower(ctx, node, a, b):
        promoted = result_type_of(node.args[:2])
        return pointwise(ctx, node, [a, b], lambda x, y: ex.op(name, x, y, dtype=torch.bool), upcast(promoted),
                         scalar_dtype=promoted, scalars_rounded_on_cuda=True, rounded_operands=True)
    return lower


for _target, _name in COMPARISONS.items():
    lowering(_target)(_comparison(_name))
for _target, _name in LOGICAL_BINARY.items():
    lowering(_target)(lambda ctx, node, a, b, _n=_name: pointwise(
        ctx, node, [a, b], lambda x, y: ex.op(_n, x, y, dtype=torch.bool), torch.bool))


def _with_alpha(a, b, alpha) -> list:
    """The operands of add/sub/rsub: alpha is a scalar operand too (eager converts it like the
    other scalar: to bf16 on the CPU), left out when it is 1."""
    return [a, b] if alpha == 1 else [a, b, alpha]


def _scaled(other, alpha):
    return other if alpha is None else ex.op("mul", other, alpha, dtype=other.dtype)


@lowering(aten.add)
def lower_add(ctx, node, a, b, alpha=1):
    return pointwise(ctx, node, _with_alpha(a, b, alpha),
                     lambda x, y, al=None: ex.op("add", x, _scaled(y, al), dtype=x.dtype))


@lowering(aten.sub)
def lower_sub(ctx, node, a, b, alpha=1):
    return pointwise(ctx, node, _with_alpha(a, b, alpha),
                     lambda x, y, al=None: ex.op("sub", x, _scaled(y, al), dtype=x.dtype))


@lowering(aten.rsub)
def lower_rsub(ctx, node, a, b, alpha=1):
    return pointwise(ctx, node, _with_alpha(a, b, alpha),
                     lambda x, y, al=None: ex.op("sub", y, _scaled(x, al), dtype=x.dtype))


def _division(rounding_mode):
    def build(x, y):
        if rounding_mode is None:
            return ex.op("truediv", x, y, dtype=x.dtype)
        if rounding_mode == "trunc":
            if x.dtype.is_floating_point:
                return ex.op("trunc", ex.op("truediv", x, y, dtype=x.dtype), dtype=x.dtype)
            return ex.op("truncdiv", x, y, dtype=x.dtype)
        return ex.op("floordiv", x, y, dtype=x.dtype)
    return build


@lowering(aten.div, aten.true_divide)
def lower_div(ctx, node, a, b, rounding_mode=None):
    return pointwise(ctx, node, [a, b], _division(rounding_mode), scalar_dtype=unrounded_scalars(node))


@lowering(prims.div.default)
def lower_prims_div(ctx, node, a, b):
    """prims.div truncates for integers and divides for floats."""
    integer = not output_of(node)[1].is_floating_point
    return pointwise(ctx, node, [a, b], _division("trunc" if integer else None), scalar_dtype=unrounded_scalars(node))


@lowering(aten.floor_divide)
def lower_floor_divide(ctx, node, a, b):
    return pointwise(ctx, node, [a, b], _division("floor"), scalar_dtype=unrounded_scalars(node))


@lowering(aten.remainder)
def lower_remainder(ctx, node, a, b):
    return pointwise(ctx, node, [a, b], _op("remainder"))


def _integer_power(x: ex.Expr, n: int) -> ex.Expr:
    result = ex.constant(1, x.dtype)
    base = x
    while n:
        if n & 1:
            result = base if result.op == "constant" else ex.op("mul", result, base, dtype=x.dtype)
        n >>= 1
        if n:
            base = ex.op("mul", base, base, dtype=x.dtype)
    return result


@lowering(aten.pow)
def lower_pow(ctx, node, a, b):
    out_dtype = output_of(node)[1]
    if isinstance(b, (int, float)) and not isinstance(b, bool) and float(b).is_integer() and 0 <= b <= 16:
        return pointwise(ctx, node, [a], lambda x: _integer_power(x, int(b)))
    if not out_dtype.is_floating_point:
        if out_dtype == torch.bool:
            raise Unsupported("pow with a bool result")
        return pointwise(ctx, node, [a, b], _op("pow_int"))
    if isinstance(b, float) and b == 0.5:
        return pointwise(ctx, node, [a], _op("sqrt"))
    return pointwise(ctx, node, [a, b], _op("pow"))


@lowering(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar,
          prims.where.default)
def lower_where(ctx, node, cond, a, b):
    out_dtype = output_of(node)[1]
    size = output_of(node)[0]
    c = operand(cond, size, torch.bool, sizes=ctx.sizes)
    return pointwise(ctx, node, [a, b], lambda x, y: ex.op("where", c, x, y, dtype=x.dtype), out_dtype)


def _clamp_expr(x, lo, hi):
    if lo is not None:
        x = ex.op("maximum", x, lo, dtype=x.dtype)
    if hi is not None:
        x = ex.op("minimum", x, hi, dtype=x.dtype)
    return x


@lowering(aten.clamp, aten.clip)
def lower_clamp(ctx, node, x, min=None, max=None):
    args = [x] + [v for v in (min, max) if v is not None]

    def build(value, *bounds):
        it = iter(bounds)
        lo = next(it) if min is not None else None
        hi = next(it) if max is not None else None
        return _clamp_expr(value, lo, hi)

    return pointwise(ctx, node, args, build)


@lowering(aten.clamp_min)
def lower_clamp_min(ctx, node, x, lo):
    return pointwise(ctx, node, [x, lo], lambda v, b: _clamp_expr(v, b, None))


@lowering(aten.clamp_max)
def lower_clamp_max(ctx, node, x, hi):
    return pointwise(ctx, node, [x, hi], lambda v, b: _clamp_expr(v, None, b))


@lowering(aten.hardtanh)
def lower_hardtanh(ctx, node, x, min_val=-1.0, max_val=1.0):
    return pointwise(ctx, node, [x, min_val, max_val], _clamp_expr)


@lowering(aten.gelu)
def lower_gelu(ctx, node, x, approximate="none"):
    def build(v):
        f = v.dtype
        half = ex.op("mul", v, ex.constant(0.5, f), dtype=f)
        if approximate == "tanh":
            cube = ex.op("mul", ex.op("mul", v, v, dtype=f), v, dtype=f)
            inner = ex.op("add", v, ex.op("mul", cube, ex.constant(0.044715, f), dtype=f), dtype=f)
            scaled = ex.op("mul", inner, ex.constant(math.sqrt(2 / math.pi), f), dtype=f)
            core = ex.op("tanh", scaled, dtype=f)
        else:
            core = ex.op("erf", ex.op("mul", v, ex.constant(math.sqrt(0.5), f), dtype=f), dtype=f)
        return ex.op("mul", half, ex.op("add", core, ex.constant(1.0, f), dtype=f), dtype=f)

    return pointwise(ctx, node, [x], build)


@lowering(aten.leaky_relu)
def lower_leaky_relu(ctx, node, x, negative_slope=0.01):
    def build(v):
        zero = ex.constant(0, v.dtype)
        scaled = ex.op("mul", v, ex.constant(negative_slope, v.dtype), dtype=v.dtype)
        return ex.op("where", ex.op("gt", v, zero, dtype=torch.bool), v, scaled, dtype=v.dtype)
    return pointwise(ctx, node, [x], build)


@lowering(aten.elu)
def lower_elu(ctx, node, x, alpha=1.0, scale=1.0, input_scale=1.0):
    def build(v):
        f = v.dtype
        positive = ex.op("mul", v, ex.constant(scale, f), dtype=f)
        em1 = ex.op("expm1", ex.op("mul", v, ex.constant(input_scale, f), dtype=f), dtype=f)
        negative = ex.op("mul", em1, ex.constant(alpha * scale, f), dtype=f)
        return ex.op("where", ex.op("gt", v, ex.constant(0, f), dtype=torch.bool), positive, negative, dtype=f)
    return pointwise(ctx, node, [x], build)
