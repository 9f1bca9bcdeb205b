"""Big matmuls whose output rows are not 16-byte multiples run into padded rows on CUDA
(codegen/wrapper.pads_matmul_columns, runtime matmul_padded_columns)."""
import pytest
import torch

from helpers import check
from tritonize.runtime.wrapper_support import matmul_padded_columns

aten = torch.ops.aten


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_matmul_padded_columns_values_and_layout(device, dtype):
    a = torch.randn(33, 20, device=device, dtype=dtype)
    b = torch.randn(20, 51, device=device, dtype=dtype)
    bias = torch.randn(51, device=device, dtype=dtype)
    product = matmul_padded_columns(aten.mm.out, a, b)
    assert product.is_contiguous() and product.shape == (33, 51)
    torch.testing.assert_close(product, a @ b)
    torch.testing.assert_close(matmul_padded_columns(aten.addmm.out, bias, a, b, beta=0.5, alpha=2.0),
                               torch.addmm(bias, a, b, beta=0.5, alpha=2.0))
    torch.testing.assert_close(matmul_padded_columns(aten.mm.out, a, b.t().contiguous().t()), a @ b)


@pytest.mark.parametrize("vocab", [1001, 1024])
def test_lm_head_with_an_odd_vocabulary(device, vocab):
    torch.manual_seed(0)
    hidden = torch.randn(1024, 512, device=device, dtype=torch.bfloat16)  # 1024 * 1001 * 512 >= 2**28
    weight = torch.randn(vocab, 512, device=device, dtype=torch.bfloat16) * 0.05
    bias = torch.randn(vocab, device=device, dtype=torch.bfloat16)
    full_bias = torch.randn(1024, vocab, device=device, dtype=torch.bfloat16)
    for fn in (lambda h, w: h @ w.t(), lambda h, w: torch.nn.functional.linear(h, w, bias)):
        report = check(fn, hidden, weight, atol=2e-2, rtol=2e-2)
        padded = "matmul_padded_columns(aten." in report.wrapper
        assert padded == (hidden.is_cuda and vocab % 8 != 0), report.wrapper
    report = check(lambda h, w: torch.addmm(full_bias, h, w.t()), hidden, weight, atol=2e-2, rtol=2e-2)
    assert "matmul_padded_columns(aten." not in report.wrapper  # a 2-D bias is not padded


def test_small_products_under_min_macs_are_computed_as_they_are(device):
    a = torch.randn(9, 20, device=device)
    b = torch.randn(51, 20, device=device).t()  # a transposed weight, as x @ w.t() reads it
    product = matmul_padded_columns(aten.mm.out, a, b, min_macs=1 << 28)
    assert product.is_contiguous() and product.shape == (9, 51)
    torch.testing.assert_close(product, a @ b)
    torch.testing.assert_close(matmul_padded_columns(aten.mm.out, a, b), a @ b)  # padded, b transposed


@pytest.mark.parametrize("vocab", [1001, 1024])
def test_lm_head_with_symbolic_rows(device, vocab):
    """Rows symbolic, columns known: padded where the row width needs it, the size test per call."""
    from tritonize.backend import make_backend

    torch.manual_seed(0)
    head = torch.nn.Linear(512, vocab, bias=False, device=device, dtype=torch.bfloat16)  # a parameter: static
    recorder = []
    compiled = torch.compile(head, backend=make_backend(recorder=recorder), dynamic=True)
    for rows in (1024, 24):
        hidden = torch.randn(rows, 512, device=device, dtype=torch.bfloat16)
        with torch.no_grad():
            torch.testing.assert_close(compiled(hidden), head(hidden), atol=2e-2, rtol=2e-2)
    wrappers = [r.wrapper for r in recorder if r != "graph"]
    padded = any("min_macs=" in w for w in wrappers)
    assert padded == (device == "cuda" and vocab % 8 != 0), wrappers
