"""Random numbers: distribution statistics (against the exact moments and eager's own samples),
reproducibility under torch.manual_seed, independent streams, dropout's scaling and its mask
across forward and backward, and Philox4x32-10's published known answers."""
import pytest
import torch
import torch.nn.functional as F

import tritonize
from tritonize.backend import make_backend
from tritonize.config import make_options
from tritonize.runtime.loader import load_source_module

N = 1 << 17  # samples per statistic: 6 standard errors stay well inside the tolerances below


def _compiled(fn, recorder=None):
    torch._dynamo.reset()
    if recorder is None:
        return torch.compile(fn, backend="tritonize")
    return torch.compile(fn, backend=make_backend(make_options(), recorder))


def _no_fallbacks(fn, *args):
    report = tritonize.explain(fn, *args)
    assert not report.fallbacks, report.fallbacks
    return report


def _ks_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """Two-sample Kolmogorov-Smirnov statistic."""
    a, b = a.flatten().double().sort().values.cpu(), b.flatten().double().sort().values.cpu()
    grid = torch.cat([a, b])
    cdf_a = torch.searchsorted(a, grid, right=True).double() / len(a)
    cdf_b = torch.searchsorted(b, grid, right=True).double() / len(b)
    return (cdf_a - cdf_b).abs().max().item()


