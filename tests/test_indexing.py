"""Indirect indexing: gather, index_select, embedding, advanced indexing, take_along_dim,
index_put, scatter/scatter_add/scatter_reduce; values against eager, kernel counts, bounds
checks (an error on the CPU, a device assert on the GPU) and embedding training."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import tritonize
from conftest import DEVICE, DTYPES
from helpers import assert_same, check
from tritonize.runtime.interpreter_checks import IndexOutOfBoundsError


def _rand(*shape, device, dtype=torch.float32):
    return torch.randn(*shape, device=device, dtype=dtype)


def _index(high, shape, device, dtype=torch.int64, low=0):
    return torch.randint(low, high, shape, device=device, dtype=dtype)


def _kernels(report, n):
    assert not report.fallbacks, report.fallback_reasons
    assert len(report.kernels) == n, [k.name for k in report.kernels]


# --- reads ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_is_one_kernel(device, dim, dtype):
    x = _rand(6, 9, device=device, dtype=dtype)
    index = _index(x.shape[dim], (4, 5), device)
    _kernels(check(lambda x, i: torch.gather(x, dim, i), x, index), 1)


def test_gather_3d_fused_with_pointwise(device):
    x = _rand(3, 8, 5, device=device)
    index = _index(8, (3, 4, 5), device)
    _kernels(check(lambda x, i: torch.gather(x.sin(), 1, i) * 2 + 1, x, index), 1)


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_index_select(device, dim, index_dtype):
    x = _rand(5, 6, 7, device=device)
    index = _index(x.shape[dim], (4,), device, index_dtype)
    _kernels(check(lambda x, i: torch.index_select(x, dim, i), x, index), 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_embedding_is_one_kernel(device, index_dtype, dtype):
    weight = _rand(50, 16, device=device, dtype=dtype)
    indices = _index(50, (3, 7), device, index_dtype)
    _kernels(check(lambda w, i: F.embedding(i, w), weight, indices), 1)
    _kernels(check(lambda w, i: F.embedding(i, w) * 3 + 1, weight, indices), 1)


def test_embedding_with_padding_idx(device):
    weight = _rand(10, 4, device=device)
    indices = torch.tensor([[0, 2, 0], [5, 9, 1]], device=device)
    _kernels(check(lambda w, i: F.embedding(i, w, padding_idx=0), weight, indices), 1)


ADVANCED = {
    "first_dim": (lambda x, i, j: x[i], (5, 6, 7)),
    "two_adjacent": (lambda x, i, j: x[i, j], (5, 6, 7)),
    "slice_then_index": (lambda x, i, j: x[:, j], (5, 6, 7)),
    "separated_indices_go_first": (lambda x, i, j: x[i, :, j], (5, 6, 7)),
    "ellipsis_last": (lambda x, i, j: x[..., j], (5, 6, 7)),
    "broadcast_column": (lambda x, i, j: x[i[:, None], j[None, :3]], (5, 6)),
    "index_then_reduce": (lambda x, i, j: x[i].sum(-1), (5, 6, 7)),
}


@pytest.mark.parametrize("name", sorted(ADVANCED))
def test_advanced_indexing(device, name):
    fn, shape = ADVANCED[name]
    x = _rand(*shape, device=device)
    i = torch.tensor([0, 4, -1, -5], device=device)  # negative indices wrap like eager
    j = torch.tensor([1, -2, 3, 0], device=device)
    report = check(fn, x, i, j)
    assert not report.fallbacks, report.fallback_reasons


def test_advanced_indexing_int32_and_0d_indices(device):
    x = _rand(5, 6, device=device)
    i = torch.tensor([3, -1, 2], device=device, dtype=torch.int32)
    _kernels(check(lambda x, i: x[i], x, i), 1)
    zero_d = torch.tensor(-2, device=device)
    _kernels(check(lambda x, k: torch.ops.aten.index(x, [None, k]) * 2, x, zero_d), 1)


def test_take_along_dim_wraps_negative_indices(device):
    x = _rand(4, 7, device=device)
    index = _index(7, (4, 3), device, low=-7)
    _kernels(check(lambda x, i: torch.take_along_dim(x, i, 1), x, index), 1)


def test_gather_inside_reduction(device):
    x = _rand(8, 33, device=device)
    index = _index(33, (8, 5), device)
    report = check(lambda x, i: torch.gather(x.exp(), 1, i).sum(1), x, index)
    _kernels(report, 1)
    assert report.kernels[0].kind.endswith("reduction")


def test_gather_from_a_computed_buffer_is_not_a_same_element_read(device):
    """y is stored and read back at other elements: the gather must not fuse as if it read y's own."""
    x = _rand(6, 40, device=device)
    index = _index(40, (6, 40), device)

    def fn(x, i):
        y = x.softmax(-1)
        return torch.gather(y, 1, i) + y, y.flip(1).gather(1, i)

    assert not check(fn, x, index).fallbacks


