"""2-D pooling lowered to generated kernels (lower/pooling.py): max_pool2d with indices,
avg_pool2d and their backward ops, against eager, with no fallbacks.

Indices must equal eager's exactly (ties: the first tap; NaN: the last NaN of a window; -inf
windows: the first tap inside the input); values within the dtype's tolerance (max pool's are
exact). Backward: the input gradient of a compiled training step against eager's.
"""
import collections

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import tritonize
from tritonize.backend import make_backend
from tritonize.config import make_options
from tritonize.lower.pooling import MAX_TAPS
from conftest import DEVICE
from helpers import assert_same, tolerances

NAN, INF = float("nan"), float("inf")


def _input(shape, dtype=torch.float32, kind="randn", channels_last=False, seed=0):
    generator = torch.Generator().manual_seed(seed)
    if kind == "ties":  # few distinct values: many ties inside a window
        x = torch.randint(-2, 3, shape, generator=generator).to(dtype)
    else:
        x = torch.randn(shape, generator=generator).to(dtype)
    if kind == "nan":
        flat = x.view(-1)
        flat[3], flat[11], flat[12], flat[40 % flat.numel()] = NAN, NAN, NAN, NAN
    elif kind == "-inf":
        x.view(-1)[::2] = -INF
        x[..., :2, :2] = -INF  # whole windows of -inf (padded taps must still never win)
    x = x.to(DEVICE)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


def _compiled(fn, *args):
    """fn's outputs through tritonize, and the report; pooling must not fall back."""
    outputs, report = tritonize.run_and_explain(fn, *args)
    assert not report.fallbacks, report
    return outputs, report


def _eager(fn, x):
    """Eager's result; integer pooling is computed on the CPU (eager CUDA may have no integer
    kernels; integer results are exact on any device)."""
    if x.dtype.is_floating_point:
        return fn(x)
    result = fn(x.cpu())
    return tuple(r.to(x.device) for r in result) if isinstance(result, tuple) else result.to(x.device)


def _check_max_pool(x, **kwargs):
    fn = lambda t: F.max_pool2d(t, return_indices=True, **kwargs)  # noqa: E731
    (values, indices), report = _compiled(fn, x)
    expected_values, expected_indices = _eager(fn, x)
    assert torch.equal(indices, expected_indices), (indices, expected_indices)
    assert torch.equal(values.isnan(), expected_values.isnan())
    assert_same(values, expected_values, atol=0, rtol=0)
    assert values.stride() == expected_values.stride() and indices.stride() == expected_indices.stride()
    return report


def _check_avg_pool(x, **kwargs):
    fn = lambda t: F.avg_pool2d(t, **kwargs)  # noqa: E731
    actual, report = _compiled(fn, x)
    expected = _eager(fn, x)
    assert actual.dtype == expected.dtype and actual.stride() == expected.stride()
    assert_same(actual, expected)
    return report


# --- forward ---------------------------------------------------------------------------------

MAX_CASES = [  # kernel, stride, padding, dilation, ceil_mode, (H, W)
    (1, 1, 0, 1, False, (5, 6)),
    (2, 2, 0, 1, False, (8, 8)),
    (2, 2, 0, 1, True, (7, 9)),
    (3, 2, 1, 1, False, (9, 9)),      # ResNet's stem
    (3, 2, 1, 1, True, (10, 7)),
    (3, 1, 1, 1, False, (6, 7)),
    (3, 3, 0, 2, True, (11, 10)),
    (4, 3, 2, 1, True, (9, 11)),
    (5, 1, 2, 1, False, (7, 6)),
    (5, 2, 2, 1, True, (9, 8)),
    ((2, 3), (1, 2), (1, 0), (2, 1), False, (8, 9)),
    ((3, 1), (3, 1), (1, 0), (1, 3), True, (10, 6)),
    ((5, 4), (2, 3), (2, 1), (1, 2), False, (9, 11)),
]


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode,hw", MAX_CASES)
def test_max_pool2d_values_and_indices(kernel, stride, padding, dilation, ceil_mode, hw):
    x = _input((2, 3) + hw, kind="ties")
    _check_max_pool(x, kernel_size=kernel, stride=stride, padding=padding, dilation=dilation,
                    ceil_mode=ceil_mode)


@pytest.mark.parametrize("kind", ["nan", "-inf", "randn"])
@pytest.mark.parametrize("padding", [0, 1])
def test_max_pool2d_nan_and_infinity(kind, padding):
    """A NaN in a window wins (the last one, as eager's rule 'greater or NaN' gives); a window
    of -inf keeps its first tap inside the input; padded taps never win."""
    x = _input((2, 2, 7, 8), kind=kind, seed=1)
    _check_max_pool(x, kernel_size=3, stride=2, padding=padding)
    _check_max_pool(x, kernel_size=(2, 3), stride=1, padding=(1, padding), dilation=(2, 1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32])