def _correlation(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.corrcoef(torch.stack([a.flatten().double(), b.flatten().double()]))[0, 1].item()


def test_rand_is_uniform_on_a_24_bit_grid(device):
    x = torch.empty(256, N // 256, device=device)
    _no_fallbacks(lambda x: torch.rand_like(x), x)
    u = _compiled(lambda x: torch.rand_like(x))(x)
    assert u.dtype == torch.float32 and u.shape == x.shape
    assert 0 <= u.min().item() and u.max().item() < 1
    assert abs(u.mean().item() - 0.5) < 0.006
    assert abs(u.var().item() - 1 / 12) < 0.002
    histogram = torch.histc(u.cpu(), bins=16, min=0, max=1) / u.numel()
    assert (histogram - 1 / 16).abs().max().item() < 0.005
    assert torch.equal(u * 2**24, (u * 2**24).round())
    assert _ks_distance(u, torch.rand(N, device=device)) < 0.015


def test_randn_is_standard_normal(device):
    z = _compiled(lambda: torch.randn(N, device=device))()
    assert abs(z.mean().item()) < 0.02
    assert abs(z.var().item() - 1) < 0.03
    inside_one = (z.abs() < 1).double().mean().item()
    inside_two = (z.abs() < 2).double().mean().item()
    assert abs(inside_one - 0.6827) < 0.01 and abs(inside_two - 0.9545) < 0.006
    centered = z.double() - z.double().mean()
    assert abs((centered**3).mean().item()) < 0.05
    assert abs((centered**4).mean().item() / z.double().var().item() ** 2 - 3) < 0.1
    assert _ks_distance(z, torch.randn(N, device=device)) < 0.015


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_random_tensors_in_other_dtypes(device, dtype):
    u, z = _compiled(lambda: (torch.rand(N, device=device, dtype=dtype),
                              torch.randn(N, device=device, dtype=dtype)))()
    assert u.dtype == z.dtype == dtype
    assert 0 <= u.min().item() and u.max().item() < 1  # low precision: never rounded up to 1
    assert abs(u.double().mean().item() - 0.5) < 0.006
    assert abs(z.double().var().item() - 1) < 0.03


def test_uniform_and_normal_in_place(device):
    def fn(x):
        return torch.empty_like(x).uniform_(-2, 3), torch.empty_like(x).normal_(2, 3)

    x = torch.empty(N, device=device)
    _no_fallbacks(fn, x)
    u, z = _compiled(fn)(x)
    assert -2 <= u.min().item() and u.max().item() < 3 and abs(u.mean().item() - 0.5) < 0.03
    assert abs(z.mean().item() - 2) < 0.06 and abs(z.std().item() - 3) < 0.05


def test_bernoulli_probabilities(device):
    levels = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0], device=device)
    p = levels.repeat_interleave(N // 8)

    def fn(p):
        return torch.bernoulli(p), torch.bernoulli(p, 0.3)

    _no_fallbacks(fn, p)
    draws, fixed = _compiled(fn)(p)
    assert draws.dtype == p.dtype and set(draws.unique().tolist()) <= {0.0, 1.0}
    means = draws.view(len(levels), -1).mean(1)
    torch.testing.assert_close(means, levels, atol=0.01, rtol=0)
    assert means[0].item() == 0 and means[-1].item() == 1
    assert abs(fixed.mean().item() - 0.3) < 0.006


def test_same_seed_same_numbers_and_consecutive_calls_differ(device):
    def fn(x):
        return torch.rand_like(x), torch.randn_like(x) + x, F.dropout(x, 0.5, training=True)

    x = torch.randn(64, 100, device=device)
    f = _compiled(fn)
    torch.manual_seed(1234)
    first = f(x)  # the call that compiles
    torch.manual_seed(1234)
    again = f(x)
    following = f(x)
    torch.manual_seed(99)
    other_seed = f(x)
    for a, b, c, d in zip(first, again, following, other_seed):
        assert torch.equal(a, b)
        assert not torch.equal(b, c)
        assert not torch.equal(a, d)
    torch.manual_seed(1234)
    fresh = _compiled(fn)(x)  # a new compilation: same numbers for the same seed
    assert all(torch.equal(a, b) for a, b in zip(first, fresh))


def test_streams_and_elements_are_independent(device):
    a, b, c = _compiled(lambda: (torch.rand(N, device=device), torch.rand(N, device=device),
                                 torch.randn(N, device=device)))()
    assert not torch.equal(a, b)
    for u, v in [(a, b), (a, c), (b, c), (a[:-1], a[1:]), (c[:-1], c[1:]), (a[:-256], a[256:])]:
        assert abs(_correlation(u, v)) < 0.02


def test_random_values_are_the_same_in_every_kernel_that_reads_them(device):
    def fn(x):
        noise = torch.rand_like(x)
        return noise, noise.cumsum(-1), (x + noise).sum(-1)

    x = torch.randn(32, 500, device=device)
    report = _no_fallbacks(fn, x)
    assert any(k.kind == "scan" for k in report.kernels)
    noise, running, total = _compiled(fn)(x)
    torch.testing.assert_close(running, noise.cumsum(-1), atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(total, (x + noise).sum(-1), atol=1e-4, rtol=1e-5)
    assert abs(running[:, -1].mean().item() - 250) < 5


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_drops_a_fraction_p_and_scales_the_rest(device, p):
    x = torch.randn(N, device=device) + 3  # never exactly 0
    _no_fallbacks(lambda x: F.dropout(x, p, training=True), x)
    y = _compiled(lambda x: F.dropout(x, p, training=True))(x)
    kept = y != 0
    assert abs(1 - kept.double().mean().item() - p) < 0.006
    assert torch.equal(y[kept], x[kept] * (1 / (1 - p)))
    out, mask = _compiled(lambda x: torch.ops.aten.native_dropout(x, p, True))(x)
    assert mask.dtype == torch.bool and torch.equal(out, x * mask * (1 / (1 - p)))


def test_dropout_edge_cases(device):
    x = torch.randn(100, device=device)
    assert torch.equal(_compiled(lambda x: F.dropout(x, 0.5, training=False))(x), x)
    assert torch.equal(_compiled(lambda x: F.dropout(x, 0.0, training=True))(x), x)
    assert torch.equal(_compiled(lambda x: F.dropout(x, 1.0, training=True))(x), torch.zeros_like(x))
    out, mask = _compiled(lambda x: torch.ops.aten.native_dropout(x, 0.3, False))(x)
    assert torch.equal(out, x) and bool(mask.all())


class _DropoutNet(torch.nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.linear = torch.nn.Linear(64, 64)
        self.drop = torch.nn.Dropout(p)

    def forward(self, x):
        return self.drop(torch.relu(self.linear(x)) + 1)


def test_dropout_module_in_training_uses_one_mask_forward_and_backward(device):
    torch.manual_seed(0)
    p, model = 0.4, _DropoutNet(0.4).to(device).train()
    x = torch.randn(512, 64, device=device, requires_grad=True)
    grad_out = torch.randn(512, 64, device=device)
    recorder = []
    y = _compiled(model, recorder)(x)
    y.backward(grad_out)
    artifacts = [a for a in recorder if a != "graph"]
    assert len(artifacts) == 2 and not any(a.fallbacks for a in artifacts)  # forward and backward
    mask = y != 0  # relu(...) + 1 is never 0: y is 0 exactly where dropout dropped
    assert abs(1 - mask.double().mean().item() - p) < 0.01
    # eager with the compiled forward's mask gives the same gradients: backward used that mask
    reference = _DropoutNet(p).to(device)
    reference.load_state_dict(model.state_dict())
    x_ref = x.detach().clone().requires_grad_()
    y_ref = (torch.relu(reference.linear(x_ref)) + 1) * mask / (1 - p)
    y_ref.backward(grad_out)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(x.grad, x_ref.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(model.linear.weight.grad, reference.linear.weight.grad, atol=1e-4, rtol=1e-4)


def test_dropout_module_in_eval_mode_is_the_identity(device):
    model = _DropoutNet(0.5).to(device).eval()
    x = torch.randn(16, 64, device=device)
    torch.testing.assert_close(_compiled(model)(x), model(x))


PHILOX_KNOWN_ANSWERS = [  # (counter c0..c3, key k0 k1) -> output, Philox4x32-10 (Salmon et al., 2011)
    ((0, 0, 0, 0, 0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 6, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344, 0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]

PHILOX_KERNEL = '''
import triton
import triton.language as tl
from tritonize.runtime import triton_helpers as helpers


@triton.jit
def kernel(in_ptr, out_ptr):
    row = tl.arange(0, 4) * 6
    c0 = tl.load(in_ptr + row).to(tl.uint32)
    c1 = tl.load(in_ptr + row + 1).to(tl.uint32)
    c2 = tl.load(in_ptr + row + 2).to(tl.uint32)
    c3 = tl.load(in_ptr + row + 3).to(tl.uint32)
    k0 = tl.load(in_ptr + row + 4).to(tl.uint32)
    k1 = tl.load(in_ptr + row + 5).to(tl.uint32)
    r0, r1, r2, r3 = helpers.philox4x32(c0, c1, c2, c3, k0, k1)
    out = tl.arange(0, 4) * 4
    tl.store(out_ptr + out, r0.to(tl.int64))
    tl.store(out_ptr + out + 1, r1.to(tl.int64))
    tl.store(out_ptr + out + 2, r2.to(tl.int64))
    tl.store(out_ptr + out + 3, r3.to(tl.int64))
'''


def test_philox_matches_the_published_known_answers(device):
    module = load_source_module(PHILOX_KERNEL, "test_philox", interpret=device == "cpu")
    cases = PHILOX_KNOWN_ANSWERS + PHILOX_KNOWN_ANSWERS[:1]  # four lanes
    inputs = torch.tensor([c for c, _ in cases], device=device, dtype=torch.int64)
    out = torch.empty(4, 4, device=device, dtype=torch.int64)
    module.kernel[(1,)](inputs, out)
    assert out.tolist() == [list(expected) for _, expected in cases]
