"""The Triton op table: IR op name -> Triton source text. One row per op.

Transcendental functions go through `libdevice` (accurate on the GPU); on the CPU the runtime binds
the name `libdevice` to a NumPy-backed twin (runtime/interpreter_libdevice.py), so one kernel
source serves both targets. Semantics that Triton's operators do not give directly (Python-style
floor division and remainder, NaN-propagating max, sign) live in runtime/triton_helpers.py.
"""
from __future__ import annotations

import math

import torch

TRITON_DTYPES = {
    torch.bool: "tl.int1", torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.int16: "tl.int16",
    torch.int32: "tl.int32", torch.int64: "tl.int64", torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16", torch.float32: "tl.float32", torch.float64: "tl.float64",
    torch.uint16: "tl.uint16", torch.uint32: "tl.uint32", torch.uint64: "tl.uint64",
}


def triton_dtype(dtype: torch.dtype) -> str:
    if dtype not in TRITON_DTYPES:
        raise NotImplementedError(f"dtype {dtype} has no Triton equivalent here")
    return TRITON_DTYPES[dtype]


# Negative zero by its bits: Triton 3.6 compiles the literal -0.0 (bare or in tl.full) to +0.0
# on the GPU (the interpreter keeps it), so x / -0.0 gave +inf there. Measured on an H100.
NEGATIVE_ZERO_FP32 = "tl.full([], -2147483648, tl.int32).to(tl.float32, bitcast=True)"
NEGATIVE_ZERO_FP64 = "tl.full([], -9223372036854775808, tl.int64).to(tl.float64, bitcast=True)"


def render_constant(value, dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "True" if value else "False"
    if dtype.is_floating_point:
        if math.isnan(value):
            text = 'float("nan")'
        elif math.isinf(value):
            text = 'float("inf")' if value > 0 else 'float("-inf")'
        elif value == 0 and math.copysign(1.0, value) < 0:
            text = NEGATIVE_ZERO_FP32  # a literal -0.0 compiles to +0.0 on the GPU (Triton 3.6)
            if dtype == torch.float64:
                return NEGATIVE_ZERO_FP64
        else:
            text = repr(float(value))
        if dtype == torch.float32:
            return text
        if dtype in (torch.float16, torch.bfloat16):  # built through fp32 (the interpreter needs it)
            return f"tl.full([], {text}, tl.float32).to({triton_dtype(dtype)})"
        return f"tl.full([], {text}, {triton_dtype(dtype)})"
    if dtype == torch.int32 and -2**31 <= value < 2**31:
        return str(int(value))
    return f"tl.full([], {int(value)}, {triton_dtype(dtype)})"


def render_cast(x: str, src: torch.dtype, dst: torch.dtype) -> str:
    if dst == torch.bool:
        return f"({x} != 0)"
    if dst in (torch.float16, torch.bfloat16) and src not in (torch.float32, torch.float16, torch.bfloat16):
        # torch converts to half types through float32; so do we (one rounding rule everywhere)
        return f"{x}.to(tl.float32).to({triton_dtype(dst)})"
    return f"{x}.to({triton_dtype(dst)})"


_LIBDEVICE_UNARY = ["expm1", "log10", "log1p", "tan", "asin", "acos", "atan", "sinh", "cosh",
                    "tanh", "asinh", "acosh", "atanh", "erfc", "erfinv", "erfcx", "lgamma", "trunc",
                    "j0", "j1", "y0", "y1"]
_LIBDEVICE_BINARY = ["atan2", "hypot", "copysign", "nextafter", "pow", "fmod"]

UNARY = {
    "neg": "-{0}", "exp": "tl.exp({0})", "exp2": "tl.exp2({0})", "log": "tl.log({0})",
    "log2": "tl.log2({0})", "sqrt": "tl.sqrt({0})", "rsqrt": "tl.rsqrt({0})", "sin": "tl.sin({0})",
    "cos": "tl.cos({0})", "erf": "tl.erf({0})", "sigmoid": "(1.0 / (1.0 + tl.exp(-{0})))",
    "floor": "tl.floor({0})", "ceil": "tl.ceil({0})", 
    "round": "libdevice.nearbyint({0})", "frac": "({0} - libdevice.trunc({0}))",
    "i0": "helpers.nan_at_infinity({0}, libdevice.cyl_bessel_i0({0}))",
    "i1": "helpers.nan_at_infinity({0}, libdevice.cyl_bessel_i1({0}))",
    "ndtri": "libdevice.normcdfinv({0})", "digamma_positive": "helpers.digamma_positive({0})",
    "trigamma": "helpers.trigamma({0})",
    "sign": "helpers.sign({0})",
    "relu": "tl.where({0} < 0, 0, {0})", "isnan": "({0} != {0})",
    "isinf": "(tl.abs({0}) == float(\"inf\"))", "isfinite": "(tl.abs({0}) < float(\"inf\"))",
    "signbit": "(libdevice.signbit({0}) != 0)", "logical_not": "({0} == 0)",
    "bitwise_not": "(~{0})",
}
UNARY.update({name: f"libdevice.{name}({{0}})" for name in _LIBDEVICE_UNARY})

BINARY = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "truediv": "({0} / {1})",
    "truncdiv": "({0} // {1})", "maximum": "helpers.maximum({0}, {1})",
    "minimum": "helpers.minimum({0}, {1})", "fmax": "helpers.fmax({0}, {1})",
    "fmin": "helpers.fmin({0}, {1})", "eq": "({0} == {1})", "ne": "({0} != {1})",
    "lt": "({0} < {1})", "le": "({0} <= {1})", "gt": "({0} > {1})", "ge": "({0} >= {1})",
    "logical_and": "(({0} != 0) & ({1} != 0))", "logical_or": "(({0} != 0) | ({1} != 0))",
    "logical_xor": "(({0} != 0) ^ ({1} != 0))", "bitwise_and": "({0} & {1})",
    "bitwise_or": "({0} | {1})", "bitwise_xor": "({0} ^ {1})", "pow_int": "helpers.pow_int({0}, {1})",
    "gcd": "helpers.gcd_int({0}, {1})", "zeta": "helpers.zeta({0}, {1})",
    # torch's orthogonal polynomials (lower/special.py POLYNOMIALS): kind, trigonometric form above
    # this degree, shifted
    "chebyshev_t": "helpers.chebyshev({0}, {1}, 0, 6, False)",
    "chebyshev_u": "helpers.chebyshev({0}, {1}, 1, 8, False)",
    "chebyshev_v": "helpers.chebyshev({0}, {1}, 2, 8, False)",
    "chebyshev_w": "helpers.chebyshev({0}, {1}, 3, 8, False)",
    "shifted_chebyshev_t": "helpers.chebyshev({0}, {1}, 0, 6, True)",
    "shifted_chebyshev_u": "helpers.chebyshev({0}, {1}, 1, 6, True)",
    "shifted_chebyshev_v": "helpers.chebyshev({0}, {1}, 2, 6, True)",
    "shifted_chebyshev_w": "helpers.chebyshev({0}, {1}, 3, 4, True)",
    "hermite_h": "helpers.orthogonal_polynomial({0}, {1}, 0)",
    "hermite_he": "helpers.orthogonal_polynomial({0}, {1}, 1)",
    "laguerre_l": "helpers.orthogonal_polynomial({0}, {1}, 2)",
    "legendre_p": "helpers.orthogonal_polynomial({0}, {1}, 3)",
}
BINARY.update({name: f"libdevice.{name}({{0}}, {{1}})" for name in _LIBDEVICE_BINARY})

