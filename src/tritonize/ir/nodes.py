"""IR nodes: buffers, lazy tensor values, and the operations that produce buffers.

* `Layout`: size, stride, storage offset, dtype and device of a real tensor.
* `TensorValue`: a lazy tensor, `body` is an Expr over d0..d{rank-1} (see ir/expr.py). Lowering
  passes these between FX nodes; views make new TensorValues, never copies.
* Buffer producers, in the order the wrapper runs them (`GraphIR.operations`):
  `ComputedBuffer` (a TensorValue materialized by a generated kernel; `ReductionBuffer` and
  `ScanBuffer` are its reducing and scanning kinds), `ExternCall` (an aten call
  made from the wrapper: library kernels on purpose, or fallbacks for ops we cannot lower).
* `GraphIR`: inputs, operations, outputs; what lowering hands to the scheduler.

Not responsible for: deciding what to fuse (schedule/) or how to print it (codegen/).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import sympy
import torch

from . import expr as ex
from .symbols import dim_vars


@dataclasses.dataclass(frozen=True)
class Layout:
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    dtype: torch.dtype
    device: torch.device

    @property
    def numel(self) -> int:
        n = 1
        for s in self.size:
            n *= s
        return n

    def storage_span(self) -> int:
        """Elements of storage this layout can touch, counted from storage start."""
        if self.numel == 0:
            return self.offset
        return self.offset + sum((s - 1) * st for s, st in zip(self.size, self.stride)) + 1

    def index(self, dims) -> sympy.Expr:
        return self.offset + sum((st * d for st, d in zip(self.stride, dims)), sympy.Integer(0))


def contiguous_strides(size) -> tuple[int, ...]:
    strides, running = [], 1
    for s in reversed(size):
        strides.append(running)
        running *= max(s, 1) if isinstance(s, int) else s  # a symbolic size is >= 2 (ir/sizes.py)
    return tuple(reversed(strides))


@dataclasses.dataclass(frozen=True)
class TensorValue:
    """A lazy tensor: element at index (d0..dN) is `body`."""

    size: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    body: ex.Expr
    origins: tuple[str, ...] = ()  # aten FX nodes whose computation body holds

    @property
    def rank(self) -> int:
        return len(self.size)

    def at(self, index) -> ex.Expr:
        """The element at `index` (sympy expressions), as an Expr."""
        mapping = dict(zip(dim_vars(self.rank), index))
        return ex.substitute(self.body, mapping)


def buffer_value(name: str, layout: Layout) -> TensorValue:
    body = ex.load(name, layout.index(dim_vars(len(layout.size))), layout.dtype)
    return TensorValue(layout.size, layout.dtype, layout.device, body)


def strided_view_of(value: TensorValue, sizes=None):
    """(buffer name, size, stride, offset) if value reads one buffer at an affine index, else None.
    sizes: the graph's SizeOracle, whose ranges may show a symbolic coefficient non-negative
    (a select at a symbolic index: Dynamo's guards keep the index in range)."""
    from .symbols import affine_coefficients

    body = value.body
    if body.op != "load" or body.dtype != value.dtype:
        return None
    dims = dim_vars(value.rank)
    coeffs = affine_coefficients(body.args[1], dims)

    def negative(c) -> bool:
        if isinstance(c, int):
            return c < 0
        return not (c.is_nonnegative or (sizes is not None and sizes.known_le(0, c)))
    if coeffs is None or any(negative(c) for c in coeffs.values()):
        return None
    stride = tuple(coeffs.get(d, 0) for d in dims)
    return body.args[0], value.size, stride, coeffs.get(1, 0)


@dataclasses.dataclass
class Buffer:
    name: str
    layout: Layout


@dataclasses.dataclass
class InputBuffer(Buffer):
    position: int
    # The caller's tensor carries torch's lazy negation bit (torch._neg_view): its memory holds
    # the negated values, so the wrapper resolves it before a kernel reads that memory.
    neg_bit: bool = False
    # A 0-d CPU tensor input (a Python float Dynamo passes as a tensor, with dynamic=True): the
    # wrapper reads its value once a call (`arg.item()`) and kernels take that number as an
    # argument, as eager mixes 0-d CPU tensors into GPU ops (codegen/kernel.py, HOST_SCALAR).
    host_scalar: bool = False


@dataclasses.dataclass
class HostValueBuffer(Buffer):
    """A number the wrapper computes from sizes alone, once a call (`source`: Python over the
    bound size symbols; lower/host_values.py); kernels take it as a host scalar's value."""

    source: str = ""
    host_scalar: bool = True


@dataclasses.dataclass
class ComputedBuffer(Buffer):
    """A buffer filled by a generated kernel: element at index d is `body` (over dims of size)."""

    body: ex.Expr
    origins: list[str]  # names of the aten FX nodes whose computation this buffer holds
    # Where in its storage the wrapper allocates it (elements): 0, or a mutated input's storage
    # offset for the input's new value laid out as the input (lower/graph.py, _realize_shared_base)
    storage_offset: Any = dataclasses.field(default=0, init=False)


REDUCTION_TYPES = ("sum", "prod", "max", "min", "argmax", "argmin", "var", "mean")


def neutral_value(rtype: str, dtype: torch.dtype):
    """The element that leaves a reduction unchanged (what masked lanes hold)."""
    if rtype in ("sum", "var", "mean"):
        return 0
    if rtype == "prod":
        return 1
    largest = rtype in ("min", "argmin")
    if dtype.is_floating_point:
        return float("inf") if largest else float("-inf")
    info = torch.iinfo(dtype)
    return info.max if largest else info.min


@dataclasses.dataclass
class ReductionBuffer(ComputedBuffer):
    """A buffer whose element at output index d reduces `body` over the reduced dims.

    `body` is an Expr over the output's dim variables d0.. and the reduction variables rd0..
    (one per reduced dim, row-major, so argmax/argmin give flat indices over them). Its dtype is
    the accumulation dtype, which is also the buffer's: lowering casts the result afterwards.
    `source` records the shape that was reduced: (size, reduced) per dim of the reduced tensor,
    so pointwise buffers of that shape can join the reduction's kernel. `correction` is var's.
    "mean" is var_mean's mean, computed as var is (two passes over registers, or Welford's
    update), so that a row of equal values has exactly their value as its mean: sum / n can be
    an ulp off it, which a layer norm's rstd (up to 1/sqrt(eps)) magnifies.
    """

    reduction_type: str = "sum"
    reduction_ranges: tuple[int, ...] = ()
    source: tuple[tuple[int, bool], ...] = ()
    correction: float = 0.0

    @property
    def rnumel(self) -> int:
        n = 1
        for s in self.reduction_ranges:
            n *= s
        return n


SCAN_TYPES = ("sum", "prod", "max", "min", "logsumexp", "argmax", "argmin")


@dataclasses.dataclass
class ScanBuffer(ComputedBuffer):
    """A buffer whose element at index d combines `body` over positions 0..d[scan_dim] of that dim.

    `body` is an Expr over the buffer's own dims d0.. (the scan's input element, in the
    accumulation dtype, which is the buffer's dtype). "argmax"/"argmin" hold the position of
    the running max/min (the last one on ties, NaN counting as the largest, like torch.cummax),
    in int64; lowering casts values to the dtype eager gives afterwards.
    """

    scan_type: str = "sum"
    scan_dim: int = 0


@dataclasses.dataclass
class ExternOutput:
    """One tensor result of an ExternCall: `path` indexes into the call's (nested) result."""

    buffer: Buffer
    path: tuple[int, ...]
    # aten's result carries the lazy negation bit (_neg_view, view_as_real of a negated complex
    # tensor): the wrapper resolves it, since kernels read memory, not torch's view flags.
    neg_bit: bool = False


@dataclasses.dataclass
class ExternCall:
    """An aten op called from the wrapper. kind: 'extern' (on purpose), 'collective' (lower/fallback.py)
    or 'fallback'."""

    name: str
    target: Any  # an OpOverload
    args: tuple  # nested; Buffer references appear as TensorArg
    kwargs: dict
    outputs: list[ExternOutput]
    kind: str
    origin: str
    reason: str = ""
    # Python statements the wrapper runs right after the call, `{result}` standing for what it
    # returned: bindings of the data-dependent sizes it decides ("u0 = {result}.size(0)") and
    # the graph's runtime asserts on them (lower/unbacked.py)
    after: list = dataclasses.field(default_factory=list)
    # an mm/addmm whose leading dimensions the wrapper aligns (codegen/wrapper.aligns_matmul;
    # lower/product_rows.py: option align_matmuls for this call's device)
    align_rows: bool = False


def writes_no_argument(target) -> bool:
    """An op (an ExternCall's target) whose schema mutates none of its arguments."""
    schema = getattr(target, "_schema", None)
    return schema is not None and not schema.is_mutable


@dataclasses.dataclass(frozen=True)
class TensorArg:
    """A tensor argument of an extern call: a strided view of a buffer."""

    buffer_name: str
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    is_plain: bool  # True when the view is the whole buffer as laid out


@dataclasses.dataclass
class GraphOutput:
    """What the graph returns at one position: a buffer view, or a plain Python value."""

    view: TensorArg | None
    value: Any = None


@dataclasses.dataclass(frozen=True)
class OpaqueInput:
    """A graph input that is no tensor and no size: an opaque object (a ScriptObject, such as
    the process group a DTensor's graphs carry), passed on as it is to the aten calls that take
    it and to the outputs that return it; the wrapper names it by its placeholder."""

    name: str


@dataclasses.dataclass
class GraphIR:
    inputs: list[InputBuffer]
    operations: list  # ComputedBuffer | ExternCall, in a valid execution order
    outputs: list[GraphOutput]
    constants: dict[str, torch.Tensor]
    buffers: dict[str, Buffer]
    arg_names: list[str] = dataclasses.field(default_factory=list)  # every placeholder, in order
    # Symbolic sizes (ir/sizes.py): where the wrapper reads each symbol ("arg0_1",
    # "arg2_1.size(1)"), and the oracle that answered the graph's questions about them.
    symbol_sources: dict = dataclasses.field(default_factory=dict)
    sizes: Any = None
    # data-dependent (unbacked) sizes, bound in the wrapper after the call that decides them
    # (ExternCall.after)
    unbacked_symbols: set = dataclasses.field(default_factory=set)

    @property
    def is_symbolic(self) -> bool:
        return bool(self.symbol_sources or self.unbacked_symbols)

    def producer_of(self) -> dict[str, Any]:
        table = {}
        for op in self.operations:
            if isinstance(op, ComputedBuffer):
                table[op.name] = op
            else:
                for out in getattr(op, "outputs", []):  # a ScatterOp writes into an existing buffer
                    table[out.buffer.name] = op
        return table

    def render(self) -> str:
        lines = [f"inputs: {', '.join(f'{b.name}{list(b.layout.size)}' for b in self.inputs)}"]
        for op in self.operations:
            if isinstance(op, ReductionBuffer):
                lines.append(f"{op.name} = {op.reduction_type} over {list(op.reduction_ranges)} "
                             f"size={list(op.layout.size)} {op.layout.dtype}  # {', '.join(op.origins)}")
                lines.append(f"    {op.body!r}")
            elif isinstance(op, ScanBuffer):
                lines.append(f"{op.name} = scan {op.scan_type} along dim {op.scan_dim} "
                             f"size={list(op.layout.size)} {op.layout.dtype}  # {', '.join(op.origins)}")
                lines.append(f"    {op.body!r}")
            elif isinstance(op, ComputedBuffer):
                lines.append(f"{op.name} = compute size={list(op.layout.size)} "
                             f"stride={list(op.layout.stride)} {op.layout.dtype}  # {', '.join(op.origins)}")
                lines.append(f"    {op.body!r}")
            elif hasattr(op, "render"):  # ScatterOp (ir/scatter.py)
                lines.append(op.render())
            else:
                outs = ", ".join(o.buffer.name for o in op.outputs)
                lines.append(f"{outs} = {op.kind} {op.target}  # {op.origin}")
        lines.append("outputs: " + ", ".join(
            (o.view.buffer_name if o.view else repr(o.value)) for o in self.outputs))
        return "\n".join(lines)
