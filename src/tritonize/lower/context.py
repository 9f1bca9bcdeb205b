"""LoweringContext: the state of lowering one graph, passed explicitly to every lowering.

It owns the buffers and the ordered list of operations, and it decides when a lazy value becomes
a real buffer (`realize`). Nothing here is global: one context per graph.
"""
from __future__ import annotations

import itertools

import sympy

import torch

from ..ir import expr as ex
from ..ir.nodes import (
    Buffer,
    ComputedBuffer,
    ExternCall,
    ExternOutput,
    InputBuffer,
    Layout,
    TensorArg,
    TensorValue,
    buffer_value,
    contiguous_strides,
    strided_view_of,
)
from ..codegen.ops_table import TRITON_DTYPES
from ..errors import Unsupported
from ..ir.sizes import as_size
from .conv_layout import channels_last_strides, inherits_channels_last
from .dtypes import symbolic_size

# A lazy value read by several consumers is stored once when recomputing it would read more.
MAX_INLINE_LOADS_FOR_SHARED = 2
MAX_INLINE_OPS_FOR_SHARED = 16
# A stencil (neighbours of one buffer: diff's differences) is judged by its arithmetic alone, 32
# ops a consumer being well within what a memory-bound kernel hides.
MAX_INLINE_ARITHMETIC_FOR_STENCIL = 32
MAX_INLINE_OPS = 200


def needs_neg_resolved(tensor: torch.Tensor) -> bool:
    """A tensor with torch's lazy negation bit whose memory a generated kernel may read. Complex
    tensors keep their bits: only aten reads them, and it honours the bits."""
    return tensor.is_neg() and not tensor.dtype.is_complex


