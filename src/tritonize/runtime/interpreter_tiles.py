"""The CPU twins of `tl.reduce` and `tl.associative_scan`, for kernels run by Triton's interpreter.

Triton's interpreter calls a reduction's or scan's combine function once per element, in Python:
minutes for a logcumsumexp over a few thousand elements. These twins call the same combine
function (the interpreted copy of runtime/triton_helpers.py) on whole tiles instead, log2(n)
times: a reduction combines adjacent pairs until one element is left; a scan is the
Hillis-Steele doubling scan, where step k combines each element with the one 2**k before it.
Both only ever combine an earlier part of the row with a later one (in that argument order),
so any associative combine function gives the scan's result, like on the GPU, up to floating
rounding order. The loader binds `helpers.reduce_along` / `helpers.scan_along` to these in CPU
modules (runtime/loader.py).

Reductions whose combine function is a NaN-propagating max or min (triton_helpers.maximum,
minimum) are one numpy call instead: the same result, exactly (no rounding), without log2(n)
interpreted steps. A looped scan takes its carry with one a chunk (codegen/scan_kernel.py): half
the time of a 2**20-long cumsum went there.
"""
from __future__ import annotations

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle


def _wrap(data: np.ndarray, scalar_type) -> tl.core.tensor:
    data = np.ascontiguousarray(data)
    if data.ndim == 0:
        return tl.core.tensor(TensorHandle(data.reshape(1), scalar_type), scalar_type)
    return tl.core.tensor(TensorHandle(data, scalar_type), tl.block_type(scalar_type, list(data.shape)))


def _combine(combine_fn, earlier: list, later: list, types: list, shape) -> list[np.ndarray]:
    """combine_fn over tiles of arrays (earlier elements first); results in the inputs' dtypes."""
    args = [_wrap(a, t) for a, t in zip(earlier, types)] + [_wrap(b, t) for b, t in zip(later, types)]
    fn = getattr(combine_fn, "fn", combine_fn)
    result = fn(*args)
    results = result if isinstance(result, tuple) else (result,)
    out = []
    for value, like in zip(results, earlier):
        data = value.handle.data if isinstance(value, tl.core.tensor) else np.asarray(value)
        out.append(np.broadcast_to(data, shape).astype(like.dtype))
    return out


def _unpack(input):
    tensors = input if isinstance(input, tuple) else (input,)
    return [np.asarray(t.handle.data) for t in tensors], [t.dtype for t in tensors]


# combine function (its Python function) -> the numpy ufunc that reduces like it
NUMPY_REDUCTIONS: dict = {}


def register_numpy_reductions(helpers) -> None:
    """helpers: the interpreted copy of triton_helpers. np.maximum/np.minimum propagate NaN as
    helpers.maximum/minimum do."""
    for name, ufunc in (("maximum", np.maximum), ("minimum", np.minimum)):
        combine = getattr(helpers, name)
        NUMPY_REDUCTIONS[getattr(combine, "fn", combine)] = ufunc


def reduce_along(input, axis, combine_fn, keep_dims=False, **kwargs):
    arrays, types = _unpack(input)
    ufunc = NUMPY_REDUCTIONS.get(getattr(combine_fn, "fn", combine_fn))
    if ufunc is not None and len(arrays) == 1 and arrays[0].shape[axis] > 0:
        result = _wrap(ufunc.reduce(arrays[0], axis=axis, keepdims=keep_dims), types[0])
        return (result,) if isinstance(input, tuple) else result
    while arrays[0].shape[axis] > 1:
        n = arrays[0].shape[axis]
        even = [np.take(a, np.arange(0, n - 1, 2), axis=axis) for a in arrays]
        odd = [np.take(a, np.arange(1, n, 2), axis=axis) for a in arrays]
        paired = _combine(combine_fn, even, odd, types, even[0].shape)
        if n % 2:
            last = [np.take(a, [n - 1], axis=axis) for a in arrays]
            paired = [np.concatenate([p, tail], axis=axis) for p, tail in zip(paired, last)]
        arrays = paired
    if not keep_dims:
        arrays = [np.squeeze(a, axis=axis) for a in arrays]
    results = [_wrap(a, t) for a, t in zip(arrays, types)]
    return tuple(results) if isinstance(input, tuple) else results[0]


def scan_along(input, axis, combine_fn, reverse=False, **kwargs):
    arrays, types = _unpack(input)
    if reverse:
        arrays = [np.flip(a, axis=axis) for a in arrays]
    n = arrays[0].shape[axis]
    position = np.arange(n).reshape([n if k == axis else 1 for k in range(arrays[0].ndim)])
    shift = 1
    while shift < n:
        # Tiles keep power-of-two shapes: combine with the whole tile rolled by shift, and keep
        # the first shift elements (which have nothing that far before them) as they are.
        earlier = [np.roll(a, shift, axis=axis) for a in arrays]
        combined = _combine(combine_fn, earlier, arrays, types, arrays[0].shape)
        arrays = [np.where(position < shift, a, c) for a, c in zip(arrays, combined)]
        shift *= 2
    if reverse:
        arrays = [np.flip(a, axis=axis) for a in arrays]
    results = [_wrap(a, t) for a, t in zip(arrays, types)]
    return tuple(results) if isinstance(input, tuple) else results[0]
