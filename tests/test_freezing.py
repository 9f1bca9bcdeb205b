"""Frozen inference (options freeze=True, lower/freezing.py): weights as constants, batch norms
folded into convolutions, and the contract (a frozen weight that changes raises) kept."""
from __future__ import annotations

import pytest
import torch
from helpers import assert_same

from conftest import DEVICE
from tritonize.backend import make_backend
from tritonize.config import make_options
from tritonize import FrozenInputChanged

nn = torch.nn


def conv_net(dtype=torch.float32) -> nn.Module:
    """conv, batch norm, ReLU; conv with bias, batch norm; a linear head. Batch norms with
    statistics and affine parameters away from their defaults, so that folding them shows."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(64, 5))
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-1, 1)
                module.running_var.uniform_(0.5, 2)
                module.weight.uniform_(0.5, 2)
                module.bias.uniform_(-1, 1)
    return model.eval().to(device=DEVICE, dtype=dtype)


def compile_frozen(model, freeze=True, options=None, **kwargs):
    recorder = []
    backend = make_backend(make_options(freeze=freeze, **(options or {})), recorder=recorder)
    return torch.compile(model, backend=backend, **kwargs), recorder


def graphs(recorder) -> list:
    return [r for r in recorder if r != "graph"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norms_fold_into_their_convolutions_and_match_eager(dtype):
    model = conv_net(dtype)
    x = torch.randn(2, 3, 8, 8, device=DEVICE, dtype=dtype)
    saved = x.clone()
    as_traced = {"conv_layout": "as_traced"}  # (channels-last on CUDA would add the edges' layout copies)
    frozen, recorder = compile_frozen(model, options=as_traced)
    plain, plain_recorder = compile_frozen(model, freeze=False, options=as_traced)
    with torch.no_grad():
        expected = model(x)
        assert_same(frozen(x), expected)
        assert_same(plain(x), expected)
    assert_same(x, saved)
    (graph,) = graphs(recorder)
    assert "freeze: 13 parameter and buffer inputs frozen" in " ".join(graph.notes)
    assert "8 folded into convolutions" in " ".join(graph.notes)  # 4 steps of each batch norm
    # the batch norm after the second convolution left no kernel at all; the first one's shift is
    # the convolution's bias, added in the ReLU's kernel
    (plain_graph,) = graphs(plain_recorder)
    assert (len(graph.kernels), len(plain_graph.kernels)) == (1, 2)


def test_channels_last_convolutions_get_their_weights_converted_once():
    model = conv_net()
    x = torch.randn(2, 3, 8, 8, device=DEVICE)
    frozen, recorder = compile_frozen(model, options={"conv_layout": "channels_last"})
    with torch.no_grad():
        assert_same(frozen(x), model(x))
    (graph,) = graphs(recorder)
    assert "2 convolution weights stored channels-last" in " ".join(graph.notes)


class MobileBlock(nn.Module):
    """Depthwise 3x3 conv, batch norm, SiLU, squeeze-and-excitation, pointwise conv, batch norm,
    residual: grouped convolutions fold per output channel too."""

    def __init__(self, channels=8):
        super().__init__()
        self.depthwise = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)
        self.norm1, self.norm2 = nn.BatchNorm2d(channels), nn.BatchNorm2d(channels)
        self.squeeze, self.excite = nn.Conv2d(channels, 4, 1), nn.Conv2d(4, channels, 1)
        self.pointwise = nn.Conv2d(channels, channels, 1, bias=False)

    def forward(self, x):
        h = nn.functional.silu(self.norm1(self.depthwise(x)))
        scale = self.excite(self.squeeze(h.mean((2, 3), keepdim=True)).relu()).sigmoid()
        return x + self.norm2(self.pointwise(h * scale))


def test_depthwise_and_squeeze_excitation_blocks_fold_and_match_eager():
    torch.manual_seed(1)
    model = nn.Sequential(MobileBlock(), MobileBlock()).eval().to(DEVICE)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-1, 1)
                module.running_var.uniform_(0.5, 2)
    x = torch.randn(3, 8, 7, 7, device=DEVICE)
    frozen, recorder = compile_frozen(model)
    with torch.no_grad():
        assert_same(frozen(x), model(x))
    notes = " ".join(graphs(recorder)[0].notes)
    assert "16 folded into convolutions" in notes  # the four batch norms, four steps each


def write_in_place(model):
    model[3].weight.mul_(2)


def swap_data(model):
    model[6].weight.data = torch.zeros_like(model[6].weight)  # same Parameter, its version unchanged


@pytest.mark.parametrize("change,named", [
    (write_in_place, r"_modules\['3'\]._parameters\['weight'\].*freeze=True"),
    (swap_data, r"_modules\['6'\]._parameters\['weight'\]"),
])
def test_a_weight_changed_after_freezing_raises_naming_it(change, named):
    model = conv_net()
    x = torch.randn(2, 3, 8, 8, device=DEVICE)
    frozen, _ = compile_frozen(model)
    with torch.no_grad():
        frozen(x)
        change(model)
        with pytest.raises(FrozenInputChanged, match=named):
            frozen(x)


def test_a_replaced_buffer_or_another_instance_compiles_again():
    """Dynamo guards each frozen tensor's identity: a new tensor (a replaced buffer, the
    parameters of another instance of the class) is a new compile, frozen with its own values."""
    model, other = conv_net(), conv_net()
    with torch.no_grad():
        other[3].weight.mul_(-1)
    x = torch.randn(2, 3, 8, 8, device=DEVICE)
    recorder = []
    backend = make_backend(make_options(freeze=True), recorder=recorder)
    compiled, compiled_other = torch.compile(model, backend=backend), torch.compile(other, backend=backend)
    with torch.no_grad():
        assert_same(compiled(x), model(x))
        assert_same(compiled_other(x), other(x))
        model[1].running_var = torch.full((8,), 3.0, device=DEVICE)  # a new tensor
        assert_same(compiled(x), model(x))
        assert_same(compiled_other(x), other(x))
    assert len(graphs(recorder)) == 3


class Counting(nn.Module):
    """A buffer the forward writes (not frozen) beside a weight it only reads (frozen)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 6)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        return self.linear(x).relu() * self.calls


