"""Dynamic shapes (docs/design.md, "Dynamic shapes"): graphs with symbolic sizes are generated
once and run at every size, with values and strides equal to eager's.

Each program is compiled with `dynamic=True` and called at several sizes, some of them not
multiples of any block size: one graph, no fallback, generated kernels with size parameters.
What is not generated for symbolic sizes yet runs through aten as a whole, with a warning, and
still matches eager.
"""
from __future__ import annotations

import warnings

import pytest
import torch
from helpers import assert_same

import tritonize
from tritonize.backend import make_backend

from conftest import DEVICE


def randn(*shape):
    return torch.randn(*shape, device=DEVICE)


def _write_strided(x):
    x = x.clone()
    x[::2] += 1
    x[1::3, 1::2] *= 2
    return x


def run_at_sizes(fn, shapes_per_call, **tolerance):
    """Compile fn with dynamic=True, call it at each list of argument shapes, and compare with
    eager (values, dtypes and strides). Returns (graph count, artifacts, tritonize warnings)."""
    recorder = []
    compiled = torch.compile(fn, backend=make_backend(recorder=recorder), dynamic=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for shapes in shapes_per_call:
            args = [randn(*shape) for shape in shapes]
            expected = fn(*[a.clone() for a in args])
            actual = compiled(*args)
            assert_same(actual, expected, **tolerance)
            for a, e in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)):
                assert a.stride() == e.stride(), (a.stride(), e.stride())
    artifacts = [r for r in recorder if r != "graph"]
    messages = [str(w.message) for w in caught if str(w.message).startswith("tritonize")]
    return recorder.count("graph"), artifacts, messages


