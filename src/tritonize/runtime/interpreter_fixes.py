"""Work-arounds for Triton interpreter bugs that our CPU kernels hit.

`apply()` runs once, before the first CPU kernel module loads (runtime/loader.py). Each fix first
checks that the installed Triton has the bug and changes nothing otherwise, so a Triton release
that fixes it makes the work-around inert. Compiled (GPU) kernels are not affected by any of them.

* Splat of a 0-d comparison result. The interpreter labels the result of `a < b` with the
  operands' dtype (the data are NumPy bools), and `create_splat` converts the data to the label's
  NumPy dtype. A 0-d comparison broadcast against a block (`(s != s) | (s < x)` where `s` is a
  0-d load or constant) so becomes floats, and the `|` fails with "ufunc 'bitwise_or' not
  supported". The fix splats the data with their own dtype.
* float32 -> bfloat16 casts truncate. `x.to(tl.bfloat16)` drops the low mantissa bits instead of
  rounding to nearest even as the GPU (and torch) do, so every bf16 result is off by up to one
  bf16 ulp. The fix rounds to nearest even (NaN stays NaN).
"""
from __future__ import annotations

import functools

import numpy as np


def _builder_class():
    from triton.runtime.interpreter import InterpreterBuilder

    return InterpreterBuilder


# --- splat of 0-d comparisons ----------------------------------------------------------------


def _splat_converts_bools(builder_cls) -> bool:
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    mislabeled = TensorHandle(np.array([True]), tl.float32)
    splat = builder_cls.create_splat(None, tl.block_type(tl.int1, [2]), mislabeled)
    return splat.data.dtype != np.bool_


def _fix_splat(builder_cls) -> None:
    def create_splat(self, ret_ty, arg):
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        value = arg.data[0] if isinstance(arg.dtype, tl.block_type) else arg.data
        return TensorHandle(np.full(ret_ty.shape, value, dtype=arg.data.dtype), arg.dtype.scalar)

    builder_cls.create_splat = create_splat


# --- float32 -> bfloat16 rounding ------------------------------------------------------------


def float32_to_bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """The bf16 bit patterns (uint16) of float32 values, rounded to nearest even."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    quiet_nan = ((bits >> 16) | 0x0040).astype(np.uint16)
    return np.where(np.isnan(np.asarray(values, dtype=np.float32)), quiet_nan, rounded)


def _bf16_cast_truncates(builder_cls) -> bool:
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    value = np.array([1.0 + 2.0**-8 + 2.0**-10], dtype=np.float32)  # rounds up to 1 + 2**-7
    cast = builder_cls.cast_impl(None, TensorHandle(value, tl.float32), tl.bfloat16)
    return int(cast.data.view(np.uint16)[0]) != int(float32_to_bfloat16_bits(value)[0])


def _fix_bf16_cast(builder_cls) -> None:
    import triton.language as tl

    original = builder_cls.cast_impl

    def cast_impl(self, src, dst_type):
        result = original(self, src, dst_type)
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            result.data = float32_to_bfloat16_bits(src.data).reshape(np.shape(src.data)).view(result.data.dtype)
        return result

    builder_cls.cast_impl = cast_impl


# --- applying them ---------------------------------------------------------------------------

FIXES = [(_splat_converts_bools, _fix_splat), (_bf16_cast_truncates, _fix_bf16_cast)]


@functools.cache
def apply() -> None:
    try:
        builder_cls = _builder_class()
    except Exception:  # no interpreter: nothing to fix
        return
    for has_bug, fix in FIXES:
        try:
            needed = has_bug(builder_cls)
        except Exception:  # an interpreter we do not know: leave it alone
            continue
        if needed:
            fix(builder_cls)
