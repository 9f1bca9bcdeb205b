"""Work-arounds for Triton interpreter bugs that our CPU kernels hit.

`apply()` runs once, before the first CPU kernel module loads (runtime/loader.py). Each fix first
checks that the installed Triton has the bug and changes nothing otherwise, so a Triton release
that fixes it makes the work-around inert.

* Splat of a 0-d comparison result. The interpreter labels the result of `a < b` with the
  operands' dtype (the data are NumPy bools), and `create_splat` converts the data to the label's
  NumPy dtype. A 0-d comparison broadcast against a block (`(s != s) | (s < x)` where `s` is a
  0-d load or constant) so becomes floats, and the `|` fails with "ufunc 'bitwise_or' not
  supported". The fix splats the data with their own dtype. Compiled (GPU) kernels are not
  affected: the IR types are right there.
"""
from __future__ import annotations

import functools

import numpy as np


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


@functools.cache
def apply() -> None:
    try:
        from triton.runtime.interpreter import InterpreterBuilder

        needs_fix = _splat_converts_bools(InterpreterBuilder)
    except Exception:  # an interpreter we do not know: leave it alone
        return
    if needs_fix:
        _fix_splat(InterpreterBuilder)