class LoweringContext:
    def __init__(self, options, sizes=None):
        self.options = options
        self.sizes = sizes  # ir/sizes.py's SizeOracle: questions about symbolic sizes
        self.buffers: dict[str, Buffer] = {}
        self.operations: list = []
        self.constants: dict[str, torch.Tensor] = {}
        self.storage_offsets: dict = {}  # input or constant -> int, a Symbol, or None (unreadable)
        self.current_node = None
        self.values: dict = {}  # FX node -> what it lowered to, filled by lower_graph
        self.random = None  # lower/random.py's RandomState, once the graph has a random op
        self.unbacked: dict = {}  # data-dependent size -> the ExternCall after which it is bound
        # new values of mutated inputs laid out as the inputs (lower/graph.py, _updated_input_strides)
        self.input_layout_buffers: set = set()
        self._read_only_copies: dict = {}  # see realize_read_only
        self.output_views: set = set()  # FX nodes a graph output is or views (lower/graph.py)
        self._counter = itertools.count()

    # --- naming -----------------------------------------------------------------------------
    def new_name(self, prefix: str = "buf") -> str:
        return f"{prefix}{next(self._counter)}"

    def storage_offset_of(self, name: str):
        """An input's or constant's storage offset: an int, or a symbol the wrapper reads."""
        offset = self.storage_offsets.get(name, 0)
        if offset is None:
            raise Unsupported(f"as_strided over {name}, whose storage offset is a symbolic expression "
                              "the wrapper cannot read from the input")
        return offset

    def origin(self) -> str:
        return self.current_node.name if self.current_node is not None else "?"

    # --- materialization ----------------------------------------------------------------------
    def compute_buffer(self, value: TensorValue, stride=None) -> Buffer:
        """Materialize value into a new buffer written by a generated kernel."""
        if any(s == 0 for s in value.size):
            return self._empty_buffer(value)
        if value.dtype not in TRITON_DTYPES:  # (a complex aten result copied to another layout)
            raise Unsupported(f"a {value.dtype} buffer would need a generated kernel")
        stride = tuple(stride) if stride is not None else contiguous_strides(value.size)
        layout = Layout(tuple(value.size), stride, 0, value.dtype, value.device)
        origins = list(dict.fromkeys(value.origins + (self.origin(),)))
        buffer = ComputedBuffer(self.new_name(), layout, value.body, origins)
        self.buffers[buffer.name] = buffer
        self.operations.append(buffer)
        return buffer

    def shared_strides(self, value: TensorValue) -> tuple:
        """The layout of a value stored for our kernels to share (realize_value): contiguous, or
        channels-last for a value computed from channels-last buffers (lower/conv_layout.py). Not
        for an aten call's argument (realize): aten ops may assume what the trace gave them, a
        unit last stride (CPU flash attention read a channels-last query wrongly: review)."""
        if inherits_channels_last(self.options, value, self.buffers):
            return channels_last_strides(tuple(value.size))
        return contiguous_strides(value.size)

    def constant_value(self, name: str, tensor: torch.Tensor) -> TensorValue:
        """A real tensor the compiled code holds (a frozen weight, a weight stored otherwise at
        compile time), read through a buffer of its own layout."""
        layout = Layout(tuple(tensor.shape), tuple(tensor.stride()), 0, tensor.dtype, tensor.device)
        self.constants[name] = tensor
        self.add_buffer(InputBuffer(name, layout, -1))
        self.storage_offsets[name] = int(tensor.storage_offset())
        return buffer_value(name, layout)

    def add_computed(self, buffer: ComputedBuffer) -> None:
        """Register a buffer a generated kernel fills (e.g. a ReductionBuffer built by a lowering)."""
        self.buffers[buffer.name] = buffer
        self.operations.append(buffer)

    def _empty_buffer(self, value: TensorValue) -> Buffer:
        """Tensors with no elements need no kernel: the wrapper allocates them directly."""
        layout = Layout(tuple(value.size), contiguous_strides(value.size), 0, value.dtype, value.device)
        buffer = Buffer(self.new_name(), layout)
        self.add_buffer(buffer)
        kwargs = {"dtype": value.dtype, "device": value.device}
        args = (list(layout.size), list(layout.stride))
        call = ExternCall(self.new_name("extern"), torch.ops.aten.empty_strided.default, args, kwargs,
                          [ExternOutput(buffer, ())], "alloc", self.origin())
        self.operations.append(call)
        return buffer

    def realize(self, value: TensorValue, stride=None) -> TensorArg:
        """A real tensor holding value: a view of an existing buffer when possible, else a new one."""
        view = strided_view_of(value, self.sizes)
        if view is not None and (stride is None or tuple(stride) == view[2]):
            name, size, vstride, offset = view
            return self._tensor_arg(name, size, vstride, offset)
        buffer = self.compute_buffer(value, stride)
        return self._tensor_arg(buffer.name, buffer.layout.size, buffer.layout.stride, 0)

    def realize_read_only(self, value: TensorValue, stride=None) -> TensorArg:
        """realize for an op that only reads the tensor: a value stored once is handed to every
        such op (each layer's slice of one attention mask, given to each layer's attention)."""
        if strided_view_of(value, self.sizes) is not None:
            return self.realize(value, stride)
        key = (value.size, value.dtype, value.device, value.body, None if stride is None else tuple(stride))
        if key not in self._read_only_copies:
            self._read_only_copies[key] = self.realize(value, stride)
        return self._read_only_copies[key]

    def stored_for_output(self, value: TensorValue, stride) -> TensorArg | None:
        """The buffer an aten call that only reads it already holds value in, in these strides,
        for a graph output to return instead of storing the value again (a training forward
        saves the bf16 copy of a weight or of an activation that a convolution read: once
        stored for the call, once for the output, before). Two outputs that would take one
        such buffer are kept apart afterwards (lower/graph.py, _apart_as_in_eager)."""
        stride = tuple(stride)
        keys = [(value.size, value.dtype, value.device, value.body, stride)]
        if stride == tuple(contiguous_strides(value.size)):
            keys.append((value.size, value.dtype, value.device, value.body, None))
        for key in keys:
            arg = self._read_only_copies.get(key)
            if arg is not None and arg.is_plain and arg.stride == stride:
                return arg
        return None

    def realize_value(self, value: TensorValue, stride=None) -> TensorValue:
        """Like realize, but hands back a TensorValue that loads from the buffer (stored in
        `stride`, by default shared_strides)."""
        if strided_view_of(value) is not None:
            return value
        buffer = self.compute_buffer(value, stride or self.shared_strides(value))
        return buffer_value(buffer.name, buffer.layout)

    def maybe_realize_shared(self, value: TensorValue, num_users: int, memory_readers: int = 0,
                             stride=None) -> TensorValue:
        """Store a value once if inlining it into every consumer would cost more memory traffic,
        or if one of its several consumers reads it from memory anyway (a library op). stride:
        the layout to store it in (padded rows for a product: lower/product_rows.py)."""
        if strided_view_of(value) is not None or any(s == 0 for s in value.size):
            return value
        n_ops = ex.count_ops(value.body)
        if n_ops > MAX_INLINE_OPS:
            return self.realize_value(value, stride)
        if num_users > 1 and (memory_readers or _costly_to_recompute(value.body, n_ops)):
            return self.realize_value(value, stride)
        return value

    def tensor_arg(self, name, size, stride, offset) -> TensorArg:
        """A view of an existing buffer."""
        return self._tensor_arg(name, size, stride, offset)

    def _tensor_arg(self, name, size, stride, offset) -> TensorArg:
        layout = self.buffers[name].layout
        plain = (tuple(size) == layout.size and tuple(stride) == layout.stride and offset == layout.offset)
        return TensorArg(name, tuple(size), tuple(stride), offset, plain)

    # --- extern calls -------------------------------------------------------------------------
    def add_buffer(self, buffer: Buffer) -> None:
        self.buffers[buffer.name] = buffer

    def extern_call(self, target, args, kwargs, result_meta, kind: str, reason: str = "", align_rows: bool = False,
                    result_stride=None):
        """Call `target` through aten from the wrapper; returns TensorValues shaped like result_meta
        (result_stride: a single result's strides, where the call returns other strides than the
        meta's: a product in padded rows, lower/product_rows.py)."""
        call = ExternCall(self.new_name("extern"), target, args, kwargs, [], kind, self.origin(), reason,
                          align_rows=align_rows)
        result = self._extern_results(call, result_meta, (), result_stride)
        self.operations.append(call)
        return result

    def _extern_results(self, call: ExternCall, meta, path, stride=None):
        if isinstance(meta, torch.Tensor):
            stride = stride or symbolic_size(meta.stride())
            layout = Layout(symbolic_size(meta.shape), stride, 0, meta.dtype, meta.device)
            buffer = Buffer(self.new_name(), layout)
            self.add_buffer(buffer)
            call.outputs.append(ExternOutput(buffer, path, needs_neg_resolved(meta)))
            return buffer_value(buffer.name, layout)
        if isinstance(meta, (tuple, list)):
            return tuple(self._extern_results(call, m, path + (i,)) for i, m in enumerate(meta))
        if isinstance(meta, torch.SymInt):  # .item() of an int: a data-dependent size (lower/unbacked.py)
            return as_size(meta)
        if isinstance(meta, (torch.SymFloat, torch.SymBool)):
            raise Unsupported(f"{call.origin} ({call.target}) returns a data-dependent "
                              f"{type(meta).__name__}, which kernels cannot take yet")
        return meta