TERNARY = {"where": "tl.where({0}, {1}, {2})",
           # (seed, element offset, stream) -> a Philox draw (lower/random.py)
           "rand": "helpers.rand({0}, {1}, {2})", "randn": "helpers.randn({0}, {1}, {2})"}


def render_op(name: str, args: list[str], arg_dtypes: list[torch.dtype], dtype: torch.dtype) -> str:
    is_float = arg_dtypes[0].is_floating_point if arg_dtypes else dtype.is_floating_point
    if name == "floordiv":
        helper = "floordiv_float" if is_float else "floordiv_int"
        return f"helpers.{helper}({args[0]}, {args[1]})"
    if name == "remainder":
        helper = "remainder_float" if is_float else "remainder_int"
        return f"helpers.{helper}({args[0]}, {args[1]})"
    if name in ("lshift", "rshift"):
        helper = "shift_left" if name == "lshift" else "shift_right"
        return f"helpers.{helper}({args[0]}, {args[1]}, {torch.iinfo(dtype).bits})"
    if name == "fmod" and not is_float:
        return f"({args[0]} % {args[1]})"
    if name == "abs":
        return f"tl.abs({args[0]})" if dtype != torch.bool else args[0]
    if name == "sqrt" and dtype == torch.float32:  # IEEE-rounded, like torch (tl.sqrt is approximate)
        return f"tl.sqrt_rn({args[0]})"
    if name == "reciprocal":
        return f"tl.div_rn(1.0, {args[0]})" if dtype == torch.float32 else f"(1.0 / {args[0]})"
    if name == "truediv":
        if not is_float:
            raise NotImplementedError("true division of integers must compute in floats")
        if dtype == torch.float32:
            return f"tl.div_rn({args[0]}, {args[1]})"
    table = {1: UNARY, 2: BINARY, 3: TERNARY}[len(args)]
    if name not in table:
        raise NotImplementedError(f"no Triton rendering for op {name!r}")
    return table[name].format(*args)
