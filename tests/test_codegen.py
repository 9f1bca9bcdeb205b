"""Kernel source decisions that do not need a run: masks, index width, tiling, dedup."""
import torch

import tritonize
from tritonize.codegen.kernel import render_kernel
from tritonize.ir import expr as ex
from tritonize.ir.nodes import ComputedBuffer, InputBuffer, Layout, contiguous_strides
from tritonize.ir.symbols import dim_vars
from tritonize.schedule.fusion import KernelGroup


def _group(size, input_layout=None):
    cpu = torch.device("cpu")
    layout_in = input_layout or Layout(size, contiguous_strides(size), 0, torch.float32, cpu)
    source = InputBuffer("arg0_1", layout_in, 0)
    dims = dim_vars(len(size))
    body = ex.op("add", ex.load("arg0_1", layout_in.index(dims), torch.float32),
                 ex.constant(1.0, torch.float32), dtype=torch.float32)
    out = ComputedBuffer("buf0", Layout(size, contiguous_strides(size), 0, torch.float32, cpu), body, ["add"])
    return KernelGroup([out]), {"arg0_1": source, "buf0": out}


def test_masks_only_when_size_is_not_a_block_multiple():
    group, buffers = _group((64, 1024))
    assert "xmask" not in render_kernel(group, buffers, "k").source
    group, buffers = _group((63, 1000))
    assert "xmask = xindex < xnumel" in render_kernel(group, buffers, "k").source


def test_int64_indices_only_past_int32():
    group, buffers = _group((1024, 1024))
    assert "tl.int64" not in render_kernel(group, buffers, "k").source
    group, buffers = _group((65536, 65536))
    assert "tl.program_id(0).to(tl.int64)" in render_kernel(group, buffers, "k").source


def test_transposed_input_gets_2d_tile():
    strided = Layout((256, 512), (1, 256), 0, torch.float32, torch.device("cpu"))
    group, buffers = _group((256, 512), strided)
    source = render_kernel(group, buffers, "k").source
    assert "YBLOCK" in source and "yindex" in source


def test_identical_kernels_are_defined_once(device):
    def fn(a, w):
        x = (a.sin() * 2) @ w  # the same pointwise kernel before and after the extern
        return x.sin() * 2

    report = tritonize.explain(fn, torch.randn(8, 8, device=device), torch.randn(8, 8, device=device))
    assert len(report.kernels) == 1
    assert report.wrapper.count(report.kernels[0].name + "(") == 2 + 1  # two launches + the def