def test_a_buffer_the_graph_writes_stays_an_input():
    model = Counting().to(DEVICE)
    reference = Counting().to(DEVICE)
    reference.load_state_dict(model.state_dict())
    frozen, recorder = compile_frozen(model)
    x = torch.randn(3, 6, device=DEVICE)
    with torch.no_grad():
        for _ in range(3):
            assert_same(frozen(x), reference(x))
    assert model.calls.item() == reference.calls.item() == 3
    notes = " ".join(graphs(recorder)[0].notes)
    assert "freeze: 2 parameter and buffer inputs frozen" in notes  # the weight and bias, not `calls`


def test_training_graphs_are_not_frozen_and_train_as_eager():
    model, reference = conv_net().train(), conv_net().train()
    frozen, recorder = compile_frozen(model)
    x = torch.randn(2, 3, 8, 8, device=DEVICE)
    frozen(x).sum().backward()
    reference(x).sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert_same(p.grad, q.grad, atol=1e-4, rtol=1e-4)
    assert any("a training graph is not frozen" in n for g in graphs(recorder) for n in g.notes)


def test_a_frozen_graph_serves_other_batch_sizes():
    model = conv_net()
    frozen, recorder = compile_frozen(model, dynamic=True)
    with torch.no_grad():
        for batch in (2, 5, 3):
            x = torch.randn(batch, 3, 8, 8, device=DEVICE)
            assert_same(frozen(x), model(x))
    assert len(graphs(recorder)) == 1


def test_freeze_is_part_of_the_code_options():
    from tritonize.config import code_options

    assert code_options(make_options(freeze=True)) != code_options(make_options())