GENERATED = {
    "pointwise": (lambda x, y: x * 2 + y, [[(5, 3), (5, 3)], [(7, 4), (7, 4)], [(33, 9), (33, 9)]]),
    "broadcast_transposed": (lambda x, y: x.t() + y.unsqueeze(0), [[(5, 3), (5,)], [(7, 4), (7,)]]),
    "flatten_view": (lambda x: (x.view(-1) * 2 + 1, x.sin()), [[(5, 3)], [(7, 4)], [(17, 2)]]),
    "reshape_split": (lambda x: x.reshape(x.shape[0], 2, -1).cos(), [[(5, 6)], [(7, 8)]]),
    "matmul_epilogue": (lambda x, w: (x @ w).relu(), [[(5, 3), (3, 4)], [(7, 3), (3, 4)]]),
    "expand": (lambda x, y: x.unsqueeze(1).expand(-1, y.shape[0], -1) + y, [[(5, 3), (4, 3)], [(7, 3), (6, 3)]]),
    "flip": (lambda x: x.flip(0) + 1, [[(5, 3)], [(7, 4)]]),
    "size_as_number": (lambda x: x * x.shape[0] + x.shape[1], [[(5, 3)], [(7, 4)]]),
    "size_modulo": (lambda x: torch.roll(x, x.shape[0] // 2 + 1, 0) * 2 + x.shape[1] % 3,
                    [[(5, 7)], [(8, 4)], [(9, 9)]]),
    # a size to a float power: Dynamo traces scalar_tensor(size) ** -0.5 (the attention scale)
    "size_to_a_float_power": (lambda x, m: torch.softmax(x * (x.shape[-1] ** -0.5) + m, -1),
                              [[(2, 5, 6), (2, 1, 6)], [(3, 7, 9), (3, 1, 9)]]),
    # a size divided by a float, made a tensor: the exact fraction, evaluated as Python divides
    "size_by_a_float": (lambda x: x * torch.tensor(x.shape[0] / 2.5) + torch.full((), x.shape[1] / 0.1),
                        [[(5, 3)], [(7, 4)], [(33, 9)]]),
    # strides that are functions of sizes (FloorDiv(s0, 2)): eager's transposed layout, kept
    "transposed_halves": (lambda x: x.reshape(2, -1).t() + 1, [[(6,)], [(10,)], [(34,)]]),
    # Dynamo keeps new_empty_strided in a symbolic graph (a static one gets empty_strided)
    "new_empty_strided": (lambda x: x.new_empty_strided((x.shape[0], 3), (1, x.shape[0])).fill_(2.0) + x[:, :1],
                          [[(5, 4)], [(7, 2)]]),
    # writes through strided slices: slice_scatter with a step over a symbolic length
    "write_every_other_row": (_write_strided, [[(5, 7)], [(8, 4)], [(9, 9)]]),
    "permute_3d": (lambda x: x.permute(2, 0, 1).contiguous() + 1, [[(5, 3, 4)], [(7, 4, 6)]]),
    "transposed_output": (lambda x: x.transpose(0, 1) * 2, [[(5, 3)], [(7, 4)]]),
    "where": (lambda x: torch.where(x > 0, x, torch.zeros_like(x)), [[(5, 3)], [(7, 4)]]),
    "arange": (lambda x: x + torch.arange(x.shape[0], device=x.device).unsqueeze(1), [[(5, 3)], [(7, 4)]]),
    "arange_start_step": (lambda x: x + torch.arange(x.shape[1], 3 * x.shape[1], 2, device=x.device),
                          [[(5, 3)], [(7, 4)]]),
    "slice_with_steps": (lambda x: x[1:-1, ::2] * 3, [[(5, 6)], [(7, 9)]]),
    "select": (lambda x: x[:, 1] + x[:, -1], [[(5, 3)], [(7, 4)]]),
    "cat": (lambda x, y: torch.cat([x, y], 0).sin(), [[(5, 3), (4, 3)], [(7, 3), (2, 3)]]),
    "pad": (lambda x: torch.nn.functional.pad(x, (1, 2)) * 2, [[(5, 3)], [(7, 4)]]),
    # reductions: rows of symbolic count and of symbolic length (the looped kernel)
    "softmax_known_row": (lambda x: torch.softmax(x, -1), [[(5, 64)], [(7, 64)], [(33, 64)]]),
    "softmax": (lambda x: torch.softmax(x, -1), [[(5, 3)], [(7, 4)], [(3, 1100)]]),
    "layer_norm": (lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b),
                   [[(5, 3, 8), (8,), (8,)], [(7, 9, 8), (8,), (8,)], [(2, 3, 10), (10,), (10,)]]),
    "var_mean": (lambda x: torch.var_mean(x, 1), [[(5, 6)], [(7, 9)]]),
    "std_and_mean": (lambda x: (x.std(1), x.mean(0) + x.mean()), [[(5, 6)], [(7, 9)]]),
    "argmax_amax_keepdim": (lambda x: (x.argmax(1), x.amax(0, keepdim=True)), [[(5, 6)], [(7, 9)]]),
    # (sums of 5000 values in another order than eager's: a sum near 0 differs by ~1e-5)
    "long_rows": (lambda x: x.sum(-1) + x.amax(-1), [[(3, 5000)], [(2, 7000)]], {"atol": 1e-4, "rtol": 1e-4}),
    "logsumexp": (lambda x: torch.logsumexp(x, -1), [[(5, 6)], [(7, 9)]]),
    # scans, and indirect reads checked against (and wrapped by) symbolic sizes
    "cumsum": (lambda x: x.cumsum(-1) + x.cummax(0).values, [[(5, 6)], [(7, 9)]]),
    # fp32 sums of 5000 terms in another order than eager's: 1e-4 off near zero crossings
    "cumsum_long_rows": (lambda x: x.cumsum(-1), [[(2, 3000)], [(3, 5000)]], {"atol": 1e-4, "rtol": 1e-4}),
    "gather_rows": (lambda x: x.gather(1, (x.abs() * 3).long() % x.shape[1]), [[(5, 6)], [(7, 9)]]),
    "index_by_position": (lambda x: x[torch.arange(x.shape[0], device=x.device) - 1, 1:] * 2, [[(5, 6)], [(7, 9)]]),
    "embedding": (lambda w, x: torch.nn.functional.embedding((x.abs() * 4).long() % w.shape[0], w),
                  [[(10, 4), (3, 5)], [(12, 4), (2, 7)]]),
    # products of sizes (H * W, C * H * W) as strides and divisors: parameters of their own
    "products_of_sizes": (lambda x: (x.permute(0, 2, 3, 1).contiguous() * 2, x.sum((2, 3)), x.amax(1) + 1),
                          [[(2, 3, 5, 7)], [(3, 4, 6, 9)], [(2, 16, 12, 12)]]),
}


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_one_generated_graph_serves_every_size(name):
    fn, shapes, *tolerance = GENERATED[name]
    graphs, artifacts, messages = run_at_sizes(fn, shapes, **(tolerance[0] if tolerance else {}))
    assert graphs == 1
    assert messages == []
    assert all(not a.fallbacks for a in artifacts), [a.fallbacks for a in artifacts]
    kernels = [k for a in artifacts for k in a.kernels]
    assert kernels and all("ks0" in k.source for k in kernels)


def test_kernels_take_sizes_as_parameters_and_mask():
    report = tritonize.explain(lambda x: x * 2, randn(5, 3))  # static: numels are literals
    torch._dynamo.reset()
    recorder = []
    fn = torch.compile(lambda x: x * 2, backend=make_backend(recorder=recorder), dynamic=True)
    fn(randn(5, 3))
    [artifacts] = [r for r in recorder if r != "graph"]
    [kernel] = artifacts.kernels
    assert "xnumel = 15" in report.kernels[0].source and "ks0" not in report.kernels[0].source
    assert "xnumel = ks0 * ks1" in kernel.source and "xmask = xindex < xnumel" in kernel.source
    assert "numel_exprs" in artifacts.wrapper and "numel_exprs" not in report.wrapper


