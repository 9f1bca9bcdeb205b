"""Kernel source decisions that do not need a run: masks, index width, tiling, dedup."""
import re

import pytest
import sympy
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


def test_a_load_is_masked_only_along_the_dims_it_reads(device):
    """A transposing 2-D tile over 70 x 100 (masked along both dims) reads a per-row weight: that
    load takes only the rows' mask, so it is [YBLOCK, 1] (a batch-norm epilogue's parameters
    were loaded and computed on for the whole tile); values as eager's."""
    def fn(x, w):
        return (x.t() * w[:, None] + 1).contiguous()

    x, w = torch.randn(100, 70, device=device), torch.randn(70, device=device)
    report = tritonize.explain(fn, x, w)
    source = report.kernels[0].source
    assert "YBLOCK" in source, source
    loads = re.findall(r"tl\.load\(([^)]*)\)", source)
    per_row = [args for args in loads if "x" not in args.split(",")[0].replace("xmask", "").replace("in_ptr", "")]
    assert per_row and all("mask" not in a or "ymask" in a and "xmask" not in a for a in per_row), source
    torch._dynamo.reset()
    torch.testing.assert_close(tritonize.compile(fn)(x, w), fn(x, w))


def test_identical_kernels_are_defined_once(device):
    def fn(a, w):
        x = (a.sin() * 2) @ w  # the same pointwise kernel before and after the extern
        return x.sin() * 2

    report = tritonize.explain(fn, torch.randn(8, 8, device=device), torch.randn(8, 8, device=device))
    assert len(report.kernels) == 1
    name = report.kernels[0].name
    launches = re.findall(rf"^    {name}(?:\.launch)?\(", report.wrapper, flags=re.M)  # .launch on the GPU
    assert len(launches) == 2, report.wrapper


@pytest.mark.parametrize("dynamic", [False, True])
def test_products_are_not_checked_for_a_layout_they_always_have(device, dynamic):
    """mm, addmm and bmm return new contiguous tensors: the wrapper does not check their layout
    a call (an ensure_layout a product); the values and strides are eager's."""
    def fn(a, w, bias, b3, c3):
        x = torch.addmm(bias, a.sin(), w) @ w.t()
        return x.relu(), torch.bmm(b3.cos(), c3).sin()

    args = [torch.randn(*shape, device=device) for shape in ((6, 8), (8, 8), (8,), (2, 6, 8), (2, 8, 4))]
    saved = [a.clone() for a in args]
    _, report = tritonize.run_and_explain(fn, *args, dynamic=dynamic)
    products = [line for line in report.wrapper.splitlines() if re.search(r"aten\.(mm|addmm|bmm)\.default", line)]
    assert len(products) == 3, report.wrapper
    assert "ensure_layout(" not in report.wrapper, report.wrapper
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tritonize", dynamic=dynamic)
    for actual, expected in zip(compiled(*args), fn(*saved)):
        torch.testing.assert_close(actual, expected)
        assert actual.stride() == expected.stride()
    assert all(torch.equal(a, b) for a, b in zip(args, saved))


def test_cuda_wrappers_allocate_on_the_graphs_device_without_parsing_a_device_argument():
    """On one CUDA device, buffers come from empty_strided_cuda (after call() makes that device
    current) and kernels launch through `.launch`; several devices keep the explicit form."""
    from types import SimpleNamespace

    from tritonize.codegen.wrapper import WrapperWriter

    def layout(device):
        return Layout((4, 2), (2, 1), 0, torch.float16, torch.device(device))

    def writer(*devices):
        buffers = {f"buf{i}": SimpleNamespace(layout=layout(d)) for i, d in enumerate(devices)}
        return WrapperWriter(SimpleNamespace(constants={}, buffers=buffers), "cuda")

    one = writer("cuda:1", "cuda:1", "cpu")
    assert one.cuda_index == 1
    assert one.allocation(layout("cuda:1")) == "empty_strided_cuda((4, 2), (2, 1), torch.float16)"
    assert one.allocation(layout("cpu")) == "empty_strided((4, 2), (2, 1), dtype=torch.float16, device='cpu')"
    assert one.kernel_call("triton_poi_0") == "triton_poi_0.launch"
    several = writer("cuda:0", "cuda:1")
    assert several.cuda_index is None
    assert several.allocation(layout("cuda:1")).endswith("device='cuda:1')")
    assert WrapperWriter(SimpleNamespace(constants={}, buffers={}), "cpu").kernel_call("k") == "k"


def _comparison_group(lhs, rhs):
    """out[x] = x < 5 as float: a comparison of two index expressions over (8,)."""
    cpu = torch.device("cpu")
    body = ex.to_dtype(ex.op("lt", ex.index_expr(lhs, torch.int64), ex.index_expr(rhs, torch.int64),
                             dtype=torch.bool), torch.float32)
    out = ComputedBuffer("buf0", Layout((8,), (1,), 0, torch.float32, cpu), body, ["lt"])
    return KernelGroup([out]), {"buf0": out}


def test_index_comparisons_run_in_the_index_type():
    """x < 5 over int32 indices compares them as they are (no int64 casts); a comparison of two
    constants stays a tensor the cast after it can take."""
    from tritonize.runtime.launcher import load_kernel

    x = dim_vars(1)[0]
    for lhs, expected in ((x, [1.0] * 5 + [0.0] * 3), (sympy.Integer(3), [1.0] * 8)):
        group, buffers = _comparison_group(lhs, sympy.Integer(5))
        kernel = render_kernel(group, buffers, "k")
        assert ".to(tl.int64)" not in kernel.source, kernel.source
        assert "(3) < (5)" not in kernel.source  # two literals would compare in Python on the GPU
        out = torch.empty(8)
        load_kernel(kernel.source, "k", xnumel=8, device="cpu")(out)
        assert out.tolist() == expected, kernel.source
