"""tritonize.wrap_triton: user kernels launched in eager code (interpreted on the CPU, compiled on
the GPU), traced by make_fx and torch.export, with grids, autotuning and heuristics."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from torch.fx.experimental.proxy_tensor import make_fx
from user_kernel_corpus import (
    add_kernel,
    add_one_inplace_kernel,
    atomic_sum_kernel,
    autotuned_add_kernel,
    autotuned_heuristic_kernel,
    cumsum_kernel,
    custom_reduce_kernel,
    custom_scan_kernel,
    heuristic_kernel,
    helper_twice_kernel,
    matmul_kernel,
    nested_helper_kernel,
    pointer_helper_kernel,
    pointer_loop_kernel,
    row_sum_kernel,
    scatter_kernel,
    transpose_kernel,
    while_pointer_kernel,
)

import tritonize
from tritonize.user_kernels import UserKernelError

from conftest import DEVICE


def randn(*shape):
    return torch.randn(*shape, device=DEVICE)


def cdiv(a, b):
    return (a + b - 1) // b


# (kernel, grid, make arguments, expected values of the written arguments after the launch)
EAGER_CASES = {
    "add": (add_kernel, (4,), lambda: [randn(100), randn(100), randn(100), 100], {"BLOCK": 32},
            lambda a: {2: a[0] + a[1]}),
    "inplace": (add_one_inplace_kernel, (4,), lambda: [randn(100), 100], {"BLOCK": 32}, lambda a: {0: a[0] + 1}),
    "atomic_sum": (atomic_sum_kernel, (4,), lambda: [randn(100), torch.zeros(1, device=DEVICE), 100], {"BLOCK": 32},
                   lambda a: {1: a[0].sum().reshape(1)}),
    "pointer_loop": (pointer_loop_kernel, (4,), lambda: [randn(4, 40), randn(4, 40), 40], {"BLOCK": 16},
                     lambda a: {1: a[0] * 2}),
    "while_loop": (while_pointer_kernel, (1,),
                   lambda: [randn(10), torch.tensor([7], dtype=torch.int32, device=DEVICE), torch.zeros(10, device=DEVICE)],
                   {}, lambda a: {2: torch.cat([a[0][:7] * 3, torch.zeros(3, device=DEVICE)])}),
    "nested_helpers": (nested_helper_kernel, (4,), lambda: [randn(100), randn(100), 100], {"BLOCK": 32},
                       lambda a: {1: a[0] * 2}),
    "pointer_helper": (pointer_helper_kernel, (4,), lambda: [randn(100), randn(100), 100], {"BLOCK": 32},
                       lambda a: {1: a[0] + 5}),
    "helper_twice": (helper_twice_kernel, (4,), lambda: [randn(100), randn(100), randn(100), 100], {"BLOCK": 32},
                     lambda a: {1: a[0] + 1, 2: a[0] + 2}),
    "row_sum": (row_sum_kernel, (8,), lambda: [randn(8, 30), randn(8), 30], {"BLOCK": 32},
                lambda a: {1: a[0].sum(1)}),
    "custom_reduce": (custom_reduce_kernel, (1,), lambda: [randn(30), randn(1), 30], {"BLOCK": 32},
                      lambda a: {1: a[0].max().reshape(1)}),
    "cumsum": (cumsum_kernel, (1,), lambda: [randn(30), randn(30), 30], {"BLOCK": 32}, lambda a: {1: a[0].cumsum(0)}),
    "custom_scan": (custom_scan_kernel, (1,), lambda: [randn(30), randn(30), 30], {"BLOCK": 32},
                    lambda a: {1: a[0].cumsum(0)}),
    "scatter": (scatter_kernel, (2,), lambda: [randn(64), torch.randperm(64, device=DEVICE), randn(64), 64],
                {"BLOCK": 32}, lambda a: {2: torch.empty_like(a[0]).index_copy_(0, a[1], a[0])}),
    "transpose": (transpose_kernel, (2, 2), lambda: [randn(20, 30), randn(30, 20), 20, 30],
                  {"BLOCK_R": 16, "BLOCK_C": 16}, lambda a: {1: a[0].t()}),
    "dot": (matmul_kernel, (1,), lambda: [randn(16, 16), randn(16, 16), randn(16, 16)], {"M": 16, "N": 16, "K": 16},
            lambda a: {2: a[0] @ a[1]}),
    "autotuned": (autotuned_add_kernel, lambda meta: (cdiv(meta["n"], meta["BLOCK"]),),
                  lambda: [randn(100), randn(100), randn(100), 100], {}, lambda a: {2: a[0] + a[1]}),
    "heuristics": (heuristic_kernel, (4,), lambda: [randn(100), randn(100), 100], {"BLOCK": 32},
                   lambda a: {1: a[0] * 4}),
    "autotuned_heuristics": (autotuned_heuristic_kernel, lambda meta: (cdiv(meta["n"], meta["BLOCK"]),),
                             lambda: [randn(128), randn(128), 128], {}, lambda a: {1: a[0] - 3}),
}


def _tolerance(name):
    return {"atol": 1e-2, "rtol": 1e-2} if name == "dot" else {"atol": 1e-5, "rtol": 1e-5}


def _interpreter_cannot_range_over_scalars() -> bool:
    """Triton < 3.7's interpreter turns a scalar argument used as a range() bound into a 1-element
    array, which numpy >= 2.4 refuses to convert to an int (fixed in Triton's interpreter since)."""
    import numpy

    def version(text):
        return tuple(int(p) for p in text.split(".")[:2])

    return DEVICE == "cpu" and version(triton.__version__) < (3, 7) and version(numpy.__version__) >= (2, 4)


@pytest.mark.parametrize("name", sorted(EAGER_CASES))
def test_eager_launch(name):
    if name == "pointer_loop" and _interpreter_cannot_range_over_scalars():
        pytest.xfail("Triton's interpreter bug with numpy >= 2.4 (range over a scalar argument)")
    kernel, grid, make_args, kwargs, expected = EAGER_CASES[name]
    args = make_args()
    want = expected([a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    tritonize.wrap_triton(kernel)[grid](*args, **kwargs)
    for index, value in want.items():
        torch.testing.assert_close(args[index], value, **_tolerance(name))


@pytest.mark.parametrize("name", ["add", "inplace", "autotuned", "scatter", "nested_helpers"])
def test_make_fx_captures_and_replays(name):
    kernel, grid, make_args, kwargs, expected = EAGER_CASES[name]
    args = make_args()
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

    def fn(*tensor_args):
        full = list(args)
        for i, t in zip(tensors, tensor_args):
            full[i] = t
        tritonize.wrap_triton(kernel)[grid](*full, **kwargs)
        return tensor_args

    inputs = [args[i].clone() for i in tensors]
    graph = make_fx(fn)(*[t.clone() for t in inputs])
    assert "tritonize_kernel_mutation" in graph.code
    outs = graph(*inputs)
    want = expected([a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    for index, value in want.items():
        torch.testing.assert_close(outs[tensors.index(index)], value, **_tolerance(name))


def test_functionalized_trace_clones_only_written_arguments():
    def fn(x, y):
        out = torch.empty_like(x)
        tritonize.wrap_triton(add_kernel)[(4,)](x, y, out, x.numel(), BLOCK=32)
        return out

    x, y = randn(100), randn(100)
    graph = make_fx(torch.func.functionalize(fn), tracing_mode="fake")(x, y)
    [node] = [n for n in graph.graph.nodes if "tritonize_kernel_functional" in str(n.target)]
    assert node.kwargs["tensors_to_clone"] == ["out_ptr"]


def test_export_captures_and_runs():
    class Model(torch.nn.Module):
        def forward(self, x, y):
            out = torch.empty_like(x)
            n = x.numel()
            tritonize.wrap_triton(add_kernel)[lambda meta: (cdiv(n, meta["BLOCK"]),)](x, y, out, n, BLOCK=32)
            tritonize.wrap_triton(add_one_inplace_kernel)[(cdiv(n, 32),)](out, n, BLOCK=32)
            return out * 2

    x, y = randn(100), randn(100)
    program = torch.export.export(Model(), (x, y), strict=False)
    torch.testing.assert_close(program.module()(x, y), (x + y + 1) * 2)
    decomposed = program.run_decompositions()
    functional = [n for n in decomposed.graph.nodes if "tritonize_kernel_functional" in str(n.target)]
    assert [n.kwargs["tensors_to_clone"] for n in functional] == [["out_ptr"], ["x_ptr"]]
    torch.testing.assert_close(decomposed.module()(x, y), (x + y + 1) * 2)


# --- autotune features -----------------------------------------------------------------------
@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})], key=["n"],
                 prune_configs_by={"early_config_prune": lambda configs, named_args, **kw: configs[1:]})
@triton.jit
def block_size_kernel(out_ptr, n, BLOCK: tl.constexpr):
    tl.store(out_ptr + tl.program_id(0), BLOCK)


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"],
                 reset_to_zero=["sum_ptr"])
