"""Functions generated wrappers call: allocation, layout checks, views, and the script benchmark."""
from __future__ import annotations

import math
import sys
import time

import torch

from .dense_copy import dense_rows, padded_rows
from .fast_launch import cuda_device_getter, cuda_stream_getter
from .launcher import load_kernel  # noqa: F401  (re-exported for wrappers)

empty_strided = torch.empty_strided


def _empty_strided_cuda_python(size, stride, dtype):
    return torch.empty_strided(size, stride, dtype=dtype, device="cuda")


# A buffer on the current CUDA device: torch's C entry skips the argument parsing of
# torch.empty_strided (about 1 us against 3 us an allocation on an H100 host). The wrapper's
# call() makes its graph's device current first.
empty_strided_cuda = getattr(getattr(getattr(torch._C, "_dynamo", None), "guards", None),
                             "_empty_strided_cuda", _empty_strided_cuda_python)


current_cuda_device = cuda_device_getter()  # () -> the current CUDA device's index, chosen once


def _reinterpret_tensor_python(tensor: torch.Tensor, size, stride, offset: int = 0) -> torch.Tensor:
    return tensor.as_strided(size, stride, tensor.storage_offset() + offset)


# A real view (shares its base's version counter, keeps `_base`): what the wrapper returns, and
# what it hands to aten fallbacks (their results may alias it and be returned). A saved tensor
# that views a graph input must see the input's in-place changes, or backward would silently
# use the changed values where eager raises "modified by an inplace operation".
view_tensor = _reinterpret_tensor_python

_GUARDS = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
# A view of a buffer at `offset` elements past its own offset. torch's C entry makes the view
# without autograd's view bookkeeping nor a shared version counter (about 1 us against 3 for
# as_strided): only for arguments of aten calls whose results are fresh tensors.
reinterpret_tensor = getattr(_GUARDS, "_reinterpret_tensor", _reinterpret_tensor_python)
_check_size_stride = getattr(_GUARDS, "assert_size_stride", None)  # C; dims of size 1 unchecked


def assert_size_stride(tensor: torch.Tensor, size, stride, name: str) -> None:
    if tensor is None:  # AOTAutograd passes None for inputs the graph does not read
        return
    if _check_size_stride is not None:  # the fast check; a mismatch is reported below
        try:
            return _check_size_stride(tensor, size, stride)
        except AssertionError:
            pass
    if tuple(tensor.shape) != tuple(size) or not _same_strides(tensor.shape, tensor.stride(), stride):
        raise AssertionError(
            f"tritonize: input {name} has size {tuple(tensor.shape)} and stride {tensor.stride()}, "
            f"but the graph was compiled for size {tuple(size)} and stride {tuple(stride)}")


def _same_strides(size, actual, expected) -> bool:
    return all(a == e or s <= 1 for s, a, e in zip(size, actual, expected))


def ensure_layout(tensor: torch.Tensor, size, stride) -> torch.Tensor:
    """An aten result with the strides the generated code assumes (copied only if they differ)."""
    if tensor is None:  # an optional result the op did not produce (nothing reads it)
        return None
    if tensor.stride() == stride and tensor.size() == size:  # the usual case, checked fast
        return tensor
    if tuple(tensor.shape) == tuple(size) and _same_strides(size, tensor.stride(), stride):
        return tensor
    fixed = torch.empty_strided(size, stride, dtype=tensor.dtype, device=tensor.device)
    fixed.copy_(tensor)
    return fixed


def split_workspace(numel: int, like: torch.Tensor) -> torch.Tensor:
    """A split outer reduction's partial results (codegen/outer_split.py): fp32, uninitialized,
    on `like`'s device (the wrapper's call() has made it current), for this call."""
    if like.is_cuda:
        return empty_strided_cuda((max(1, numel),), (1,), torch.float32)
    return torch.empty((max(1, numel),), dtype=torch.float32)