def test_view_of_a_gather(device):
    x = _rand(6, 8, device=device)
    index = _index(8, (6, 8), device)
    check(lambda x, i: torch.gather(x, 1, i).t().reshape(4, 12) + torch.gather(x, 1, i.flip(0)).reshape(4, 12), x, index)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_runs_with_no_fallback(device, reduction):
    logits = _rand(16, 40, device=device)
    target = _index(40, (16,), device)
    target[3] = -100  # ignore_index
    report = check(lambda x, t: F.cross_entropy(x, t, reduction=reduction), logits, target)
    assert not report.fallbacks, report.fallback_reasons
    assert len(report.kernels) <= 2, [k.name for k in report.kernels]


def test_nll_loss_with_weights(device):
    logp = torch.log_softmax(_rand(10, 7, device=device), -1)
    target = _index(7, (10,), device)
    weight = torch.rand(7, device=device)
    assert not check(lambda x, t, w: F.nll_loss(x, t, w), logp, target, weight).fallbacks


# --- boolean masks: data-dependent sizes ----------------------------------------------------------

def test_boolean_mask_read_is_data_dependent_and_reported(device):
    x = _rand(5, 7, device=device)
    fn = lambda x: x[x > 0] * 2  # noqa: E731
    report = check(fn, x)
    assert report.graphs >= 2  # Dynamo breaks the graph at the data-dependent size
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        report = check(fn, x)
    assert report.fallbacks, "the data-dependent graph must be reported as running through aten"


def test_boolean_mask_assignment_is_one_kernel(device):
    def fn(x):
        y = x.clone()
        y[y > 0] = 0.5
        return y

    report = check(fn, _rand(5, 7, device=device))
    _kernels(report, 1)
    _assert_constant_inlined(report, "0.5")


def _assert_constant_inlined(report, value: str):
    """The graph's 0-d constant (a CPU tensor even in a GPU graph) is a number in the kernel, not
    a tensor argument: a CPU pointer cannot be read by a GPU kernel."""
    assert "CONSTANTS[" not in report.wrapper, report.wrapper
    assert any(value in k.source for k in report.kernels), [k.source for k in report.kernels]


# --- writes --------------------------------------------------------------------------------

def _unique(high, n, device, dtype=torch.int64):
    return torch.randperm(high, device=device)[:n].to(dtype)


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_index_put_unique_indices(device, index_dtype):
    x = _rand(9, 6, device=device)
    index = _unique(9, 5, device, index_dtype)
    index[0] = index[0] - 9  # a negative index wraps
    values = _rand(5, 6, device=device)
    _kernels(check(lambda x, i, v: x.index_put((i,), v), x, index, values), 2)


def test_index_put_with_slices_and_broadcast_values(device):
    x = _rand(4, 9, 3, device=device)
    j = _unique(9, 4, device)
    index_put = torch.ops.aten.index_put
    _kernels(check(lambda x, j, v: index_put(x, [None, j], v), x, j, _rand(4, 1, 3, device=device)), 2)
    _kernels(check(lambda x, j, v: index_put(x, [None, j], v, True), x, j, _rand(3, device=device)), 2)

    def assign(x, j):
        y = x.clone()
        y[:, j] = 2.5
        return y

    report = check(assign, x, j)
    _kernels(report, 2)
    _assert_constant_inlined(report, "2.5")


