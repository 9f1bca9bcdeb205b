"""Fusion decisions, tested by counting kernels and fallbacks (and checking values against eager)."""
import copy

import torch
import torch.nn.functional as F

from conftest import DTYPES
from helpers import check

import pytest


def _rand(*shape, device, dtype=torch.float32):
    return torch.randn(*shape, device=device, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_bias_mul_is_one_kernel(device, dtype):
    report = check(lambda x, b: F.gelu(x + b) * 2, _rand(64, 96, device=device, dtype=dtype),
                   _rand(96, device=device, dtype=dtype))
    assert len(report.kernels) == 1 and not report.fallbacks
    assert set(report.kernels[0].fused_nodes) >= {"add", "gelu", "mul"}


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_add_is_one_tiled_kernel(device, dtype):
    report = check(lambda x, y: x.t() + y, _rand(96, 64, device=device, dtype=dtype),
                   _rand(64, 96, device=device, dtype=dtype))
    assert len(report.kernels) == 1 and not report.fallbacks
    assert "YBLOCK" in report.kernels[0].source  # both reads coalesced: a 2-D tile


def test_two_outputs_one_kernel(device):
    report = check(lambda x: (x.relu() + 1, x.sigmoid()), _rand(33, 17, device=device))
    assert len(report.kernels) == 1 and not report.fallbacks
    assert report.kernels[0].source.count("tl.store") == 2


def test_view_permute_reshape_chain_is_one_kernel(device):
    def fn(x, y):
        a = (x * 2).view(4, 8, 16).permute(2, 0, 1).reshape(16, 32)
        return torch.tanh(a) + y

    report = check(fn, _rand(32, 16, device=device), _rand(16, 32, device=device))
    assert len(report.kernels) == 1 and not report.fallbacks


def test_contiguous_chain_collapses_to_flat_index(device):
    report = check(lambda x: (x + 1).view(-1) * 3, _rand(8, 16, 4, device=device))
    source = report.kernels[0].source
    assert "//" not in source and "%" not in source


def test_shared_cheap_value_is_recomputed_not_stored(device):
    def fn(x):
        y = x + 1
        return y * 2, y.t().contiguous()

    report = check(fn, _rand(32, 48, device=device))
    assert not report.fallbacks
    stores = sum(k.source.count("tl.store") for k in report.kernels)
    assert stores == 2  # only the two outputs are written


def test_shared_expensive_value_is_stored_once(device):
    def fn(a, b, c, w):
        y = a * b + c  # three inputs: storing once is cheaper than reading them twice
        return (y @ w).sum(), y.sin()

    args = [_rand(16, 16, device=device) for _ in range(4)]
    report = check(fn, *args, atol=1e-4, rtol=1e-4)
    assert report.externs["aten.mm.default"] == 1


def test_broadcast_scalar_and_constant_inputs(device):
    report = check(lambda x: torch.where(x > 0, x * 2.5, torch.full_like(x, -1.0)) + 3,
                   _rand(7, 9, device=device))
    assert len(report.kernels) == 1 and not report.fallbacks


def test_cat_pad_flip_fuse(device):
    def fn(x, y):
        z = torch.cat([x, y.flip(0)], dim=0)
        return F.pad(z, (1, 2, 0, 1), value=0.5) * 2

    report = check(fn, _rand(5, 6, device=device), _rand(3, 6, device=device))
    assert len(report.kernels) == 1 and not report.fallbacks


def test_unlowered_op_falls_back_and_is_reported(device):
    report = check(lambda x: torch.histc(x, 4) + 1, _rand(10, 4, device=device))
    assert report.fallbacks["aten.histc.default"] == 1
    assert len(report.kernels) == 1



def test_a_mask_read_by_every_attention_call_is_stored_once(device):
    """Each layer slices the model's one attention mask (to the keys' length, a symbolic size):
    the slices are one value, stored once and handed to every aten attention call
    (lower/context.realize_read_only), not stored again per layer."""
    from tritonize.backend import make_backend

    def three_layers(q, k, v, ids):
        n = q.shape[-2]
        positions = ids.cumsum(-1) - 1
        keys = torch.arange(n, device=q.device)
        mask = (positions[:, None, :, None] >= keys[None, None, None, :]).expand(q.shape[0], 1, n, n)
        h = q
        for _ in range(3):
            h = F.scaled_dot_product_attention(h * 2, k, v, attn_mask=mask[:, :, :, :k.shape[-2]])
        return h

    recorder = []
    compiled = torch.compile(three_layers, backend=make_backend(recorder=recorder), dynamic=True)
    for n in (8, 11):
        q, k, v = (_rand(2, 3, n, 16, device=device) for _ in range(3))
        ids = torch.ones(2, n, dtype=torch.int64, device=device)
        torch.testing.assert_close(compiled(q, k, v, ids), three_layers(q, k, v, ids), atol=1e-5, rtol=1e-5)
    wrapper = [r for r in recorder if r != "graph"][-1].wrapper
    calls = [line for line in wrapper.splitlines() if "aten._scaled_dot_product" in line]
    # the CPU's flash kernel takes attn_mask by keyword, CUDA's efficient one takes attn_bias 4th
    masks = {line.split("attn_mask=")[1].split(")")[0] if "attn_mask=" in line
             else line.split("(", 1)[1].split(",")[3].strip() for line in calls}
    assert len(masks) == 1 and len(calls) == 3, wrapper


def test_a_stencil_chain_is_recomputed_in_one_kernel(device):
    """diff(x, n=4): each difference reads the previous one at two neighbouring rows. Reads of one
    buffer a constant apart count as one stream (lower/context._distinct_streams), so the shared
    differences are recomputed, not stored: one kernel, and in bf16 one rounding, at the end.
    Small integers make every difference exact, so the result equals eager's."""
    x = torch.randint(-8, 8, (9, 5), device=device).to(torch.bfloat16)
    report = check(lambda t: torch.diff(t, n=4, dim=0), x, atol=0, rtol=0)
    assert len(report.kernels) == 1 and not report.fallbacks, report.wrapper
    # rows appended (a cat read at nine neighbouring offsets), eight differences: still one kernel
    tail = torch.randint(-8, 8, (2, 5), device=device).to(torch.float32)
    report = check(lambda t, a: torch.diff(t, n=8, dim=0, append=a), x.float(), tail, atol=0, rtol=0)
    assert len(report.kernels) == 1 and not report.fallbacks, report.wrapper


@pytest.mark.parametrize("transposed", [False, True])
def test_a_value_two_matmuls_read_is_computed_once(device, transposed):
    """Each matmul reads its operand from memory: a value two of them read is stored once, not
    computed by a kernel of its own for each (one of them wanting it transposed)."""
    def fn(x, y, w, v):
        h = torch.sin(x) * y
        return h @ w, (h.t() if transposed else h) @ v
    v = _rand(64, 8, device=device) if transposed else _rand(32, 8, device=device)
    report = check(fn, _rand(64, 32, device=device), _rand(64, 32, device=device), _rand(32, 8, device=device), v)
    assert len(report.kernels) == 1 and not report.fallbacks


def test_a_value_a_matmul_and_a_kernel_read_is_computed_once(device):
    def fn(x, y, w):
        h = torch.sin(x) * y
        return h @ w, h.cos()
    report = check(fn, _rand(64, 32, device=device), _rand(64, 32, device=device), _rand(32, 8, device=device))
    assert len(report.kernels) == 1 and not report.fallbacks


@pytest.mark.parametrize("batch", [1, 2])
def test_a_batch_of_one_fuses_as_any_batch(device, batch):
    """h is stored for the matmul; the ReLU reads it at its own element and joins h's kernel. At a
    batch of one the load's index has no batch term and h's layout has, which fusion took for
    another element (two kernels)."""
    def fn(x, w):
        h = x * 2 + 1
        return h @ w, h.relu()
    report = check(fn, _rand(batch, 8, 64, device=device), _rand(64, 32, device=device))
    assert len(report.kernels) == 1 and not report.fallbacks


def test_a_value_scaled_by_0d_tensors_is_recomputed_not_stored(device):
    """A 0-d tensor's load is one number: x * a * b (a and b computed sums) reads one stream and
    is recomputed by its two consumers (a row mean and the result, viewed otherwise) rather than
    stored for them (cross entropy's backward)."""
    def fn(x, y, z):
        h = x * y.sum() * z.sum()
        return (h - h.mean(1, keepdim=True)).view(8, 8, 96)
    report = check(fn, _rand(64, 96, device=device), _rand(8, device=device), _rand(8, device=device))
    stores = [k.source.count("tl.store") for k in report.kernels]
    assert stores == [2, 1, 1], stores  # the two sums, the rows' means, the result: h is not stored


def test_a_kernel_after_a_matmul_keeps_its_own_kind(device):
    """A reduction that reads the matmul's result cannot join the kernel before the matmul, and
    trying must not turn that pointwise kernel into a reduction kernel."""
    def fn(x, w):
        a = torch.sin(x) * 2
        y = a @ w
        return (a * y).sum(-1), y
    report = check(fn, _rand(64, 32, device=device), _rand(32, 32, device=device))
    assert [k.kind for k in report.kernels] == ["pointwise", "persistent_reduction"], \
        [(k.name, k.kind) for k in report.kernels]


def test_a_training_batch_norm_is_its_statistics_kernel_and_a_counter(device):
    """In training a batch norm adds 1 to num_batches_tracked (one element) between its
    statistics' reduction and the running statistics' update. That one-element kernel steps
    aside (schedule/fusion._steps_aside), so the update and the normalization with its ReLU join
    the statistics' kernel: two forward kernels, where the counter made four. The outputs, the
    gradients and the three buffers match eager's."""
    from helpers import assert_same
    from tritonize.backend import make_backend
    from tritonize.config import make_options

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16),
                                torch.nn.ReLU()).to(device)
    reference = copy.deepcopy(model)
    x = _rand(4, 8, 10, 10, device=device)
    recorder = []
    compiled = torch.compile(model, backend=make_backend(make_options(), recorder=recorder))
    for _ in range(2):
        actual, expected = compiled(x), reference(x)
        assert_same(actual, expected, atol=1e-5, rtol=1e-5)
        actual.square().sum().backward()
        expected.square().sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert_same(p.grad, q.grad, atol=1e-4, rtol=1e-4)
    assert_same(list(model[1].buffers()), list(reference[1].buffers()), atol=1e-6, rtol=1e-6)
    forward = next(r for r in recorder if r != "graph")
    assert len(forward.kernels) == 2, [k.name for k in forward.kernels]
