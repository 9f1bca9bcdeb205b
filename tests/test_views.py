"""Views as index maps: no copies, no fallbacks, eager's values."""
import pytest
import torch

from helpers import assert_same, check


def _x(device, *shape):
    return torch.randn(*shape, device=device)


def test_slices_with_steps_select_narrow(device):
    def fn(x):
        return (x[1:7:2, ::3] * 2, x.select(1, -1) + 1, x.narrow(0, 2, 3).exp(), x[-3:, 2:5] - 1)

    report = check(fn, _x(device, 9, 12))
    assert not report.fallbacks


def test_expand_squeeze_unsqueeze_alias(device):
    def fn(x, y):
        return (x.unsqueeze(0).expand(3, 4, 5) + y.squeeze(1).unsqueeze(-1), x.squeeze() * 1)

    report = check(fn, _x(device, 4, 5), _x(device, 4, 1))
    assert not report.fallbacks


def test_as_strided_of_input(device):
    report = check(lambda x: x.as_strided((3, 3), (4, 1), 2) + 1, _x(device, 20))
    assert not report.fallbacks


def test_non_contiguous_input(device):
    x = _x(device, 8, 6).t()
    report = check(lambda t: t * 2 + 1, x)
    assert not report.fallbacks


def test_output_view_of_input_keeps_eager_strides(device):
    def fn(x):
        return x.t(), (x + 1).t()

    x = _x(device, 4, 6)
    out = torch.compile(fn, backend="tritonize")(x)
    assert out[0].stride() == x.t().stride()
    assert out[1].stride() == (x + 1).t().stride()
    check(fn, x)


def test_diagonal_and_flip(device):
    report = check(lambda x: (x.diagonal(1) * 2, x.flip(0, 1) + x), _x(device, 5, 5))
    assert not report.fallbacks


def test_reshape_of_non_contiguous_value(device):
    def fn(x):
        return x.t().reshape(-1) + torch.arange(24, device=x.device)

    report = check(fn, _x(device, 4, 6))
    assert not report.fallbacks


def test_slice_scatter_and_diagonal_scatter(device):
    """The backward of slicing and of diagonal: the source on the view's elements, x elsewhere."""
    aten = torch.ops.aten

    def fn(x, rows, column, ends, diagonal, below):
        return (aten.slice_scatter(x, rows, 1, 1, 6, 2) * 2,  # a step
                aten.slice_scatter(x, column, 2, 0, 100, 3),  # an end past the size
                aten.slice_scatter(x, ends, 1, -4),  # a negative start
                aten.diagonal_scatter(x, diagonal, 2, 0, 1) + 1,
                aten.diagonal_scatter(x, below, -1, -1, 1))

    report = check(fn, _x(device, 5, 7, 3), _x(device, 5, 3, 3), _x(device, 5, 7, 1), _x(device, 5, 4, 3),
                   _x(device, 3, 5), _x(device, 5, 2))
    assert not report.fallbacks


def test_split_and_chunk_are_views(device):
    def fn(x):
        uneven = [part * 2 for part in x.split(4, 1)]
        sized = [part + 1 for part in x.split([2, 0, 7], 1)]
        return uneven, sized, [part.exp() for part in x.chunk(3, 0)]

    report = check(fn, _x(device, 6, 9))
    assert not report.fallbacks


# --- outputs that share storage, across a graph break (issue 25 bug 9) ---------------------

def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def test_view_outlives_a_graph_break():
    def fn():
        a = torch.tensor([1])[0:1]
        b = a.squeeze()
        a[0] = 0
        if a[0] < 1e5:  # a graph break: the first graph returns a and b
            pass
        a[0] = 2
        return b

    torch._dynamo.reset()
    assert torch.compile(fn, backend="tritonize")().item() == fn().item() == 2


