"""render_kernel: one KernelGroup -> the source of one @triton.jit pointwise kernel.

The kernel computes every buffer of the group at each element of the shared iteration space,
stores the ones that are not internal, and reuses values in registers where a later buffer reads
an earlier one (same element, by the scheduler's fusion rule). Sub-expressions are computed once
(CSE). Masks appear only where a size is not a multiple of the largest block the heuristics may
pick; int64 index arithmetic only where an index can pass 2^31 - 1.
"""
from __future__ import annotations

import dataclasses

import sympy

from ..ir import expr as ex
from ..ir.nodes import ComputedBuffer
from ..ir.sizes import SizeOracle, is_symbolic
from ..ir.symbols import FloorDiv, ModularIndexing, dim_vars, upper_bound
from ..runtime.heuristics import MAX_BLOCK_1D, MAX_BLOCK_2D
from ..schedule.fusion import KernelGroup
from .index_printer import print_index
from .indirect import has_indirect, render_indirect, resolve
from .iteration import IterationSpace, plan_iteration
from .ops_table import render_cast, render_constant, render_op, triton_dtype
from .symbolic import SizeParameters, is_symbolic_kernel, kernel_size_expressions
from .symbolic import needs_int64 as symbolic_needs_int64

KERNEL_HEADER = """import triton
import triton.language as tl
from triton.language.extra import libdevice
from tritonize.runtime import triton_helpers as helpers
from tritonize.runtime import index_checks as checks
"""
INT32_LIMIT = 2**31 - 1


def kernel_source(name: str, params: list[str], blocks: list[str], lines: list[str]) -> str:
    """The module text of one kernel: header, then `@triton.jit def name(params, blocks, PDL)`.

    Its first statement is `helpers.wait_for_previous_grid(PDL)`: the runtime sets the constexpr
    PDL on GPUs with programmatic dependent launch (Hopper and later), launches the kernel so
    that it may start while the previous kernel finishes, and the wait keeps every memory access
    after that kernel's end. Elsewhere PDL is False and the wait compiles to nothing."""
    signature = ", ".join(params + [f"{b}: tl.constexpr" for b in blocks] + ["PDL: tl.constexpr"])
    body = "\n".join("    " + line for line in ["helpers.wait_for_previous_grid(PDL)"] + lines)
    return f"{KERNEL_HEADER}\n\n@triton.jit\ndef {name}({signature}):\n{body}\n"


@dataclasses.dataclass
class RenderedKernel:
    name: str
    source: str
    kind: str
    arg_names: list[str]
    xnumel: int
    ynumel: int
    origins: list[str]
    rnumel: int = 1
    hint: str = ""  # reductions: "inner" or "outer" (which way the inputs are contiguous)
    checks: bool = False  # calls runtime/index_checks.py (launched in debug mode on the GPU)
    # Symbolic sizes: the numels as source over the kernel's size parameters ({"xnumel": "ks0 *
    # 3"}), from which the runtime computes each launch's grid; empty for a static kernel.
    numel_exprs: dict = dataclasses.field(default_factory=dict)
    split: int = 1  # outer reductions: row chunks a column block is split into (codegen/outer_split.py)


def render_kernel(group: KernelGroup, buffers: dict, name: str, sizes: SizeOracle | None = None) -> RenderedKernel:
    """sizes: the graph's SizeOracle when its sizes are symbolic (ir/sizes.py)."""
    dims = dim_vars(len(group.size))
    stores = [(b, b.layout.index(dims)) for b in group.stored]
    first = (group.stored or group.buffers)[0]
    expressions = _index_expressions(group, stores)
    indirect_sizes = kernel_size_expressions(b.body for b in group.buffers)
    symbolic = is_symbolic_kernel([*group.size, *expressions, *indirect_sizes], sizes)
    space = plan_iteration(group.size, dims, first.layout.stride, expressions, sizes.hint if symbolic else int)
    size_params = None
    if symbolic:
        use_int64, hints, size_params, space = _symbolic_sizes(space, group, buffers, indirect_sizes, sizes)
    else:
        use_int64, hints = _needs_int64(space, buffers, group), (space.xnumel, space.ynumel)
    writer = _BodyWriter(space, buffers, use_int64, sizes if symbolic else None)
    if size_params is not None:
        writer.size_renames = size_params.renames
    for buffer in group.buffers:
        value = writer.render(buffer.body, writer.base_mask)
        writer.stored_values[(buffer.name, space.rewrite[buffer.layout.index(dims)])] = value
        if buffer.name not in group.internal:
            writer.store(buffer, space.rewrite[buffer.layout.index(dims)], value)
    stored = [b.name for b, _ in stores]
    params = [writer.pointer(n) for n in writer.loaded] + [writer.pointer(n) for n in stored]
    arg_names = writer.loaded_arguments() + stored
    numel_exprs = {}
    if size_params is not None:
        params += size_params.names
        arg_names += size_params.arguments
        numel_exprs = {"xnumel": print_index(space.xnumel), "ynumel": print_index(space.ynumel)}
    source = _assemble(name, params, space, writer, group)
    return RenderedKernel(name, source, "pointwise", arg_names, *hints, group.origins(),
                          checks=writer.has_checks, numel_exprs=numel_exprs)


