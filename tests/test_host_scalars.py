"""0-d CPU tensor inputs ("host scalars"): a number the kernels take as an argument.

Dynamo passes a Python float attribute (an RMSNorm's eps, a rotary scaling) as a 0-d float64 CPU
tensor once sizes are dynamic; users mix 0-d CPU tensors into GPU ops too. Eager allows both, so
the graph is generated: the wrapper reads the value once a call (`.item()`) and each kernel takes
it as a number, on the CPU as on the GPU (where a CPU pointer could not be read).
"""
from __future__ import annotations

import warnings

import pytest
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
    # a float attribute is read once with .item(), which checks it holds one number: no size assert
    scalars = [line.split(" = ")[1].split(".")[0] for line in wrapper.splitlines() if line.endswith(".item()")]
    assert scalars and not [s for s in scalars if f"assert_size_stride({s}," in wrapper]


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


# ----------------------------------------------------------------------------- numbers from sizes

def attention_scale(x, mask):
    return torch.softmax(x * x.shape[-1] ** -0.5 + mask, dim=-1)


def root_of_rows(x):
    return x.sum(0) / x.shape[0] ** 0.5 - x.shape[1] ** 0.5


@pytest.mark.parametrize("fn", [attention_scale, root_of_rows], ids=lambda f: f.__name__)
def test_numbers_computed_from_sizes_alone_are_computed_by_the_wrapper(fn):
    """`x.shape[-1] ** -0.5` is a float64 pow of a size in the traced graph: the wrapper computes
    it once a call and the kernel takes the number (lower/host_values.py), instead of every
    thread computing it; values match eager at every size."""
    compiled, recorder = compile_recording(fn, dynamic=True)
    for rows, cols in ((4, 6), (7, 16), (3, 9)):
        args = [torch.randn(rows, cols, device=DEVICE)]
        if fn is attention_scale:
            args.append(torch.randn(rows, cols, device=DEVICE))
        saved = [a.clone() for a in args]
        assert_same(compiled(*args), fn(*args))
        assert all(torch.equal(a, s) for a, s in zip(args, saved))
    assert recorder.count("graph") == 1
    artifacts = next(r for r in recorder if r != "graph")
    assert "hv0_item = host_math." in artifacts.wrapper and not artifacts.fallbacks
    assert all("pow" not in line for kernel in artifacts.kernels for line in kernel.source.splitlines()
               if "tmp" in line), "the power is computed by the wrapper, not in the kernel"


def test_host_math_gives_the_ieee_results_python_raises_on():
    from tritonize.runtime import host_math

    inf = float("inf")
    assert host_math.pow_(0.0, -0.5) == inf and host_math.pow_(-0.0, -1.0) == -inf
    assert host_math.pow_(-8.0, 0.5) != host_math.pow_(-8.0, 0.5)  # nan
    assert host_math.pow_(10.0, 400.0) == inf and host_math.pow_(4.0, 0.5) == 2.0
    assert host_math.div(1.0, 0.0) == inf and host_math.div(-1.0, 0.0) == -inf
    assert host_math.div(1.0, -0.0) == -inf and host_math.div(0.0, 0.0) != host_math.div(0.0, 0.0)
    assert host_math.log(0.0) == -inf and host_math.sqrt(-1.0) != host_math.sqrt(-1.0)
    assert host_math.exp(1000.0) == inf and host_math.rsqrt(0.0) == inf
    assert host_math.to_float32(1e40) == inf and host_math.to_float32(0.1) == float(torch.tensor(0.1).item())