@pytest.mark.parametrize("dtype", DTYPES + [torch.float64, torch.int64, torch.int32])
def test_index_put_accumulate_with_duplicates(device, dtype):
    x = (_rand(7, 5, device=device) * 4).to(dtype)
    index = torch.tensor([0, 3, 0, -1, 3, 3, 6], device=device)
    values = (_rand(7, 5, device=device) * 4).to(dtype)
    report = check(lambda x, i, v: x.index_put((i,), v, accumulate=True), x, index, values)
    assert not report.fallbacks, report.fallback_reasons


def test_index_put_accumulate_two_index_tensors(device):
    x = _rand(6, 8, device=device)
    i = torch.tensor([[0], [5], [0]], device=device)
    j = torch.tensor([1, 7, 1, 1], device=device)
    assert not check(lambda x, i, j, v: x.index_put((i, j), v, accumulate=True), x, i, j,
                     _rand(3, 4, device=device)).fallbacks


def test_index_add_and_small_int_accumulate(device):
    x = torch.randint(-100, 100, (6, 4), device=device, dtype=torch.int8)
    index = torch.tensor([1, 1, 5, 0], device=device)
    values = torch.randint(-100, 100, (4, 4), device=device, dtype=torch.int8)
    report = check(lambda x, i, v: x.index_put((i,), v, accumulate=True), x, index, values)
    assert not report.fallbacks
    x = _rand(6, 4, device=device)
    assert not check(lambda x, i: x.index_add(0, i, torch.ones(4, 4, device=x.device)), x, index).fallbacks


def test_scatter_src_and_value(device):
    x = _rand(5, 8, device=device)
    index = torch.stack([torch.randperm(8, device=device)[:3] for _ in range(5)])
    _kernels(check(lambda x, i, s: x.scatter(1, i, s), x, index, _rand(5, 3, device=device)), 2)
    _kernels(check(lambda x, i: x.scatter(1, i, -2.0), x, index), 2)


@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_add_collisions(device, dim):
    x = _rand(6, 7, device=device)
    index = _index(x.shape[dim], (6, 7), device)
    src = _rand(6, 7, device=device)
    _kernels(check(lambda x, i, s: x.scatter_add(dim, i, s), x, index, src), 2)
    assert not check(lambda x, i, s: x.scatter(dim, i, s, reduce="add"), x, index, src).fallbacks


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_sum(device, include_self):
    x = _rand(4, 9, device=device)
    index = _index(9, (4, 6), device)
    src = _rand(4, 6, device=device)
    report = check(lambda x, i, s: x.scatter_reduce(1, i, s, "sum", include_self=include_self), x, index, src)
    assert not report.fallbacks


def _with_nans(t):
    t = t.clone()
    t.view(-1)[::5] = float("nan")
    return t