def _symbolic_sizes(space: IterationSpace, group: KernelGroup, buffers: dict, indirect_sizes, sizes: SizeOracle):
    """For a kernel over symbolic sizes: (int64 indexing, the example's numels, its size
    parameters, the iteration space over those parameters instead of the ShapeEnv's symbols)."""
    use_int64 = symbolic_needs_int64(space.xnumel * space.ynumel, buffers, [b.body for b in group.buffers],
                                     [b.name for b in group.stored], sizes)
    hints = (sizes.hint(space.xnumel), sizes.hint(space.ynumel))
    params = SizeParameters.of([space.xnumel, space.ynumel, *space.rewrite.values(), *indirect_sizes],
                               [s for s, _ in space.x_dims + space.y_dims])
    renamed = IterationSpace(params.rename_dims(space.x_dims), params.rename_dims(space.y_dims),
                             {e: params.rename(v) for e, v in space.rewrite.items()})
    return use_int64, hints, params, renamed


def _index_expressions(group: KernelGroup, stores) -> list:
    found = [index for _, index in stores]
    dims = dim_vars(len(group.size))
    for buffer in group.buffers:
        found.append(buffer.layout.index(dims))
        for e in ex.walk(buffer.body):
            if e.op in ("load", "index_expr"):
                found.append(e.args[1] if e.op == "load" else e.args[0])
    return list(dict.fromkeys(sympy.sympify(f) for f in found))


def _needs_int64(space: IterationSpace, buffers: dict, group: KernelGroup) -> bool:
    if space.xnumel * space.ynumel > INT32_LIMIT:
        return True
    ranges = dict(space.x_dims + space.y_dims)
    ranges.update(ex.indirect_ranges(b.body for b in group.buffers))
    for expr in space.rewrite.values():
        bound = upper_bound(expr, ranges)
        if bound is None or bound > INT32_LIMIT:
            return True
    return False


# comparisons of two index expressions, rendered without casting either side (_render)
INDEX_COMPARISONS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}

# integer ops that divide by their second argument, named as a division-by-zero error says
INTEGER_DIVISIONS = {"floordiv": "floor division", "truncdiv": "division", "remainder": "remainder",
                     "fmod": "fmod"}


