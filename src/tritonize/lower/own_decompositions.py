"""Decompositions of our own, for ops torch has none for (or none that matches eager): adaptive
pooling with uneven windows, 3-D max and average pooling, searchsorted, torch's grid_sampler_2d
with eager's answer at NaN coordinates, grid_sampler_3d, and _trilinear (bilinear). They are
written with gathers and elementwise ops, which lower to pointwise kernels (a gather is an
indirect load), so the whole op fuses.

* adaptive pooling: output o of an axis of `size` inputs and `out` outputs pools the inputs
  [floor(o * size / out), ceil((o + 1) * size / out)), eager's window. The largest window has
  `kernel` taps (a static number); tap i of a shorter window is clamped to its last input and, for
  the average, masked out. Max pooling keeps eager's rule (a tap wins when larger than the best so
  far or NaN; the index is h * W + w), which a clamped tap never changes: it repeats a tap just
  taken. 3-D max pooling uses the same taps (o * stride - padding + i * dilation); a tap outside
  the input never wins, and the index starts at the window's first tap inside it, like eager's;
  3-D average pooling sums the taps inside the input and divides by eager's divisor.
  (torch's decompositions of both take an argmax, which picks the first NaN where eager picks the
  last.) Windows of more than MAX_TAPS taps are left to aten.
* searchsorted: the binary search of eager's kernel, unrolled (bit_length(M) steps for M
  boundaries), one gather per step. It keeps eager's comparisons: the left side moves past a
  boundary unless boundary >= value, the right side unless boundary > value, so NaN sorts last.
* grid_sampler_3d: eager's arithmetic step by step (unnormalization, reflection, clipping, the
  corner weights and their order), so that nearest sampling rounds the same values and
  trilinear sampling sums the same terms; a corner outside the input is skipped, not weighted 0.
* _trilinear: a sum over a product of broadcast inputs, which the reduction computes in its loop.
* put: an index_put into the tensor seen as 1-D. index_add, index_copy, index_fill and
  index_reduce of a 0-d tensor: the same op on its one-element 1-D view (other ranks return NotImplemented and keep
  lower/scatter.py's lowering).
"""
from __future__ import annotations

import itertools
import math

import torch
from torch._decomp import decomposition_table as torch_decompositions
from torch._meta_registrations import pooling_output_shape
from torch.fx.experimental.symbolic_shapes import statically_known_true

from .pooling import MAX_TAPS

aten = torch.ops.aten


# --- adaptive pooling ---------------------------------------------------------------------------

def _static(sizes) -> list[int] | None:
    """The sizes as ints, or None when one is symbolic (then aten runs the op)."""
    try:
        return [int(s) for s in sizes]
    except (TypeError, ValueError, RuntimeError):
        return None


