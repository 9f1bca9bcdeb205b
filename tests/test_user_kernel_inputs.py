"""A compiled function changes its caller's tensors exactly where eager does: every runnable
kernel of the corpus (tests/test_user_kernel_launch.py's EAGER_CASES), launched inside compiled
code on the caller's tensors, on copies of them, on values computed from them and on views of
them, through both ways torch.compile captures user kernels.

The bug this guards against: `x = x.clone(); kernel(x, ...)` lowered the clone to a view of the
input's buffer, and the kernel then wrote the caller's `x` (the returned values were right).
"""
from __future__ import annotations

import pytest
import torch
from test_user_kernel_launch import EAGER_CASES, _interpreter_cannot_range_over_scalars, _tolerance

import tritonize

# How the program hands each tensor argument to the kernel. "as_is" writes the caller's tensors
# (eager does too, and through a view); copies and computed values must leave the caller's tensors as they were.
ARGUMENT_FORMS = {
    "as_is": lambda t: t,
    "clone": lambda t: t.clone(),
    "computed": lambda t: t * 1 if t.is_floating_point() else t + 0,
    "flat_view": lambda t: t.view(t.shape),
}


def _program(kernel, grid, template, kwargs, form):
    """fn(*tensors): launches the kernel on form(tensor) for each tensor argument and returns
    those arguments after the launch, plus a value computed from one of them."""
    tensor_positions = [i for i, a in enumerate(template) if isinstance(a, torch.Tensor)]

    def fn(*tensors):
        args = list(template)
        for position, t in zip(tensor_positions, tensors):
            args[position] = ARGUMENT_FORMS[form](t)
        tritonize.wrap_triton(kernel)[grid](*args, **kwargs)
        passed = [args[p] for p in tensor_positions]
        return (*passed, passed[-1] * 2)

    return fn, [template[p] for p in tensor_positions]


@pytest.mark.parametrize("form", sorted(ARGUMENT_FORMS))
@pytest.mark.parametrize("name", sorted(EAGER_CASES))
def test_caller_tensors_change_only_where_eager_changes_them(name, form, capture):
    if name == "pointer_loop" and _interpreter_cannot_range_over_scalars():
        pytest.xfail("Triton's interpreter bug with numpy >= 2.4 (range over a scalar argument)")
    kernel, grid, make_args, kwargs, _ = EAGER_CASES[name]
    fn, tensors = _program(kernel, grid, make_args(), kwargs, form)
    eager_inputs = [t.clone() for t in tensors]
    expected = fn(*eager_inputs)
    compiled_inputs = [t.clone() for t in tensors]
    actual = torch.compile(fn, backend="tritonize")(*compiled_inputs)
    tolerance = _tolerance(name)
    torch.testing.assert_close(actual, expected, **tolerance)
    for got, want, original in zip(compiled_inputs, eager_inputs, tensors):
        torch.testing.assert_close(got, want, **tolerance)  # the caller's tensor, after the call
        if form in ("clone", "computed"):  # eager writes a copy, never the caller's tensor
            assert torch.equal(got, original), "a compiled function overwrote its caller's input"
