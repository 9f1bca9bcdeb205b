"""Kernels that only feed graph outputs, moved up where the larger inputs they free die otherwise
(schedule/memory_order.py, taken by codegen/memory_plan.lower_peak_order only where the planned
peak drops). The pattern is a training forward's: a bf16 copy of a float32 activation, computed
only to be saved, which AOTAutograd's partitioner places after the whole forward. Planned peaks
are exact, worked by hand; every result is compared with eager (values, strides, inputs)."""
from __future__ import annotations

import torch

from helpers import assert_same
from test_memory_plan import F32, compile_and_check

BF16 = 2


def _line_of(wrapper: str, text: str) -> int:
    return next(i for i, line in enumerate(wrapper.splitlines()) if text in line)


def _copy_allocated(wrapper: str) -> int:
    """The wrapper's line allocating the bf16 copy (its only bf16 buffer)."""
    return next(i for i, line in enumerate(wrapper.splitlines())
                if line.startswith("    buf") and "torch.bfloat16" in line)


def _saved_copy_after_a_wide_tail(x, w1, w2, w3):
    a = torch.relu(x @ w1)            # (64, 256) float32; its other reader is the next product
    c = torch.sin(a @ w2)             # (64, 128)
    g = torch.cos(c @ w3)             # (64, 512): the tail, wide
    return g, a.to(torch.bfloat16)    # the copy, last in program order


def test_a_copy_only_returned_moves_up_to_where_its_input_dies(device):
    """In program order the bf16 copy of `a` comes last, so `a` (64 KiB) lives through the wide
    tail: 64 (a) + 32 (c) + 128 (the last product) KiB at the last product, and a + g + the
    copy = 224 KiB at the copy. Moved up to just after the first product, `a` dies there: the
    peak is the last product's, c + its product + the copy = 32 + 128 + 32 = 192 KiB."""
    x, w1, w2, w3 = (torch.randn(64, 32, device=device), torch.randn(32, 256, device=device),
                     torch.randn(256, 128, device=device), torch.randn(128, 512, device=device))
    report, wrapper = compile_and_check(_saved_copy_after_a_wide_tail, x, w1, w2, w3)
    copy = _copy_allocated(wrapper)
    assert _line_of(wrapper, "# extern: mm_1") < copy < _line_of(wrapper, "# extern: mm_2"), wrapper
    assert report.peak_memory == 32 * 1024 + 128 * 1024 + 64 * 256 * BF16


def test_a_move_that_would_raise_the_peak_is_not_taken(device):
    """The same copy after a narrow tail: the peak is where the copy would go (a + the first
    product + the copy = 224 KiB, against 194 KiB in program order: a, c and the last product
    at that product, 64 + 128 + 2), so the schedule's order stays."""
    def fn(x, w1, w2, w3):
        a = torch.relu(x @ w1)            # (64, 256)
        c = torch.tanh(a @ w2)            # (64, 512)
        d = c @ w3                        # (64, 8)
        return d, a.to(torch.bfloat16)

    x, w1, w2, w3 = (torch.randn(64, 32, device=device), torch.randn(32, 256, device=device),
                     torch.randn(256, 512, device=device), torch.randn(512, 8, device=device))
    report, wrapper = compile_and_check(fn, x, w1, w2, w3)
    assert _line_of(wrapper, "# extern: mm_2") < _copy_allocated(wrapper), wrapper
    assert report.peak_memory == (64 * 256 + 64 * 512 + 64 * 8) * F32


def test_a_kernel_never_moves_above_a_scatter(device):
    """A scatter (index_put into a copy) between the copy's input's last other reader and the
    copy: the copy goes no higher than just below it (a scatter writes into a buffer that exists;
    only kernels and pure aten calls are passed)."""
    def fn(x, w1, w2, w3, index):
        a = torch.relu(x @ w1)
        c = torch.sin(a @ w2).index_put((index,), torch.zeros(128, device=x.device))
        g = torch.cos(c @ w3)
        return g, a.to(torch.bfloat16)

    x, w1, w2, w3 = (torch.randn(64, 32, device=device), torch.randn(32, 256, device=device),
                     torch.randn(256, 128, device=device), torch.randn(128, 512, device=device))
    index = torch.tensor([3, 17, 40], device=device)
    _, wrapper = compile_and_check(fn, x, w1, w2, w3, index)
    scatter = max(i for i, line in enumerate(wrapper.splitlines())
                  if line.startswith("    triton_") and "scatter" in line)
    copy = _copy_allocated(wrapper)
    assert scatter < copy < _line_of(wrapper, "# extern: mm_2"), wrapper


def test_training_under_autocast_matches_eager(device):
    """Convolutions, batch norm and hardswish under autocast: the forward saves bf16 copies of
    float32 activations, which move up; gradients and running statistics as eager's."""
    def build():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.Hardswish(),
            torch.nn.Conv2d(8, 8, 1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.Hardswish(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4)).to(device)

    eager, model = build(), build()
    compiled = torch.compile(model, backend="tritonize")
    x = torch.randn(4, 3, 16, 16, device=device)
    before = x.clone()
    results = []
    for net, run in ((eager, eager), (model, compiled)):
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
            out = run(x)
        out.float().square().mean().backward()
        results.append([out] + [p.grad for p in net.parameters()] + list(net.buffers()))
    assert_same(results[1], results[0], atol=2e-2, rtol=2e-2)
    assert_same(x, before)


def test_a_kernel_never_moves_above_a_user_kernel(device):
    """A user kernel (adding one in place) between the copy's input's last other reader and the
    copy: its effects are not known to us, so the copy goes no higher than just below it."""
    import triton
    import tritonize
    from user_kernel_corpus import add_one_inplace_kernel

    def fn(x, w1, w2, w3):
        a = torch.relu(x @ w1)
        c = torch.sin(a @ w2)
        n = c.numel()
        tritonize.wrap_triton(add_one_inplace_kernel)[(triton.cdiv(n, 256),)](c, n, BLOCK=256)
        g = torch.cos(c @ w3)
        return g, a.to(torch.bfloat16)

    x, w1, w2, w3 = (torch.randn(64, 32, device=device), torch.randn(32, 256, device=device),
                     torch.randn(256, 128, device=device), torch.randn(128, 512, device=device))
    _, wrapper = compile_and_check(fn, x, w1, w2, w3)
    user_kernel = _line_of(wrapper, "# user kernel add_one_inplace_kernel")
    assert user_kernel < _copy_allocated(wrapper) < _line_of(wrapper, "# extern: mm_2"), wrapper