OUTPUT_VIEWS = {
    "slice": lambda a: a[1:], "t": lambda a: a.t(), "view": lambda a: a.view(-1),
    "squeeze": lambda a: a[:1].squeeze(0), "unbind": lambda a: a.unbind(0)[1],
    "split": lambda a: a.split(1)[0], "expand": lambda a: a[:, :1].expand(3, 4),
    "diagonal": lambda a: a.diagonal(),
}


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("name", sorted(OUTPUT_VIEWS))
def test_output_that_views_another_output(device, name, requires_grad):
    """Mutating one output after a graph break shows through the other, as in eager."""
    view = OUTPUT_VIEWS[name]
    if requires_grad and name in ("split", "unbind"):
        pytest.skip("eager refuses to read a multi-output view whose base was modified in place")

    def fn(x):
        a = x * 2
        b = view(a)
        torch._dynamo.graph_break()
        a.add_(100)
        return a, b

    x = torch.randn(3, 4, device=device)
    torch._dynamo.reset()
    expected = fn(x.clone().requires_grad_(requires_grad))
    actual = torch.compile(fn, backend="tritonize")(x.clone().requires_grad_(requires_grad))
    assert_same(actual, expected)
    assert _same_storage(*actual) and _same_storage(*expected)
    assert actual[1].stride() == expected[1].stride()


def test_outputs_that_view_an_intermediate(device):
    def fn(x):
        a = torch.exp(x)
        first, rest = a[0], a[1:]
        torch._dynamo.graph_break()
        first.mul_(0)
        return a, first, rest

    x = torch.randn(3, 4, device=device)
    torch._dynamo.reset()
    expected = fn(x)
    actual = torch.compile(fn, backend="tritonize")(x)
    assert_same(actual, expected)
    assert _same_storage(actual[0], actual[1]) and _same_storage(actual[0], actual[2])


NON_DENSE_OUTPUTS = {
    # fuzz seed 153: a step slice of a value eager lays out column-major (its operand is transposed)
    "step_slice_of_transposed": lambda x, s: (s * x.t())[..., 1::2],
    # fuzz seed 194: a step slice of a value computed from a step-sliced input
    "step_slice_of_sliced": lambda x, s: (x[:, ::2] + 1)[..., 1::2],
    # fuzz seed 189: an expand of a reduction
    "expand_of_reduction": lambda x, s: x.amax().relu().unsqueeze(0).expand(2),
}


@pytest.mark.parametrize("name", sorted(NON_DENSE_OUTPUTS))
def test_non_dense_view_of_intermediate_output_keeps_eager_strides(device, name):
    """An output that is a step slice or an expand of an intermediate has eager's strides: its base
    is laid out as eager's and the output is a view of it (it was a contiguous copy)."""
    fn = NON_DENSE_OUTPUTS[name]
    x, s = torch.randn(6, 5, device=device), torch.randn(6, device=device)
    expected = fn(x, s)
    torch._dynamo.reset()
    actual = torch.compile(fn, backend="tritonize")(x, s)
    assert_same(actual, expected)
    assert actual.stride() == expected.stride()


@pytest.mark.parametrize("columns", [8, 10, 7])
def test_a_flattened_step_slice_of_an_intermediate_keeps_eager_strides_with_symbolic_sizes(device, columns):
    """Fuzz seed 101808: `(x * 2)[:, 1::2].reshape(-1)` under dynamic=True is a view of stride 2
    when the row length is even (the trace guarded s == 2*(s//2), a fact of the ShapeEnv the index
    simplification now uses) and a copy when it is odd, as eager; it was returned dense."""
    def fn(x):
        return (x * 2)[:, 1::2].reshape(-1)

    x = torch.randn(4, columns, device=device)
    expected = fn(x)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tritonize", dynamic=True)
    compiled(torch.randn(3, columns + 2, device=device))  # the graph compiled at another even or odd length
    actual = compiled(x)
    assert_same(actual, expected)
    assert actual.stride() == expected.stride() and actual.storage_offset() == expected.storage_offset()


