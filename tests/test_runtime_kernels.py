"""Hand-written kernels with the generated kernels' conventions (sizes baked in, block sizes the
only constexpr parameters) through load_kernel, on the device under test. On the CPU they run in
Triton's interpreter with the first pick; on CUDA they are compiled, autotuned on the first call
(the in-place kernels below would give wrong results if a timing run touched the real output),
and launched through the fast path."""
import pytest
import torch

import tritonize
from tritonize.runtime.launcher import load_kernel
from conftest import DEVICE
from helpers import assert_same

ROWS, COLS = (96, 1000) if DEVICE == "cuda" else (12, 100)  # the interpreter reduces slowly
RBLOCK = 1 << (COLS - 1).bit_length()

LOOPED = f'''
import triton
import triton.language as tl


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def hand_looped_row_sum(in_ptr0, in_out_ptr0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xnumel = {ROWS}
    rnumel = {COLS}
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    acc = tl.full([XBLOCK, RBLOCK], 0, tl.float32)
    for roffset in range(0, rnumel, RBLOCK):
        rindex = roffset + tl.arange(0, RBLOCK)[None, :]
        acc += tl.load(in_ptr0 + (rindex + rnumel * xindex), xmask & (rindex < rnumel), other=0.0)
    old = tl.load(in_out_ptr0 + xindex, xmask)
    tl.store(in_out_ptr0 + xindex, old + tl.reduce(acc, 1, _add)[:, None], xmask)
'''

PERSISTENT = f'''
import triton
import triton.language as tl


@triton.jit
def _max(a, b):
    return tl.maximum(a, b)


@triton.jit
def hand_persistent_row_max(in_ptr0, in_out_ptr0, XBLOCK: tl.constexpr):
    xnumel = {ROWS}
    RBLOCK: tl.constexpr = {RBLOCK}
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    rindex = tl.arange(0, RBLOCK)[None, :]
    mask = (xindex < xnumel) & (rindex < {COLS})
    values = tl.load(in_ptr0 + (rindex + {COLS} * xindex), mask, other=float("-inf"))
    old = tl.load(in_out_ptr0 + xindex, xindex < xnumel)
    tl.store(in_out_ptr0 + xindex, old + tl.reduce(values, 1, _max)[:, None], xindex < xnumel)
'''


@pytest.fixture(autouse=True)
def private_cache(cache):
    """Every test here gets its own empty cache root (conftest's `cache` fixture)."""
    yield cache


def uses_fast_path(kernel) -> bool:
    return kernel.launch != kernel._fallback


@pytest.mark.parametrize("mode", ["default", "max-autotune"])
def test_looped_reduction_autotunes_without_touching_results(mode):
    kernel = load_kernel(LOOPED, "hand_looped_row_sum", kind="reduction", xnumel=ROWS, rnumel=COLS,
                         device=DEVICE, mode=mode, arg_dtypes=(torch.float32, torch.float32))
    x = torch.randn(ROWS, COLS, device=DEVICE)
    out = torch.ones(ROWS, 1, device=DEVICE)
    kernel(x, out)  # in place: out += row sums, exactly once
    assert_same(out, 1 + x.sum(1, keepdim=True), atol=1e-3, rtol=1e-4)
    kernel(x, out)
    assert_same(out, 1 + 2 * x.sum(1, keepdim=True), atol=1e-3, rtol=1e-4)
    for name, value in kernel.config.blocks.items():
        assert value & (value - 1) == 0 and (name != "XBLOCK" or value <= 128)
    if DEVICE == "cuda":
        assert uses_fast_path(kernel) and len(kernel.configs) >= 2


def test_persistent_reduction_and_a_misaligned_input():
    kernel = load_kernel(PERSISTENT, "hand_persistent_row_max", kind="persistent_reduction", xnumel=ROWS,
                         rnumel=COLS, device=DEVICE, arg_dtypes=(torch.float32, torch.float32))
    storage = torch.randn(ROWS * COLS + 1, device=DEVICE)
    aligned, misaligned = storage[:-1].view(ROWS, COLS), storage[1:].view(ROWS, COLS)
    out = torch.zeros(ROWS, 1, device=DEVICE)
    kernel(aligned, out)
    assert_same(out, aligned.amax(1, keepdim=True))
    out.zero_()
    kernel(misaligned, out)  # GPU: the guard fails, a variant for an unaligned pointer runs
    assert_same(out, misaligned.amax(1, keepdim=True))
    if DEVICE == "cuda":
        assert len(kernel.variants) == 2 and uses_fast_path(kernel)