MASK_INDEX = "aten.index.Tensor"
UNBACKED = {  # name: (fn, argument makers per call, the ops that decide sizes); sizes only the data decides
    "nonzero": (lambda x: x.nonzero() * 2, [lambda: randn(5, 3), lambda: randn(7, 4),
                                            lambda: torch.zeros(3, 2, device=DEVICE)], ["aten.nonzero.default"]),
    "boolean_mask": (lambda x: (x[x > 0] * 2 + 1, x[x > 0].sum()), [lambda: randn(5, 3), lambda: randn(40, 9)],
                     [MASK_INDEX]),
    "masked_select": (lambda x: torch.masked_select(x, x > 0).cos() + 1, [lambda: randn(6, 5), lambda: randn(3, 9)],
                      ["aten.masked_select.default"]),
    "unique": (lambda x: torch.unique(x.round()) * 2, [lambda: randn(20), lambda: randn(7)], ["aten._unique2.default"]),
    "softmax_of_masked": (lambda x: torch.softmax(x[x.abs() > 0.2], 0), [lambda: randn(30), lambda: randn(9)],
                          [MASK_INDEX]),
    "cat_of_masked": (lambda x: torch.cat([x[x > 0], x[x < 0] * 2]), [lambda: randn(9), lambda: randn(14)],
                      [MASK_INDEX]),
    "gather_by_nonzero": (lambda x: x[x.nonzero()[:, 0]] * 2, [lambda: randn(7, 3), lambda: randn(4, 5)],
                          ["aten.nonzero.default"]),
}
ITEM = {  # .item() of an int tensor, with capture_scalar_outputs
    "slice_to_item": lambda x, n: x[:n.sum().item()] * 2,
    "factory_of_item": lambda x, n: torch.ones(n.sum().item(), device=x.device) * x.sum(),
    "arange_to_item": lambda x, n: torch.arange(n.max().item(), device=x.device) * x.sum(),
}


def _compile_and_check(fn, calls, expected_fallbacks):
    recorder = []
    compiled = torch.compile(fn, backend=make_backend(recorder=recorder), dynamic=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for args in calls:
            expected = fn(*[a.clone() for a in args])
            actual = compiled(*args)
            assert_same(actual, expected)
            for a, e in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)):
                assert a.stride() == e.stride() or a.numel() == 0, (a.stride(), e.stride())
    [artifacts] = [r for r in recorder if r != "graph"]
    assert sorted({target for target, _ in artifacts.fallbacks}) == sorted(expected_fallbacks)
    assert artifacts.kernels and "= u0" not in artifacts.wrapper.split("def call")[0]  # bound in call()
    messages = [str(w.message) for w in caught if str(w.message).startswith("tritonize")]
    assert len(messages) == 1 and all(t in messages[0] for t in expected_fallbacks)  # once, naming the ops
    return artifacts


@pytest.mark.parametrize("name", sorted(UNBACKED))
def test_data_dependent_sizes_are_generated_after_the_op_that_decides_them(name):
    """The op that decides a size (nonzero, a boolean mask) runs through aten; the wrapper reads
    u0 from its result, asserts what the graph assumed of it, and generates the rest over u0."""
    fn, makers, deciding_ops = UNBACKED[name]
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        artifacts = _compile_and_check(fn, [[make()] for make in makers], deciding_ops)
    assert "u0 = " in artifacts.wrapper and "assert u0 >= 0" in artifacts.wrapper


def test_training_through_a_data_dependent_size_matches_eager():
    def fn(x, w):
        y = x[x > 0] * w.sum()
        return y.pow(2).sum() + torch.softmax(y, 0).max()

    compiled = torch.compile(fn, backend="tritonize", dynamic=True)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the ops that decide sizes are named: tested above)
        for n in (10, 17, 31):
            signs = torch.arange(n, device=DEVICE) % 3 - 0.5  # two thirds positive: y is never empty
            x, w = (randn(n).abs() * signs).requires_grad_(), randn(3).requires_grad_()
            x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
            actual, expected = compiled(x, w), fn(x2, w2)
            actual.backward()
            expected.backward()
            assert_same(actual, expected)
            assert_same(x.grad, x2.grad)
            assert_same(w.grad, w2.grad)