@pytest.mark.parametrize("reduce", ["amax", "amin", "mean"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_scatter_reduce_extremes_and_mean(device, reduce, include_self, dtype):
    """Repeated indices, NaN updates and NaNs in the destination (eager's max and min let a NaN
    win), include_self either way; generated (atomic max/min, or sums and counts)."""
    x = _with_nans(_rand(4, 9, device=device)).to(dtype)
    index = _index(9, (4, 12), device)
    src = _with_nans(_rand(4, 12, device=device)).to(dtype)
    report = check(lambda x, i, s: x.scatter_reduce(1, i, s, reduce, include_self=include_self), x, index, src,
                   atol=1e-2, rtol=1e-2)
    native = reduce != "mean" or dtype.is_floating_point  # an integer mean rounds eager's way: aten
    assert bool(report.fallbacks) != native, report.fallback_reasons


@pytest.mark.parametrize("reduce", ["amax", "amin", "mean"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_extremes_and_mean(device, reduce, include_self):
    x = _with_nans(_rand(5, 6, device=device))
    index = torch.tensor([0, 4, 0, 2, 4, 4, 1], device=device)
    source = _with_nans(_rand(7, 6, device=device))
    report = check(lambda x, i, s: x.index_reduce(0, i, s, reduce, include_self=include_self), x, index, source)
    assert not report.fallbacks


def test_scatter_reduce_prod_falls_back_and_is_reported(device):
    x = _rand(4, 9, device=device)
    index = _index(9, (4, 6), device)
    report = check(lambda x, i, s: x.scatter_reduce(1, i, s, "prod"), x, index, _rand(4, 6, device=device))
    assert "aten.scatter_reduce.two" in report.fallbacks


def test_one_update_per_row_is_pointwise(device):
    """cross_entropy's backward writes one value per row: a where, fused, no scatter kernel."""
    x = _rand(6, 10, device=device)
    target = _index(10, (6, 1), device)
    _kernels(check(lambda x, t: torch.zeros_like(x).scatter(1, t, -1.0) * x, x, target), 1)
    _kernels(check(lambda x, t, s: x.scatter_add(1, t, s), x, target, _rand(6, 1, device=device)), 1)


# --- bounds checks -------------------------------------------------------------------------

OUT_OF_RANGE = {
    "gather": (lambda x, i: torch.gather(x, 1, i.view(1, -1).expand(5, -1)), "aten.gather"),
    "index_select": (lambda x, i: torch.index_select(x, 1, i), "aten.index_select"),
    "embedding": (lambda x, i: F.embedding(i, x), "aten.embedding"),
    "getitem": (lambda x, i: x[:, i] + 1, "aten.index.Tensor"),
    "index_put": (lambda x, i: torch.ops.aten.index_put(x, [None, i], torch.ones(5, 3, device=x.device), True),
                  "aten.index_put"),
    "scatter_add": (lambda x, i: x.scatter_add(1, i.view(1, -1), torch.ones(1, 3, device=x.device)),
                    "aten.scatter_add"),
    "cross_entropy": (lambda x, i: F.cross_entropy(x[:3], i), "aten.gather"),
    "index_add": (lambda x, i: x.index_add(1, i, torch.ones(5, 3, device=x.device)), "aten.index_add"),
    "index_copy": (lambda x, i: x.index_copy(1, i, torch.ones(5, 3, device=x.device)), "aten.index_copy"),
}

# Ops whose eager form rejects a negative index, and ops whose eager form counts it from the end
# (issue 25 bug 8: index_add decomposed into index_put, which wraps, and wrote the last row).
REJECT_NEGATIVE = {name: OUT_OF_RANGE[name][0] for name in
                   ("gather", "index_select", "embedding", "scatter_add", "index_add", "index_copy")}
REJECT_NEGATIVE["index_add_alpha"] = lambda x, i: x.index_add(1, i, torch.ones(5, 3, device=x.device), alpha=2)
REJECT_NEGATIVE["index_add_"] = lambda x, i: x.clone().index_add_(1, i, torch.ones(5, 3, device=x.device))
REJECT_NEGATIVE["scatter"] = lambda x, i: x.scatter(1, i.view(1, -1), 2.0)
ACCEPT_NEGATIVE = {
    "getitem": lambda x, i: x[:, i] + 1,
    "index_put": lambda x, i: x.index_put((i,), torch.ones(7, device=x.device)),
    "index_put_accumulate": lambda x, i: x.index_put((i,), torch.ones(7, device=x.device), accumulate=True),
    "index_fill": lambda x, i: x.index_fill(1, i, -1.0),
    "take": lambda x, i: torch.take(x, i) + 1,
    "put": lambda x, i: x.put(i, torch.ones(3, device=x.device)),
    "take_along_dim": lambda x, i: torch.take_along_dim(x, i.view(1, -1), 1) + 1,
}


@pytest.mark.skipif(DEVICE != "cpu", reason="on the GPU an out-of-range index is a device assert")
@pytest.mark.parametrize("name", sorted(REJECT_NEGATIVE))
def test_negative_index_raises_where_eager_does(device, name):
    fn = REJECT_NEGATIVE[name]
    x, good, negative = _rand(5, 7, device=device), torch.tensor([1, 4, 0]), torch.tensor([1, -1, 0])
    compiled = torch.compile(fn, backend="tritonize")
    assert_same(compiled(x, good), fn(x, good))
    with pytest.raises((RuntimeError, IndexError)):
        fn(x, negative)
    before = x.clone()
    with pytest.raises(IndexOutOfBoundsError):
        compiled(x, negative)
    assert torch.equal(x, before)


@pytest.mark.parametrize("name", sorted(ACCEPT_NEGATIVE))
def test_negative_index_counts_from_the_end_where_eager_does(device, name):
    fn = ACCEPT_NEGATIVE[name]
    x = _rand(5, 7, device=device)
    negative = torch.tensor([1, -1, -5], device=device)
    assert_same(torch.compile(fn, backend="tritonize")(x, negative), fn(x, negative))


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", DTYPES + [torch.int32])
def test_index_add_and_index_copy_values(device, dim, dtype):
    # quarters of at most 5: every sum exact in bf16, so the order in which duplicate indices
    # add (atomics on the GPU, in eager too) cannot round differently
    x = (torch.randint(-20, 21, (6, 5), device=device) / 4).to(dtype)
    index = torch.tensor([3, 0, 3, 1], device=device)
    source = (torch.randint(-20, 21, (6, 5), device=device) / 4).to(dtype).narrow(dim, 0, 4)
    alpha = 2 if dtype == torch.int32 else 0.5
    assert not check(lambda x, i, s: x.index_add(dim, i, s, alpha=alpha), x, index, source).fallbacks
    assert not check(lambda x, i, s: x.index_add(dim, i, s), x, index, source).fallbacks
    unique = torch.tensor([3, 0, 4, 1], device=device)
    assert not check(lambda x, i, s: x.index_copy(dim, i, s), x, unique, source).fallbacks
    assert not check(lambda x, i: x.index_fill(dim, i, 7), x, torch.tensor([-1, 0, -1], device=device)).fallbacks
    fill = torch.tensor(-3, dtype=dtype, device=device)
    assert not check(lambda x, i, v: x.index_fill(dim, i, v), x, torch.tensor(2, device=device), fill).fallbacks


@pytest.mark.skipif(DEVICE != "cpu", reason="on the GPU an out-of-range index is a device assert (below)")
@pytest.mark.parametrize("name", sorted(OUT_OF_RANGE))
@pytest.mark.parametrize("bad", [7, -8])
def test_out_of_range_index_raises_on_cpu(device, name, bad):
    fn, op = OUT_OF_RANGE[name]
    x = _rand(5, 7, device=device)
    good = torch.tensor([1, 4, 0], device=device)
    compiled = torch.compile(fn, backend="tritonize")
    assert_same(compiled(x, good), fn(x, good))
    with pytest.raises(IndexOutOfBoundsError, match=op):
        compiled(x, torch.tensor([1, bad, 0], device=device))


@pytest.mark.skipif(DEVICE != "cuda", reason="device asserts need a GPU (the CPU test above raises)")
def test_out_of_range_index_is_a_device_assert_on_gpu():
    # A device assert poisons the CUDA context, so it runs in a child process.
    script = textwrap.dedent("""
        import torch, tritonize
        x = torch.randn(5, 7, device="cuda")
        f = torch.compile(lambda x, i: torch.gather(x, 1, i) * 2, backend="tritonize")
        good = torch.zeros(5, 3, dtype=torch.long, device="cuda")
        torch.testing.assert_close(f(x, good), torch.gather(x, 1, good) * 2)
        torch.cuda.synchronize()
        print("in-range ok", flush=True)
        f(x, good + 7)
        torch.cuda.synchronize()
        print("no assert", flush=True)
    """)
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    output = proc.stdout + proc.stderr
    assert "in-range ok" in output, output[-3000:]
    assert proc.returncode != 0 and "no assert" not in output, output[-3000:]
    assert "device-side assert" in output or "index out of bounds in aten.gather" in output, output[-3000:]


# --- training ------------------------------------------------------------------------------

class _EmbeddingModel(torch.nn.Module):
    def __init__(self, vocab=30, dim=8, classes=5):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.head = torch.nn.Linear(dim, classes)

    def forward(self, tokens, target):
        logits = self.head(torch.tanh(self.embed(tokens))).flatten(0, 1)
        return F.cross_entropy(logits, target)


def test_embedding_training_grads_match_eager(device):
    torch.manual_seed(0)
    eager = _EmbeddingModel().to(device)
    compiled_model = _EmbeddingModel().to(device)
    compiled_model.load_state_dict(eager.state_dict())
    tokens = _index(30, (4, 6), device)
    tokens[0, :3] = 7  # repeated tokens: their gradients accumulate into one row
    target = _index(5, (24,), device)

    loss = eager(tokens, target)
    loss.backward()
    recorder: list = []
    from tritonize.backend import make_backend

    compiled = torch.compile(compiled_model, backend=make_backend(None, recorder))
    compiled_loss = compiled(tokens, target)
    compiled_loss.backward()
    assert_same(compiled_loss, loss)
    for (name, p), q in zip(eager.named_parameters(), compiled_model.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=1e-5, rtol=1e-5, msg=name)
    artifacts = [a for a in recorder if a != "graph"]
    assert len(artifacts) == 2  # forward and backward
    for art in artifacts:
        assert not art.fallbacks, art.fallbacks
    backward_kinds = [k.name for k in artifacts[1].kernels]
    assert any("scatter" in name for name in backward_kinds), backward_kinds


def test_embedding_dense_backward_alone(device):
    grad = _rand(3, 5, 4, device=device)
    tokens = torch.tensor([[1, 2, 1, 0, 9], [9, 9, 3, 1, 2], [0, 0, 0, 4, 4]], device=device)
    fn = lambda g, t: torch.ops.aten.embedding_dense_backward(g, t, 10, -1, False)  # noqa: E731
    report = check(fn, grad, tokens)
    assert not report.fallbacks, report.fallback_reasons


# --- codegen details -----------------------------------------------------------------------

def test_transposed_index_tensor_gets_2d_tile(device):
    x = _rand(40, 50, device=device)
    index = _index(50, (40, 40), device).t()  # read transposed: a 2-D tiled kernel
    report = check(lambda x, i: torch.gather(x, 1, i) + i, x, index)
    _kernels(report, 1)
    assert "YBLOCK" in report.kernels[0].source


def test_embedding_in_looped_reduction(device):
    weight = _rand(12, 9000, device=device)  # rows longer than a persistent reduction holds
    tokens = _index(12, (4, 130), device)  # 520 rows: enough programs that nothing is split
    report = check(lambda w, t: F.embedding(t, w).softmax(-1), weight, tokens, atol=1e-6, rtol=1e-4)
    _kernels(report, 1)
    assert report.kernels[0].kind == "reduction"


def test_indices_into_a_huge_table_use_int64():
    from tritonize.codegen.kernel import render_kernel
    from tritonize.ir import expr as ex
    from tritonize.ir.nodes import ComputedBuffer, InputBuffer, Layout, contiguous_strides
    from tritonize.ir.symbols import dim_vars
    from tritonize.schedule.fusion import KernelGroup

    cpu = torch.device("cpu")

    def group(vocab):
        table = InputBuffer("w", Layout((vocab, 4096), (4096, 1), 0, torch.float32, cpu), 0)
        tokens = InputBuffer("t", Layout((64,), (1,), 0, torch.int32, cpu), 1)
        d0, d1 = dim_vars(2)
        body = ex.indirect(ex.load("t", d0, torch.int32), vocab, False, "test",
                           lambda t: ex.load("w", 4096 * t + d1, torch.float32))
        out = ComputedBuffer("buf0", Layout((64, 4096), contiguous_strides((64, 4096)), 0, torch.float32, cpu),
                             body, ["embedding"])
        return KernelGroup([out]), {"w": table, "t": tokens, "buf0": out}

    assert ".to(tl.int64)" not in render_kernel(*group(1000), "k").source
    assert ".to(tl.int64)" in render_kernel(*group(1 << 20), "k").source  # 2^32 elements


def test_deterministic_mode_keeps_float_accumulation_in_aten(device):
    x = _rand(6, 4, device=device)
    index = torch.tensor([1, 1, 5, 0], device=device)
    values = _rand(4, 4, device=device)
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        report = check(lambda x, i, v: x.index_put((i,), v, accumulate=True), x, index, values)
    finally:
        torch.use_deterministic_algorithms(previous)
    assert "aten.index_put.default" in report.fallbacks
