"""Test helpers: compile with tritonize, compare with eager, count kernels and fallbacks."""
from __future__ import annotations

import torch
import torch.utils._pytree as pytree

import tritonize


def tolerances(dtype: torch.dtype) -> dict:
    if dtype in (torch.float16, torch.bfloat16):
        return {"atol": 2e-2, "rtol": 2e-2}
    if dtype == torch.float64:
        return {"atol": 1e-7, "rtol": 1e-7}
    return {"atol": 1e-5, "rtol": 1.3e-5}


def assert_same(actual, expected, **tol) -> None:
    a_leaves, b_leaves = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    assert len(a_leaves) == len(b_leaves)
    for a, b in zip(a_leaves, b_leaves):
        if isinstance(b, torch.Tensor):
            kw = tol or tolerances(b.dtype)
            torch.testing.assert_close(a, b, equal_nan=True, **kw)
        else:
            assert a == b


def check(fn, *args, **tol) -> tritonize.Report:
    """Run fn through tritonize (explain) and eager; assert equal; return the report."""
    expected = fn(*args)
    report = tritonize.explain(fn, *args)
    torch._dynamo.reset()
    actual = torch.compile(fn, backend="tritonize")(*args)
    assert_same(actual, expected, **tol)
    return report
