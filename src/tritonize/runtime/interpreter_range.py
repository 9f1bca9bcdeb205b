"""`range` for generated kernels run by Triton's interpreter (bound by runtime/loader.py).

Triton's interpreter rewrites every assignment in a kernel, so `rnumel = 3000` holds a scalar
tensor, not an int, by the time `for roffset in range(0, rnumel, RBLOCK)` runs. Triton < 3.7
keeps such a scalar as a one-element array, and its `__index__` (`int(array)`) is refused by
numpy >= 2.4. This `range` takes the number out of the scalar itself, on any Triton and numpy.
"""
from __future__ import annotations

import builtins

import numpy as np


def _as_int(bound) -> int:
    handle = getattr(bound, "handle", None)
    data = getattr(handle, "data", None)
    if data is None:
        return bound.__index__()
    values = np.asarray(data).reshape(-1)
    if values.size != 1:
        raise TypeError(f"range() bound is a block of {values.size} values, not a scalar")
    return int(values[0])


def interpreter_range(*bounds) -> range:
    return builtins.range(*(_as_int(b) for b in bounds))