# Counters of split outer reductions, zero between launches (each launch's last programs reset
# theirs), one buffer per (device, stream): kernels on one stream run one after the other, so
# they can share it; kernels on two streams may overlap, so they do not. A buffer outgrown is
# kept, not freed: a CUDA graph may have captured its address.
_COUNTERS: dict = {}
_OUTGROWN: list = []
_raw_stream = cuda_stream_getter()


def split_counters(count: int, like: torch.Tensor) -> torch.Tensor:
    """At least `count` zero counters on `like`'s device for the current stream. On the CPU
    fresh zeros every call: Triton's interpreter raises mid-launch on a bad index or divisor
    (checks), which would leave counts behind for every later kernel (on the GPU the same error
    is a device assert, fatal to the context)."""
    index = like.get_device()  # -1 on the CPU
    if index < 0:
        return torch.zeros((max(count, 1),), dtype=torch.int32)
    return _counters_of((index, _raw_stream(index)), count, 1024)


def _counters_of(key: tuple, count: int, least: int) -> torch.Tensor:
    """The counters of (device index, stream): grown to at least max(count, least) when fewer
    than `count` (the outgrown buffer is kept: a CUDA graph may have captured its address)."""
    counters = _COUNTERS.get(key)
    if counters is not None and counters.numel() >= count:
        return counters
    if counters is not None:
        _OUTGROWN.append(counters)
    counters = _COUNTERS[key] = torch.zeros((max(count, least),), dtype=torch.int32,
                                            device=torch.device("cuda", key[0]))
    return counters


def reserve_split_counters(index: int, stream_id: int) -> None:
    """Before a CUDA graph capture on stream `stream_id`: its counters, as many as the device's
    largest, made now, outside the capture's memory pool (a buffer made inside would stay in the
    pool for the program's life, which the pool's memory bookkeeping cannot restore around:
    runtime/cuda_graph_pool.py)."""
    size = max((c.numel() for (i, _), c in _COUNTERS.items() if i == index), default=0)
    if size:
        _counters_of((index, stream_id), size, size)