def test_view_of_an_input_returned_with_the_input(device):
    def fn(x):
        v = x[1:]
        y = x + 1
        torch._dynamo.graph_break()
        v.zero_()
        return x, v, y

    x = torch.randn(3, 4, device=device)
    expected_x = x.clone()
    expected = fn(expected_x)
    torch._dynamo.reset()
    actual = torch.compile(fn, backend="tritonize")(x)
    assert_same(actual, expected)
    assert actual[0] is x and _same_storage(x, actual[1]) and torch.equal(x, expected_x)


# --- as_strided addresses the storage eager keeps its input in (issue 25, bugs 4 and 5) ---------

def _channels_last(device, *shape):
    return _x(device, *shape).to(memory_format=torch.channels_last)


AS_STRIDED_OVER_COMPUTED = {
    # x + 1 keeps x's channels-last layout in eager (bug 4)
    "channels_last": (lambda x: torch.as_strided(x + 1, (2, 8, 2, 4, 2), (128, 1, 64, 8, 32), 0),
                      lambda d: (_channels_last(d, 2, 8, 4, 4),)),
    # repeat's result is a fresh contiguous tensor, never its input's storage (bug 5)
    "repeat": (lambda x: (lambda full: torch.as_strided(full, (3, 2), full.stride()) * 2)(x.repeat(3, 2)),
               lambda d: (_x(d, 1, 1),)),
    "transposed": (lambda x: torch.as_strided(x.t() + 1, (3, 4), (1, 3)), lambda d: (_x(d, 3, 4),)),
    "transposed_offset": (lambda x: torch.as_strided(x.t() * 2, (2, 2), (2, 1), 3), lambda d: (_x(d, 3, 4),)),
    "permuted": (lambda x: torch.as_strided(x.permute(2, 0, 1).exp(), (4, 6), (6, 1)),
                 lambda d: (_x(d, 2, 3, 4),)),
    "expand_of_computed": (lambda x: torch.as_strided((x + 1).expand(3, 4), (2, 2), (1, 1), 1) + 1,
                           lambda d: (_x(d, 4),)),
    "cat": (lambda a, b: torch.as_strided(torch.cat([a, b], 1), (3, 2), (1, 3)), lambda d: (_x(d, 2, 2), _x(d, 2, 1))),
    "pad": (lambda x: torch.as_strided(torch.nn.functional.pad(x, (1, 1)), (3, 3), (1, 4), 1),
            lambda d: (_x(d, 3, 2),)),
    # a view's own storage offset is where as_strided starts when it is given none
    "slice_of_computed": (lambda x: torch.as_strided((x + 1)[1:, ::2], (2, 2), (1, 4)), lambda d: (_x(d, 3, 4),)),
    "slice_of_transposed": (lambda x: torch.as_strided((x.t() + 1)[1:], (2, 2), (1, 4)), lambda d: (_x(d, 4, 3),)),
    "unbind_piece": (lambda x: torch.as_strided((x * 3).unbind(0)[1], (3,), (2,)), lambda d: (_x(d, 3, 4),)),
    "keepdim_reduction": (lambda x: torch.as_strided(x.amax(2, keepdim=True) + 0, (2, 15), (15, 1)),
                          lambda d: (_channels_last(d, 2, 3, 4, 5),)),
    "contiguous_of_channels_last": (lambda x: torch.as_strided(x.contiguous(), (2, 60), (60, 1)),
                                    lambda d: (_channels_last(d, 2, 3, 4, 5),)),
    "view_of_computed": (lambda x: torch.as_strided((x + 1).t(), (3, 4), (1, 3)), lambda d: (_x(d, 3, 4),)),
    "as_strided_twice": (lambda x: torch.as_strided(torch.as_strided(x * 2, (2, 3), (3, 1), 1), (4,), (2,), 2),
                         lambda d: (_x(d, 12),)),
    "as_strided_copy": (lambda x: torch.ops.aten.as_strided_copy(x.t() + 1, (3, 4), (1, 3)),
                        lambda d: (_x(d, 3, 4),)),
    "mm": (lambda a, b: torch.as_strided((a @ b).t(), (6,), (1,)), lambda d: (_x(d, 2, 5), _x(d, 5, 3))),
    "conv_channels_last": (lambda x, w: torch.as_strided(torch.nn.functional.conv2d(x, w) + 1, (2, 10), (10, 1), 5),
                           lambda d: (_channels_last(d, 2, 3, 4, 5), _channels_last(d, 3, 3, 3, 3))),
}


