"""The CPU twin of runtime/index_checks.py: checks that raise in Triton's interpreter.

The interpreter ignores `tl.device_assert`, so CPU kernel modules call these plain Python
functions instead (the loader binds the name `checks`). They look at the whole block of indices
and raise IndexOutOfBoundsError naming the op, the FX node and the first bad index;
GeneratedKernel re-raises it unwrapped from the interpreter's error. Integer division by zero
raises IntegerDivisionByZeroError, as eager's CPU kernels raise ("ZeroDivisionError").
"""
from __future__ import annotations

import numpy as np
import triton.language as tl


class IndexOutOfBoundsError(IndexError):
    """An indirect index (gather, embedding, x[idx], scatter...) outside its dimension."""


class IntegerDivisionByZeroError(RuntimeError, ZeroDivisionError):
    """An integer divisor of zero in //, div(rounding_mode=...), remainder or fmod. A RuntimeError
    whose text starts with "ZeroDivisionError", like eager's on the CPU."""


def _array(value):
    if isinstance(value, tl.core.tensor):
        return np.asarray(value.handle.data)
    if isinstance(value, tl.core.constexpr):
        return np.asarray(value.value)
    return np.asarray(value)


def _check(index, size, mask, msg) -> None:
    data = _array(index)
    size = int(_array(size).reshape(-1)[0])  # a kernel size parameter comes as a 1-element array
    bad = (data < 0) | (data >= size)
    if mask is not None:
        data, bad, live = np.broadcast_arrays(data, bad, _array(mask).astype(bool))
        bad = bad & live
    if bad.any():
        value = int(np.broadcast_to(data, bad.shape)[bad].flat[0])
        raise IndexOutOfBoundsError(f"tritonize: {msg}: index {value} is not in [0, {size})")


def check_index(index, size, msg) -> None:
    _check(index, size, None, msg)


def check_index_masked(index, size, mask, msg) -> None:
    _check(index, size, mask, msg)


def _check_divisor(divisor, mask, msg) -> None:
    zero = _array(divisor) == 0
    if mask is not None:
        zero, live = np.broadcast_arrays(zero, _array(mask).astype(bool))
        zero = zero & live
    if zero.any():
        raise IntegerDivisionByZeroError(f"ZeroDivisionError: tritonize: {msg}")


def check_divisor(divisor, msg) -> None:
    _check_divisor(divisor, None, msg)


def check_divisor_masked(divisor, mask, msg) -> None:
    _check_divisor(divisor, mask, msg)
