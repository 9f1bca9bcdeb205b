"""The wrapper's memory plan (codegen/memory_plan.py): a dead buffer's storage taken by a later
buffer of the same class in any layout, a freed buffer nothing takes deleted at its last use, and
the planned peak in explain() (report.peak_memory), exact for graphs small enough to plan by hand.
Every compiled result is compared with eager (values and strides) and the inputs are checked."""
from __future__ import annotations

import torch

import tritonize
from helpers import assert_same

F32 = 4  # bytes


def compile_and_check(fn, *inputs):
    """explain()'s report and the wrapper's source, after checking fn against eager."""
    before = [x.clone() for x in inputs]
    compiled = torch.compile(fn, backend="tritonize")
    result, expected = compiled(*inputs), fn(*before)
    assert_same(result, expected)
    for r, e in zip(*((result, expected) if isinstance(result, tuple) else ([result], [expected]))):
        assert r.stride() == e.stride()
    for x, b in zip(inputs, before):
        assert_same(x, b)
    report = tritonize.explain(fn, *inputs)
    return report, report.wrapper


def test_a_dead_buffer_lends_its_storage_to_another_layout(device):
    """relu(x) feeds a matmul and dies there; the sine of the transposed product (eager's strides:
    (1, 32)) has the same dtype and storage span, so it takes relu's storage as is."""
    def fn(x, w):
        return (torch.relu(x) @ w).t().sin()

    x, w = torch.randn(8, 32, device=device), torch.randn(32, 32, device=device)
    report, wrapper = compile_and_check(fn, x, w)
    assert "storage" in wrapper and "reinterpret_tensor(" in wrapper, wrapper
    # relu (1 KiB) and the product (1 KiB) live at the matmul; the sine reuses relu's storage
    assert report.peak_memory == 2 * 8 * 32 * F32


def test_holding_a_freed_buffer_never_raises_the_peak(device):
    """relu(x) dies at the first matmul; the only later buffer of its class is the final sine,
    and holding relu's storage until then would add it to the second matmul's step, the peak
    (the wide product and the narrow one). So it is deleted, and the sine allocates."""
    def fn(x, w1, w2):
        return ((torch.relu(x) @ w1) @ w2).sin()

    x, w1, w2 = (torch.randn(16, 16, device=device), torch.randn(16, 32, device=device),
                 torch.randn(32, 16, device=device))
    report, wrapper = compile_and_check(fn, x, w1, w2)
    assert "# reuse" not in wrapper, wrapper
    assert report.peak_memory == (16 * 32 + 16 * 16) * F32  # at either matmul


def test_a_freed_buffer_nothing_takes_is_deleted_at_its_last_use(device):
    """The first matmul's input dies at that matmul and is deleted right after it, not held to
    the end of the call."""
    def fn(x, w):
        return (torch.relu(x) @ w).sum(0)

    x, w = torch.randn(16, 8, device=device), torch.randn(8, 4, device=device)
    _, wrapper = compile_and_check(fn, x, w)
    body = [line.strip() for line in wrapper.split("def call")[1].splitlines()]
    matmul = next(i for i, line in enumerate(body) if "aten.mm" in line)
    relu = body[matmul].split("aten.mm.default(")[1].split(",")[0]
    after = body[matmul + 1:]
    deleted = next(i for i, line in enumerate(after) if line.startswith("del "))
    launch = next(i for i, line in enumerate(after) if line.startswith("triton_"))
    assert deleted < launch and relu in after[deleted], body


def test_the_report_shows_the_planned_peak(device):
    def fn(x):
        return (x @ x.t()).softmax(-1)

    report, _ = compile_and_check(fn, torch.randn(32, 8, device=device))
    assert report.peak_memory >= 32 * 32 * F32
    assert "planned peak" in str(report)