def _adaptive_axis(size: int, out: int, device) -> tuple[list, list]:
    """Per tap i, the input index of tap i of every output window (clamped into the window) and
    whether the tap lies inside its window."""
    o = torch.arange(out, device=device)
    start = (o * size) // out
    end = ((o + 1) * size + out - 1) // out
    kernel = max(-(-((k + 1) * size) // out) - (k * size) // out for k in range(out))
    taps = [start + i for i in range(kernel)]
    return [torch.minimum(t, end - 1) for t in taps], [t < end for t in taps]


def _strided_axis(size: int, out: int, kernel: int, stride: int, padding: int, dilation: int,
                  device) -> tuple[list, list]:
    """The same for a pooling window: tap i of output o is o * stride - padding + i * dilation,
    inside when in [0, size); outside taps are clamped into the input (and never win)."""
    o = torch.arange(out, device=device)
    taps = [o * stride - padding + i * dilation for i in range(kernel)]
    return [torch.clamp(t, 0, size - 1) for t in taps], [(t >= 0) & (t < size) for t in taps]


def _axis_view(t: torch.Tensor, axis: int, rank: int) -> torch.Tensor:
    """t (1-D) shaped to broadcast along spatial axis `axis` of `rank` spatial dims."""
    shape = [1] * rank
    shape[axis] = t.shape[0]
    return t.reshape(shape)


def _taps(x: torch.Tensor, sizes: list, axes: list):
    """Yields (values, flat input position, inside window) for every tap of the windows,
    row-major; None when the window is too large."""
    rank = len(axes)
    if math.prod(len(taps) for taps, _ in axes) > MAX_TAPS:
        return None

    def taps(k: int, chosen: list):
        if k == rank:
            index = [_axis_view(t, a, rank) for a, (t, _) in enumerate(chosen)]
            position, inside = 0, True
            for a, (t, valid) in enumerate(chosen):
                position = position * sizes[a] + _axis_view(t, a, rank)
                inside = inside & _axis_view(valid, a, rank)
            yield x[(Ellipsis, *index)], position, inside
            return
        for tap in zip(*axes[k]):
            yield from taps(k + 1, chosen + [tap])

    return taps(0, [])


def _adaptive_taps(x: torch.Tensor, output_size):
    rank = len(output_size)
    sizes = _static(list(x.shape[-rank:]) + list(output_size))
    if sizes is None or 0 in sizes:
        return None
    return _taps(x, sizes, [_adaptive_axis(sizes[k], sizes[rank + k], x.device) for k in range(rank)])


def _max_of_taps(x: torch.Tensor, taps):
    """Eager's max pooling over the taps: a tap inside its window wins when larger than the best
    so far or NaN; the index starts at the window's first tap inside the input."""
    if taps is None:
        return NotImplemented
    lowest = float("-inf") if x.dtype.is_floating_point else torch.iinfo(x.dtype).min
    best = index = None
    for value, position, inside in taps:
        inside = torch.as_tensor(inside, device=x.device).expand(value.shape)
        position = position.expand(value.shape)
        if best is None:
            best = torch.full_like(value, lowest)
            index = position
            found = inside
        else:
            index = torch.where(found, index, position)
            found = found | inside
        take = inside & ((value > best) | torch.isnan(value))
        best, index = torch.where(take, value, best), torch.where(take, position, index)
    return best, index


def _adaptive_max(x: torch.Tensor, output_size):
    return _max_of_taps(x, _adaptive_taps(x, output_size))


def _triple(value) -> list[int]:
    value = [value] if isinstance(value, int) else list(value)
    return value * 3 if len(value) == 1 else value


def _pool3d_axes(x, kernel_size, stride, padding, dilation, ceil_mode):
    """(sizes: input and output sizes, the _strided_axis of each dim, kernel, stride, padding), or
    None when the sizes are symbolic or empty."""
    kernel = _triple(kernel_size)
    stride = _triple(stride) if stride not in ([], (), None) else kernel
    padding, dilation = _triple(padding), _triple(dilation)
    sizes = _static(x.shape[-3:])
    if sizes is None or 0 in sizes:
        return None
    sizes += [pooling_output_shape(sizes[k], kernel[k], padding[k], stride[k], dilation[k], ceil_mode)
              for k in range(3)]
    axes = [_strided_axis(sizes[k], sizes[3 + k], kernel[k], stride[k], padding[k], dilation[k], x.device)
            for k in range(3)]
    return sizes, axes, kernel, stride, padding


def max_pool3d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    plan = _pool3d_axes(x, kernel_size, stride, padding, dilation, ceil_mode)
    if plan is None:
        return NotImplemented
    sizes, axes = plan[:2]
    return _max_of_taps(x, _taps(x, sizes, axes))


def avg_pool3d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Eager's average: the sum of the taps inside the input over divisor_override, or over the
    taps inside the padded input (count_include_pad) or inside the input."""
    plan = _pool3d_axes(x, kernel_size, stride, padding, 1, ceil_mode)
    if plan is None or not x.dtype.is_floating_point:
        return NotImplemented
    sizes, axes, kernel, stride, padding = plan
    taps = _taps(x, sizes, axes)
    if taps is None:
        return NotImplemented
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    total = sum(torch.where(inside, value.to(compute), 0) for value, _, inside in taps)
    if divisor_override:
        return (total / divisor_override).to(x.dtype)
    count = 1
    for k in range(3):
        o = torch.arange(sizes[3 + k], device=x.device)
        start = o * stride[k] - padding[k]
        end = torch.clamp(start + kernel[k], max=sizes[k] + padding[k])
        if not count_include_pad:
            start, end = torch.clamp(start, min=0), torch.clamp(end, max=sizes[k])
        count = count * _axis_view(end - start, k, 3)
    return (total / count).to(x.dtype)


def _adaptive_avg(x: torch.Tensor, output_size):
    taps = _adaptive_taps(x, output_size)
    if taps is None:
        return NotImplemented
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    total = count = None
    for value, _, inside in taps:
        term = torch.where(inside, value.to(compute), 0)
        total = term if total is None else total + term
        count = inside.to(compute) if count is None else count + inside.to(compute)
    return (total / count).to(x.dtype)


def adaptive_max_pool(x, output_size):
    # (torch's adaptive_max_pool2d decomposition pools a 1x1 output with argmax, which takes the
    # first NaN of the plane where eager takes the last)
    return _adaptive_max(x, output_size)


def adaptive_avg_pool3d(x, output_size):
    return _adaptive_avg(x, output_size)


# --- grid sampling ------------------------------------------------------------------------------

def grid_sampler_2d(x, grid, interpolation_mode, padding_mode, align_corners):
    """torch's decomposition, with eager's answer at NaN grid coordinates: the border and reflection
    modes clip a NaN coordinate to 0 (fmin/fmax), and bilinear sampling with zero padding gives
    NaN on the CPU; the decomposition drops such a point as out of bounds (0)."""
    if padding_mode == 0 and interpolation_mode == 0 and x.device.type != "cpu":
        # eager's CUDA kernel answers neither NaN (the CPU's) nor 0 (the decomposition's) at a NaN
        # coordinate (H100, 2026-11-25): the op stays and runs through aten, where it is right
        return NotImplemented
    nan = torch.isnan(grid)
    if padding_mode in (1, 2) and interpolation_mode in (0, 1):
        # the grid value that unnormalizes to 0, along x (width) and y (height)
        at_x, at_y = (-1.0, -1.0) if align_corners else (1 / x.shape[-1] - 1, 1 / x.shape[-2] - 1)
        is_x = torch.arange(2, device=grid.device) == 0
        grid = torch.where(nan, torch.where(is_x, at_x, at_y).to(grid.dtype), grid)
    out = torch_decompositions[aten.grid_sampler_2d.default](x, grid, interpolation_mode, padding_mode,
                                                            align_corners)
    if padding_mode == 0 and interpolation_mode == 0:
        out = torch.where(nan.any(-1).unsqueeze(1), float("nan"), out)
    return out


def grid_sampler_3d(x, grid, interpolation_mode, padding_mode, align_corners):
    """Eager's 3-D sampler: trilinear (mode 0) or nearest (mode 1) sampling of x (N, C, D, H, W)
    at grid (N, D', H', W', 3) points (x, y, z order), with zeros (0), border (1) or reflection
    (2) padding. Coordinates are computed as eager computes them (fp16/bf16 in fp32): the same
    unnormalization, reflection and clipping, so that nearest sampling rounds (half to even) the
    same value. A corner outside the input adds nothing (not even 0 * its value: eager skips it);
    the eight corners are summed in eager's order."""
    if interpolation_mode not in (0, 1) or padding_mode not in (0, 1, 2):
        return NotImplemented  # (eager has no bicubic 3-D sampling)
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    n, c, depth, height, width = x.shape
    points = grid.to(compute).unsqueeze(1)  # (N, 1, D', H', W', 3): broadcast over channels
    source = [_source_coordinate(points[..., k], size, padding_mode, align_corners, x.device)
              for k, size in enumerate((width, height, depth))]
    batch = torch.arange(n, device=x.device).reshape(n, 1, 1, 1, 1)
    channel = torch.arange(c, device=x.device).reshape(1, c, 1, 1, 1)

    def sample(corner):
        """x at a corner (float positions along x, y, z) and whether the corner is inside x."""
        inside = None
        for position, size in zip(corner, (width, height, depth)):
            within = (position >= 0) & (position < size)
            inside = within if inside is None else inside & within
        ix, iy, iz = (torch.where(inside, position, 0).to(torch.int64) for position in corner)
        return x[batch, channel, iz, iy, ix], inside

    if interpolation_mode == 1:
        value, inside = sample([s.round() for s in source])
        return torch.where(inside, value, 0)
    low = [s.floor() for s in source]
    high = [s + 1 for s in low]
    # along each axis, the weight of the low corner is high - s, of the high corner s - low
    weights = [((h - s), (s - lo)) for s, lo, h in zip(source, low, high)]
    total = None
    for dz, dy, dx in itertools.product((0, 1), repeat=3):  # eager's order: x fastest, then y, z
        value, inside = sample([(low, high)[d][k] for k, d in enumerate((dx, dy, dz))])
        weight = weights[0][dx] * weights[1][dy] * weights[2][dz]
        term = torch.where(inside, value.to(compute) * weight, 0)
        total = term if total is None else total + term
    return total.to(x.dtype)


def _source_coordinate(coordinate, size, padding_mode, align_corners, device):
    """A grid coordinate in [-1, 1] as a position along an input axis of `size` elements, padded
    as eager pads it (eager's operations, in eager's order)."""
    if align_corners:  # -1 and 1 are the centres of the first and last elements
        position = (coordinate + 1) / 2 * (size - 1)
    else:  # -1 and 1 are the outer edges of the first and last elements
        position = ((coordinate + 1) * size - 1) / 2
    if padding_mode == 2:
        twice_low, twice_high = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        position = _reflect(position, twice_low, twice_high, device)
    if padding_mode in (1, 2):
        # eager clips NaN to the last element on the CPU (std::min/max) and to the first on CUDA
        # (fmin/fmax); reflection turns an infinite coordinate into NaN
        nan_to = size - 1 if device.type == "cpu" else 0
        position = torch.where(position.isnan(), nan_to, position.clamp(0, size - 1))
    return position


def _reflect(position, twice_low: int, twice_high: int, device):
    """position reflected back and forth between low and high (given doubled, to be integers)
    until inside, as eager's reflect_coordinates: by the distance from low, its remainder within
    one span and the parity of the number of whole spans. Eager counts the spans as an int: past
    2**31 spans that is even on the CPU (x86 gives INT_MIN) and odd on CUDA (it saturates)."""
    if twice_low == twice_high:
        return torch.zeros_like(position)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = (position - low).abs()
    extra = torch.fmod(distance, span)
    spans = torch.floor(distance / span)
    odd = (spans - 2 * torch.floor(spans / 2)) == 1
    odd = torch.where(spans >= 2.0 ** 31, device.type != "cpu", odd)
    return torch.where(odd, span - extra + low, extra + low)


# --- searchsorted -------------------------------------------------------------------------------

def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    if not isinstance(values, torch.Tensor):
        values = torch.full((), values, device=sorted_sequence.device)
    right = right or side == "right"
    dtype = torch.int32 if out_int32 else torch.int64
    boundaries = _static([sorted_sequence.shape[-1]])
    if boundaries is None:
        return NotImplemented
    count = boundaries[0]
    low = torch.zeros(values.shape, dtype=torch.int64, device=values.device)
    if count == 0:
        return low.to(dtype)
    high = low + count
    for _ in range(count.bit_length()):
        middle = (low + high) // 2
        boundary = _boundary_at(sorted_sequence, sorter, torch.clamp(middle, max=count - 1))
        past = ~(boundary > values) if right else ~(boundary >= values)
        active = low < high
        low = torch.where(active & past, middle + 1, low)
        high = torch.where(active & ~past, middle, high)
    return low.to(dtype)


def _boundary_at(sequence, sorter, position):
    """sequence (through sorter, when given) at `position` of each value's row."""
    if sorter is not None:
        position = _take(sorter, position)
    return _take(sequence, position)


def _take(sequence, position):
    if sequence.dim() == 1:
        return sequence[position]
    return torch.gather(sequence, -1, position)


# --- indexing on a flattened or one-element tensor ---------------------------------------------

def put(x, index, source, accumulate=False):
    """x.put(index, source): index_put into x seen as 1-D (indices wrap from the end as eager's),
    laid out as x (eager's result is a clone of x, written in place)."""
    flat = x.reshape(-1).index_put((index.reshape(-1),), source.reshape(-1), accumulate)
    return aten.copy.default(torch.empty_like(x), flat.reshape(x.shape))


def _on_one_element(op, takes_source: bool):
    """op on a 0-d x as on its one-element 1-D view (lower/scatter.py lowers ranks >= 1 only);
    NotImplemented for other ranks, which keep their own lowering."""
    def decomposition(x, dim, index, value, *args, **kwargs):
        if x.dim() != 0:
            return NotImplemented
        if takes_source:
            value = value.reshape(-1)
        return op(x.reshape(1), dim, index.reshape(-1), value, *args, **kwargs).reshape(())
    return decomposition


# --- compositions of ops we lower --------------------------------------------------------------

def addbmm(x, batch1, batch2, *, beta=1, alpha=1):
    """beta * x + alpha * sum over the batch of batch1 @ batch2 (x ignored when beta is 0): one
    matrix product over the batch and inner dims together, accumulated as eager's."""
    batches, rows, inner = batch1.shape
    product = torch.mm(batch1.transpose(0, 1).reshape(rows, batches * inner), batch2.reshape(batches * inner, -1))
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product.expand(torch.broadcast_shapes(x.shape, product.shape)).clone()
    return (x if beta == 1 else x * beta) + product


def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """aten._trilinear (what F.bilinear calls): the product of the three inputs, each unsqueezed
    at its expand dims, summed over sumdim; contiguous, as eager's. The product is an expression
    the reduction computes in its loop (fp16/bf16 in fp32, rounded once), never a tensor in
    memory. Eager's quirk kept: a dim that no input has and that is not summed has size 0."""
    rank = i1.dim() + len(expand1)
    torch._check(0 <= unroll_dim < rank, lambda: f"unroll_dim must be in [0, {rank - 1}]")
    expanded = [{d % rank for d in expand} for expand in (expand1, expand2, expand3)]
    if not _small_product((i1, i2, i3), expanded, rank):
        return NotImplemented  # a large layer: eager's bmm runs on tensor cores
    compute = torch.float32 if i1.dtype in (torch.float16, torch.bfloat16) else i1.dtype
    product = None
    for t, dims in zip((i1, i2, i3), expanded):
        for d in sorted(dims):  # eager unsqueezes in increasing order
            t = t.unsqueeze(d)
        product = t.to(compute) if product is None else product * t.to(compute)
    summed = sorted({d % rank for d in sumdim})
    kept = [d for d in range(rank) if d not in summed]
    if any(all(d in dims for dims in expanded) for d in kept):
        shape = [0 if all(d in dims for dims in expanded) else product.shape[d] for d in kept]
        return i1.new_zeros(shape)
    if summed:
        product = product.sum(summed, dtype=compute)
    return product.to(i1.dtype).contiguous()


# Multiply-adds above which _trilinear stays with eager (bmm on tensor cores): our reduction runs
# them on CUDA cores, fine for small layers (a bilinear 16 x 16 -> 16 over 4096 rows is 2^24).
MAX_TRILINEAR_MACS = 1 << 24


def _small_product(inputs, expanded, rank) -> bool:
    """Whether the broadcast product of _trilinear's inputs (each unsqueezed at its `expanded`
    dims) provably has at most MAX_TRILINEAR_MACS elements (symbolic sizes: without a guard)."""
    size = [1] * rank
    for t, dims in zip(inputs, expanded):
        kept = [d for d in range(rank) if d not in dims]
        for d, n in zip(kept, t.shape):
            size[d] = n if isinstance(size[d], int) and size[d] == 1 else size[d]
    return statically_known_true(math.prod(size) <= MAX_TRILINEAR_MACS)


def _p_norm_of_last_dim(diff, p):
    """The p-norm of |diff| over the last dim, as eager's distance kernels define it."""
    if p == 0:
        return (diff != 0).sum(-1).to(diff.dtype)
    if p == 1:
        return diff.sum(-1)
    if p == 2:
        return diff.pow(2).sum(-1).sqrt()
    if math.isinf(p):
        return diff.amax(-1)
    return diff.pow(p).sum(-1).pow(1.0 / p)


def cdist(x1, x2, p, compute_mode=None):
    """Distances between the rows of x1 and x2, each pair's difference reduced directly (eager
    may go through a matrix product for p = 2, a little less exactly)."""
    if x1.shape[-1] == 0 and math.isinf(p):
        return NotImplemented
    return _p_norm_of_last_dim((x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs(), p)


def pdist(x, p=2):
    """Distances between the rows i < j of x, in row-major order of (i, j)."""
    rows = _static([x.shape[0]])
    if rows is None or (x.shape[1] == 0 and math.isinf(p)):
        return NotImplemented
    n = rows[0]
    if n < 2:
        return x.new_zeros((0,))
    # pair k belongs to row i, the last whose first pair starts[i] = i * (2n - i - 1) / 2 is <= k
    row = torch.arange(n, device=x.device)
    starts = row * (2 * n - row - 1) // 2
    pair = torch.arange(n * (n - 1) // 2, device=x.device)
    i = torch.searchsorted(starts, pair, right=True) - 1
    j = pair - starts[i] + i + 1
    return _p_norm_of_last_dim((x[i] - x[j]).abs(), p)


def masked_scatter(x, mask, source):
    """Where mask holds, source's elements in order (a running count of the mask picks each);
    contiguous, as eager's result."""
    shape = torch.broadcast_shapes(x.shape, mask.shape)  # eager broadcasts both
    x, mask = x.expand(shape), mask.expand(shape)
    if source.numel() == 0:
        return x.clone(memory_format=torch.contiguous_format)
    position = mask.reshape(-1).to(torch.int64).cumsum(0) - 1
    taken = source.reshape(-1)[position.clamp(min=0)].reshape(x.shape)
    return torch.where(mask, taken, x).contiguous()


def nonzero_static(x, *, size, fill_value=-1):
    """The coordinates of the first `size` nonzero elements in row-major order, rows past the
    count filled with fill_value: a running count of the nonzeros places each one's coordinates;
    the others (and those past `size`) go to a spare row that is cut off. Laid out as eager's:
    row-major on the CPU, dimension-major (the transpose of a contiguous (dims, size)) on CUDA."""
    if x.dim() == 0:  # no coordinates to give
        return _nonzero_layout(torch.full((size, 0), fill_value, dtype=torch.int64, device=x.device))
    if _static(x.shape) is None:
        return NotImplemented
    if x.numel() == 0:  # no coordinates: every row is fill_value
        return _nonzero_layout(torch.full((size, x.dim()), fill_value, dtype=torch.int64, device=x.device))
    nonzero = x.reshape(-1) != 0
    position = nonzero.to(torch.int64).cumsum(0) - 1
    target = torch.where(nonzero & (position < size), position, size)
    flat = torch.arange(x.numel(), device=x.device)
    coordinates, stride = [], x.numel()
    for extent in x.shape:
        stride //= extent
        coordinates.append((flat // stride) % extent)
    table = torch.full((size + 1, x.dim()), fill_value, dtype=torch.int64, device=x.device)
    return _nonzero_layout(table.index_put((target,), torch.stack(coordinates, 1))[:size])


def _nonzero_layout(coordinates):
    if not dimension_major_nonzero(coordinates.device):
        return coordinates.clone()
    count, dims = coordinates.shape  # strides (1, count), or (1, 1) when empty, as CUDA's kernel
    return coordinates.t().contiguous().as_strided((count, dims), (1, max(count, 1)))


def dimension_major_nonzero(device) -> bool:
    """Whether eager's nonzero on this device lays coordinates out dimension-major (CUDA's)."""
    return device.type == "cuda"


# --- order statistics through a sort (an extern) -------------------------------------------------

def median(x):
    """The lower median of all elements; NaN if any is NaN (torch.sort puts NaNs last)."""
    flat = x.reshape(-1)
    if flat.numel() == 0:
        return NotImplemented
    value = torch.sort(flat).values[(flat.numel() - 1) // 2]
    if not x.is_floating_point():
        return value
    return torch.where(flat.isnan().any(), torch.full_like(value, math.nan), value)


def nanmedian(x):
    """The lower median of the non-NaN elements (NaN when there are none)."""
    if not x.is_floating_point():
        return median(x)
    if x.numel() == 0:
        return NotImplemented
    return _nanmedian_along(x.reshape(-1), 0)


def _nanmedian_along(x, dim):
    """Per row along dim of a float x: the lower median of its non-NaN elements (NaN for a row
    of NaNs). (aten.nanmedian.dim stays an aten call: for a row of NaNs eager's index comes from
    its selection algorithm's internals, 5 for 7 elements.)"""
    values = torch.sort(x, dim=dim).values
    position = (((~x.isnan()).sum(dim, keepdim=True) - 1) // 2).clamp(min=0)
    return values.gather(dim, position).squeeze(dim)


def kthvalue(x, k, dim=-1, keepdim=False):
    """The k-th smallest along dim and its index (a stable sort; NaNs sort last, as in eager).
    Integers tie often, and among equal values eager's selection returns no particular index:
    those stay aten calls."""
    if x.dim() == 0 or not x.is_floating_point():
        return NotImplemented
    values, indices = torch.sort(x, dim=dim, stable=True)
    value, index = values.narrow(dim, k - 1, 1), indices.narrow(dim, k - 1, 1)
    if not keepdim:
        value, index = value.squeeze(dim), index.squeeze(dim)
    dense = torch.contiguous_format  # fresh tensors, as eager's
    return value.clone(memory_format=dense), index.clone(memory_format=dense)


def frexp(x):
    """(mantissa in [0.5, 1) with x's sign, exponent) with x = mantissa * 2**exponent; 0, infinities
    and NaN keep their value with exponent 0. Computed in float64, where scaling by powers of
    two is exact; log2's rounding near a power of two is corrected by one step either way."""
    wide = x.to(torch.float64)
    regular = torch.isfinite(wide) & (wide != 0)
    exponent = torch.floor(torch.log2(torch.where(regular, wide.abs(), 1.0))) + 1
    half = torch.floor(exponent / 2)
    mantissa = wide * torch.exp2(-half) * torch.exp2(half - exponent)
    too_large = mantissa.abs() >= 1
    mantissa, exponent = torch.where(too_large, mantissa / 2, mantissa), torch.where(too_large, exponent + 1, exponent)
    too_small = regular & (mantissa.abs() < 0.5)
    mantissa, exponent = torch.where(too_small, mantissa * 2, mantissa), torch.where(too_small, exponent - 1, exponent)
    mantissa = torch.where(regular, mantissa, wide).to(x.dtype)
    return mantissa, torch.where(regular, exponent, 0.0).to(torch.int32)


TABLE = {
    aten.adaptive_max_pool2d.default: adaptive_max_pool,
    aten.adaptive_max_pool3d.default: adaptive_max_pool,
    aten._adaptive_avg_pool3d.default: adaptive_avg_pool3d,
    aten.max_pool3d_with_indices.default: max_pool3d_with_indices,
    aten.avg_pool3d.default: avg_pool3d,
    aten.grid_sampler_2d.default: grid_sampler_2d,
    aten.grid_sampler_3d.default: grid_sampler_3d,
    aten.searchsorted.Tensor: searchsorted,
    aten.searchsorted.Scalar: searchsorted,
    aten.put.default: put,
    aten.index_add.default: _on_one_element(aten.index_add.default, takes_source=True),
    aten.index_copy.default: _on_one_element(aten.index_copy.default, takes_source=True),
    aten.index_fill.int_Scalar: _on_one_element(aten.index_fill.int_Scalar, takes_source=False),
    aten.index_fill.int_Tensor: _on_one_element(aten.index_fill.int_Tensor, takes_source=False),
    aten.index_reduce.default: _on_one_element(aten.index_reduce.default, takes_source=True),
    aten.addbmm.default: addbmm,
    aten._trilinear.default: trilinear,
    aten._cdist_forward.default: cdist,
    aten._pdist_forward.default: pdist,
    aten.masked_scatter.default: masked_scatter,
    aten.nonzero_static.default: nonzero_static,
    aten.median.default: median,
    aten.nanmedian.default: nanmedian,
    aten.kthvalue.default: kthvalue,
    aten.frexp.Tensor: frexp,
}