def test_max_pool2d_dtypes(dtype):
    x = _input((2, 3, 9, 8), dtype, kind="ties" if not dtype.is_floating_point else "randn")
    _check_max_pool(x, kernel_size=3, stride=2, padding=1, ceil_mode=True)


@pytest.mark.parametrize("channels_last", [False, True])
def test_max_pool2d_3d_and_channels_last(channels_last):
    if channels_last:
        x = _input((2, 5, 9, 8), kind="ties", channels_last=True)
    else:
        x = _input((4, 9, 8), kind="ties")  # (C, H, W)
    _check_max_pool(x, kernel_size=3, stride=2, padding=1)
    _check_max_pool(x, kernel_size=2, stride=1, padding=1, dilation=2, ceil_mode=True)


AVG_CASES = [  # kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, (H, W)
    (1, 1, 0, False, True, None, (5, 6)),
    (2, 2, 0, False, True, None, (8, 8)),
    (2, 2, 1, True, False, None, (7, 9)),
    (3, 2, 1, False, True, None, (9, 9)),
    (3, 2, 1, False, False, None, (9, 10)),
    (3, 2, 1, True, True, None, (10, 7)),
    (3, 2, 1, True, False, None, (10, 7)),
    (3, 1, 1, False, False, 5, (6, 7)),
    (4, 3, 2, True, True, None, (9, 11)),
    (4, 3, 2, True, False, 3, (9, 11)),
    (5, 2, 2, False, False, None, (8, 9)),
    ((2, 5), (1, 3), (1, 2), True, True, None, (7, 11)),
    ((3, 1), (2, 1), (0, 0), False, True, 2, (9, 4)),
]


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,count_include_pad,divisor_override,hw", AVG_CASES)
def test_avg_pool2d(kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, hw):
    x = _input((2, 3) + hw)
    _check_avg_pool(x, kernel_size=kernel, stride=stride, padding=padding, ceil_mode=ceil_mode,
                    count_include_pad=count_include_pad, divisor_override=divisor_override)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int64])
