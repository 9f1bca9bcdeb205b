"""tritonize.profile (issue 24): each kernel's bytes and floating-point operations, counted from
the IR (codegen/traffic.py), against counts made by hand."""
import torch
import torch.nn.functional as F

import tritonize

ROWS, COLS = 32, 64
POINTS = ROWS * COLS
FP32 = 4


def _only_kernel(prof):
    assert len(prof.rows) == 1, str(prof)
    return prof.rows[0]


def test_a_gelu_chain(device):
    """gelu(2x + 1): mul, add, then gelu's mul by 0.5, mul by 1/sqrt(2), erf, add 1, mul: 7 an
    element; x read once, the result written once."""
    row = _only_kernel(tritonize.profile(lambda x: F.gelu(x * 2 + 1), torch.randn(ROWS, COLS, device=device)))
    assert (row.kind, row.launches) == ("kernel", 1)
    assert (row.bytes_read, row.bytes_written, row.flops) == (POINTS * FP32, POINTS * FP32, 7 * POINTS)


def test_a_softmax(device):
    """Over rows of 64: the max's and the sum's combines, x - max, exp and the division: 5 an
    element (exp(x - max) feeds the sum and the output, computed once)."""
    row = _only_kernel(tritonize.profile(lambda x: torch.softmax(x, -1), torch.randn(ROWS, COLS, device=device)))
    assert (row.bytes_read, row.bytes_written, row.flops) == (POINTS * FP32, POINTS * FP32, 5 * POINTS)


def test_a_layer_norm(device):
    """An element: var_mean's combines, the variance's (3: a deviation, squared, summed) and the
    mean's (2: the sum, and the deviations' sum that corrects it), then x - mean, times rstd,
    times the weight, plus the bias (4). A row: var + eps, rsqrt (2)."""
    x, w, b = torch.randn(ROWS, COLS, device=device), torch.randn(COLS, device=device), torch.randn(COLS, device=device)
    row = _only_kernel(tritonize.profile(lambda x, w, b: F.layer_norm(x, (COLS,), w, b), x, w, b))
    assert row.bytes_read == (POINTS + 2 * COLS) * FP32 and row.bytes_written == POINTS * FP32
    assert row.flops == 9 * POINTS + 2 * ROWS


def test_a_matmul_extern(device):
    a, b = torch.randn(ROWS, COLS, device=device), torch.randn(COLS, 16, device=device)
    row = _only_kernel(tritonize.profile(lambda a, b: a @ b, a, b))
    assert (row.name, row.kind) == ("aten.mm.default", "extern")
    assert (row.bytes_read, row.bytes_written) == ((ROWS * COLS + COLS * 16) * FP32, ROWS * 16 * FP32)
    assert row.flops == 2 * ROWS * 16 * COLS


def test_launches_of_one_kernel_add_up_and_the_table_names_them(device):
    """Two graphs (a graph break) run the same kernel: one row, two launches, twice the bytes."""
    def fn(x):
        y = torch.sin(x)
        torch._dynamo.graph_break()
        return torch.sin(y)

    prof = tritonize.profile(fn, torch.randn(ROWS, COLS, device=device))
    row = _only_kernel(prof)
    assert row.launches == 2 and row.bytes == 2 * 2 * POINTS * FP32 and row.flops == 2 * POINTS
    assert row.name in str(prof) and prof.graphs == 2


def test_training_counts_the_backward_too(device):
    """A linear layer's backward: its two products (the input's and the weight's gradients) are
    counted with the forward's."""
    layer = torch.nn.Linear(COLS, 16, bias=False, device=device)
    x = torch.randn(ROWS, COLS, device=device, requires_grad=True)
    prof = tritonize.profile(lambda x: layer(x).sum(), x)
    products = [r for r in prof.rows if r.kind == "extern" and "mm" in r.name]
    assert sum(r.launches for r in products) == 3
    assert sum(r.flops for r in products) == 3 * 2 * ROWS * 16 * COLS


def test_fused_attention_counts_its_products(device):
    """q (2, 4, 16, 8), k and v (2, 4, 32, 8): forward QK^T and PV, 2 * 16 * 32 * (8 + 8) a batch
    and head; backward 2.5 times that (five products); causal half. Whichever kernel the device
    picks (flash, efficient, cuDNN, the CPU's), named by its schema's query, key and value."""
    q, k, v = (torch.randn(2, 4, n, 8, device=device) for n in (16, 32, 32))
    forward = 2 * 8 * 16 * 32 * 16

    def attention_rows(prof):
        return sorted((r.flops, r.launches) for r in prof.rows if "scaled_dot_product" in r.name)

    assert attention_rows(tritonize.profile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v)) == [
        (forward, 1)]
    causal = tritonize.profile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v[:, :, :16], is_causal=True),
                               q, k[:, :, :16], v)
    assert attention_rows(causal) == [(forward // 4, 1)]
    trained = tritonize.profile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v).sum().backward(),
                                q.clone().requires_grad_(), k, v)
    assert attention_rows(trained) == [(forward, 1), (forward * 5 // 2, 1)]
