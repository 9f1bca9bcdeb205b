"""Mutation analysis of user Triton kernels: the exact written and read sets over a corpus.

The analysis generates TTIR for a fixed target, so every case (GPU-only kernels included) runs on
machines without a GPU.
"""
from __future__ import annotations

import logging

import pytest
import torch
import triton
import triton.language as tl
from user_kernel_corpus import CASES, add_kernel, autotuned_add_kernel, inline_asm_kernel

import tritonize
from tritonize.user_kernels import UserKernelError
from tritonize.user_kernels.analysis import RecursiveKernel, UnknownOperation, summarize_module
from tritonize.user_kernels.ttir import IrBlock, IrFunction, IrModule, IrOp

from conftest import DEVICE


def test_corpus_is_large_enough():
    assert len(CASES) >= 25
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_corpus_written_and_read_sets(case):
    device = DEVICE if DEVICE == "cuda" else "cpu"
    args, kwargs = case.make_args(device)
    access = tritonize.analyze_kernel(case.kernel, *args, **kwargs)
    assert access.mutated == case.mutated
    assert access.read == case.read
    assert access.exact == case.exact
    assert tritonize.mutated_arguments(case.kernel, *args, **kwargs) == list(case.mutated)
    assert tritonize.read_arguments(case.kernel, *args, **kwargs) == list(case.read)


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_fallback_is_logged():
    x = torch.randn(8)
    handler, logger = _Collect(), logging.getLogger("tritonize.user_kernels")
    logger.addHandler(handler)
    try:
        access = tritonize.analyze_kernel(inline_asm_kernel, x, torch.empty(8), 7, BLOCK=8, PURE=False)
    finally:
        logger.removeHandler(handler)
    assert access.mutated == ("x_ptr", "out_ptr") and not access.exact
    [message] = handler.messages
    assert "inline asm" in message and "inline_asm_kernel" in message


def test_keyword_and_default_arguments():
    @triton.jit
    def kernel(x_ptr, out_ptr, n, SCALE: tl.constexpr = 2, BLOCK: tl.constexpr = 16):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * SCALE, mask=offs < n)

    x = torch.randn(8)
    assert tritonize.mutated_arguments(kernel, out_ptr=x, x_ptr=x, n=8) == ["out_ptr"]


def test_fake_tensors_are_enough():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x, y, out = torch.empty(64), torch.empty(64), torch.empty(64)
    assert tritonize.mutated_arguments(add_kernel, x, y, out, 64, BLOCK=32) == ["out_ptr"]


@pytest.mark.parametrize("args, kwargs, message", [
    ((1, 2), {}, "missing argument"),
    ((1, 2, 3, 4, 5, 6), {}, "takes 5 arguments"),
    ((1, 2, 3, 4), {"BLOCK": 8, "nope": 1}, "has no parameter 'nope'"),
    ((1, 2, 3, 4), {"x_ptr": 1, "BLOCK": 8}, "two values for argument 'x_ptr'"),
])
def test_bad_arguments_name_the_kernel(args, kwargs, message):
    with pytest.raises(UserKernelError, match=message) as info:
        tritonize.mutated_arguments(add_kernel, *args, **kwargs)
    assert "add_kernel" in str(info.value)


def test_not_a_kernel():
    with pytest.raises(UserKernelError, match="not a Triton kernel"):
        tritonize.mutated_arguments(lambda x: x, torch.randn(3))


def test_autotuned_kernel_missing_config_parameter_is_an_error():
    x = torch.randn(8)
    # BLOCK comes from the configs, so this call is complete; passing nothing for n is not.
    assert tritonize.mutated_arguments(autotuned_add_kernel, x, x, x, 8) == ["out_ptr"]
    with pytest.raises(UserKernelError, match="'n'"):
        tritonize.mutated_arguments(autotuned_add_kernel, x, x, x)


# --- the analysis on hand-written IR: cases Triton's front end does not produce ---------------
def _op(name, operands=(), results=(), regions=(), **attrs):
    return IrOp(name, tuple(operands), tuple(results), tuple("!tt.ptr<f32>" for _ in results), tuple(regions), attrs)


def _module(functions):
    return IrModule(functions[0].name, {f.name: f for f in functions}, "")


def test_recursion_is_an_error():
    body = IrBlock((1,), [_op("tt.call", [1], callee="f"), _op("tt.return")])
    with pytest.raises(RecursiveKernel, match="recursion"):
        summarize_module(_module([IrFunction("f", (1,), ("p",), (body,))]))


def test_unknown_region_op_is_not_guessed():
    inner = IrBlock((), [_op("tt.store", [1, 2]), _op("scf.yield")])
    body = IrBlock((1, 2), [_op("scf.execute_region", [], [], [(inner,)]), _op("tt.return")])
    with pytest.raises(UnknownOperation, match="scf.execute_region"):
        summarize_module(_module([IrFunction("k", (1, 2), ("a", "b"), (body,))]))


def test_loop_carried_pointer_that_switches_parameter():
    # for ...: store(p); p = other  -- the store may write either parameter
    loop_body = IrBlock((10, 11), [_op("tt.store", [11, 3]), _op("scf.yield", [2])])
    body = IrBlock((1, 2, 3), [_op("arith.constant", [], [5]),
                               _op("scf.for", [5, 5, 5, 1], [12], [(loop_body,)]),
                               _op("tt.return")])
    summary = summarize_module(_module([IrFunction("k", (1, 2, 3), ("a", "b", "c"), (body,))]))["k"]
    assert summary.writes == {0, 1}


def test_helper_summary_maps_through_returned_pointer():
    helper_body = IrBlock((20, 21), [_op("tt.addptr", [20, 21], [22]), _op("tt.return", [22])])
    helper = IrFunction("h", (20, 21), ("p", "o"), (helper_body,))
    body = IrBlock((1, 2), [_op("tt.call", [2, 1], [3], callee="h"), _op("tt.store", [3, 1]), _op("tt.return")])
    summaries = summarize_module(_module([IrFunction("k", (1, 2), ("a", "b"), (body,)), helper]))
    assert summaries["k"].writes == {0, 1}  # the helper adds both pointers together
    assert summaries["h"].returns == (frozenset({0, 1}),)