# Selections, comparisons and casts: what a cat or pad adds around each load, a few instructions.
SELECTION_OPS = frozenset({"where", "masked", "lt", "le", "gt", "ge", "eq", "ne", "chunk_bound", "logical_and",
                           "logical_or", "to_dtype"})


def _costly_to_recompute(body, n_ops: int) -> bool:
    """Whether a value several consumers read is better stored: it reads more than
    MAX_INLINE_LOADS_FOR_SHARED streams, or has more ops than MAX_INLINE_OPS_FOR_SHARED (a
    stencil: more arithmetic than MAX_INLINE_ARITHMETIC_FOR_STENCIL). A load at a constant index
    (a 0-d tensor such as a loss's incoming gradient) is one number, no stream."""
    loads = [e for e in ex.loads(body) if sympy.sympify(e.args[1]).free_symbols]
    streams = _distinct_streams(loads)
    if streams > MAX_INLINE_LOADS_FOR_SHARED:
        return True
    if streams < len({(e.args[0], e.args[1]) for e in loads}):  # neighbours of one buffer
        return _arithmetic_ops(body) > MAX_INLINE_ARITHMETIC_FOR_STENCIL
    return n_ops > MAX_INLINE_OPS_FOR_SHARED


def _arithmetic_ops(body) -> int:
    """The ops recomputing a stencil costs: its selections and casts (a cat's, repeated at each
    neighbour's offset) aside."""
    skipped = SELECTION_OPS | {"load", "constant", "index_expr"}
    return sum(1 for e in ex.walk(body) if e.op not in skipped)


def _distinct_streams(loads) -> int:
    """How many streams of memory the loads read: loads of one buffer at indices a constant apart
    (a stencil: x[i], x[i + 1]) count as one stream, the neighbours coming from the cache."""
    firsts: dict = {}
    streams = 0
    for load in loads:
        name, index = load.args[0], sympy.sympify(load.args[1])
        if not any((index - first).is_number for first in firsts.get(name, ())):
            streams += 1
        firsts.setdefault(name, []).append(index)
    return streams