def test_folded_weights_are_static_constants_a_generated_depthwise_convolution_takes():
    """The folded weight's fake value has static sizes (not new symbols of the ShapeEnv), so the
    depthwise convolution after folding is still generated (lower/depthwise.py)."""
    torch.manual_seed(1)
    model = MobileBlock().eval().to(DEVICE)
    x = torch.randn(2, 8, 7, 7, device=DEVICE)
    frozen, recorder = compile_frozen(model, options={"depthwise_conv": "generated"})
    with torch.no_grad():
        assert_same(frozen(x), model(x))
    (graph,) = graphs(recorder)
    assert len([e for e in graph.externs if "convolution" in e]) == 3  # the three 1x1 convolutions
    # the depthwise filter is reordered tap-major at compile time: no kernel over its 9 x 8 taps
    assert not [k for k in graph.kernels if "numel = 72\n" in k.source or "ynumel = 9\n" in k.source]


class ReturnsWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(x), self.linear.weight * 2, self.linear.weight.t()


def test_an_output_computed_from_weights_alone_is_a_new_tensor_at_every_call():
    model = ReturnsWeights().to(DEVICE)
    frozen, _ = compile_frozen(model)
    x = torch.randn(3, 4, device=DEVICE)
    with torch.no_grad():
        _, doubled, _ = frozen(x)
        doubled.add_(100)  # the caller writes into its output
        assert_same(frozen(x), model(x))
        transposed = frozen(x)[2]
        assert transposed._base is not None or transposed.data_ptr() == model.linear.weight.data_ptr()


def test_frozen_inputs_need_no_size_assert_each_call():
    model = conv_net()
    frozen, recorder = compile_frozen(model, options={"conv_layout": "as_traced"})
    with torch.no_grad():
        frozen(torch.randn(2, 3, 8, 8, device=DEVICE))
    (graph,) = graphs(recorder)
    call = graph.wrapper[graph.wrapper.index("def call("):]
    assert call.count("assert_size_stride(") == 1  # the image; the 13 frozen weights are constants now


class ChannelBroadcast(nn.Module):
    """A one-channel convolution times a (1, 3, 1, 1) parameter: the product has more channels
    than the convolution, so it is not a per-channel fold."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 1, 1)
        self.scale = nn.Parameter(torch.randn(1, 3, 1, 1))

    def forward(self, x):
        return self.conv(x) * self.scale


def test_a_constant_that_broadcasts_the_channels_up_is_left_as_a_product():
    model = ChannelBroadcast().eval().to(DEVICE)
    frozen, recorder = compile_frozen(model)
    x = torch.randn(2, 2, 4, 4, device=DEVICE)
    with torch.no_grad():
        assert_same(frozen(x), model(x))
    assert "0 folded into convolutions" in " ".join(graphs(recorder)[0].notes)


def test_a_model_made_under_inference_mode_freezes():
    with torch.inference_mode():
        model = conv_net()
    frozen, recorder = compile_frozen(model)
    x = torch.randn(2, 3, 8, 8, device=DEVICE)
    with torch.no_grad():
        assert_same(frozen(x), model(x))
    assert "inference-mode tensors" in " ".join(graphs(recorder)[0].notes)


class ScaledConv(nn.Module):
    def __init__(self, dtype, weight: float, scale: float, shift: float):
        super().__init__()
        self.weight = nn.Parameter(torch.full((1, 1, 1, 1), weight, dtype=dtype))
        self.scale, self.shift = scale, shift

    def forward(self, x):
        return (F_conv(x, self.weight).float() * self.scale - self.shift).to(x.dtype)


def F_conv(x, weight):
    return torch.nn.functional.conv2d(x, weight)


@pytest.mark.parametrize("dtype,weight,scale,shift", [
    (torch.bfloat16, 100.0, 1.003, 0.0),  # the scale must not be rounded to bf16 (1.0) first
    (torch.float16, 1.0, 1e5, 99990.0),  # folded, W' = 1e5 overflows fp16: left unfolded
])
def test_python_number_steps_fold_exactly_or_not_at_all(dtype, weight, scale, shift):
    model = ScaledConv(dtype, weight, scale, shift).to(DEVICE)
    frozen, _ = compile_frozen(model)
    x = torch.ones(1, 1, 2, 2, device=DEVICE, dtype=dtype)
    with torch.no_grad():
        assert_same(frozen(x), model(x), atol=0, rtol=0)  # 100.5 both ways (100.0 with 1.003 as bf16)