class _BodyWriter:
    # A pointwise kernel's load is masked only along the dims its index reads (`masks_of_dims_read`);
    # reduction kernels keep the whole mask (their masked lanes must read the neutral 0).
    NARROW_LOAD_MASKS = True
    # Kernels with the EVEN constexpr (reductions of symbolic sizes, codegen/reduction_kernel.py)
    # or it into their bounds; a split's last-chunk bound then adds its condition to `even_when`.
    even_masks = False
    # Buffers of the group a reduction or scan kernel recomputes where read (their writers set it)
    members: dict = {}

    def __init__(self, space: IterationSpace, buffers: dict, use_int64: bool, sizes: SizeOracle | None = None):
        self.space = space
        self.sizes = sizes  # symbolic sizes: the space's sizes are then the kernel's parameters
        self.buffers = buffers
        self.use_int64 = use_int64
        self.lines: list[str] = []
        self.cache: dict = {}
        self.loaded: list[str] = []
        self.stored_values: dict = {}
        self.counter = 0
        self.even_when: list[str] = []  # conditions (over the size parameters) EVEN also needs
        self.pointers: dict[str, str] = {}
        self.has_checks = False  # set by codegen/indirect.py
        self.size_renames: dict = {}  # symbolic sizes: ShapeEnv symbol -> the kernel's ks parameter
        self.base_mask = self._base_mask()

    def _base_mask(self):
        masks = []
        if not self._multiple(self.space.xnumel, MAX_BLOCK_2D if self.space.is_2d else MAX_BLOCK_1D):
            masks.append("xmask")
        if self.space.is_2d and not self._multiple(self.space.ynumel, MAX_BLOCK_2D):
            masks.append("ymask")
        return " & ".join(masks) if masks else None

    def _multiple(self, numel, block: int) -> bool:
        """Whether numel is a multiple of the largest block: a symbolic numel is masked (that a
        size is a multiple of 8192 at every size is rarely known)."""
        return not is_symbolic(numel) and int(numel) % block == 0

    def numel_text(self, numel) -> str:
        return print_index(numel) if self.sizes is not None else str(numel)

    def pointer(self, buffer_name: str, stored: bool = False) -> str:
        """Kernel parameters are named by role (in_ptr0, out_ptr0, in_scalar0 for a host
        scalar), so identical kernels over different buffers have identical source and compile
        once."""
        if buffer_name not in self.pointers:
            prefix = "out_ptr" if stored else "in_scalar" if self.is_host_scalar(buffer_name) else "in_ptr"
            count = sum(1 for p in self.pointers.values() if p.startswith(prefix))
            self.pointers[buffer_name] = f"{prefix}{count}"
        return self.pointers[buffer_name]

    def varies(self, index) -> bool:
        """Whether an index changes across the block (holds an iteration or an indirect
        symbol), not only size parameters: a constant index is a scalar in Triton."""
        params = set(self.size_renames.values())
        return bool(sympy.sympify(index).free_symbols - params)

    def masks_of_dims_read(self, mask: str, index) -> str | None:
        """The parts of the base mask ("xmask", "ymask") along dims that `index` varies with. A lane
        out of range along a dim the index does not read loads the element of its in-range dims,
        valid memory, and no store keeps it. So a per-channel parameter of a 2-D tile is loaded
        [YBLOCK, 1] and its math runs once per row, not [YBLOCK, XBLOCK] (a depthwise convolution's
        batch-norm epilogue, NHWC in and NCHW out: 66.8 us against Inductor's 15.6 us on the H100
        with the whole mask)."""
        read = sympy.sympify(index).free_symbols
        dims = {"xmask": self.space.x_dims, "ymask": self.space.y_dims}
        kept = [part for part in mask.split(" & ") if any(symbol in read for symbol, _ in dims[part])]
        return " & ".join(kept) if kept else None

    def is_host_scalar(self, buffer_name: str) -> bool:
        return getattr(self.buffers.get(buffer_name), "host_scalar", False)

    def loaded_arguments(self) -> list[str]:
        """What the wrapper passes for each loaded buffer: the buffer, or a host scalar's value
        (the wrapper's `<name>_item` local)."""
        return [host_scalar_argument(n) if self.is_host_scalar(n) else n for n in self.loaded]

    def new_var(self, text: str) -> str:
        name = f"tmp{self.counter}"
        self.counter += 1
        self.lines.append(f"{name} = {text}")
        return name

    def index_text(self, index) -> str:
        return print_index(resolve(self, self.space.rewrite.get(index, index)))

    def render(self, e: ex.Expr, mask) -> str:
        key = (e, mask)
        if key in self.cache:
            return self.cache[key]
        result = self._render(e, mask)
        self.cache[key] = result
        return result

    def _render(self, e: ex.Expr, mask) -> str:
        if e.op == "constant":
            return render_constant(e.args[0], e.dtype)
        if e.op == "neg" and e.args[0].op == "constant" and e.dtype.is_floating_point:
            # -(0.0) as source text would be Triton's constant -0.0, which it compiles to +0.0 on
            # the GPU: the negated constant is rendered instead (ops_table.NEGATIVE_ZERO_*)
            return render_constant(-float(e.args[0].args[0]), e.dtype)
        if e.op == "load":
            return self._load(e, mask)
        if e.op == "indirect":
            return render_indirect(self, e, mask)
        if e.op in INDEX_COMPARISONS and all(a.op == "index_expr" for a in e.args) and \
                any(self.varies(self.space.rewrite.get(a.args[0], a.args[0])) for a in e.args):
            # compared in the index math's own type: widening both sides first changes no result
            # (two constants go the long way: each a tensor, so the result is one too)
            lhs, rhs = (self.index_text(a.args[0]) for a in e.args)
            return self.new_var(f"({lhs}) {INDEX_COMPARISONS[e.op]} ({rhs})")
        if e.op == "chunk_bound":
            return self._chunk_bound(e)
        if e.op == "index_expr" and not self.varies(self.space.rewrite.get(e.args[0], e.args[0])):
            return f"tl.full([], {print_index(self.space.rewrite.get(e.args[0], e.args[0]))}, {triton_dtype(e.dtype)})"
        if e.op == "index_expr":
            return self.new_var(f"({self.index_text(e.args[0])}).to({triton_dtype(e.dtype)})")
        if e.op == "to_dtype":
            inner = e.args[0]
            return self.new_var(render_cast(self.render(inner, mask), inner.dtype, e.dtype))
        if e.op == "masked":
            condition = self.render(e.args[0], mask)
            inner_mask = condition if mask is None else f"{mask} & {condition}"
            body = self.render(e.args[1], inner_mask)
            if self._zero_where_masked(e):
                return body
            other = render_constant(e.args[2], e.dtype)
            return self.new_var(f"tl.where({condition}, {body}, {other})")
        args = [self.render(a, mask) for a in e.args]
        if e.op in INTEGER_DIVISIONS and not e.args[1].dtype.is_floating_point:
            self._check_divisor(e, args[1], mask)
        return self.new_var(render_op(e.op, args, [a.dtype for a in e.args], e.dtype))

    def _zero_where_masked(self, e: ex.Expr) -> bool:
        """Whether a masked value (e: masked(condition, inner, 0)) is already 0 wherever the
        condition is false without a tl.where: inner is a load from memory, maybe converted,
        which takes the condition as its mask and reads 0 there (`other=0`). Not a value this
        kernel computed (stored_values, a reduction's members), a host scalar, or a load of one
        element for the whole block, which is not masked. A window's padded taps (a depthwise
        convolution's 49) each saved a select."""
        inner, other = e.args[1], e.args[2]
        if isinstance(other, bool) or other != 0:
            return False
        if inner.op == "to_dtype":
            inner = inner.args[0]
        if inner.op != "load":
            return False
        name, index = inner.args
        rewritten = self.space.rewrite.get(index, index)
        return ((name, rewritten) not in self.stored_values and name not in self.members
                and not self.is_host_scalar(name) and self.varies(rewritten) and not has_indirect(rewritten))

    def _chunk_bound(self, e: ex.Expr) -> str:
        """A split reduction's last-chunk bound, r < rows - split * chunk (lower/reductions.py): true
        for every r when the split divides the rows (its third argument, their remainder, is 0)."""
        lhs, rhs, remainder = (self.index_text(a.args[0]) for a in e.args)
        bound = f"({lhs}) < ({rhs})"
        if not self.even_masks:
            return self.new_var(bound)
        condition = f"({remainder}) == 0"
        if condition not in self.even_when:
            self.even_when.append(condition)
        return self.new_var(f"({bound}) | EVEN")

    def _check_divisor(self, e: ex.Expr, divisor: str, mask) -> None:
        """Eager raises on an integer divisor of zero on the CPU: so do we there, for the lanes that
        hold elements (masked-off lanes load 0). A no-op on the GPU (runtime/index_checks.py)."""
        if e.args[1].op == "constant" and e.args[1].args[0] != 0:
            return
        message = repr(f"integer {INTEGER_DIVISIONS[e.op]} by zero")
        if mask:
            self.lines.append(f"checks.check_divisor_masked({divisor}, {mask}, {message})")
        else:
            self.lines.append(f"checks.check_divisor({divisor}, {message})")

    def _load(self, e: ex.Expr, mask) -> str:
        name, index = e.args
        rewritten = self.space.rewrite.get(index, index)
        if (name, rewritten) in self.stored_values:
            return self.stored_values[(name, rewritten)]
        if name not in self.loaded:
            self.loaded.append(name)
        pointer = self.pointer(name)
        if self.is_host_scalar(name):  # a number argument (InputBuffer.host_scalar), not a pointer
            return self.new_var(f"tl.full([], {pointer}, {triton_dtype(self.buffers[name].layout.dtype)})")
        indirect = has_indirect(rewritten)
        rewritten = resolve(self, rewritten)
        if not self.varies(rewritten):
            return self.new_var(f"tl.load({pointer} + {print_index(rewritten)})")
        offset = _parenthesize(print_index(rewritten))
        if indirect and mask:  # the offset takes the mask's shape; masked lanes read element 0
            offset = f"tl.where({mask}, {offset}, 0)"
        elif mask is not None and mask == self.base_mask and self.NARROW_LOAD_MASKS:
            mask = self.masks_of_dims_read(mask, rewritten)
        mask_text = f", {mask}, other=0" if mask else ""
        return self.new_var(f"tl.load({pointer} + {offset}{mask_text}{self.cache_hint(rewritten)})")

    def cache_hint(self, index) -> str:
        """Extra tl.load arguments for a load at index (reduction kernels hint L2 eviction)."""
        return ""

    def store(self, buffer: ComputedBuffer, index, value: str) -> None:
        index_text = print_index(index)
        if not self.varies(index):
            index_text += " + 0 * xindex" if not self.space.is_2d else " + 0 * (xindex + yindex)"
        mask_text = f", {self.base_mask}" if self.base_mask else ""
        pointer = self.pointer(buffer.name, stored=True)
        self.lines.append(f"tl.store({pointer} + {_parenthesize(index_text)}, {value}{mask_text})")