def test_a_graph_that_returns_a_comparison_of_sizes_returns_a_bool():
    """AOTAutograd (torch 2.11) saves a SymBool such as `u0 >= 0` for the backward: the wrapper
    returns the comparison's value at this call's sizes, a Python bool, as it returns sizes."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from tritonize import pipeline
    from tritonize.config import make_options

    def fn(x):
        return x * 2, x.shape[0] >= 3, x.shape[0] * 4

    gm = make_fx(fn, tracing_mode="symbolic")(randn(5, 3))
    fakes = [node.meta["val"] for node in gm.graph.nodes if node.op == "placeholder"]
    compiled = pipeline.compile_graph(gm, fakes, make_options(), 0)
    assert ">= 3" in compiled.artifacts.wrapper and not compiled.artifacts.fallbacks
    for rows in (2, 3, 7):
        x = randn(rows, 3)
        product, at_least_three, times_four = compiled([x])
        assert_same(product, x * 2)
        assert at_least_three is (rows >= 3) and times_four == rows * 4


@pytest.mark.parametrize("name", sorted(ITEM))
def test_sizes_from_item_are_generated(name):
    """`.item()` of an int under capture_scalar_outputs is a size the wrapper reads once; a
    slice to it gets a size of its own (u1), read from the slice aten makes."""
    counts = [torch.tensor([1, 2], device=DEVICE), torch.tensor([4, 3], device=DEVICE),
              torch.tensor([0, 0], device=DEVICE)]
    calls = [[randn(10), n] for n in counts]
    expected = ["aten._local_scalar_dense.default"] + (["aten.slice.Tensor"] if name == "slice_to_item" else [])
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        _compile_and_check(ITEM[name], calls, expected)


def test_training_with_a_dynamic_batch_matches_eager():
    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                   torch.nn.Linear(16, 4)).to(DEVICE)

    eager, model = make(), make()
    recorder = []
    compiled = torch.compile(model, backend=make_backend(recorder=recorder), dynamic=True)
    for batch in (5, 7, 13):
        x = randn(batch, 8)
        eager(x).sum().backward()
        compiled(x).sum().backward()
        for p, q in zip(eager.parameters(), model.parameters()):
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5)
            p.grad = q.grad = None
    artifacts = [r for r in recorder if r != "graph"]
    # one forward and one backward for every batch (Dynamo may restart its own analysis once,
    # tensorifying LayerNorm's eps: a backend call that compiles nothing)
    assert sorted(a.role for a in artifacts) == ["backward", "forward"]
    assert all(a.kernels and not a.fallbacks for a in artifacts)


def test_int32_indexing_is_guarded_and_the_guard_reported():
    """A symbolic kernel indexes in int32 under a guard that its sizes stay below 2^31 (the
    ShapeEnv records it, so a larger size would recompile, with int64); explain() lists it."""
    recorder = []
    fn = torch.compile(lambda x: x + 1, backend=make_backend(recorder=recorder), dynamic=True)
    x = randn(40)
    assert_same(fn(x), x + 1)
    [artifacts] = [r for r in recorder if r != "graph"]
    assert ".to(tl.int64)" not in artifacts.kernels[0].source
    assert artifacts.guards and all("<= 2147483647" in g for g in artifacts.guards)
    assert "guard on sizes" in "\n".join(artifacts.lines())


def test_symbolic_wrapper_binds_sizes_from_the_inputs():
    recorder = []
    fn = torch.compile(lambda x, y: x + y, backend=make_backend(recorder=recorder), dynamic=True)
    x, y = randn(6, 2), randn(6, 2)
    assert_same(fn(x, y), x + y)
    [artifacts] = [r for r in recorder if r != "graph"]
    lines = artifacts.wrapper.splitlines()
    bound = [line.strip() for line in lines if ".size(" in line or line.strip().startswith("s")]
    assert any(".size(0)" in line or "= arg" in line for line in bound)
    assert any("empty_strided" in line and "((s" in line for line in lines)  # sized by the symbols


def test_user_kernel_with_symbolic_sizes_and_grid():
    """A user kernel's size argument and grid are symbolic: the wrapper passes them at each call,
    and the mutation analysis runs at the example's size (no conservative copies)."""
    import triton
    from user_kernel_corpus import add_kernel

    def fn(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        tritonize.wrap_triton(add_kernel)[(triton.cdiv(n, 32),)](x, y, out, n, BLOCK=32)
        return out * 2

    recorder = []
    compiled = torch.compile(fn, backend=make_backend(recorder=recorder), dynamic=True)
    for n in (50, 70, 90):
        x, y = randn(n), randn(n)
        assert_same(compiled(x, y), (x + y) * 2)
    artifacts = [r for r in recorder if r != "graph"]
    assert len(artifacts) == 1 and not artifacts[0].fallbacks and not artifacts[0].clones
    assert "_grids=[" in artifacts[0].wrapper


class TinyLanguageModel(torch.nn.Module):
    """Embedding, a head and cross entropy: the backward scatters (embedding's index_put with
    accumulation, nll_loss's scatter) over symbolic sizes."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.head = torch.nn.Linear(16, 50)

    def forward(self, tokens):
        logits = self.head(torch.nn.functional.gelu(self.embed(tokens)))
        return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 50), tokens[:, 1:].reshape(-1))


def test_training_with_scatters_over_symbolic_sizes_is_generated():
    def make():
        torch.manual_seed(0)
        return TinyLanguageModel().to(DEVICE)

    eager, model = make(), make()
    recorder = []
    compiled = torch.compile(model, backend=make_backend(recorder=recorder), dynamic=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch, length in ((2, 5), (3, 9), (4, 17)):
            tokens = torch.randint(0, 50, (batch, length), device=DEVICE)
            saved = tokens.clone()
            expected, actual = eager(tokens), compiled(tokens)
            torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
            expected.backward()
            actual.backward()
            assert torch.equal(tokens, saved)
            for p, q in zip(eager.parameters(), model.parameters()):
                torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6)
                p.grad = q.grad = None
    assert not [w for w in caught if "runs through aten" in str(w.message)]
    artifacts = [r for r in recorder if r != "graph"]
    assert "backward" in {a.role for a in artifacts}
    scatter_kernels = [k for a in artifacts for k in a.kernels if "atomic_add" in k.source or "scatter" in k.name]
    assert scatter_kernels and all("ks0" in k.source for k in scatter_kernels)


def test_slice_scatter_with_symbolic_bounds():
    graphs, artifacts, messages = run_at_sizes(
        lambda x, y: torch.slice_scatter(x, y[:, :x.shape[1] - 2], 1, 1, x.shape[1] - 1) * 2,
        [[(5, 6), (5, 9)], [(7, 8), (7, 9)], [(9, 11), (9, 13)]])
    assert graphs == 1 and not messages
    assert not artifacts[0].fallbacks


@pytest.mark.parametrize("name", ["slice", "narrow", "select", "select_scatter", "slice_scatter"])
def test_positions_from_the_end_given_as_symbolic_ints(name):
    """`x[:, -n:]` with n an int argument, which dynamic=True makes a symbol: the start -n counts
    from the end (it was read as an offset before the tensor, returning garbage). Where the
    graph's guards fix n's sign the op is generated, else it runs through aten."""
    programs = {
        "slice": lambda x, w, n: (x[:, -n:].reshape(-1, x.shape[-1]) @ w).view(x.shape[0], n, -1),
        "narrow": lambda x, w, n: x.narrow(1, -n, n - 1) * 2,
        "select": lambda x, w, n: x.select(1, -n) + 1,
        "select_scatter": lambda x, w, n: torch.select_scatter(x, x[:, 0] * 0, 1, -n) * 2,
        "slice_scatter": lambda x, w, n: torch.slice_scatter(x, x[:, :n] * 0, 1, -n) * 2,
    }
    fn = programs[name]
    compiled = torch.compile(fn, backend="tritonize", dynamic=True)
    x, w = randn(2, 16, 8), randn(8, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (5, 7, 3):
            expected = fn(x, w, n)
            assert_same(compiled(x, w, n), expected)
    fallbacks = [str(w.message) for w in caught if "through aten" in str(w.message)]
    if name.endswith("scatter"):  # Dynamo guards nothing on n's sign there: aten, and said so
        assert fallbacks and all("not known to be negative or not" in m for m in fallbacks)
    else:
        assert not fallbacks


@pytest.mark.parametrize("widths", ["left", "every_side", "crop_left", "crop_right"])
def test_pad_by_symbolic_widths(widths):
    """F.pad by an int argument (a symbol under dynamic=True), negative ones cropping: generated."""
    pads = {"left": lambda n: (n, 1), "every_side": lambda n: (n, n, 1, n),
            "crop_left": lambda n: (-n, 2), "crop_right": lambda n: (1, -n)}[widths]
    fn = lambda x, n: torch.nn.functional.pad(x, pads(n), value=3.5) * 2  # noqa: E731
    compiled = torch.compile(fn, backend="tritonize", dynamic=True)
    x = randn(4, 9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (3, 5, 2):
            assert_same(compiled(x, n), fn(x, n))
    assert not [w for w in caught if "through aten" in str(w.message)]


def test_an_input_view_with_a_symbolic_storage_offset():
    base = randn(64)
    compiled = torch.compile(lambda x: x * 2 + 1, dynamic=True, backend="tritonize")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for start in (3, 5, 9):
            view = base[start:start + 20]
            assert_same(compiled(view), view * 2 + 1)
    assert not [w for w in caught if "runs through aten" in str(w.message)]


def test_contiguous_strides_written_with_max_are_plain_sizes():
    """torch writes a contiguous stride as Max(1, size) where the size's symbol is not known to
    be positive; the ShapeEnv's ranges decide it, so the wrapper's asserts and kernels use s."""
    from tritonize.ir.sizes import as_size
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        x = mode.from_tensor(torch.empty(6, 5), symbolic_context=None)
    rows = x.shape[1]
    stride = torch.sym_max(1, rows)
    assert as_size(stride) == as_size(rows)


def test_a_channels_last_stride_with_max_inside_a_product_keeps_its_layout():
    """CUDA's convolution traces a channels-last output's strides as products of Max(1, n) for
    sizes n = s0 - s1 + 3 that no guard shows positive (the CPU's adds such guards). The output
    used to get contiguous strides on the GPU: the Max was stripped only at the top of a stride."""
    from tritonize.lower.dtypes import symbolic_size
    from tritonize.lower.graph import dense_strides
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(shape_env=ShapeEnv())
    context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * 3)
    x = mode.from_tensor(torch.empty(2, 4, 7), symbolic_context=context, source=ConstantSource("x"))
    with mode:
        batch, channels, length = x.shape
        width = length - 2  # at least 0, as far as the ShapeEnv knows
        out = torch.empty_strided((batch, channels, width), (channels * torch.sym_max(1, width), 1, channels))
        # a size that is itself Max(1, n) has elements at n = 0: its Max stays in the strides
        kept = torch.sym_max(1, width)
        floor = torch.empty_strided((batch, channels, kept), (channels * kept, 1, channels))
    c, w = symbolic_size((channels, width))
    assert "Max" in str(symbolic_size(out.stride())[0])  # the ShapeEnv cannot drop it by itself
    assert dense_strides(out) == (c * w, 1, c)
    assert dense_strides(floor) == symbolic_size(floor.stride())


def test_min_and_max_of_sizes_print_as_builtins():
    """Python's min/max in the wrapper; Triton maps them to tl.minimum/tl.maximum in kernels."""
    import sympy
    from tritonize.codegen.index_printer import print_index

    a, b, c = sympy.symbols("ks0 ks1 ks2", integer=True)
    assert print_index(sympy.Min(a, b)) == "min(ks0, ks1)"
    assert print_index(sympy.Max(a, b, c) * 2) in ("2 * (max(ks0, max(ks1, ks2)))", "2 * max(ks0, max(ks1, ks2))")


def test_an_op_that_needs_a_size_as_a_number_runs_through_aten_alone():
    """A lowering that would have to compare symbolic sizes (pad by a difference of sizes, whose
    sign only a guard could tell) sends that op through aten; the rest stays generated."""
    def fn(x, y):
        padded = torch.nn.functional.pad(x, (0, 0, 0, y.shape[0] - x.shape[0]))
        return (padded * 2).relu() + y

    graphs, artifacts, messages = run_at_sizes(fn, [[(3, 4), (5, 4)], [(4, 6), (9, 6)]])
    assert graphs == 1 and not messages
    assert all(a.kernels for a in artifacts)


def test_batch_norm_training_with_a_dynamic_batch_is_generated():
    """The running variance's unbiased correction is N / (N - 1) of symbolic sizes: a float the
    kernels compute as eager's Python division does."""
    torch.manual_seed(0)
    eager = torch.nn.BatchNorm2d(3).to(DEVICE)
    model = torch.nn.BatchNorm2d(3).to(DEVICE)
    recorder = []
    compiled = torch.compile(model, backend=make_backend(recorder=recorder), dynamic=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch, side in ((4, 5), (6, 3), (3, 7)):
            x = randn(batch, 3, side, side)
            assert_same(compiled(x), eager(x))
            assert_same(model.running_var, eager.running_var)
            assert_same(model.running_mean, eager.running_mean)
    assert not [w for w in caught if "runs through aten" in str(w.message)]
    assert all(a.kernels and not a.eager_reason for a in recorder if a != "graph")


def test_a_ratio_of_sizes_prints_as_a_division():
    import sympy
    from tritonize.codegen.index_printer import print_index

    n = sympy.Symbol("s0", integer=True, positive=True)
    text = print_index(n / (n - 1))
    assert "/" in text and "//" not in text and eval(text, {"s0": 5}) == 5 / 4  # Python's float division


@pytest.mark.parametrize("case", ["select", "split", "narrow"])
def test_outputs_that_alias_inputs_at_symbolic_offsets_are_views_of_them(case):
    """An int argument becomes a SymInt with dynamic=True: the output's offset into the input is
    symbolic. It is returned as eager's view of the input (AOTAutograd rebuilds aliasing outputs
    from our result's layout: a copy gave the input's first slice)."""
    fns = {"select": lambda x, i: x.select(1, i),
           "split": lambda x, i: torch.split(x, i, 1),
           "narrow": lambda x, i: x.narrow(0, i, 2)}
    fn = fns[case]
    compiled = torch.compile(fn, backend="tritonize", dynamic=True)
    for shape, index in (((5, 6, 4), 2), ((7, 8, 3), 3)):
        x = randn(*shape)
        expected, actual = fn(x, index), compiled(x, index)
        for a, e in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)):
            assert_same(a, e)
            assert (a.stride(), a.storage_offset()) == (e.stride(), e.storage_offset())
            assert a.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_a_reduction_of_symbolic_row_length_has_both_bodies_and_runs_either():
    """A row of symbolic length: one kernel with a persistent and a looped body; short rows run
    the first (RBLOCK: the row's power of two), rows past the register limit the second."""
    fn = lambda x: (torch.softmax(x, -1), torch.var_mean(x, -1))  # noqa: E731
    graphs, artifacts, messages = run_at_sizes(fn, [[(3, 5)], [(2, 100)], [(2, 9000)], [(4, 33)]],
                                               atol=1e-5, rtol=1e-4)
    assert graphs == 1 and not messages
    [kernel] = artifacts[0].kernels
    assert kernel.kind == "adaptive_reduction" and "if PERSISTENT:" in kernel.source
    assert "for roffset in range(" in kernel.source.split("else:")[1]


def test_long_reductions_of_symbolic_length_are_split_as_the_example_would_be():
    """A few long rows use the whole GPU in two kernels: the split count is the example's, the
    chunk each partial reduces is symbolic, and any size stays right (chunks past the end are
    masked)."""
    fn = lambda x: (x.sum(), x.amax(), x.sum(0))  # noqa: E731
    graphs, artifacts, messages = run_at_sizes(fn, [[(20000, 4)], [(17, 5)], [(30001, 3)]], atol=1e-3, rtol=1e-4)
    assert graphs == 1 and not messages and not artifacts[0].fallbacks
    kinds = [k.kind for k in artifacts[0].kernels]
    assert kinds == ["adaptive_reduction", "persistent_reduction"] * 3, kinds  # partials, then their reduction
    # the last chunk's end is compared in the kernel's index type (no int64 casts)
    partials = artifacts[0].kernels[0].source
    compare = next(line for line in partials.splitlines() if " < (" in line and "tl.load" not in line)
    assert ".to(tl.int64)" not in compare, compare


def test_size_arithmetic_that_dynamo_leaves_in_the_graph():
    """A float divided by a size (var's backward: 2 / (N - 1)), a size to an integer power, a
    sum of sizes, and a reshape whose dims are equal only through torch's own view check."""
    def var_training(x):
        x = x.detach().requires_grad_()
        x.var(1).sum().backward()
        return x.grad

    checks = {
        "float_by_size": (var_training, [[(5, 6)], [(7, 9)]]),
        "power": (lambda x: x * x.shape[0] ** 2, [[(5, 3)], [(7, 4)]]),
        "reshape_to_halves": (lambda x: torch.log_softmax(-x, 0).reshape(2, -1) + 1, [[(8, 16)], [(6, 4)]]),
    }
    for name, (fn, shapes) in checks.items():
        graphs, artifacts, messages = run_at_sizes(fn, shapes, atol=1e-5, rtol=1e-5)
        assert not messages and all(not a.eager_reason for a in artifacts), (name, messages)
        assert not [f for a in artifacts for f in a.fallbacks], name


def test_a_size_that_is_one_only_through_a_guard_broadcasts():
    """x[1::3] has (s0 + 1) // 3 rows by our slice; broadcast against x, torch made Dynamo guard
    that it is 1. A buffer computed from it (scatter_add) must then be read as one row, not past
    its end (dynamic fuzz seed 6093: values of 1e30)."""
    def fn(x, index):
        rows = x[1::3]
        added = rows.scatter_add(1, index, rows[:1, :7])
        return torch.where(x > -1, added, -1.0)

    compiled = torch.compile(fn, backend="tritonize", dynamic=True)
    for n in (4, 3):
        x, index = randn(n, 7), torch.randint(0, 7, (1, 7), device=DEVICE)
        assert_same(compiled(x, index), fn(x, index))


@pytest.mark.parametrize("first_row", [0, 1], ids=["at_storage_start", "past_storage_start"])
def test_a_view_of_an_input_written_later_in_the_graph_follows_the_input(first_row):
    """fuzz seed 8174 (dynamic): v = x.reshape(2, -1) of a step-sliced x, then x.index_put_.
    Eager's v is a view of x. AOTAutograd copies the graph's new value of x into x and rebuilds v
    from x; with symbolic sizes it cannot replay the view, so it reinterprets x with the layout
    of our v's base, which is therefore laid out as x is (aot_eager itself returns wrong values
    here)."""
    def fn(x, index):
        v = x.reshape(2, -1)
        x.index_put_((index,), torch.tensor(1.5, device=x.device).expand(x.shape[1]))
        return v

    compiled = torch.compile(fn, backend="tritonize", dynamic=True)
    for rows, cols in ((4, 32), (6, 20), (8, 16)):
        base = randn(rows + first_row, cols)
        index = torch.randperm(rows, device=DEVICE)[:3]
        x, x_eager = base.clone()[first_row:, ::2], base.clone()[first_row:, ::2]
        out, expected = compiled(x, index), fn(x_eager, index)
        assert_same(out, expected)
        assert_same(x, x_eager)
        x.add_(1)  # still a view of x, as eager's
        x_eager.add_(1)
        assert_same(out, expected)


def test_an_expand_of_a_symbolic_size_one_dim_broadcasts():
    """Fuzz seed 99669: x[3::2] of 4 or 5 rows has (s - 2) // 2 rows, one; the backward expands the
    saved mask `x[3::2] > -1` to s rows. It is broadcast (index 0): read row by row, the rows past
    its end held whatever the memory had, so the gradient was wrong in some runs and not others
    (hence the repeats)."""
    def fn(x):
        return torch.where(x[3::2] > -1, (x + 1) * 3, -1.0)

    compiled = torch.compile(fn, backend="tritonize", dynamic=True)
    for seed in range(8):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(4 + seed % 2, 1, generator=g).to(DEVICE).abs().requires_grad_()  # x[3::2]: 1 row
        x_eager = x.detach().clone().requires_grad_()
        upstream = torch.randn(x.shape, generator=g).to(DEVICE)
        out, expected = compiled(x), fn(x_eager)
        (out * upstream).sum().backward()
        (expected * upstream).sum().backward()
        assert_same(out, expected)
        assert_same(x.grad, x_eager.grad)


@pytest.mark.parametrize("op", ["add", "where", "to", "mul_"])
def test_an_operand_of_a_symbolic_size_one_dim_broadcasts(op):
    """An elementwise op's operand whose symbolic dim, (s - 2) // 2, is 1 at run time: broadcast
    against the s rows of the other operand (index 0), as in eager; read row by row, it would
    read past its one row. Pointwise ops, where's condition, a cast and an in-place op share the
    rule with expand (`lower/pointwise.is_broadcast`). These cases came out right before the rule
    moved there too (the ShapeEnv's range for s, 4 to 5 after Dynamo's guard, makes the size 1);
    the rule covers sizes no range pins."""
    def fn(x):
        m = x[3::2]  # (s - 2) // 2 rows: 1 for 4 or 5 rows
        if op == "add":
            return x + m
        if op == "where":
            return torch.where(m > 0, x, -x)
        if op == "to":
            return x * 0 + m.to(torch.float64).to(x.dtype)
        y = x.clone()
        return y.mul_(m)

    compiled = torch.compile(fn, backend="tritonize", dynamic=True)
    for rows in (4, 5, 4):
        x = torch.randn(rows, 3, device=DEVICE)
        before = x.clone()
        assert_same(compiled(x), fn(x))
        assert torch.equal(x, before)


def test_a_flat_view_of_a_step_sliced_input_mutated_in_place():
    """Fuzz seed 91084: `x[..., ::2].reshape(-1)` is a view of x (strides (8, 2) flatten to 2);
    clamped in place, it is returned. AOTAutograd rebuilds the returned view on x's storage with
    the strides of ours: the flat base is laid out with the input's step, and its view keeps it."""
    def fn(x):
        v = x.reshape(-1)
        v.clamp_(min=-0.5)
        return v

    compiled = torch.compile(fn, backend="tritonize", dynamic=True)
    for rows in (3, 4):
        g = torch.Generator().manual_seed(rows)
        base = torch.randn(rows, 8, generator=g).to(DEVICE)
        x, x_eager = base.clone()[..., ::2], base.clone()[..., ::2]
        out, expected = compiled(x), fn(x_eager)
        assert_same(out, expected)
        assert out.stride() == expected.stride()
        assert_same(x, x_eager)


def test_attention_reads_a_stored_channels_last_value_with_a_unit_last_stride():
    """g, read by two consumers, is stored once in its own (NCHW) layout; attention's query, a
    transposed view of it, has a last stride of H*W where the trace had 1, so the call gets a
    copy with the traced strides, with symbolic sizes too (it read the view as it was: a review
    of the twentieth session found errors of 6.6)."""
    import torch.nn.functional as F

    def fn(x, y, z):
        g = x * y + z
        q = g.flatten(2).transpose(1, 2).unsqueeze(1)
        return F.scaled_dot_product_attention(q, q, q), g.sigmoid()
    compiled = torch.compile(fn, backend="tritonize", dynamic=True)
    with torch.no_grad():
        for side in (6, 7):
            args = [randn(2, 8, side, side).to(memory_format=torch.channels_last) for _ in range(3)]
            assert_same(compiled(*args), fn(*args))


def test_a_product_viewed_after_a_slice_from_an_int_input_is_returned_as_computed():
    """transformers' LM heads slice `hidden[:, -logits_to_keep:]` with an int that
    dynamic=True makes a symbol of unknown sign: the row count is then `s0 + s1`, and the
    view of the product back to (batch, rows, vocab) has a stride `31*(s0 + s1)` whose factor
    is no size. It is still a plain view of the product: no copy of the logits (GPT-2's
    training step copied its logits, 233 us on the H100)."""
    weight = randn(64, 31)

    def head(hidden, keep):
        rows = hidden[:, -keep:, :]
        batch, length, _ = rows.shape
        return (rows.reshape(batch * length, 64) @ weight).view(batch, length, 31)

    recorder = []
    compiled = torch.compile(head, backend=make_backend(recorder=recorder), dynamic=True)
    for length in (24, 37):
        hidden = randn(2, length, 64)
        actual, expected = compiled(hidden, 0), head(hidden, 0)
        assert_same(actual, expected)
        assert actual.stride() == expected.stride()
    artifacts = [r for r in recorder if r != "graph"][-1]
    # the slice's copy stays (a view only if the int is 0); nothing copies the product
    assert len(artifacts.kernels) == 1 and not artifacts.fallbacks, [k.name for k in artifacts.kernels]


def test_products_of_sizes_in_the_index_math_are_parameters_of_their_own():
    """codegen/symbolic.py: each product of sizes in an index expression (H * W as a divisor and a
    stride, C * H * W as a stride) is one parameter, computed by the wrapper; numels stay products
    of the dims' parameters, and a size times a constant is no product."""
    import sympy

    from tritonize.codegen.symbolic import SizeParameters

    n, c, h, w = sympy.symbols("s0 s1 s2 s3", integer=True, positive=True)
    x0, y0, y1 = sympy.symbols("x0 y0 y1", integer=True, nonnegative=True)
    index = y0 + x0 * h * w + y1 * c * h * w + 768 * n
    params = SizeParameters.of([n * h * w, c, index], [x0, y0, y1])
    assert params.names == ["ks0", "ks1", "ks2", "ks3", "ks4", "ks5"]
    assert params.arguments == ["s0", "s2", "s3", "s1", "s2 * s3", "s1 * s2 * s3"]  # in order of first use
    ks = sympy.symbols("ks0:6", integer=True, positive=True)
    assert params.rename(index) == y0 + x0 * ks[4] + y1 * ks[5] + 768 * ks[0]
    assert params.rename(n * h * w) == ks[0] * ks[1] * ks[2]