def test_a_pointwise_kernel_writes_over_an_input_that_dies_there(device):
    """GELU after a matmul: the product dies at the GELU kernel, which reads each element where it
    writes it, so the GELU's output takes the product's storage at that very step."""
    def fn(x, w):
        return torch.nn.functional.gelu(x @ w)

    x, w = torch.randn(16, 8, device=device), torch.randn(8, 64, device=device)
    report, wrapper = compile_and_check(fn, x, w)
    assert "# in place over it" in wrapper, wrapper
    assert report.peak_memory == 16 * 64 * F32  # one buffer, not two


def test_a_batch_of_one_is_written_in_place_as_any_batch(device):
    """The same at a batch of one: the GELU's loads drop the batch dim, the product's layout
    keeps it; the two indexes are the same element."""
    def fn(x, w):
        return torch.nn.functional.gelu(torch.bmm(x, w))

    x, w = torch.randn(1, 16, 8, device=device), torch.randn(1, 8, 64, device=device)
    report, wrapper = compile_and_check(fn, x, w)
    assert "# in place over it" in wrapper, wrapper
    assert report.peak_memory == 16 * 64 * F32


def test_no_kernel_writes_over_an_input_read_elsewhere(device):
    """flip reads the product at another row than the one it writes: never in place."""
    def fn(x, w):
        return (x @ w).flip(0) + 1

    x, w = torch.randn(16, 8, device=device), torch.randn(8, 16, device=device)
    report, wrapper = compile_and_check(fn, x, w)
    assert "# in place over it" not in wrapper, wrapper
    assert report.peak_memory == 2 * 16 * 16 * F32


def test_no_kernel_writes_over_an_input_that_lives_on(device):
    def fn(x, w):
        product = x @ w
        return torch.nn.functional.gelu(product), product.sum(0)

    x, w = torch.randn(16, 8, device=device), torch.randn(8, 16, device=device)
    _, wrapper = compile_and_check(fn, x, w)
    assert "# in place over it" not in wrapper, wrapper


def test_an_output_a_convolution_read_is_stored_once(device):
    """sin(x) is stored for the convolution and returned: one buffer serves both (a training
    forward's saved bf16 copies, stored twice before). The equal sin(x) returned again gets a
    buffer of its own: two outputs never share storage that eager gives them apart."""
    def fn(x, w):
        a, b = torch.sin(x), torch.sin(x)
        return torch.nn.functional.conv2d(a, w), a, b

    x, w = torch.randn(2, 4, 8, 8, device=device), torch.randn(6, 4, 3, 3, device=device)
    _, wrapper = compile_and_check(fn, x, w)
    body = wrapper.split("def call(args)")[1].split("INPUTS = ")[0]
    assert body.count("(2, 4, 8, 8), (256, 64, 8, 1)") == 3, wrapper  # the input's check and two buffers
    conv, a, b = torch.compile(fn, backend="tritonize")(x, w)
    assert a.data_ptr() != b.data_ptr()
    a.add_(1)
    assert_same(b, torch.sin(x))


def test_a_returned_clone_of_a_saved_value_has_storage_of_its_own(device):
    """h feeds a product (so the forward saves it for the backward) and h.clone() is returned: our
    lowering drops clone, and both were one buffer, so a caller writing into the clone changed the
    saved h (backward raised a version-counter error). Eager's outputs share no storage; ours now
    neither, and backward after writing into the clone gives eager's gradients."""
    def fn(x, w1, w2):
        h = torch.relu(x @ w1)
        return h @ w2, h.clone()

    torch.manual_seed(0)
    tensors = [torch.randn(4, 8, device=device), torch.randn(8, 8, device=device), torch.randn(8, 8, device=device)]
    results = []
    for run in (torch.compile(fn, backend="tritonize"), fn):
        leaves = [t.clone().requires_grad_() for t in tensors]
        out, copy = run(*leaves)
        copy.add_(1)
        out.square().sum().backward()
        results.append([out, copy] + [t.grad for t in leaves])
    assert_same(results[0], results[1])
