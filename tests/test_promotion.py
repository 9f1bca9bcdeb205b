"""Output dtypes against eager's promotion rules, for ops that take a destination and a source (or
value) of different dtypes: the scatter family, index_put / scatter / index_copy / index_add /
index_fill / masked_fill with a source of another dtype, where and cat of mixed dtypes. Each case
runs on every (destination, source) dtype pair eager accepts and compares dtype and values."""
import pytest
import torch

from helpers import assert_same
import tritonize

PAIRS = [(torch.int64, torch.float32), (torch.float32, torch.int64), (torch.int32, torch.float64),
         (torch.bfloat16, torch.float32), (torch.float32, torch.float16), (torch.uint8, torch.int64),
         (torch.bool, torch.float32), (torch.float16, torch.bool), (torch.int8, torch.bool)]


def sample(dtype, shape, device, seed):
    g = torch.Generator().manual_seed(seed)
    values = torch.randn(shape, generator=g) * 5
    if dtype == torch.bool:
        return (values > 0).to(device)
    if dtype == torch.uint8:
        values = values.abs()
    return values.to(dtype).to(device)


def index(device, n, size, seed=3):
    g = torch.Generator().manual_seed(seed)
    return torch.randperm(size, generator=g)[:n].to(device)


CASES = {
    "select_scatter": (lambda x, s: torch.select_scatter(x, s[:, 0], 1, 0), (6, 5, 4), (6, 4, 4)),
    "slice_scatter": (lambda x, s: torch.slice_scatter(x, s[:, :2], 1, 1, 5, 2), (6, 5, 4), (6, 2, 4)),
    "diagonal_scatter": (lambda x, s: torch.diagonal_scatter(x, s[0, :4], 1), (5, 6), (5, 6)),
    "as_strided_scatter": (lambda x, s: torch.as_strided_scatter(x, s[:2, :3], (2, 3), (6, 2), 1),
                           (5, 6), (5, 6)),
    "index_put": (lambda x, s: torch.index_put(x, (index(x.device, 3, 6),), s[:3]), (6, 4), (6, 4)),
    "index_put_accumulate": (lambda x, s: torch.index_put(x, (index(x.device, 3, 6),), s[:3], accumulate=True),
                             (6, 4), (6, 4)),
    "scatter": (lambda x, s: torch.scatter(x, 0, index(x.device, 4, 6).view(4, 1).expand(4, 4), s[:4]),
                (6, 4), (6, 4)),
    "index_copy": (lambda x, s: torch.index_copy(x, 0, index(x.device, 3, 6), s[:3]), (6, 4), (6, 4)),
    "masked_fill_tensor": (lambda x, s: x.masked_fill(x != 0, s[0, 0]), (6, 4), (6, 4)),
    "where": (lambda x, s: torch.where(s != 0, x, s), (6, 4), (6, 4)),
    "where_scalar": (lambda x, s: (torch.where(s != 0, x, 2.5), torch.where(s != 0, 3, s)), (6, 4), (6, 4)),
    "cat": (lambda x, s: torch.cat([x, s]), (6, 4), (6, 4)),
    "index_fill": (lambda x, s: (x.index_fill(0, index(x.device, 3, 6), s[0, 0]),
                                 x.index_fill(1, index(x.device, 2, 4), 2.75)), (6, 4), (6, 4)),
    "index_add": (lambda x, s: torch.index_add(x, 0, index(x.device, 3, 6), s[:3]), (6, 4), (6, 4)),
    "masked_fill_scalar": (lambda x, s: (x.masked_fill(s != 0, 2.75), x.masked_fill(s != 0, -1)), (6, 4), (6, 4)),
    "clamp_tensor": (lambda x, s: (torch.clamp(x, min=s), torch.clamp(x, max=s)), (6, 4), (6, 4)),
    "binary": (lambda x, s: (x + s, x - s, x * s, x == s, x < s, torch.maximum(x, s), torch.minimum(x, s)),
               (6, 4), (6, 4)),
    "scatter_add": (lambda x, s: torch.scatter_add(x, 0, index(x.device, 4, 6).view(4, 1).expand(4, 4), s[:4]),
                    (6, 4), (6, 4)),
    "copy_into": (lambda x, s: x.clone().copy_(s), (6, 4), (6, 4)),
}

@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0]}-{p[1]}".replace("torch.", ""))
@pytest.mark.parametrize("case", sorted(CASES))
def test_output_dtype_matches_eager(device, case, pair):
    fn, x_shape, s_shape = CASES[case]
    x = sample(pair[0], x_shape, device, 0)
    s = sample(pair[1], s_shape, device, 1)
    x_before, s_before = x.clone(), s.clone()
    try:
        expected = fn(x, s)
    except RuntimeError:
        pytest.skip("eager refuses these dtypes")
    actual = torch.compile(fn, backend="tritonize")(x, s)
    for a, e in zip(*(t if isinstance(t, tuple) else (t,) for t in (actual, expected))):
        assert a.dtype == e.dtype
    assert_same(actual, expected)
    assert torch.equal(x, x_before) and torch.equal(s, s_before)
