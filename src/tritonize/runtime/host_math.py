"""Arithmetic the wrapper does on numbers computed from sizes (lower/host_values.py).

Python floats are IEEE doubles, but Python raises where a GPU returns inf or nan (`0.0 ** -0.5`,
`1.0 / 0.0`, `math.log(0.0)`) and has no float32. These functions give the IEEE results a kernel
would give, and `to_float32` rounds a double to the nearest float32 (so a float32 value computed
here is the one a float32 kernel argument holds).
"""
from __future__ import annotations

import math
import struct

INF = float("inf")
NAN = float("nan")


def to_float32(x: float) -> float:
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:  # beyond float32's range: rounds to an infinity
        return math.copysign(INF, x)


def div(a: float, b: float) -> float:
    a, b = float(a), float(b)
    if b != 0.0:
        return a / b
    if a != a or a == 0.0:
        return NAN
    return math.copysign(INF, a) * math.copysign(1.0, b)


def pow_(a: float, b: float) -> float:
    a, b = float(a), float(b)
    try:
        result = math.pow(a, b)
    except ZeroDivisionError:
        return INF
    except (ValueError, OverflowError):
        if a == 0.0 and b < 0:  # 0 ** negative: inf, signed for -0.0 and an odd integer power
            odd = b.is_integer() and int(b) % 2 == 1
            return math.copysign(INF, a) if odd else INF
        if a < 0 and not b.is_integer():
            return NAN
        return INF if abs(a) > 1 else 0.0  # overflow
    return result


def sqrt(x: float) -> float:
    x = float(x)
    return math.sqrt(x) if x >= 0 else NAN


def rsqrt(x: float) -> float:
    return div(1.0, sqrt(x))


def exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return INF


def log(x: float) -> float:
    x = float(x)
    if x > 0:
        return math.log(x)
    return -INF if x == 0 else NAN