def matmul_aligned(out_op, *args, min_macs: int = 0, pads: dict | None = None, padded_rows: bool = False,
                   **kwargs) -> torch.Tensor:
    """`out_op` (aten.mm.out or aten.addmm.out, bias 1-D) on operands whose rows all start at
    16-byte boundaries, returned dense. cuBLAS takes an unvectorized kernel when a leading
    dimension is not a multiple of 16 bytes: GPT-2's LM head (vocabulary 50257) took 6.6 ms on an
    H100 that way, against 0.9 ms padded, and its two products of the backward (the gradient of
    the logits times the weight, and its transpose times the hidden states) 0.44 ms each.
    - An odd depth K: a and b are copied with K padded by zeros (which add nothing); or, when b's
      rows start at 16-byte boundaries and the width is whole, the last steps of K are a product
      of their own and b is not copied (_product_split_depth).
    - An odd number of columns N: the product is written into rows padded to 16 bytes and
      copied once more, dense, a block of rows at a time (_product_into_dense: the padded result
      never exists whole). When b's columns start at 16-byte boundaries (a transposed weight),
      its first N rounded down columns and the few left are two products, and b is not copied;
      otherwise b (and the bias) are copied with N padded (those columns are never read back).
      (N odd alone sends cuBLAS to its slow kernel: bench/odd_columns.py.)
    - An operand laid out with an odd row stride (the transposed view of odd-width logits) is
      copied in its own order with that stride padded: for a, the extra rows of the result are
      dropped (a view of whole rows).
    Copies keep the operand's own order (a transposed weight is copied row by row of its memory).
    A product smaller than min_macs (M*N*K; a graph with symbolic sizes decides per call) is
    computed as it is. pads: a dict the graph's call shares between its padded products (an
    operand two products read is copied once; _copy_padded). padded_rows: an odd-width product is
    returned as it was computed, a view of rows padded to 16 bytes (where nothing needs it dense:
    lower/product_rows.py)."""
    *bias, a, b = args
    (rows, depth), cols = a.shape, b.shape[1]
    if rows * cols * depth < min_macs:
        return _product(out_op, bias, a, b, kwargs, rows, cols)
    unit = max(1, 16 // a.element_size())
    deep, wide, tall = _round_up(depth, unit), _round_up(cols, unit), rows
    split_depth = deep != depth and wide == cols and depth > unit and _rows_aligned(b, unit)
    if (deep != depth and not split_depth) or not _rows_aligned(a, unit):
        tall = _round_up(rows, unit) if _column_major(a) else rows  # the copy's leading dimension
        a = _copy_padded(a, tall, deep, pads)
    if split_depth:
        out = _product_split_depth(out_op, bias, a[:, :depth], b, kwargs, unit)
        return out if tall == rows else out[:rows]
    split_columns = wide != cols and deep == depth and cols > unit and _rows_aligned(b, unit) and _column_major(b)
    if not split_columns and (deep != depth or wide != cols or not _rows_aligned(b, unit)):
        b = _copy_padded(b, deep, wide, pads)
    if bias and wide != cols and not split_columns:
        bias_wide = torch.zeros((wide,), dtype=bias[0].dtype, device=bias[0].device)
        bias_wide[:cols].copy_(bias[0])
        bias = [bias_wide]
    if wide != cols and padded_rows:
        return _product_in_padded_rows(out_op, bias, a, b, kwargs, rows, cols, wide)
    if wide != cols:
        return _product_into_dense(out_op, bias, a, b, kwargs, rows, cols, wide)
    out = _product(out_op, bias, a, b, kwargs, tall, wide)
    return out if tall == rows else out[:rows]  # whole rows of a dense result: dense


def _product_split_depth(out_op, bias, a, b, kwargs, unit) -> torch.Tensor:
    """A product of odd depth whose operands' rows start at 16-byte boundaries (b: the LM head's
    weight, read by the backward's product of the logits' gradient; matmul_aligned copies a where
    its rows do not): the last few steps of depth first, with the bias, then the aligned rest (a
    whole number of 16 bytes of depth, b's first rows as they are) added onto them by cuBLAS's
    vectorized kernels. b is not copied (GPT-2's weight: 74 MiB a step). The large part is
    rounded once, as in one product; the first product's result (the bias and the tail) is rounded
    to the output's dtype before the rest is added onto it: at most half a unit of its last place
    more than one product."""
    aligned = a.shape[1] - a.shape[1] % unit
    out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    out_op(*bias, a[:, aligned:], b[aligned:], **kwargs, out=out)
    torch.ops.aten.addmm.out(out, a[:, :aligned], b[:aligned], beta=1, alpha=kwargs.get("alpha", 1), out=out)
    return out


# A padded product of more than PADDED_BLOCK_BYTES is computed in at most PADDED_BLOCKS blocks of
# rows (multiples of PADDED_BLOCK_ROWS), one reused padded buffer for them all. GPT-2's logits (8192
# x 50257 bf16, H100, 2026-11-26): the padded result (786 MiB) sat next to its dense copy (785
# MiB), a peak of 1.89 GiB against eager's 1.05.
PADDED_BLOCK_BYTES = 64 << 20
PADDED_BLOCKS = 8
PADDED_BLOCK_ROWS = 128


def _product_into_dense(out_op, bias, a, b, kwargs, rows, cols, wide) -> torch.Tensor:
    """The product of width `cols` written into a dense (rows, cols) result through a buffer of
    a block of rows padded to `wide`, each block copied out before the next is computed; or,
    for many rows and b not copied, by groups of rows (_product_by_row_residue)."""
    if b.shape[1] != wide and _by_residue_pays(a, cols):  # b as it is (not copied padded)
        return _product_by_row_residue(out_op, bias, a, b, kwargs, cols)
    dense = torch.empty((rows, cols), dtype=a.dtype, device=a.device)
    block = _padded_block_rows(rows, wide * a.element_size())
    padded = torch.empty((min(block, rows), wide), dtype=a.dtype, device=a.device)
    parts = _column_parts(bias, b, cols, wide)
    for start in range(0, rows, block):
        count = min(block, rows - start)
        for first, end, part_bias, part_b in parts:
            out_op(*part_bias, a[start:start + count], part_b, **kwargs, out=padded[:count, first:end])
        dense_rows(padded[:count, :cols], out=dense[start:start + count])
    return dense


def _product_in_padded_rows(out_op, bias, a, b, kwargs, rows, cols, wide) -> torch.Tensor:
    """The product of width `cols` in rows of `wide` elements: the (rows, cols) view of them."""
    padded = torch.empty((rows, wide), dtype=a.dtype, device=a.device)
    for first, end, part_bias, part_b in _column_parts(bias, b, cols, wide):
        out_op(*part_bias, a[:rows], part_b, **kwargs, out=padded[:, first:end])
    return padded[:, :cols]


# A product of odd width with at least this many rows per unit of depth is computed by groups of
# rows: each group's product reads the whole of b, which costs less than the padded result's copy
# only for many rows. GPT-2's LM head (K = 768, N = 50257, bf16, H100, 2026-11-27,
# bench/odd_columns.py): by groups 462 us against 783 padded and copied at M = 3072, 1038 against
# 1725 at 8192; 417 against 282 at 768, 457 against 619 and 460 against 414 (two runs) at 1600.
RESIDUE_MIN_ROWS_PER_DEPTH = 2


def _by_residue_pays(a: torch.Tensor, cols: int) -> bool:
    rows, depth = a.shape
    unit = 16 // a.element_size()
    return rows >= RESIDUE_MIN_ROWS_PER_DEPTH * depth and a.stride(1) == 1 and cols > 2 * unit


def _product_by_row_residue(out_op, bias, a, b, kwargs, cols) -> torch.Tensor:
    """The product of odd width `cols` straight into a dense result: neither padded nor copied.
    Rows `groups` apart start at the same offset from a 16-byte boundary (groups * cols is a
    multiple of 16 bytes), so the rows of one residue modulo `groups` are one product over the
    columns from the first that starts at a boundary in those rows, a multiple of 16 bytes of
    them, which cuBLAS takes with its vectorized kernels. The few columns left at either edge are
    two small products over all rows, written first (the groups overwrite what they share).
    b's columns must start at 16-byte boundaries (a transposed weight), a's rows too."""
    rows = a.shape[0]
    unit = 16 // a.element_size()
    groups = unit // math.gcd(cols, unit)
    out = torch.empty((rows, cols), dtype=a.dtype, device=a.device)
    bias = [t.expand(cols) for t in bias]
    spans = [(0, unit, slice(None)), (cols - unit, cols, slice(None))]
    for residue in range(min(groups, rows)):
        first = -residue * cols % unit
        spans.append((first, first + (cols - first) // unit * unit, slice(residue, None, groups)))
    for first, end, group in spans:
        out_op(*[t[first:end] for t in bias], a[group], b[:, first:end], **kwargs, out=out[group, first:end])
    return out


def _column_parts(bias, b, cols, wide) -> list:
    """(first column, end, bias, b) of each product: b padded to `wide` whole, or b as it is in
    its columns up to a multiple of 16 bytes and the rest (each with its columns of the bias,
    which may be one element that broadcasts)."""
    if b.shape[1] == wide:
        return [(0, wide, bias, b)]
    aligned = cols - cols % max(1, 16 // b.element_size())
    bias = [t.expand(cols) for t in bias]
    return [(0, aligned, [t[:aligned] for t in bias], b[:, :aligned]),
            (aligned, cols, [t[aligned:] for t in bias], b[:, aligned:])]


def _padded_block_rows(rows: int, row_bytes: int) -> int:
    if rows * row_bytes <= PADDED_BLOCK_BYTES:
        return max(1, rows)
    fitting = PADDED_BLOCK_BYTES // row_bytes
    return max(_round_up(-(-rows // PADDED_BLOCKS), PADDED_BLOCK_ROWS), fitting // PADDED_BLOCK_ROWS * PADDED_BLOCK_ROWS)


def _product(out_op, bias, a, b, kwargs, rows, cols) -> torch.Tensor:
    out = torch.empty((rows, cols), dtype=a.dtype, device=a.device)
    out_op(*bias, a, b, **kwargs, out=out)
    return out


def _round_up(n: int, unit: int) -> int:
    return -(-n // unit) * unit


def _rows_aligned(t: torch.Tensor, unit: int) -> bool:
    """Whether cuBLAS reads t (2-D) with a leading dimension and a start of 16-byte multiples."""
    rows, cols = t.shape
    inner_ok = (t.stride(1) == 1 or cols == 1) and (t.stride(0) % unit == 0 or rows == 1)
    outer_ok = (t.stride(0) == 1 or rows == 1) and (t.stride(1) % unit == 0 or cols == 1)
    return (inner_ok or outer_ok) and t.data_ptr() % 16 == 0


def _column_major(t: torch.Tensor) -> bool:
    return t.stride(0) == 1 and t.stride(1) != 1


def _copy_padded(t: torch.Tensor, rows: int, cols: int, pads: dict | None = None) -> torch.Tensor:
    """t in the top left corner of a new (rows, cols) tensor, zeros in the rest; column-major when
    t is (a transposed view), so the copy reads t's memory in order (its leading dimension is then
    `rows`: matmul_aligned pads it). pads: copies made earlier in the same graph call, by source
    view (the gradient of odd-width logits is padded once for both of its backward products, one
    reading it transposed; the wrapper shares a dict only between products that follow one
    another, so nothing writes a source in between)."""
    if _column_major(t):
        return _copy_padded(t.t(), cols, rows, pads).t()
    key = None if pads is None else (t.data_ptr(), t.dtype, tuple(t.shape), tuple(t.stride()), t._version, rows, cols)
    if key in (pads or {}):
        return pads[key][1]
    if t.stride(1) == 1 or t.shape[1] == 1:  # one kernel (the CPU runs it in Triton's interpreter)
        padded = padded_rows(t, rows, cols)
    else:
        padded = torch.empty((rows, cols), dtype=t.dtype, device=t.device)
        padded[:t.shape[0], :t.shape[1]].copy_(t)
        if rows > t.shape[0]:
            padded[t.shape[0]:].zero_()
        if cols > t.shape[1]:
            padded[:, t.shape[1]:].zero_()
    if key is not None:  # the source held with its copy: freed, its address could come back as
        pads[key] = (t, padded)  # another tensor's of the same shape, which would find this copy
    return padded


def random_input(size, stride, dtype, device) -> torch.Tensor:
    out = torch.empty_strided(size, stride, dtype=dtype, device=device)
    if dtype.is_floating_point:
        out.copy_(torch.randn(out.shape, device=device, dtype=dtype))
    elif dtype == torch.bool:
        out.copy_(torch.rand(out.shape, device=device) > 0.5)
    else:
        out.copy_(torch.randint(0, 8, out.shape, device=device, dtype=dtype))
    return out


def benchmark_main(call, input_specs, repeat: int = 20) -> None:
    """Run `call` on random inputs and print the median time (used when a wrapper runs as a script)."""
    def make_args():
        return [random_input(*spec) for spec in input_specs]

    call(make_args())
    on_gpu = any(spec[3] != "cpu" for spec in input_specs)
    times = []
    for _ in range(repeat):
        args = make_args()
        if on_gpu:
            torch.cuda.synchronize()
        start = time.perf_counter()
        call(args)
        if on_gpu:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    print(f"median {times[len(times) // 2] * 1e3:.3f} ms over {repeat} runs", file=sys.stdout)
