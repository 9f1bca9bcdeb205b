"""0-d CPU tensor inputs ("host scalars"): a number the kernels take as an argument.

Dynamo passes a Python float attribute (an RMSNorm's eps, a rotary scaling) as a 0-d float64 CPU
tensor once sizes are dynamic; users mix 0-d CPU tensors into GPU ops too. Eager allows both, so
the graph is generated: the wrapper reads the value once a call (`.item()`) and each kernel takes
it as a number, on the CPU as on the GPU (where a CPU pointer could not be read).
"""
from __future__ import annotations

import warnings

import torch
from helpers import assert_same

from tritonize.backend import make_backend
from tritonize.pipeline import graph_device

from conftest import DEVICE


class ScaledNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.eps = 1e-5
        self.scale = 0.5

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * self.scale


def compile_recording(fn, **kwargs):
    recorder = []
    return torch.compile(fn, backend=make_backend(recorder=recorder), **kwargs), recorder


def test_float_attributes_of_a_dynamic_graph_are_kernel_arguments():
    model = ScaledNorm()
    compiled, recorder = compile_recording(model, dynamic=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rows, scale in ((5, 0.5), (9, 0.5), (9, 0.25)):
            model.scale = scale  # a new value reaches the same graph, read at the call
            x = torch.randn(rows, 24, device=DEVICE)
            saved = x.clone()
            assert_same(compiled(x), model(x))
            assert_same(x, saved)
    assert recorder.count("graph") == 1
    assert not [w for w in caught if "runs through aten" in str(w.message)]
    wrapper = next(r for r in recorder if r != "graph").wrapper
    assert ".item()" in wrapper and "in_scalar" in wrapper


def test_user_passed_zero_dim_cpu_tensors_mix_with_device_tensors():
    def fn(x, scale, offset):
        return x * scale + offset, (x - offset).relu()

    compiled, recorder = compile_recording(fn)
    x = torch.randn(6, 7, device=DEVICE)
    for scale, offset in ((2.5, 3), (-1.25, -7)):
        scale_t = torch.tensor(scale, dtype=torch.float64)
        offset_t = torch.tensor(offset, dtype=torch.int64)
        assert_same(compiled(x, scale_t, offset_t), fn(x, scale_t, offset_t))
        assert scale_t.item() == scale and offset_t.item() == offset
    artifacts = [r for r in recorder if r != "graph"]
    assert artifacts and all("in_scalar" in a.wrapper and a.eager_reason is None for a in artifacts)


def test_zero_dim_cpu_inputs_do_not_decide_the_graph_device():
    on_device = torch.empty(3, device="meta")
    assert graph_device([on_device, torch.tensor(1.0)]) == "cuda"
    assert graph_device([torch.ones(3), torch.tensor(1.0)]) == "cpu"
