"""User kernels inside compiled graphs: mixed with generated kernels, matching eager, and with no
copy left for the `out = empty(); kernel(x, out)` and in-place patterns.

Calls come in two ways: `tritonize.wrap_triton(kernel)[grid](...)` (our operator), and a plain
`kernel[grid](...)`, which Dynamo captures as torch's triton_kernel_wrapper operator when it
believes Triton can run (on the GPU; on the CPU the `dynamo_sees_triton` and `capture` fixtures of
conftest.py make it so).
"""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from user_kernel_corpus import (
    add_kernel,
    add_one_inplace_kernel,
    autotuned_add_kernel,
    autotuned_heuristic_kernel,
    inline_asm_kernel,
    row_sum_kernel,
    scatter_kernel,
    tma_copy_kernel,
)

import tritonize

from conftest import DEVICE

on_gpu_only = pytest.mark.skipif(DEVICE != "cuda", reason="inline PTX and TMA need an NVIDIA GPU")


def randn(*shape):
    return torch.randn(*shape, device=DEVICE)


def cdiv(a, b):
    return (a + b - 1) // b


def run_both(fn, *args):
    """(eager result, compiled result, report); inputs are cloned for each run."""
    eager_args = [a.clone() for a in args]
    expected = fn(*eager_args)
    report = tritonize.explain(fn, *[a.clone() for a in args])
    torch._dynamo.reset()
    compiled_args = [a.clone() for a in args]
    actual = torch.compile(fn, backend="tritonize")(*compiled_args)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    for a, b in zip(compiled_args, eager_args):  # inputs the kernels wrote, written the same way
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    return report


def mixed(x, y, z):
    a = x.sin()                       # generated kernel
    out = torch.empty_like(a)
    n = a.numel()
    tritonize.wrap_triton(add_kernel)[lambda meta: (cdiv(n, meta["BLOCK"]),)](a, y, out, n, BLOCK=32)
    tritonize.wrap_triton(add_one_inplace_kernel)[(cdiv(n, 32),)](out, n, BLOCK=32)
    return out.cos() + z              # generated kernel reading the user kernels' result


def test_mixed_with_generated_kernels_and_no_copies(capture):
    report = run_both(mixed, randn(100), randn(100), randn(100))
    assert [k.name for k in report.user_kernels] == ["add_kernel", "add_one_inplace_kernel"]
    assert all(k.kind == "user" for k in report.user_kernels)
    assert len([k for k in report.kernels if k.kind == "pointwise"]) == 2
    assert report.clones == []
    assert "[user]" in str(report)
    assert "copy_(" not in report.wrapper


def test_in_place_kernel_on_a_graph_input(capture):
    def fn(x, y):
        tritonize.wrap_triton(add_one_inplace_kernel)[(cdiv(x.numel(), 32),)](x, x.numel(), BLOCK=32)
        return x * y

    report = run_both(fn, randn(100), randn(100))
    assert report.clones == []
    assert "copy_(" not in report.wrapper


def test_old_value_read_later_keeps_a_copy(capture):
    def fn(x, w):
        y = x @ w                     # a buffer (library call), not a value recomputed from x
        before = y * 3                # computed after the kernel wrote y: y must be copied
        tritonize.wrap_triton(add_one_inplace_kernel)[(cdiv(y.numel(), 32),)](y, y.numel(), BLOCK=32)
        return y + before

    report = run_both(fn, randn(10, 10), randn(10, 10))
    assert report.graphs == 1
    [(kernel, argument, reason)] = report.clones
    assert (kernel, argument) == ("add_one_inplace_kernel", "x_ptr")
    assert "read after the kernel" in reason
    assert "clone of add_one_inplace_kernel(x_ptr)" in str(report)


def test_graph_input_read_later_keeps_a_copy(capture):
    def fn(x):
        tritonize.wrap_triton(add_one_inplace_kernel)[(cdiv(x.numel(), 32),)](x, x.numel(), BLOCK=32)
        return x

    def fn_reads_old(x):
        old = x * 1
        tritonize.wrap_triton(add_one_inplace_kernel)[(cdiv(x.numel(), 32),)](x, x.numel(), BLOCK=32)
        return x + old

    assert run_both(fn, randn(64)).clones == []
    report = run_both(fn_reads_old, randn(64))
    assert report.graphs == 1  # the kernel is inside the graph, not run eagerly between two
    assert len(report.clones) == 1


def test_user_kernel_chain_reductions_and_scatter():
    def fn(x, idx):
        rows = torch.empty(x.shape[0], device=x.device)
        tritonize.wrap_triton(row_sum_kernel)[(x.shape[0],)](x.relu(), rows, x.shape[1], BLOCK=32)
        scattered = torch.empty_like(rows)
        tritonize.wrap_triton(scatter_kernel)[(1,)](rows * 2, idx, scattered, rows.numel(), BLOCK=8)
        return scattered + 1

    report = run_both(fn, randn(8, 30), torch.randperm(8, device=DEVICE))
    assert report.clones == []


