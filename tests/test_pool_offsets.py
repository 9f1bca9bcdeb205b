"""max_pool2d's indices saved for the backward as int8 window offsets (pool_offsets.py): the
training step matches eager's (values, gradients, inputs) for strides, paddings, dilations,
ceil mode and ties, the compiled forward saves int8 and no int64 tensor, and a window of more
than 127 elements keeps its int64 indices."""
from __future__ import annotations

import pytest
import torch

from helpers import assert_same


def _step(pool_args, x, weight, compiled: bool):
    def fn(x, weight):
        y = torch.relu(torch.nn.functional.conv2d(x, weight, padding=1))
        return torch.nn.functional.max_pool2d(y, *pool_args)

    run = torch.compile(fn, backend="tritonize") if compiled else fn
    x, weight = x.clone().requires_grad_(), weight.clone().requires_grad_()
    out = run(x, weight)
    out.square().sum().backward()
    return out, x.grad, weight.grad


def _saved_dtypes(pool_args, x, weight) -> list:
    def fn(x, weight):
        return torch.nn.functional.max_pool2d(torch.relu(torch.nn.functional.conv2d(x, weight, padding=1)), *pool_args)

    out = torch.compile(fn, backend="tritonize")(x.clone().requires_grad_(), weight.clone().requires_grad_())
    node = out.grad_fn
    while "CompiledFunction" not in type(node).__name__:
        node = node.next_functions[0][0]
    return [t.dtype for t in node.saved_tensors]


POOLS = [
    (3, 2, 1),                          # ResNet's stem
    ((3, 2), (2, 1), (1, 0)),           # rectangular window, unequal strides and paddings
    (3, 2, 0, 2, True),                 # dilation 2, ceil mode
    (2, 2),                             # non-overlapping windows
]


@pytest.mark.parametrize("pool_args", POOLS, ids=["stem", "rectangular", "dilated-ceil", "plain"])
def test_training_matches_eager(device, pool_args):
    torch.manual_seed(0)
    x, weight = torch.randn(2, 3, 11, 13, device=device), torch.randn(4, 3, 3, 3, device=device)
    before = x.clone()
    assert_same(_step(pool_args, x, weight, compiled=True), _step(pool_args, x, weight, compiled=False))
    assert_same(x, before)
    dtypes = _saved_dtypes(pool_args, x, weight)
    assert torch.int8 in dtypes and torch.int64 not in dtypes, dtypes


def test_ties_pick_eager_positions(device):
    """Windows of equal values (a ReLU's zeros): the gradient goes where eager sends it."""
    x = torch.zeros(1, 3, 8, 8, device=device)
    x[..., ::3, ::2] = 1.0
    weight = torch.randn(2, 3, 3, 3, device=device).abs()
    assert_same(_step((3, 2, 1), x, weight, compiled=True), _step((3, 2, 1), x, weight, compiled=False))


def test_a_window_past_127_elements_keeps_its_indices(device):
    """A 12 x 12 window has 144 positions, more than an int8 holds: the indices stay int64."""
    torch.manual_seed(0)
    x, weight = torch.randn(1, 2, 26, 26, device=device), torch.randn(2, 2, 3, 3, device=device)
    assert_same(_step((12, 12), x, weight, compiled=True), _step((12, 12), x, weight, compiled=False))
    assert torch.int64 in _saved_dtypes((12, 12), x, weight)


def test_two_pools_with_a_dynamic_batch(device):
    """A symbolic batch makes the forward save a size too, which the backward takes before the
    saved tensors: each pool's offsets must reach that pool's backward (matched by name, not by
    position; by position, two pools' gradients were swapped, 208 off)."""
    def fn(x, y):
        return torch.nn.functional.max_pool2d(x, 3, 2, 1) * 2 + torch.nn.functional.max_pool2d(y, 3, 2, 1) * 3

    torch.manual_seed(0)
    x, y = torch.randn(4, 3, 10, 10, device=device), torch.randn(4, 3, 10, 10, device=device)
    grads = []
    for compiled in (True, False):
        a, b = x.clone().requires_grad_(), y.clone().requires_grad_()
        if compiled:
            torch._dynamo.mark_dynamic(a, 0)
            torch._dynamo.mark_dynamic(b, 0)
        run = torch.compile(fn, backend="tritonize") if compiled else fn
        out = run(a, b)
        out.square().sum().backward()
        grads.append((out, a.grad, b.grad))
    assert_same(grads[0], grads[1])