@triton.jit
def reset_sum_kernel(x_ptr, sum_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(sum_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"],
                 restore_value=["x_ptr"])
@triton.jit
def restore_inplace_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2 + 1, mask=mask)


def test_autotune_prune_configs_by():
    out = torch.zeros(2, dtype=torch.int32, device=DEVICE)
    tritonize.wrap_triton(block_size_kernel)[(2,)](out, 100)
    assert out.tolist() == [64, 64]


def grid_for(n):
    return lambda meta: (cdiv(n, meta["BLOCK"]),)


@pytest.mark.parametrize("compiled", [False, True])
def test_autotune_reset_to_zero_and_restore_value(compiled):
    def fn(x, total, y):
        tritonize.wrap_triton(reset_sum_kernel)[grid_for(x.numel())](x, total, x.numel())
        tritonize.wrap_triton(restore_inplace_kernel)[grid_for(y.numel())](y, y.numel())
        return total, y

    x, y = randn(200), randn(200)
    total, y_before = torch.zeros(1, device=DEVICE), y.clone()
    run = torch.compile(fn, backend="tritonize") if compiled else fn
    got_total, got_y = run(x, total, y)
    torch.testing.assert_close(got_total, x.sum().reshape(1), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got_y, y_before * 2 + 1)
    torch.testing.assert_close(y, y_before * 2 + 1)  # the input itself was written, as in eager


