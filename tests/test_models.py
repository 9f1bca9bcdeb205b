"""Small real models: an MLP and a transformer block, against eager."""
import pytest
import torch

from conftest import DTYPES
from helpers import check
from tritonize.demo import MLP, TransformerBlock


@pytest.mark.parametrize("dtype", DTYPES)
def test_mlp_matches_eager(device, dtype):
    torch.manual_seed(0)
    model = MLP(32, 64, 16).to(device=device, dtype=dtype).eval()
    x = torch.randn(8, 32, device=device, dtype=dtype)
    with torch.no_grad():
        report = check(model, x, atol=2e-2 if dtype != torch.float32 else 1e-4, rtol=2e-2 if dtype != torch.float32 else 1e-4)
    assert report.externs and not report.fallbacks


@pytest.mark.parametrize("dtype", DTYPES)
def test_transformer_block_matches_eager(device, dtype):
    torch.manual_seed(0)
    model = TransformerBlock(32, 4).to(device=device, dtype=dtype).eval()
    x = torch.randn(2, 8, 32, device=device, dtype=dtype)
    tol = 3e-2 if dtype != torch.float32 else 1e-4
    with torch.no_grad():
        report = check(model, x, atol=tol, rtol=tol)
    assert report.kernels
