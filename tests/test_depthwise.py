"""Depthwise convolutions as generated kernels (option depthwise_conv="generated",
lower/depthwise.py): values and strides as eager's, the batch norm and activation after them in
the same kernel, other convolutions left to aten."""
from __future__ import annotations

import pytest
import torch
from helpers import assert_same

from conftest import DEVICE
from tritonize.backend import make_backend
from tritonize.config import make_options
from tritonize.lower.depthwise import measured_faster

nn = torch.nn
F = torch.nn.functional


def compile_generated(model, layout="as_traced", **kwargs):
    recorder = []
    options = make_options(depthwise_conv="generated", conv_layout=layout)
    return torch.compile(model, backend=make_backend(options, recorder=recorder), **kwargs), recorder


def graphs(recorder) -> list:
    return [r for r in recorder if r != "graph"]


def depthwise_block(kernel, stride, padding, dilation, bias, channels=6, dtype=torch.float32):
    torch.manual_seed(0)
    conv = nn.Conv2d(channels, channels, kernel, stride, padding, dilation, groups=channels, bias=bias)
    norm = nn.BatchNorm2d(channels)
    with torch.no_grad():
        norm.running_mean.uniform_(-1, 1)
        norm.running_var.uniform_(0.5, 2)
    return nn.Sequential(conv, norm, nn.SiLU()).eval().to(device=DEVICE, dtype=dtype)


@pytest.mark.parametrize("kernel,stride,padding,dilation,bias", [
    (3, 1, 1, 1, False), (3, 2, 1, 1, True), (5, 2, 2, 1, False), (7, 1, 3, 1, True), (3, 1, 0, 2, False),
    ((3, 5), (1, 2), (1, 0), 1, True),
])
@pytest.mark.parametrize("layout", ["as_traced", "channels_last"])
def test_a_depthwise_convolution_and_what_follows_are_one_kernel(kernel, stride, padding, dilation, bias, layout):
    model = depthwise_block(kernel, stride, padding, dilation, bias)
    x = torch.randn(2, 6, 11, 9, device=DEVICE)
    saved = x.clone()
    compiled, recorder = compile_generated(model, layout)
    with torch.no_grad():
        actual, expected = compiled(x), model(x)
    assert_same(actual, expected)
    assert actual.stride() == expected.stride()
    assert_same(x, saved)
    (graph,) = graphs(recorder)
    assert not graph.externs and not graph.fallbacks
    # the filter reordered tap-major (lower/depthwise._tap_major), then one kernel for the rest
    taps = model[0].kernel_size[0] * model[0].kernel_size[1]
    assert len(graph.kernels) == 2 and sum(reorders_filter(k.source, 6, taps) for k in graph.kernels) == 1


def reorders_filter(source: str, channels: int, taps: int) -> bool:
    """The kernel copies a (channels, 1, kh, kw) filter tap-major: one flat copy, or a tile of
    channels by taps."""
    return f"xnumel = {channels * taps}\n" in source or (
        f"xnumel = {channels}\n" in source and f"ynumel = {taps}\n" in source)


