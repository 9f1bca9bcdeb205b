"""Run-time checks as generated kernels call them: bounds of indirect indices
(`checks.check_index(...)`) and integer divisors (`checks.check_divisor(...)`).

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


# Integer division, remainder and fmod by zero: eager raises on the CPU (the interpreter twin
# does too) but its CUDA kernels do not check and give an unspecified value, so on the GPU this
# is nothing: no assert, no debug build, no cost; the kernel gives whatever the hardware gives.
@triton.jit
def check_divisor(divisor, msg: tl.constexpr):
    pass


@triton.jit
def check_divisor_masked(divisor, mask, msg: tl.constexpr):
    pass