def test_autotuned_and_heuristic_kernels_compile():
    def fn(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        grid = lambda meta: (cdiv(n, meta["BLOCK"]),)  # noqa: E731
        tritonize.wrap_triton(autotuned_add_kernel)[grid](x, y, out, n)
        res = torch.empty_like(x)
        tritonize.wrap_triton(autotuned_heuristic_kernel)[grid](out, res, n)
        return res.exp()

    report = run_both(fn, randn(128), randn(128))
    assert report.clones == []


def test_plain_kernel_calls_captured_by_dynamo(dynamo_sees_triton):
    def fn(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(cdiv(n, 32),)](x.sin(), y, out, n, BLOCK=32)
        add_one_inplace_kernel[lambda meta: (cdiv(n, meta["BLOCK"]),)](out, n, BLOCK=16)
        autotuned_add_kernel[lambda meta: (cdiv(n, meta["BLOCK"]),)](out, y, y, n)
        return out * 2, y

    x, y = randn(100), randn(100)
    expected_y = x.sin() + y + 1 + y
    report = tritonize.explain(fn, x, y.clone())
    assert [k.name for k in report.user_kernels] == ["add_kernel", "add_one_inplace_kernel", "autotuned_add_kernel"]
    torch._dynamo.reset()
    y_compiled = y.clone()
    out, y_out = torch.compile(fn, backend="tritonize")(x, y_compiled)
    torch.testing.assert_close(out, (x.sin() + y + 1) * 2)
    torch.testing.assert_close(y_out, expected_y)
    torch.testing.assert_close(y_compiled, expected_y)


def test_wrapped_kernel_called_inside_compiled_code_runs_eagerly_too():
    kernel = tritonize.wrap_triton(add_kernel)

    def fn(x, y):
        out = torch.empty_like(x)
        kernel[(cdiv(x.numel(), 32),)](x, y, out, x.numel(), BLOCK=32)
        return out

    x, y = randn(50), randn(50)
    torch.testing.assert_close(fn(x, y), x + y)
    torch.testing.assert_close(torch.compile(fn, backend="tritonize")(x, y), x + y)


@on_gpu_only
def test_inline_asm_kernel_on_gpu():
    def fn(x):
        out = torch.empty_like(x)
        tritonize.wrap_triton(inline_asm_kernel)[(4,)](x * 2, out, x.numel(), BLOCK=32, PURE=True)
        return out + 1

    report = run_both(fn, randn(100))
    assert report.clones == []


@on_gpu_only
def test_host_tma_descriptors_on_gpu():
    from triton.tools.tensor_descriptor import TensorDescriptor

    def fn(x):
        out = torch.empty_like(x)
        tma_copy_kernel[(2, 2)](TensorDescriptor.from_tensor(x, [32, 32]),
                                TensorDescriptor.from_tensor(out, [32, 32]), BLOCK_R=32, BLOCK_C=32)
        return out + 1

    x = randn(64, 64)
    torch.testing.assert_close(torch.compile(fn, backend="tritonize")(x), x * 2 + 1)
    wrapped = tritonize.wrap_triton(tma_copy_kernel)
    out = torch.empty_like(x)
    wrapped[(2, 2)](TensorDescriptor.from_tensor(x, [32, 32]), TensorDescriptor.from_tensor(out, [32, 32]),
                    BLOCK_R=32, BLOCK_C=32)
    torch.testing.assert_close(out, x * 2)


def test_num_warps_in_graph_and_mutation_report_kind():
    @triton.jit
    def double(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    def fn(x):
        y = x + 1
        tritonize.wrap_triton(double)[(cdiv(y.numel(), 64),)](y, y.numel(), BLOCK=64, num_warps=1)
        return y

    report = run_both(fn, randn(200))
    assert report.clones == [] and [k.kind for k in report.user_kernels] == ["user"]


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * SCALE, mask=mask)


class TripleWithKernels(torch.autograd.Function):
    """Gradients for user kernels come from an autograd.Function, as in eager PyTorch."""

    @staticmethod
    def forward(ctx, x):
        out = torch.empty_like(x)
        tritonize.wrap_triton(scale_kernel)[(cdiv(x.numel(), 32),)](x, out, x.numel(), SCALE=3, BLOCK=32)
        return out

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        grad_in = torch.empty_like(grad)
        tritonize.wrap_triton(scale_kernel)[(cdiv(grad.numel(), 32),)](grad, grad_in, grad.numel(), SCALE=3, BLOCK=32)
        return grad_in


def test_training_through_an_autograd_function():
    def fn(x):
        return TripleWithKernels.apply(x.sin()).square().sum()

    x = randn(100).requires_grad_()
    fn(x).backward()
    expected = x.grad.clone()
    x.grad = None
    loss = torch.compile(fn, backend="tritonize")(x)
    loss.backward()
    torch.testing.assert_close(loss, fn(x.detach()))
    torch.testing.assert_close(x.grad, expected)