def host_scalar_argument(buffer_name: str) -> str:
    """The wrapper local that holds a host scalar input's value (codegen/wrapper.py binds it)."""
    return f"{buffer_name}_item"


def _parenthesize(text: str) -> str:
    simple = text.isidentifier() or text.isdigit()
    return text if simple or (text.startswith("(") and text.endswith(")") and text.count("(") == 1) else f"({text})"


def _dim_lines(dims, flat: str) -> list[str]:
    lines, stride = [], 1
    for k, (symbol, extent) in enumerate(dims):
        if len(dims) == 1:
            expr = sympy.Symbol(flat)
        elif k == len(dims) - 1:
            expr = FloorDiv(sympy.Symbol(flat, integer=True, nonnegative=True), stride)
        else:
            expr = ModularIndexing(sympy.Symbol(flat, integer=True, nonnegative=True), stride, extent)
        lines.append(f"{symbol.name} = {print_index(expr)}")
        stride *= extent
    return lines


def _assemble(name: str, params: list[str], space: IterationSpace, writer: _BodyWriter,
              group: KernelGroup) -> str:
    offset_type = ".to(tl.int64)" if writer.use_int64 else ""
    lines = [f"# aten nodes: {', '.join(group.origins())}", f"xnumel = {writer.numel_text(space.xnumel)}"]
    if space.is_2d:
        lines += [
            f"ynumel = {writer.numel_text(space.ynumel)}",
            "pid = tl.program_id(0)",
            "x_tiles = (xnumel + XBLOCK - 1) // XBLOCK",
            f"yindex = ((pid // x_tiles){offset_type} * YBLOCK + tl.arange(0, YBLOCK))[:, None]",
            f"xindex = ((pid % x_tiles){offset_type} * XBLOCK + tl.arange(0, XBLOCK))[None, :]",
        ]
    else:
        lines += [f"xindex = tl.program_id(0){offset_type} * XBLOCK + tl.arange(0, XBLOCK)"]
    if writer.base_mask and "xmask" in writer.base_mask:
        lines.append("xmask = xindex < xnumel")
    if writer.base_mask and "ymask" in writer.base_mask:
        lines.append("ymask = yindex < ynumel")
    lines += _dim_lines(space.x_dims, "xindex") + _dim_lines(space.y_dims, "yindex")
    lines += writer.lines
    return kernel_source(name, params, ["YBLOCK", "XBLOCK"] if space.is_2d else ["XBLOCK"], lines)
