"""Bounds checks of indirect indices, as generated kernels call them: `checks.check_index(...)`.

On the GPU these are device asserts: a kernel that calls them is launched with Triton's debug
option on (asserts are compiled out otherwise), so an index out of range stops the program with
the message, which names the aten op and FX node. Triton's interpreter skips device asserts, so
the loader binds `checks` in CPU kernel modules to runtime/interpreter_checks.py instead, which
raises IndexOutOfBoundsError.
"""
import triton
import triton.language as tl


@triton.jit
def check_index(index, size, msg: tl.constexpr):
    tl.device_assert((index >= 0) & (index < size), msg)


@triton.jit
def check_index_masked(index, size, mask, msg: tl.constexpr):
    tl.device_assert((index >= 0) & (index < size), msg, mask=mask)