def test_compiled_graph_with_misaligned_inputs():
    def fn(x, y):
        return (x * 2 + y).sin(), x.t() - y

    base = torch.randn(64 * 64 + 1, device=DEVICE)
    y = torch.randn(64, 64, device=DEVICE)
    compiled = tritonize.compile(fn)
    for x in (base[:-1].view(64, 64), base[1:].view(64, 64)):
        assert_same(compiled(x, y), fn(x, y))


def test_max_autotune_mode_end_to_end():
    def fn(x, y):
        return torch.nn.functional.gelu(x.t() + y) * 3, (x + 1).exp()

    x, y = torch.randn(300, 200, device=DEVICE), torch.randn(200, 300, device=DEVICE)
    assert_same(tritonize.compile(fn, mode="max-autotune")(x, y), fn(x, y))


def test_every_kind_of_generated_kernel_takes_the_fast_path(monkeypatch):
    """A graph with pointwise (1-D and 2-D), persistent and looped (inner and outer) reductions,
    and a whole-row and a looped scan: right results, and on CUDA every kernel launches through its
    generated launcher after the first call."""
    from tritonize.runtime import launcher

    loaded = []
    original = launcher.load_kernel

    def recording_load_kernel(*args, **kwargs):
        kernel = original(*args, **kwargs)
        loaded.append(kernel)
        return kernel

    monkeypatch.setattr("tritonize.runtime.wrapper_support.load_kernel", recording_load_kernel)

    def fn(x, wide, tall, long_rows):
        return (x * 2 + 1, x.t() + x, x.softmax(-1), wide.sum(-1), tall.sum(0), x.cumsum(-1),
                long_rows.cumsum(-1))

    rows = 64 if DEVICE == "cuda" else 8
    inputs = (torch.randn(rows, rows, device=DEVICE), torch.randn(rows, 9000, device=DEVICE),
              torch.randn(20000, 4, device=DEVICE), torch.randn(2, 5000, device=DEVICE))
    compiled = tritonize.compile(fn)
    for _ in range(2):
        assert_same(compiled(*inputs), fn(*inputs), atol=1e-3, rtol=1e-4)
    kinds = {k.kind for k in loaded}
    assert {"pointwise", "persistent_reduction", "reduction", "scan", "looped_scan"} <= kinds, kinds
    if DEVICE == "cuda":
        slow = [k.name for k in loaded if k.launch == k._fallback or not k.variants]
        assert not slow, slow


def dependent_chain(x, w):
    """Each kernel reads what the previous one wrote (a reduction, then pointwise and scans on its
    result): a kernel that started reading before its predecessor ended would see garbage."""
    scale = (x * w).sum(-1, keepdim=True)
    normed = x / (scale.abs() + 1)
    running = normed.cumsum(-1)
    return running.softmax(-1) * 3 + normed.amax(0), (running * w).mean(0)


def test_kernels_that_wait_for_their_predecessor_give_eager_results_call_after_call():
    """On sm_90+ every generated kernel is launched with programmatic dependent launch and waits
    for the previous grid before touching memory (docs/design.md): a chain of dependent kernels
    must match eager on every call with fresh inputs (fresh outputs are uninitialized memory)."""
    from tritonize.runtime.triton_compile import current_target, supports_pdl

    rows, cols = (256, 700) if DEVICE == "cuda" else (8, 60)
    w = torch.randn(cols, device=DEVICE)
    compiled = tritonize.compile(dependent_chain)
    for seed in range(6 if DEVICE == "cuda" else 2):
        x = torch.randn(rows, cols, device=DEVICE) * (seed + 1)
        assert_same(compiled(x, w), dependent_chain(x, w), atol=1e-3, rtol=1e-4)
    if DEVICE == "cuda":
        major, _ = torch.cuda.get_device_capability()
        assert supports_pdl(current_target()) == (major >= 9)


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA graphs exist only on the GPU (the chain itself runs on the CPU above)")
def test_compiled_graph_replays_inside_a_cuda_graph():
    """A compiled function captured into a CUDA graph (after its first call compiled and tuned
    it) replays with eager's results: launches under PDL become programmatic graph edges."""
    cols = 700
    w = torch.randn(cols, device=DEVICE)
    static_x = torch.randn(256, cols, device=DEVICE)
    compiled = tritonize.compile(dependent_chain)
    compiled(static_x, w)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        compiled(static_x, w)  # warm the allocator on the capture stream, as torch's docs advise
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = compiled(static_x, w)
    for scale in (1.0, 5.0, 0.25):
        static_x.copy_(torch.randn_like(static_x) * scale)
        graph.replay()
        assert_same(static_out, dependent_chain(static_x, w), atol=1e-3, rtol=1e-4)
