"""Custom ops (torch.library.custom_op) inside compiled code: they run through aten (fallbacks
listed in explain()), see their arguments with eager's strides (torch's default layout tag for
custom ops, needs_exact_strides), and mutate list arguments as eager does."""
import warnings
from typing import List

import torch

import tritonize

SEEN_STRIDES: list = []


@torch.library.custom_op("tritonize_tests::double_contiguous", mutates_args=())
def double_contiguous(x: torch.Tensor) -> torch.Tensor:
    SEEN_STRIDES.append(x.stride())
    torch._check(x.is_contiguous(), lambda: "Expected x to be contiguous")
    return x * 2


@double_contiguous.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("tritonize_tests::add_to_each", mutates_args=["xs"])
def add_to_each(xs: List[torch.Tensor], y: torch.Tensor) -> None:
    for x in xs:
        x.add_(y)


def _run_both(fn, *args):
    """(eager result, compiled result, strides the custom op saw in eager, and compiled)."""
    SEEN_STRIDES.clear()
    expected = fn(*args)
    eager_seen = list(SEEN_STRIDES)
    SEEN_STRIDES.clear()
    actual, report = tritonize.run_and_explain(fn, *args)
    return expected, actual, eager_seen, list(SEEN_STRIDES), report


def test_custom_op_gets_the_contiguous_copy_eager_gives_it(device):
    x = torch.randn(4, 6, device=device)
    for make in (lambda x: x[:, :3].contiguous(), lambda x: x.t().contiguous(),
                 lambda x: x.view(2, 2, 6).permute(2, 0, 1).contiguous()):
        expected, actual, eager_seen, seen, report = _run_both(lambda x: double_contiguous(make(x)) + 1, x)
        assert torch.equal(actual, expected) and actual.stride() == expected.stride()
        assert seen == eager_seen
        assert "tritonize_tests.double_contiguous.default" in report.fallbacks


@torch.library.custom_op("tritonize_tests::strides_probe", mutates_args=())
def strides_probe(x: torch.Tensor) -> torch.Tensor:
    SEEN_STRIDES.append(x.stride())
    return x.clone()


@strides_probe.register_fake
def _(x):
    return torch.empty_like(x)


def test_custom_op_sees_non_contiguous_arguments_as_eager_does(device):
    x = torch.randn(4, 6, device=device)
    for make, strides in ((lambda x: x[:, 1:4], (6, 1)), (lambda x: x.t(), (1, 6)),
                          (lambda x: (x + 1).t(), (1, 6))):
        expected, actual, eager_seen, seen, _ = _run_both(lambda x: strides_probe(make(x)), x)
        assert torch.equal(actual, expected) and actual.stride() == expected.stride()
        assert seen == eager_seen == [strides]


def test_custom_op_mutating_a_list_of_tensors(device):
    def fn(a, b, y):
        c = y * 3
        add_to_each([a, b, c], y)
        return a + b, c

    y = torch.randn(4, 6, device=device)
    a, b = torch.randn(4, 6, device=device), torch.randn(4, 6, device=device)
    a_eager, b_eager = a.clone(), b.clone()
    expected = fn(a_eager, b_eager, y)
    y_before = y.clone()
    actual, report = tritonize.run_and_explain(fn, a, b, y)
    for got, want in zip(actual, expected):
        assert torch.equal(got, want)
    assert torch.equal(a, a_eager) and torch.equal(b, b_eager)  # the inputs mutated as in eager
    assert torch.equal(y, y_before)
    assert set(report.fallbacks) == {"auto_functionalized_v2"}


@torch.library.custom_op("tritonize_tests::positives", mutates_args=())
def positives(x: torch.Tensor) -> torch.Tensor:
    return x[x > 0].clone()


@positives.register_fake
def _(x):
    return x.new_empty(torch.library.get_ctx().new_dynamic_size())


def test_custom_op_with_a_data_dependent_size_runs_through_aten_and_the_rest_is_generated(device):
    """The custom op decides the size (u0); the wrapper reads it from its result, and the
    kernels after it take u0 as a size."""
    x = torch.randn(4, 6, device=device)

    def fn(x):
        p = positives(x)
        return p * 2, p.sum() + x

    expected = fn(x)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual, report = tritonize.run_and_explain(fn, x)
    for got, want in zip(actual, expected):
        torch.testing.assert_close(got, want)
    assert list(report.fallback_reasons) == ["tritonize_tests.positives.default"]
    assert report.kernels and "u0 = " in report.wrapper
    assert any("tritonize_tests.positives.default" in str(w.message) for w in caught)