@pytest.mark.parametrize("compiled", [False, True])
def test_launch_options_and_int_grid(compiled, capture):
    """wrap_triton takes grids Triton's own launch (and Dynamo's capture) refuse: an int, a list,
    a callable returning an int."""
    def fn(x, y):
        n = x.numel()
        out, twice, thrice = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
        tritonize.wrap_triton(add_kernel)[4](x, y, out, n, BLOCK=32, num_warps=2, num_stages=1)
        tritonize.wrap_triton(add_kernel)[[4]](out, y, twice, n, BLOCK=32)
        tritonize.wrap_triton(add_kernel)[lambda meta: cdiv(n, meta["BLOCK"])](twice, y, thrice, n, BLOCK=32)
        return thrice

    x, y = randn(100), randn(100)
    run = torch.compile(fn, backend="tritonize") if compiled else fn
    torch.testing.assert_close(run(x, y), x + 3 * y)
    if compiled:  # and in one graph: no launch broke it
        torch._dynamo.reset()
        assert tritonize.explain(fn, x, y).graphs == 1


# --- errors --------------------------------------------------------------------------------------
def test_missing_grid_names_the_kernel():
    x = randn(8)
    with pytest.raises(UserKernelError, match="add_kernel launched without a grid"):
        tritonize.wrap_triton(add_kernel)(x, x, x, 8, BLOCK=8)


def test_bad_grid_and_arguments():
    x = randn(8)
    with pytest.raises(UserKernelError, match="1 to 3 dimensions"):
        tritonize.wrap_triton(add_kernel)[(1, 1, 1, 1)](x, x, x, 8, BLOCK=8)
    with pytest.raises(UserKernelError, match="kernel add_kernel has no parameter 'BLOKC'"):
        tritonize.wrap_triton(add_kernel)[(1,)](x, x, x, 8, BLOKC=8)
    with pytest.raises(UserKernelError, match="not a Triton kernel"):
        tritonize.wrap_triton(torch.add)


def test_bad_arguments_in_compiled_code_name_the_kernel(capture):
    def fn(x):
        tritonize.wrap_triton(add_kernel)[(1,)](x, x, BLOCK=8)
        return x

    # Our capture checks the call; when Dynamo captures it (on a GPU), lowering checks it.
    with pytest.raises(Exception, match=r"add_kernel[\s\S]*argument") as info:
        torch.compile(fn, backend="tritonize", fullgraph=True)(randn(8))
    assert "out_ptr" in str(info.value)
    if capture == "dynamo":
        assert "test_user_kernel_launch.py" in str(info.value)  # the user's line, not wrap_triton's


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def scaled_copy_kernel(x_ptr, out_ptr, n, SCALE: tl.constexpr = 3, BLOCK: tl.constexpr = 128):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * SCALE, mask=mask)


@pytest.mark.parametrize("compiled", [False, True])
def test_defaults_and_configs_that_set_a_defaulted_parameter(compiled):
    def fn(x):
        out = torch.empty_like(x)
        tritonize.wrap_triton(scaled_copy_kernel)[grid_for(x.numel())](x, out, x.numel())
        return out

    x = randn(100)
    run = torch.compile(fn, backend="tritonize") if compiled else fn
    torch.testing.assert_close(run(x), x * 3)
    assert tritonize.mutated_arguments(scaled_copy_kernel, x, x, 100) == ["out_ptr"]


def test_dynamic_shapes_run_the_kernel():
    def fn(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        tritonize.wrap_triton(add_kernel)[lambda meta: (cdiv(n, meta["BLOCK"]),)](x, y, out, n, BLOCK=32)
        return out * 2

    run = torch.compile(fn, backend="tritonize", dynamic=True)
    for n in (50, 70, 90):
        x, y = randn(n), randn(n)
        torch.testing.assert_close(run(x, y), (x + y) * 2)


@triton.jit
def tuple_kernel(pointers, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(pointers[1] + offs, tl.load(pointers[0] + offs, mask=offs < n), mask=offs < n)


def test_tuple_of_tensors_is_refused_by_name_when_captured():
    def fn(x):
        out = torch.empty_like(x)
        tritonize.wrap_triton(tuple_kernel)[(1,)]((x, out), x.numel(), BLOCK=16)
        return out

    x = randn(10)
    torch.testing.assert_close(fn(x), x)  # eager code runs it
    with pytest.raises(UserKernelError, match="tuple_kernel: argument 'pointers' is a tuple holding tensors"):
        make_fx(fn)(x)
