"""Views as index maps: no copies, no fallbacks, eager's values."""
import torch

from helpers import check


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
