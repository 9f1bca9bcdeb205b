"""The CPU twin of `triton.language.extra.libdevice`, for kernels run by Triton's interpreter.

The interpreter cannot call libdevice, so the loader binds the name `libdevice` in CPU kernel
modules to this module instead. Each function computes with torch on the interpreter's NumPy
arrays, so results match torch's own CPU kernels. Only the functions our op table emits are here.
"""
from __future__ import annotations

import numpy as np
import torch
import triton.language as tl
from triton.runtime.interpreter import TensorHandle


def _as_array(x, like_dtype=None):
    if isinstance(x, tl.core.tensor):
        return np.asarray(x.handle.data), x.handle.dtype.scalar
    return np.asarray(x, dtype=like_dtype), None


def _wrap(data: np.ndarray, scalar_type, is_block: bool = True) -> tl.core.tensor:
    """A tensor of data; scalars stay scalars (the interpreter stores them as 1-element arrays)."""
    data = np.asarray(data)
    block = tl.block_type(scalar_type, list(data.shape)) if data.shape and is_block else scalar_type
    return tl.core.tensor(TensorHandle(data, scalar_type), block)


def _elementwise(fn, *, returns_int=False):
    def apply(*args):
        arrays, scalar_type = [], None
        for a in args:
            data, sty = _as_array(a)
            arrays.append(data)
            scalar_type = scalar_type or sty
        # Only Python numbers (a folded constant call: copysign(1.0, -0.0)): Triton makes a
        # float literal an fp32 tensor before calling libdevice, so the twin computes in fp32 too.
        dtype = next((a.dtype for a, x in zip(arrays, args) if isinstance(x, tl.core.tensor)), np.float32)
        scalar_type = scalar_type or tl.float32
        arrays = [a.astype(dtype) if a.dtype != dtype else a for a in arrays]
        tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
        result = fn(*torch.broadcast_tensors(*tensors)).numpy()
        is_block = any(isinstance(x, tl.core.tensor) and x.type.is_block() for x in args)
        if returns_int:
            return _wrap(result.astype(np.int32), tl.int32, is_block)
        return _wrap(result.astype(dtype), scalar_type, is_block)
    return apply


expm1 = _elementwise(torch.expm1)
log10 = _elementwise(torch.log10)
log1p = _elementwise(torch.log1p)
tan = _elementwise(torch.tan)
asin = _elementwise(torch.asin)
acos = _elementwise(torch.acos)
atan = _elementwise(torch.atan)
sinh = _elementwise(torch.sinh)
cosh = _elementwise(torch.cosh)
tanh = _elementwise(torch.tanh)
asinh = _elementwise(torch.asinh)
acosh = _elementwise(torch.acosh)
atanh = _elementwise(torch.atanh)
erfc = _elementwise(torch.erfc)
erfinv = _elementwise(torch.erfinv)
lgamma = _elementwise(torch.lgamma)
trunc = _elementwise(torch.trunc)
nearbyint = _elementwise(torch.round)
cyl_bessel_i0 = _elementwise(torch.i0)
cyl_bessel_i1 = _elementwise(torch.special.i1)
erfcx = _elementwise(torch.special.erfcx)
j0 = _elementwise(torch.special.bessel_j0)
j1 = _elementwise(torch.special.bessel_j1)
y0 = _elementwise(torch.special.bessel_y0)
y1 = _elementwise(torch.special.bessel_y1)
normcdfinv = _elementwise(torch.special.ndtri)
signbit = _elementwise(torch.signbit, returns_int=True)
atan2 = _elementwise(torch.atan2)
hypot = _elementwise(torch.hypot)
copysign = _elementwise(torch.copysign)
nextafter = _elementwise(torch.nextafter)
pow = _elementwise(torch.pow)
fmod = _elementwise(torch.fmod)


def _to_int64_as_the_cpu_does(x):
    """float2ll_rz and double2ll_rz: truncation to int64 as torch's CPU kernels cast (NaN and
    values out of range give INT64_MIN on x86), where CUDA's conversion saturates."""
    data, _ = _as_array(x)
    result = torch.from_numpy(np.ascontiguousarray(data)).to(torch.int64).numpy()
    return _wrap(result, tl.int64, isinstance(x, tl.core.tensor) and x.type.is_block())


float2ll_rz = double2ll_rz = _to_int64_as_the_cpu_does
