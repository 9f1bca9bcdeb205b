"""Big matmuls with a leading dimension that is not a 16-byte multiple (output rows, depth, an
operand's row stride) run on aligned copies on CUDA (codegen/wrapper.aligns_matmul, runtime
matmul_aligned)."""
import math
import unittest.mock

import pytest
import torch

from helpers import check
from tritonize.runtime.wrapper_support import matmul_aligned

aten = torch.ops.aten


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_matmul_aligned_values_and_layout(device, dtype):
    a = torch.randn(33, 20, device=device, dtype=dtype)
    b = torch.randn(20, 51, device=device, dtype=dtype)
    bias = torch.randn(51, device=device, dtype=dtype)
    product = matmul_aligned(aten.mm.out, a, b)
    assert product.is_contiguous() and product.shape == (33, 51)
    torch.testing.assert_close(product, a @ b)
    torch.testing.assert_close(matmul_aligned(aten.addmm.out, bias, a, b, beta=0.5, alpha=2.0),
                               torch.addmm(bias, a, b, beta=0.5, alpha=2.0))
    torch.testing.assert_close(matmul_aligned(aten.mm.out, a, b.t().contiguous().t()), a @ b)


def test_a_large_padded_product_is_computed_a_block_of_rows_at_a_time(device, monkeypatch):
    """Past PADDED_BLOCK_BYTES the padded result is never whole: blocks of rows go through one
    padded buffer into the dense result (GPT-2's logits held both, 1.6 GB). Blocks of rows of a
    transposed a, and addmm's bias and scales, give eager's values."""
    from tritonize.runtime import wrapper_support

    monkeypatch.setattr(wrapper_support, "PADDED_BLOCK_BYTES", 1024)
    monkeypatch.setattr(wrapper_support, "PADDED_BLOCK_ROWS", 4)
    copied = []
    dense_rows = wrapper_support.dense_rows
    monkeypatch.setattr(wrapper_support, "dense_rows",
                        lambda view, out: copied.append(tuple(view.shape)) or dense_rows(view, out=out))
    a = torch.randn(37, 20, device=device)
    b = torch.randn(20, 13, device=device)  # 13 columns: padded to 16 (64 bytes a row)
    bias = torch.randn(13, device=device)
    product = matmul_aligned(aten.mm.out, a, b)
    assert copied == [(16, 13), (16, 13), (5, 13)]  # 37 rows of 64 bytes: blocks of 1024 bytes
    assert product.is_contiguous() and product.shape == (37, 13)
    torch.testing.assert_close(product, a @ b)
    a_t = a.t().contiguous().t()
    torch.testing.assert_close(matmul_aligned(aten.addmm.out, bias, a_t, b, beta=0.5, alpha=2.0),
                               torch.addmm(bias, a, b, beta=0.5, alpha=2.0))
    # a transposed weight (columns at 16-byte boundaries) is not copied: its first 12 columns and
    # its last one are two products a block
    copies = []
    copy_padded = wrapper_support._copy_padded
    monkeypatch.setattr(wrapper_support, "_copy_padded", lambda t, *size: copies.append(t.shape) or copy_padded(t, *size))
    weight_t = b.t().contiguous().t()
    torch.testing.assert_close(matmul_aligned(aten.addmm.out, bias, a, weight_t, beta=0.5, alpha=2.0),
                               torch.addmm(bias, a, b, beta=0.5, alpha=2.0))
    assert copies == [] and copied[-3:] == [(16, 13), (16, 13), (5, 13)]
    one = bias[:1]  # addmm broadcasts a bias of one element over the columns of both products
    torch.testing.assert_close(matmul_aligned(aten.addmm.out, one, a, weight_t), torch.addmm(one, a, b))

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("cols", [51, 50, 1001, 60, 64])
def test_many_rows_of_an_odd_width_are_products_by_row_residue(device, dtype, cols, monkeypatch):
    """With many rows (_by_residue_pays) and a transposed weight, a product of odd width goes
    straight into the dense result: two products of the columns at the edges, then a product for
    each residue of the row index whose output rows and first column start at 16-byte boundaries
    (cuBLAS's vectorized kernels); no padded buffer, no copy. Values with addmm's bias and
    scales, and with a bias of one element, are eager's."""
    from tritonize.runtime import wrapper_support

    copied, outs = [], []
    dense_rows = wrapper_support.dense_rows
    monkeypatch.setattr(wrapper_support, "dense_rows",
                        lambda view, out: copied.append(view.shape) or dense_rows(view, out=out))
    unit = 16 // torch.empty((), dtype=dtype).element_size()

    def recording(op):
        return lambda *args, out, **kwargs: outs.append(out) or op(*args, out=out, **kwargs)

    # small integers: every sum is exact in bf16 (|value| < 256), so any order of the products'
    # additions gives eager's values exactly, on any device
    a = torch.randint(-2, 3, (53, 24), device=device).to(dtype)  # 53 rows >= 2 x depth 24
    weight = torch.randint(-2, 3, (cols, 24), device=device).to(dtype)
    bias = torch.randint(-2, 3, (cols,), device=device).to(dtype) * 2
    product = matmul_aligned(recording(aten.mm.out), a, weight.t())
    assert product.is_contiguous() and product.shape == (53, cols)
    torch.testing.assert_close(product, a @ weight.t(), rtol=0, atol=0)
    assert copied == []
    if cols % unit == 0:
        assert len(outs) == 1
    else:
        groups = unit // math.gcd(cols, unit)
        edges, by_residue = outs[:2], outs[2:]
        assert [o.shape[1] for o in edges] == [unit, unit]
        assert sorted(o.storage_offset() // cols for o in by_residue) == list(range(groups))
        for o in by_residue:
            first = o.storage_offset() % cols
            assert o.stride() == (groups * cols, 1) and o.data_ptr() % 16 == 0 and o.shape[1] % unit == 0
            assert first < unit and first + o.shape[1] > cols - unit  # the edges cover the rest
            assert o.shape[0] in (53 // groups, 53 // groups + 1)
    torch.testing.assert_close(matmul_aligned(aten.addmm.out, bias, a, weight.t(), beta=0.5, alpha=2.0),
                               torch.addmm(bias, a, weight.t(), beta=0.5, alpha=2.0), rtol=0, atol=0)
    one = bias[:1]
    torch.testing.assert_close(matmul_aligned(aten.addmm.out, one, a, weight.t()), torch.addmm(one, a, weight.t()),
                               rtol=0, atol=0)
    few = a[:47]  # fewer rows than 2 x depth: padded and copied
    torch.testing.assert_close(matmul_aligned(aten.mm.out, few, weight.t()), few @ weight.t(), rtol=0, atol=0)
    assert len(copied) == (1 if cols % unit else 0)



@pytest.mark.parametrize("vocab", [1001, 1024])
def test_lm_head_with_an_odd_vocabulary(device, vocab):
    torch.manual_seed(0)
    hidden = torch.randn(1024, 512, device=device, dtype=torch.bfloat16)  # 1024 * 1001 * 512 >= 2**28
    weight = torch.randn(vocab, 512, device=device, dtype=torch.bfloat16) * 0.05
    bias = torch.randn(vocab, device=device, dtype=torch.bfloat16)
    full_bias = torch.randn(1024, vocab, device=device, dtype=torch.bfloat16)
    for fn in (lambda h, w: h @ w.t(), lambda h, w: torch.nn.functional.linear(h, w, bias)):
        report = check(fn, hidden, weight, atol=2e-2, rtol=2e-2)
        padded = "matmul_aligned(aten." in report.wrapper
        assert padded == (hidden.is_cuda and vocab % 8 != 0), report.wrapper
    report = check(lambda h, w: torch.addmm(full_bias, h, w.t()), hidden, weight, atol=2e-2, rtol=2e-2)
    assert "matmul_aligned(aten." not in report.wrapper  # a 2-D bias is not padded


def test_small_products_under_min_macs_are_computed_as_they_are(device):
    a = torch.randn(9, 20, device=device)
    b = torch.randn(51, 20, device=device).t()  # a transposed weight, as x @ w.t() reads it
    product = matmul_aligned(aten.mm.out, a, b, min_macs=1 << 28)
    assert product.is_contiguous() and product.shape == (9, 51)
    torch.testing.assert_close(product, a @ b)
    torch.testing.assert_close(matmul_aligned(aten.mm.out, a, b), a @ b)  # padded, b transposed


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_matmul_aligned_pads_an_odd_depth_and_copies_odd_row_strides(device, dtype):
    """The LM head's backward: the logits' gradient (odd width) times the weight (an odd depth),
    and its transpose times the hidden states (an odd row stride); with a bias too."""
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
    grad = torch.randn(24, 51, device=device, dtype=dtype)
    weight = torch.randn(51, 16, device=device, dtype=dtype)
    hidden = torch.randn(24, 16, device=device, dtype=dtype)
    bias = torch.randn(16, device=device, dtype=dtype)
    from tritonize.runtime import wrapper_support

    for a, b in ((grad, weight), (grad.t(), hidden), (grad, weight[:, :13]), (hidden.t(), grad)):
        copies = []
        real_padded = wrapper_support.padded_rows
        with unittest.mock.patch.object(wrapper_support, "padded_rows",
                                        lambda t, *size: copies.append(real_padded(t, *size)) or copies[-1]):
            product = matmul_aligned(aten.mm.out, a, b)
        assert copies
        for copy in copies:  # the padded operands' leading dimensions are aligned
            assert copy.stride(0) % (16 // copy.element_size()) == 0
        assert product.is_contiguous() and product.shape == (a.shape[0], b.shape[1])
        torch.testing.assert_close(product, a @ b, **tol)
    torch.testing.assert_close(matmul_aligned(aten.addmm.out, bias, grad, weight, beta=0.5),
                               torch.addmm(bias, grad, weight, beta=0.5), **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_an_odd_depth_splits_off_its_last_steps_and_leaves_b_uncopied(device, dtype):
    """The LM head's backward product of the logits' gradient (odd depth) and the weight (rows at
    16-byte boundaries): the weight is not copied; the depth's last steps are a product of their
    own (with the bias), the aligned rest is added onto it. The gradient is copied only where its
    rows do not start at 16-byte boundaries (dense, odd width); stored with padded rows it is
    read as it is. Values with addmm's bias and scales are eager's; the operands are unchanged."""
    from tritonize.runtime import wrapper_support

    unit = 16 // torch.empty((), dtype=dtype).element_size()

    def small_integers(*size):  # every sum below is exact in bf16 too: equal to eager's bit for bit
        return torch.randint(-1, 2, size, device=device).to(dtype)

    torch.manual_seed(0)
    grad, weight = small_integers(24, 51), small_integers(51, 16)
    bias = small_integers(16) * 2
    padded_rows = torch.zeros(24, 56, device=device, dtype=dtype)
    padded_rows[:, :51] = grad
    grad_in_padded_rows = padded_rows[:, :51]  # what a kernel stores for a product (aligned rows)
    transposed = small_integers(51, 24).t()  # column-major: aligned as it is
    before = [t.clone() for t in (grad, weight, bias, padded_rows)]
    for a, copies_a in ((grad, True), (grad_in_padded_rows, False), (transposed, False)):
        copied = []
        real_copy = wrapper_support._copy_padded
        with unittest.mock.patch.object(wrapper_support, "_copy_padded",
                                        lambda t, *size: copied.append(t) or real_copy(t, *size)):
            product = matmul_aligned(aten.mm.out, a, weight)
            scaled = matmul_aligned(aten.addmm.out, bias, a, weight, beta=0.5, alpha=2.0)
        assert not any(t is weight for t in copied) and (len(copied) == 2) == copies_a, [t.shape for t in copied]
        assert product.is_contiguous() and product.shape == (24, 16)
        assert torch.equal(product, a @ weight)
        assert torch.equal(scaled, torch.addmm(bias, a, weight, beta=0.5, alpha=2.0))
    for t, b in zip((grad, weight, bias, padded_rows), before):
        assert torch.equal(t, b)
    assert 51 % unit  # the case is an odd depth for both dtypes


@pytest.mark.parametrize("align", ["auto", "always"])
@pytest.mark.parametrize("vocab", [1001, 1024])
def test_lm_head_backward_with_symbolic_rows(device, vocab, align):
    """Training an LM head with dynamic rows: the gradients match eager. With an odd vocabulary
    (on CUDA, or everywhere with align_matmuls="always") the backward's two products run aligned
    too, and share the padded copy of the logits' gradient (a graph input here: the loss is
    outside the compiled code)."""
    from tritonize.backend import make_backend
    from tritonize.config import make_options

    torch.manual_seed(0)
    head = torch.nn.Linear(512, vocab, bias=False, device=device, dtype=torch.bfloat16)
    recorder = []
    backend = make_backend(make_options(align_matmuls=align), recorder=recorder)
    compiled = torch.compile(head, backend=backend, dynamic=True)
    for rows in (1024, 600):
        hidden = torch.randn(rows, 512, device=device, dtype=torch.bfloat16, requires_grad=True)
        expected = torch.autograd.grad(head(hidden).float().square().mean(), [hidden, head.weight])
        actual = torch.autograd.grad(compiled(hidden).float().square().mean(), [hidden, head.weight])
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e, atol=2e-2, rtol=2e-2)
    padded = vocab % 8 != 0 and (device == "cuda" or align == "always")
    wrappers = [r.wrapper for r in recorder if r != "graph"]
    assert sum(w.count("matmul_aligned(aten.") for w in wrappers) == (3 if padded else 0)
    assert sum(w.count("pads=pads") for w in wrappers) == (2 if padded else 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_a_value_computed_for_products_is_stored_in_padded_rows(device, dtype, monkeypatch):
    """lower/product_rows.py (align_matmuls="always"): the logits' gradient of a cross-entropy
    loss, read by the LM head's two backward products, is stored by its kernel with rows padded
    to 16 bytes; neither product copies an operand (no _copy_padded at all); gradients and the
    loss are eager's, the inputs unchanged. With "never" the gradient is stored dense."""
    from tritonize.backend import make_backend
    from tritonize.config import make_options
    from tritonize.runtime import wrapper_support

    copies = []
    real_copy = wrapper_support._copy_padded
    monkeypatch.setattr(wrapper_support, "_copy_padded", lambda t, *a, **k: copies.append(t.shape) or real_copy(t, *a, **k))
    torch.manual_seed(0)
    vocab, width, rows = 1001, 128, 4096  # rows * width * vocab >= MIN_PADDED_MATMUL_MACS
    weight = (torch.randn(vocab, width, device=device) * 0.05).to(dtype)

    def loss_fn(hidden, weight, target):
        return torch.nn.functional.cross_entropy((hidden @ weight.t()).float(), target)

    hidden = torch.randn(rows, width, device=device).to(dtype)
    target = torch.randint(0, vocab, (rows,), device=device)
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {"atol": 1e-5, "rtol": 1e-4}
    for align, padded in (("always", True), ("never", False)):
        torch._dynamo.reset()
        recorder, copies[:] = [], []
        compiled = torch.compile(loss_fn, backend=make_backend(make_options(align_matmuls=align), recorder=recorder))
        args = [hidden.clone().requires_grad_(), weight.clone().requires_grad_(), target]
        before = [t.detach().clone() for t in args]
        loss = compiled(*args)
        loss.backward()
        eager_args = [hidden.clone().requires_grad_(), weight.clone().requires_grad_(), target]
        eager_loss = loss_fn(*eager_args)
        eager_loss.backward()
        torch.testing.assert_close(loss, eager_loss, **tol)
        for a, e in zip(args[:2], eager_args[:2]):
            torch.testing.assert_close(a.grad, e.grad, **tol)
        assert all(torch.equal(a.detach(), b) for a, b in zip(args, before))
        [backward] = [r.wrapper for r in recorder if r != "graph" and r.role == "backward"]
        unit = 16 // weight.element_size()
        stored = [line for line in backward.splitlines() if f"({rows}, {vocab})" in line and "empty_strided" in line]
        assert len(stored) == 1 and (f"({-(-vocab // unit) * unit}, 1)" in stored[0]) == padded, backward
        assert backward.count("matmul_aligned(aten.") == (1 if padded else 0)
        assert copies == [], copies


RETURNED_FORMS = {  # a value returned as it is, or through ops whose result is (or lowers to) its memory
    "view": lambda r: r.view(1024, 2002),
    "unfold": lambda r: r.unfold(1, 4, 2),
    "clone": lambda r: r.clone(),
}


@pytest.mark.parametrize("form", list(RETURNED_FORMS))
def test_a_value_an_output_views_keeps_its_dense_rows(device, form):
    """A value read by a product and returned too (a view, an unfold: views by their schema; a
    clone, which lowering makes a view) keeps eager's layout (stored padded, the output would need
    a copy at the graph's edge): the graph stores it once, dense, and returns eager's strides."""
    from tritonize.backend import make_backend
    from tritonize.config import make_options

    torch.manual_seed(0)
    x = torch.randn(2048, 1001, device=device)
    w = torch.randn(1001, 256, device=device)
    recorder = []

    def fn(x, w):
        r = torch.relu(x)
        return r @ w, RETURNED_FORMS[form](r)

    compiled = torch.compile(fn, backend=make_backend(make_options(align_matmuls="always"), recorder=recorder))
    product, returned = compiled(x, w)
    expected = fn(x, w)
    torch.testing.assert_close(product, expected[0], atol=1e-4, rtol=1e-4)
    assert torch.equal(returned, expected[1]) and returned.stride() == expected[1].stride()
    [wrapper] = [r.wrapper for r in recorder if r != "graph"]
    stored = [line for line in wrapper.splitlines() if "= empty_strided" in line]
    assert len(stored) == 1 and "(1001, 1)" in stored[0], wrapper


class _ReusingAllocator:
    """wrapper_support's torch, with `empty` handing a freed block of the same size back to the
    next request (as CUDA's caching allocator does; the CPU's rarely does)."""

    def __init__(self):
        self.blocks = []  # [storage tensor, weak reference to the tensor handed out]

    def __getattr__(self, name):
        return getattr(torch, name)

    def empty(self, shape, dtype=None, device=None):
        import weakref

        numel = math.prod(shape)
        block = next((b for b in self.blocks if b[0].numel() == numel and b[0].dtype == dtype and b[1]() is None), None)
        if block is None:
            block = [torch.empty((numel,), dtype=dtype, device=device), None]
            self.blocks.append(block)
        out = torch.empty((0,), dtype=dtype, device=device)  # a new tensor (its own version counter)
        out.set_(block[0].untyped_storage(), 0, tuple(shape))  # on the block's memory
        block[1] = weakref.ref(out)
        return out


def test_a_chain_of_padded_products_reads_no_stale_copy(device, monkeypatch):
    """x @ W1.T @ W2.T @ W3.T @ W4.T with odd widths (align_matmuls="always") under an allocator
    that reuses freed blocks: a product's operand freed inside a run of products may come back as
    another tensor's memory of the same shape and version, and a copy cached by address then
    stood for it (a review of the thirty-first session: the result was (x @ W1.T) @ W4.T). Runs
    share copies only between products that read a buffer in common, and the shared dict holds
    each copied source; the result is eager's."""
    from tritonize.backend import make_backend
    from tritonize.config import make_options
    from tritonize.runtime import wrapper_support

    monkeypatch.setattr(wrapper_support, "torch", _ReusingAllocator())
    torch.manual_seed(0)
    x = torch.randn(512, 512, device=device)
    w1, w3 = torch.randn(1025, 512, device=device) / 20, torch.randn(1025, 512, device=device) / 20
    w2, w4 = torch.randn(512, 1025, device=device) / 30, torch.randn(512, 1025, device=device) / 30

    def fn(x, w1, w2, w3, w4):
        return x @ w1.t() @ w2.t() @ w3.t() @ w4.t()

    compiled = torch.compile(fn, backend=make_backend(make_options(align_matmuls="always")))
    torch.testing.assert_close(compiled(x, w1, w2, w3, w4), fn(x, w1, w2, w3, w4), atol=1e-4, rtol=1e-4)


def test_shared_padded_copies_hold_their_sources(device):
    """_copy_padded with a shared dict keeps each source alive with its copy: its address cannot
    come back as another tensor's while the dict lives."""
    import weakref

    from tritonize.runtime.wrapper_support import _copy_padded

    pads = {}
    source = torch.randn(5, 13, device=device)
    held = weakref.ref(source)
    copy = _copy_padded(source, 5, 16, pads)
    assert torch.equal(copy[:, :13], source) and not copy[:, 13:].any()
    del source
    assert held() is not None
    pads.clear()
    assert held() is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_two_products_of_one_gradient_pad_it_once(device, dtype):
    """An LM head's backward: the logits' gradient (odd width) times the weight, and its
    transpose times the hidden states. With a shared `pads`, the gradient is copied padded once
    (one kernel: values and zeros around them), and both products are eager's."""
    from tritonize.runtime import wrapper_support

    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
    grad = torch.randn(24, 51, device=device, dtype=dtype)
    weight = torch.randn(51, 16, device=device, dtype=dtype)
    hidden = torch.randn(24, 16, device=device, dtype=dtype)
    before = grad.clone()
    sources = []
    real_padded = wrapper_support.padded_rows
    pads = {}
    with unittest.mock.patch.object(wrapper_support, "padded_rows",
                                    lambda t, *size: sources.append(t) or real_padded(t, *size)):
        grad_hidden = matmul_aligned(aten.mm.out, grad, weight, pads=pads)
        grad_weight = matmul_aligned(aten.mm.out, grad.t(), hidden, pads=pads)
    torch.testing.assert_close(grad_hidden, grad @ weight, **tol)
    torch.testing.assert_close(grad_weight, grad.t() @ hidden, **tol)
    assert sum(s is grad for s in sources) == 1, [tuple(s.shape) for s in sources]
    unit = 16 // grad.element_size()
    [padded] = [p for _, p in pads.values() if p.shape == (24, -(-51 // unit) * unit)]
    assert torch.equal(padded[:, :51], grad) and not padded[:, 51:].any() and torch.equal(grad, before)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows,cols,width,offset", [(5, 1027, 1032, 0), (9, 7, 16, 3), (1, 1, 8, 0), (0, 3, 8, 0)])
def test_dense_rows_copies_a_view_of_padded_rows(device, dtype, rows, cols, width, offset):
    """runtime/dense_copy.dense_rows: what matmul_aligned returns for an odd width; equal to the
    view's values, dense, and the padded source untouched."""
    from tritonize.runtime.dense_copy import dense_rows

    source = torch.randn(rows * width + offset, device=device).to(dtype)
    before = source.clone()
    view = source[offset:].view(rows, width)[:, :cols]
    copy = dense_rows(view)
    assert copy.stride() == (cols, 1) and copy.shape == view.shape and copy.dtype == dtype
    assert torch.equal(copy, view) and torch.equal(source, before)


def test_an_operand_rewritten_between_padded_products_is_padded_again(device):
    """x @ W1 -> gelu (in place over the product) -> @ W2 -> gelu into the same buffer -> @ W3:
    three padded products (odd widths on CUDA) with kernels between them that rewrite their
    operand's memory without moving its version. They share no padded copies (a review of the
    twenty-first session: the third product read the first gelu's copy, error 3.9 in bf16)."""
    torch.manual_seed(0)
    rows, width = 2048, 1001
    x = torch.randn(rows, width, device=device)
    w1, w2, w3 = [torch.randn(width, width, device=device) / width ** 0.5 for _ in range(3)]

    def fn(x, w1, w2, w3):
        hidden = torch.nn.functional.gelu(x @ w1) @ w2
        return torch.nn.functional.gelu(hidden) @ w3, hidden

    report = check(fn, x, w1, w2, w3, atol=1e-3, rtol=1e-3)
    assert "pads=pads" not in report.wrapper


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_the_strided_padded_product(device, dtype):
    """matmul_aligned(padded_rows=True): an odd-width product returned as computed, a view of rows
    padded to 16 bytes (no copy back dense), for a transposed weight (two products: the aligned
    columns and the rest), a weight copied padded, and addmm's bias and scales; eager's values
    (small integers: exact), operands unchanged."""
    from tritonize.runtime import wrapper_support

    def small_integers(*size):
        return torch.randint(-1, 2, size, device=device).to(dtype)

    torch.manual_seed(0)
    unit = 16 // torch.empty((), dtype=dtype).element_size()
    a, weight, bias = small_integers(40, 24), small_integers(51, 24), small_integers(51) * 2
    before = [t.clone() for t in (a, weight, bias)]
    copied = []
    real_rows = wrapper_support.dense_rows
    with unittest.mock.patch.object(wrapper_support, "dense_rows", lambda *x, **k: copied.append(1) or real_rows(*x, **k)):
        for b in (weight.t(), weight.t().contiguous()):  # a transposed weight; a row-major one (copied padded)
            product = matmul_aligned(aten.mm.out, a, b, padded_rows=True)
            scaled = matmul_aligned(aten.addmm.out, bias, a, b, beta=0.5, alpha=2.0, padded_rows=True)
            for result in (product, scaled):
                assert result.shape == (40, 51) and result.stride() == (-(-51 // unit) * unit, 1)
            assert torch.equal(product, a @ b)
            assert torch.equal(scaled, torch.addmm(bias, a, b, beta=0.5, alpha=2.0))
    assert copied == []
    assert all(torch.equal(t, b) for t, b in zip((a, weight, bias), before))


@pytest.mark.parametrize("returned", [False, True])
def test_a_product_no_output_views_stays_in_padded_rows(device, returned):
    """lower/product_rows.py (align_matmuls="always"): logits of odd width that only our kernels
    read (a softmax and its largest value inside the graph) stay in the padded rows their
    product was computed in (padded_rows=True: no dense copy); returned logits keep eager's dense
    layout. Values and strides are eager's."""
    from tritonize.backend import make_backend
    from tritonize.config import make_options

    torch.manual_seed(0)
    hidden = torch.randn(4096, 128, device=device)
    weight = torch.randn(1001, 128, device=device) * 0.05
    bias = torch.randn(1001, device=device)

    def fn(hidden, weight, bias):
        logits = torch.nn.functional.linear(hidden, weight, bias)
        largest = torch.softmax(logits, -1).amax(-1)  # (an argmax could flip on a near tie)
        return (largest, logits) if returned else (largest, logits.amax(-1))

    recorder = []
    compiled = torch.compile(fn, backend=make_backend(make_options(align_matmuls="always"), recorder=recorder))
    actual, expected = compiled(hidden, weight, bias), fn(hidden, weight, bias)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, atol=1e-4, rtol=1e-4)
        assert a.stride() == e.stride()
    [wrapper] = [r.wrapper for r in recorder if r != "graph"]
    assert ("padded_rows=True" in wrapper) == (not returned), wrapper
    assert "matmul_aligned(aten.addmm.out" in wrapper