@pytest.mark.parametrize("batch", [1, 3])
def test_the_filter_is_read_tap_major_and_a_batch_of_one_fuses_as_any(batch):
    """Each tap reads its weights for neighbouring channels from consecutive memory: the filter
    (channels, 1, kh, kw) is stored (kh, kw, channels) first. A batch of one is one kernel too:
    the loads of a size-1 dim drop it, which fusion did not see as the same element (three
    kernels: convolution, batch norm, SiLU)."""
    model = depthwise_block(3, 1, 1, 1, False, channels=5, dtype=torch.bfloat16)
    x = torch.randn(batch, 5, 6, 6, device=DEVICE, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    compiled, recorder = compile_generated(model, "channels_last")
    with torch.no_grad():
        assert_same(compiled(x), model(x))
    (graph,) = graphs(recorder)
    reorder, convolution = graph.kernels
    assert reorders_filter(reorder.source, 5, 9)
    assert all(f"in_ptr1 + (x0 + {5 * t})" in convolution.source for t in range(1, 9)), convolution.source


def test_half_precision_accumulates_in_float32():
    model = depthwise_block(5, 1, 2, 1, True, dtype=torch.bfloat16)
    x = torch.randn(2, 6, 8, 8, device=DEVICE, dtype=torch.bfloat16)
    compiled, _ = compile_generated(model)
    with torch.no_grad():
        assert_same(compiled(x), model(x))


class ConvNextBlock(nn.Module):
    """7x7 depthwise convolution, layer norm over channels (permute, norm, permute back), MLP."""

    def __init__(self, dim=8):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = self.norm(self.dwconv(x).permute(0, 2, 3, 1))
        return x + self.down(F.gelu(self.up(h))).permute(0, 3, 1, 2)


def test_a_convnext_block_matches_eager_in_inference_and_training():
    torch.manual_seed(0)
    model, reference = ConvNextBlock().to(DEVICE), ConvNextBlock().to(DEVICE)
    reference.load_state_dict(model.state_dict())
    compiled, recorder = compile_generated(model)
    x = torch.randn(2, 8, 9, 9, device=DEVICE)
    with torch.no_grad():
        assert_same(compiled(x), reference(x))
    assert not [e for g in graphs(recorder) for e in g.externs if "convolution" in e]
    compiled(x).square().sum().backward()  # the backward's convolution_backward stays aten's
    reference(x).square().sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert_same(p.grad, q.grad, atol=1e-4, rtol=1e-4)


def test_other_convolutions_and_symbolic_sizes_stay_library_calls():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 8, 3, groups=2), nn.Conv2d(8, 8, 3, groups=8)).eval().to(DEVICE)
    compiled, recorder = compile_generated(model, dynamic=True)
    with torch.no_grad():
        for size in (7, 10):
            x = torch.randn(2, 4, size, size, device=DEVICE)
            assert_same(compiled(x), model(x))
    for graph in graphs(recorder):
        assert not graph.fallbacks
        assert [e for e in graph.externs if "convolution" in e]  # grouped, and depthwise of symbolic size


@pytest.mark.parametrize("size,kernel,stride,layout,generated", [
    ((2, 64, 130, 130), 3, 2, "channels_last", True),    # a 3x3 window of stride 2, 540800 outputs
    ((1, 8, 20, 20), 5, 1, "channels_last", True),       # a small output
    ((2, 16, 130, 130), 3, 1, "channels_last", False),   # 540800 output elements, stride 1
    ((1, 32, 300, 300), 5, 2, "channels_last", False),   # 5x5 of stride 2 lost to cuDNN
    ((1, 8, 20, 20), 5, 1, "as_traced", False),          # not the layout the rule was measured in
])
def test_auto_generates_the_shapes_measured_faster(size, kernel, stride, layout, generated):
    """depthwise_conv="auto" (the default) follows lower/depthwise.measured_faster, in
    channels-last graphs only; the values are eager's either way."""
    torch.manual_seed(0)
    channels = size[1]
    model = nn.Sequential(nn.Conv2d(channels, channels, kernel, stride, kernel // 2, groups=channels),
                          nn.SiLU()).eval().to(DEVICE)
    x = torch.randn(*size, device=DEVICE).to(memory_format=torch.channels_last)
    recorder = []
    compiled = torch.compile(model, backend=make_backend(make_options(conv_layout=layout), recorder=recorder))
    with torch.no_grad():
        assert_same(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    (graph,) = graphs(recorder)
    assert bool([e for e in graph.externs if "convolution" in e]) is not generated


@pytest.mark.parametrize("kernel,stride,dilation,outputs,faster", [
    ((3, 3), [2, 2], [1, 1], 10**6, True), ((3, 3), 2, 1, 10**6, True), ((3, 3), [2, 2], [2, 2], 10**6, False),
    ((3, 3), [2, 1], [1, 1], 10**6, False), ((5, 5), [2, 2], [1, 1], 10**6, False), ((3, 3), [1, 1], [1, 1], 10**6, False),
    ((7, 7), [1, 1], [1, 1], 2**19, True), ((7, 7), [1, 1], [1, 1], 2**19 + 1, False),
])
def test_the_rule_is_the_sweep_s(kernel, stride, dilation, outputs, faster):
    assert measured_faster(kernel, stride, dilation, outputs) is faster


def test_the_option_is_checked():
    with pytest.raises(ValueError, match="depthwise_conv"):
        make_options(depthwise_conv="triton")