def test_avg_pool2d_dtypes(dtype):
    """fp16/bf16 sum in fp32 and round once; int64 divides with truncation like eager."""
    kind = "ties" if dtype == torch.int64 else "randn"
    x = _input((2, 3, 9, 8), dtype, kind=kind)
    _check_avg_pool(x, kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
    _check_avg_pool(x, kernel_size=2, stride=1, padding=1, divisor_override=3)


def test_avg_pool2d_low_precision_sums_in_fp32():
    """Eight bf16 values whose bf16 running sum would lose the small ones: the fp32 sum does not."""
    x = torch.tensor([256.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], dtype=torch.bfloat16, device=DEVICE)
    x = x.reshape(1, 1, 2, 4)
    actual, _ = _compiled(lambda t: F.avg_pool2d(t, (2, 4)), x)
    assert actual.item() == torch.tensor(263.0 / 8, dtype=torch.bfloat16).item()


@pytest.mark.parametrize("channels_last", [False, True])
def test_avg_pool2d_3d_and_channels_last(channels_last):
    x = _input((2, 5, 9, 8), channels_last=True) if channels_last else _input((4, 9, 8))
    _check_avg_pool(x, kernel_size=3, stride=2, padding=1, count_include_pad=False)
    _check_avg_pool(x, kernel_size=2, stride=2, ceil_mode=True)


# --- fusion ------------------------------------------------------------------------------------

def test_relu_max_pool_add_is_one_kernel():
    x = _input((2, 4, 9, 9), kind="ties")

    def fn(t):
        return F.max_pool2d(torch.relu(t), 3, 2, 1) * 2 + 1

    actual, report = _compiled(fn, x)
    assert_same(actual, fn(x))
    assert len(report.kernels) == 1, report
    assert {"relu", "max_pool2d_with_indices", "mul", "add"} <= set(report.kernels[0].fused_nodes)


def test_avg_pool_of_a_pointwise_value_is_one_kernel():
    x = _input((2, 4, 9, 9))

    def fn(t):
        return torch.sigmoid(F.avg_pool2d(t * 3, 3, 2, 1, count_include_pad=False))

    actual, report = _compiled(fn, x)
    assert_same(actual, fn(x))
    assert len(report.kernels) == 1, report


def test_values_and_indices_are_one_kernel():
    x = _input((2, 3, 8, 8))
    report = _check_max_pool(x, kernel_size=3, stride=2, padding=1)
    assert len(report.kernels) == 1 and report.kernels[0].source.count("tl.store") == 2


# --- training: backward ops ------------------------------------------------------------------

def _fallbacks(artifacts, role: str) -> collections.Counter:
    return collections.Counter(op for a in artifacts if a.role == role for op, _ in a.fallbacks)


def _check_input_grad(fn, x, forward_fallbacks=(), backward_fallbacks=(), eager_layout=None, **tol):
    """One forward and backward of fn compiled and eager: losses and input gradients must match,
    and the forward and backward graphs must fall back exactly as listed. Returns the artifacts.
    `eager_layout` (a memory format) runs the eager reference on a copy in that layout, where
    eager's kernel for x's own layout is known to be wrong."""
    recorder: list = []
    compiled = torch.compile(fn, backend=make_backend(make_options(), recorder))
    x_compiled = x.detach().clone().requires_grad_()
    x_eager = x.detach().clone().requires_grad_()
    x_reference = x_eager if eager_layout is None else x_eager.contiguous(memory_format=eager_layout)
    loss_compiled, loss_eager = compiled(x_compiled), fn(x_reference)
    loss_compiled.backward()
    loss_eager.backward()
    artifacts = [a for a in recorder if a != "graph"]
    assert [a.role for a in artifacts] == ["forward", "backward"]
    assert _fallbacks(artifacts, "forward") == collections.Counter(forward_fallbacks)
    assert _fallbacks(artifacts, "backward") == collections.Counter(backward_fallbacks)
    loss_tol = tol if x.dtype in (torch.float16, torch.bfloat16) else {}  # the loss is fp32
    assert_same(loss_compiled, loss_eager, **loss_tol)
    assert x_compiled.grad.stride() == x_eager.grad.stride()
    assert_same(x_compiled.grad, x_eager.grad, **tol)
    return artifacts


def _weighted_sum(out):
    """A loss whose gradient differs per output element (so misrouted gradients show)."""
    weights = torch.arange(out.numel(), device=out.device, dtype=torch.float32).reshape(out.shape)
    return (out.float() * torch.cos(weights)).sum()


BACKWARD_CASES = [  # kernel, stride, padding, dilation, ceil_mode, (H, W)
    (2, 2, 0, 1, False, (8, 8)),
    (3, 2, 1, 1, False, (9, 9)),
    (3, 2, 1, 1, True, (10, 7)),
    (3, 1, 1, 1, False, (6, 7)),      # overlapping windows: a tap can win several
    (5, 2, 2, 1, True, (9, 8)),
    (3, 1, 1, 2, False, (8, 9)),      # dilation, stride 1: candidates by tap
    ((2, 3), (3, 2), (1, 1), (3, 2), True, (11, 10)),
    ((4, 2), (1, 3), (2, 0), (2, 1), False, (9, 11)),
    (7, 1, 3, 1, False, (9, 9)),      # the largest window: 49 taps, 49 candidate windows
]


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode,hw", BACKWARD_CASES)
def test_max_pool2d_backward(kernel, stride, padding, dilation, ceil_mode, hw):
    x = _input((2, 3) + hw, kind="ties")  # ties: the gradient goes to the first tap only
    _check_input_grad(lambda t: _weighted_sum(F.max_pool2d(t, kernel, stride, padding, dilation,
                                                           ceil_mode=ceil_mode)), x)


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,count_include_pad,divisor_override,hw", AVG_CASES)
def test_avg_pool2d_backward(kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, hw):
    x = _input((2, 3) + hw)
    _check_input_grad(lambda t: _weighted_sum(F.avg_pool2d(
        t, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)), x)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("channels_last", [False, True])
def test_pool_backward_dtypes_and_layouts(dtype, channels_last):
    x = _input((2, 3, 9, 8), dtype, channels_last=channels_last)

    def fn(t):
        return (_weighted_sum(F.max_pool2d(t, 3, 2, 1))
                + _weighted_sum(F.avg_pool2d(t, 3, 2, 1, ceil_mode=True, count_include_pad=False)))

    # Eager's channels-last avg_pool2d backward on CUDA drops the padding offset and returns wrong
    # gradients when padding > 0 (pytorch/pytorch#188344, fixed after torch 2.11): compare with
    # eager's NCHW kernel there, which computes the same gradient.
    buggy_eager = channels_last and torch.device(DEVICE).type == "cuda"
    _check_input_grad(fn, x, eager_layout=torch.contiguous_format if buggy_eager else None,
                      **tolerances(dtype))


def test_pool_backward_with_nan_routes_to_eagers_tap():
    x = _input((2, 2, 7, 8), kind="nan", seed=2)
    _check_input_grad(lambda t: _weighted_sum(F.max_pool2d(t, 3, 1, 1)), x)


def test_3d_input_backward():
    x = _input((3, 9, 8))
    _check_input_grad(lambda t: _weighted_sum(F.max_pool2d(t, 3, 2, 1) + F.avg_pool2d(t, 3, 2, 1)), x)


class SmallConvNet(nn.Module):
    """conv -> bn -> relu -> max pool -> conv -> avg pool: ResNet's stem and head in small."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 3, 2, 1)
        return F.avg_pool2d(F.relu(self.conv2(x)), 2).flatten(1)


def test_small_convnet_training_step_has_no_fallback(exact_convolutions):
    torch.manual_seed(0)
    eager = SmallConvNet().to(DEVICE)
    compiled_model = SmallConvNet().to(DEVICE)
    compiled_model.load_state_dict(eager.state_dict())
    loss = lambda model: lambda t: _weighted_sum(model(t))  # noqa: E731
    x = _input((2, 3, 12, 12))
    recorder: list = []
    compiled = torch.compile(compiled_model, backend=make_backend(make_options(), recorder))
    x_eager, x_compiled = x.clone().requires_grad_(), x.clone().requires_grad_()
    loss(eager)(x_eager).backward()
    loss(compiled)(x_compiled).backward()
    artifacts = [a for a in recorder if a != "graph"]
    assert {a.role for a in artifacts} == {"forward", "backward"}
    assert not any(a.fallbacks for a in artifacts), [a.fallbacks for a in artifacts]
    assert_same(x_compiled.grad, x_eager.grad, atol=1e-4, rtol=1e-4)
    for (name, p_eager), p_compiled in zip(eager.named_parameters(), compiled_model.parameters()):
        assert_same(p_compiled.grad, p_eager.grad, atol=1e-4, rtol=1e-4)


# --- what falls back, and why ----------------------------------------------------------------

def test_oversized_window_falls_back_with_reason():
    x = _input((1, 2, 10, 10))
    fn = lambda t: F.max_pool2d(t, 8) + F.avg_pool2d(t, (8, 7), 1)[..., :1, :1]  # noqa: E731
    actual, report = tritonize.run_and_explain(fn, x)
    assert_same(actual, fn(x))
    assert report.fallbacks == collections.Counter({"aten.max_pool2d_with_indices.default": 1,
                                                    "aten.avg_pool2d.default": 1})
    reasons = report.fallback_reasons
    assert f"more than {MAX_TAPS} taps" in reasons["aten.max_pool2d_with_indices.default"]
    assert "8x7 window" in reasons["aten.avg_pool2d.default"]


def test_oversized_window_backward():
    """An 8x8 window falls back in the forward; its backward with stride 8 has one candidate
    window per element and is generated; with stride 1 it has 8x8 and falls back, saying why."""
    x = _input((1, 2, 16, 16), kind="ties")
    _check_input_grad(lambda t: _weighted_sum(F.max_pool2d(t, 8)), x,
                      forward_fallbacks=["aten.max_pool2d_with_indices.default"])
    artifacts = _check_input_grad(lambda t: _weighted_sum(F.avg_pool2d(t, 8, 1)), x,
                                  forward_fallbacks=["aten.avg_pool2d.default"],
                                  backward_fallbacks=["aten.avg_pool2d_backward.default"])
    (reason,) = [r for a in artifacts if a.role == "backward" for _, r in a.fallbacks]
    assert "8x8 candidate windows" in reason


# --- expression DAGs -------------------------------------------------------------------------

def _running_max_chain(length: int, first_load: str):
    """A DAG like max pool's: each node feeds the next node's comparison and its where."""
    from tritonize.ir import expr as ex

    best = ex.load(first_load, 0, torch.float32)
    for k in range(1, length):
        tap = ex.load("x", k, torch.float32)
        take = ex.op("gt", tap, best, dtype=torch.bool)
        best = ex.op("where", take, tap, best, dtype=torch.float32)
    return best


def test_expr_dag_equality_and_text_are_linear():
    """Equality of two equal DAGs built separately, and their text, visit each node once (the
    recursive versions take 2**60 steps here and never finish)."""
    a, b, c = _running_max_chain(60, "x"), _running_max_chain(60, "x"), _running_max_chain(60, "y")
    assert a is not b and a == b and hash(a) == hash(b)
    assert a != c
    text = repr(a)
    assert len(text) < 20000 and text.count("$") > 50
    assert repr(_running_max_chain(1, "x")) == "load[float32]('x', 0)"  # no sharing: plain text
