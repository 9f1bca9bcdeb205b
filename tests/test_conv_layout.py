"""conv_layout="channels_last" (lower/conv_layout.py): convolutions and the buffers around them in
NHWC memory order; values, output strides and inputs as eager's, in inference and training."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import tritonize
from helpers import assert_same
from test_training import check_training

CHANNELS_LAST = {"conv_layout": "channels_last"}


def conv_bn_relu_block():
    return nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())


class Residual(nn.Module):
    """conv-bn-relu-conv-bn, plus the input, then relu (a ResNet basic block)."""

    def __init__(self, channels=16):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels),
                                  nn.ReLU(), nn.Conv2d(channels, channels, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(channels))

    def forward(self, x):
        return torch.relu(self.body(x) + x)


def compile_both(model, x):
    """(eager's result, then for each layout: the compiled result and its report)."""
    with torch.no_grad():
        expected = model(x)
        results = {}
        for layout in ("as_traced", "channels_last"):
            torch._dynamo.reset()
            report = tritonize.explain(model, x, options={"conv_layout": layout})
            torch._dynamo.reset()
            results[layout] = tritonize.compile(model, options={"conv_layout": layout})(x), report
    return expected, results


@pytest.mark.parametrize("make_model, channels", [(conv_bn_relu_block, 8), (Residual, 16)])
def test_channels_last_convolutions_match_eager(device, exact_convolutions, make_model, channels):
    torch.manual_seed(0)
    model = make_model().to(device).eval()
    x = torch.randn(2, channels, 10, 10, device=device)
    before = x.clone()
    expected, results = compile_both(model, x)
    for layout, (actual, report) in results.items():
        assert_same(actual, expected)
        assert actual.stride() == expected.stride(), layout  # outputs keep eager's strides
        assert not report.fallbacks, report.fallbacks
    assert torch.equal(x, before)
    wrapper = results["channels_last"][1].wrapper
    # every convolution's result is expected channels-last (its input was stored so)
    nhwc = [line for line in wrapper.splitlines() if "ensure_layout(" in line and ", 1, 160, 16))" in line]
    assert len(nhwc) == 2, wrapper


def test_no_layout_copy_between_convolutions(device):
    """The kernel between two convolutions writes NHWC: one kernel more than as traced (the
    graph input's conversion at the edge), no layout copy inside the graph."""
    torch.manual_seed(0)
    model = conv_bn_relu_block().to(device).eval()
    _, results = compile_both(model, torch.randn(2, 8, 10, 10, device=device))
    kernels = {layout: len(report.kernels) for layout, (_, report) in results.items()}
    assert kernels["channels_last"] == kernels["as_traced"] + 1, kernels


class StemAndBlock(nn.Module):
    """A ResNet stem (conv-bn-relu, max pool) and a residual block: the pooled map is read by a
    convolution and by the residual sum."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.block = Residual(16)

    def forward(self, x):
        return self.block(self.stem(x))


@pytest.mark.parametrize("make_model", [Residual, StemAndBlock])
def test_a_value_read_twice_is_stored_once_in_channels_last(device, exact_convolutions, make_model):
    """A block's input is read by a convolution and by the residual sum: it is stored once,
    channels-last, not once per layout (a transposing kernel with two stores)."""
    torch.manual_seed(0)
    model = make_model().to(device).eval()
    x = torch.randn(2, 16 if make_model is Residual else 3, 16, 16, device=device)
    expected, results = compile_both(model, x)
    actual, report = results["channels_last"]
    assert_same(actual, expected)
    assert actual.stride() == expected.stride()
    kernels = report.wrapper.split("@triton.jit")[1:]
    assert kernels and all(k.count("tl.store(") == 1 for k in kernels), report.wrapper
    assert report.layout_copies == [0, 1], str(report)  # the graph input's conversion, at the edge
    assert "layout copies: 0 inside the graph, 1 at its edges" in str(report)


def test_channels_last_training_matches_eager(device, exact_convolutions):
    with tritonize.config.patch(**CHANNELS_LAST):
        check_training(Residual, [torch.randn(2, 16, 8, 8, device=device, requires_grad=True)])


def test_channels_last_training_through_a_stem_matches_eager(device, exact_convolutions):
    with tritonize.config.patch(**CHANNELS_LAST):
        check_training(StemAndBlock, [torch.randn(2, 3, 16, 16, device=device, requires_grad=True)])


def test_saved_activations_leave_the_forward_channels_last(device):
    """Training under channels_last: the forward returns the activations it saves for the backward
    as they are, NHWC (no copy to eager's layout), and the backward's convolutions read them so.
    The copies left are at the edges: the input's conversion and the output returned NCHW in the
    forward, the input read NHWC by the first convolution's backward."""
    torch.manual_seed(0)
    model = Residual().to(device)
    report = tritonize.explain(model, torch.randn(2, 16, 16, 16, device=device, requires_grad=True),
                               options=CHANNELS_LAST)
    copies = {art.role: art.layout_copies for art in report.sections}
    assert copies == {"forward": [0, 2], "backward": [0, 1]}, str(report)


def test_a_computed_argument_of_attention_keeps_the_traced_layout(device):
    """A value computed from a convolution's channels-last result and handed to an aten op is
    stored as traced (contiguous), not channels-last: CPU flash attention read a channels-last
    query as if its last stride were 1 (a review of the nineteenth session: 2.6 off eager)."""
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 4, 3, padding=1).to(device).eval()

    def fn(x):
        y = conv(x)  # (batch, heads, sequence, head dim)
        q = y * 0.5
        return torch.nn.functional.scaled_dot_product_attention(q, q, y + 1)

    x = torch.randn(2, 4, 16, 8, device=device)
    with torch.no_grad():
        expected = fn(x)
        actual = tritonize.compile(fn, options=CHANNELS_LAST)(x)
    assert_same(actual, expected)


def test_an_unknown_conv_layout_is_an_error():
    with pytest.raises(ValueError, match="conv_layout"):
        tritonize.compile(nn.ReLU(), options={"conv_layout": "nhwc"})(torch.randn(2))


def test_channels_last_with_symbolic_sizes(device, exact_convolutions):
    """NHWC strides over symbolic batch and spatial sizes: one compile serves both calls."""
    torch.manual_seed(0)
    model = conv_bn_relu_block().to(device).eval()
    compiled = torch.compile(model, backend="tritonize", dynamic=True, options=CHANNELS_LAST)
    with torch.no_grad():
        for batch, side in ((2, 10), (3, 12)):
            x = torch.randn(batch, 8, side, side, device=device)
            actual, expected = compiled(x), model(x)
            assert_same(actual, expected)
            assert actual.stride() == expected.stride()


@pytest.mark.parametrize("layout", ["as_traced", "channels_last"])
def test_a_channels_last_input_keeps_eagers_output_strides_with_symbolic_sizes(device, exact_convolutions, layout):
    """Eager returns relu(conv(x)) channels-last for a channels-last x. Under dynamic=True the
    output's strides are expressions (s0 - s1 + 3); the output used to come back contiguous."""
    def conv_relu(x, w):
        return torch.relu(torch.nn.functional.conv2d(x, w, None, 1, 1))

    compiled = torch.compile(conv_relu, backend="tritonize", dynamic=True, options={"conv_layout": layout})
    for batch, height, width in ((2, 7, 6), (3, 9, 5)):
        x = torch.randn(batch, 3, height, width, device=device).to(memory_format=torch.channels_last)
        w = torch.randn(4, 3, 3, 3, device=device)
        saved = x.clone()
        actual, expected = compiled(x, w), conv_relu(x, w)
        assert_same(actual, expected)
        assert actual.stride() == expected.stride()
        assert_same(x, saved)


def traced_convolution(device, dtype):
    """An aten graph with one 2-D convolution over fake tensors of `device` (no GPU needed)."""
    from torch._subclasses import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    def conv_relu(x, w):
        return torch.ops.aten.convolution(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1).relu()

    with FakeTensorMode():
        x = torch.empty(2, 8, 10, 10, device=device, dtype=dtype)
        w = torch.empty(8, 8, 3, 3, device=device, dtype=dtype)
        return make_fx(conv_relu)(x, w), [x, w]


@pytest.mark.parametrize("device_type, dtype, role, expected", [
    ("cuda", torch.bfloat16, "inference", "channels_last"),
    ("cuda", torch.float16, "inference", "channels_last"),
    ("cuda", torch.float32, "inference", "as_traced"),
    ("cuda", torch.bfloat16, "forward", "as_traced"),
    ("cuda", torch.bfloat16, "backward", "as_traced"),
    ("cpu", torch.bfloat16, "inference", "as_traced"),
])
def test_auto_layout_decides_per_graph(device_type, dtype, role, expected):
    """conv_layout="auto" (the default): channels-last for CUDA inference graphs with fp16/bf16
    convolutions; the decision and its reason are a note of the report."""
    from tritonize.config import make_options
    from tritonize.lower import conv_layout

    assert make_options().conv_layout == "auto"
    gm, _ = traced_convolution(device_type, dtype)
    options, note = conv_layout.decide(make_options(), gm, role)
    assert options.conv_layout == expected
    assert note.startswith(f"convolution layout: {expected} (")
    forced, no_note = conv_layout.decide(make_options(conv_layout="as_traced"), gm, role)
    assert forced.conv_layout == "as_traced" and no_note is None


def test_auto_layout_is_said_in_the_report(device):
    """bf16 inference: channels-last on CUDA, as traced on the CPU; values and strides as eager's."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(8, 8, 3), nn.ReLU()).to(device, torch.bfloat16).eval()
    x = torch.randn(2, 8, 8, 8, device=device, dtype=torch.bfloat16)
    with torch.no_grad():
        report = tritonize.explain(model, x)
        torch._dynamo.reset()
        actual, expected = tritonize.compile(model)(x), model(x)
    layout = "channels_last" if device == "cuda" else "as_traced"
    assert f"convolution layout: {layout} (" in str(report), str(report)
    assert_same(actual, expected)
    assert actual.stride() == expected.stride()