@pytest.mark.parametrize("case", sorted(AS_STRIDED_OVER_COMPUTED))
def test_as_strided_over_computed_value_reads_eager_storage(device, case):
    fn, make_args = AS_STRIDED_OVER_COMPUTED[case]
    args = make_args(device)
    before = [a.clone() for a in args]
    check(fn, *args)
    for a, b in zip(args, before):
        assert torch.equal(a, b) and a.stride() == b.stride()


def test_logical_views_of_non_contiguous_values(device):
    """view/reshape/flatten/unfold pick elements by position whatever the layout: no storage involved."""
    def fn(x, y):
        return ((x.t() + 1).unfold(0, 2, 1) * 1, (x.t() + 1).reshape(-1).view(2, 6) * 1,
                (y * 2).flatten() + 0, (y * 2).view(2, 3, 20) + 0)

    check(fn, _x(device, 3, 4), _channels_last(device, 2, 3, 4, 5))


# --- views of cat and pad: slices, flips and reshapes compose (issue 25, bug 6) ------------------

def test_flip_of_slice_of_view_of_cat(device):
    def fn(a, b):
        return (torch.cat([a, b], 1).view(4)[0:3].flip(0) * 1,
                torch.cat([a, b], 1).flatten()[1:].flip(0).reshape(3, 1) + 0,
                torch.cat([a, b, a], 1).view(3, 2)[1:].flip(0, 1) * 1)

    check(fn, _x(device, 2, 1), _x(device, 2, 1))


def _write_through_as_strided(x):
    y = x.t() + 1  # transposed in eager: the as_strided write addresses that layout
    y.as_strided((2,), (3,), 1).mul_(2)
    return y


def _write_through_as_strided_channels_last(x):
    y = x * 2
    y.as_strided((2, 3), (1, 8), 4).add_(10)
    return y


@pytest.mark.parametrize("layout", ["contiguous", "offset", "transposed", "step", "step_offset"])
def test_as_strided_scatter_of_a_graph_input_writes_its_layout(device, layout):
    """Eager's copy keeps the input's strides, gaps of a step slice included, and the storage
    offset counts from the input's own: all generated, the caller's tensor left alone."""
    base = torch.arange(30.0, device=device)
    x = {"contiguous": base, "offset": base[5:25], "transposed": base.view(5, 6).t(),
         "step": base[::2], "step_offset": base[5::2]}[layout]
    offset = 6 if layout.endswith("offset") else 1
    report = check(lambda t, s: torch.as_strided_scatter(t, s, (2, 2), (3, 1), offset), x,
                   -torch.ones(2, 2, device=device))
    assert not report.fallbacks
    assert torch.equal(base, torch.arange(30.0, device=device))


def test_as_strided_scatter_writes_eager_storage(device):
    """Functionalization turns a write through as_strided into as_strided_scatter, which writes
    storage positions of its input as eager lays it out."""
    aten = torch.ops.aten

    def explicit(x, src):
        return (aten.as_strided_scatter(x.t() * 1, src, (2, 2), (1, 3), 1),
                aten.as_strided_scatter(x, src, (2, 2), (2, 1), 3))  # a graph input

    check(_write_through_as_strided, _x(device, 3, 4))
    check(_write_through_as_strided_channels_last, _channels_last(device, 2, 3, 2, 2))
    x, src = _x(device, 3, 4), _x(device, 2, 2)
    before = x.clone()
    check(explicit, x, src)
    assert torch.equal(x, before)
