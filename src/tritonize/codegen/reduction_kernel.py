"""render_reduction_kernel: one reduction KernelGroup -> a persistent or looped Triton kernel.

The kernel works on [XBLOCK, RBLOCK] tiles: XBLOCK rows (`xindex`, a column) by RBLOCK elements of
each row (`rindex`, a row vector). Members of the group (schedule/rows.py) are computed in stages:

* a reduction runs in the first stage after every in-group reduction it reads;
* a "full" buffer (shaped like the reduced tensor) is stored in the first stage where all the
  reductions it reads are done; a "row" buffer (shaped like the output) right after them.

Persistent kernels (the row fits in registers) compute every stage on the same tile: each input
byte is read once. Looped kernels walk the row once a stage, keeping per-lane accumulators
(Welford states for var) and reducing them across lanes after the loop. In-group values are
registers, never reloaded; a value needed in a later loop is recomputed from its expression.

A row of symbolic length gets both bodies in one kernel ("adaptive_reduction"), behind
`if PERSISTENT:` (a constexpr: Triton compiles the branch taken alone). The launch config of
each size bucket chooses: the persistent body, with RBLOCK the bucket's row length, when the
rows fit in registers, else the looped one (runtime/heuristics.py).

A kernel of symbolic sizes also takes a constexpr `EVEN`, or-ed into the masks of its symbolic
bounds (`xmask`, `rmask`): the launcher sets it when the launch's sizes fill every tile (XBLOCK
divides xnumel; RBLOCK divides the row, or each split chunk, or equals it in the persistent
body: heuristics.even_source), and Triton then drops those masks, as a static kernel of such
sizes has none.
"""
from __future__ import annotations

import dataclasses

import sympy
import triton

from ..ir import expr as ex
from ..ir.nodes import ReductionBuffer
from ..ir.sizes import SizeOracle, is_symbolic
from ..ir.symbols import affine_coefficients, dim_vars, index_symbol, simplify_with_ranges, upper_bound
from ..runtime.heuristics import (
    ADAPTIVE, MAX_OUTER_PERSISTENT_RBLOCK, MAX_PERSISTENT_RBLOCK, MAX_RBLOCK_LOOPED, MAX_XBLOCK_REDUCTION,
)
from .index_printer import print_index
from .indirect import has_indirect
from . import outer_split
from .iteration import merge_dims
from .kernel import INT32_LIMIT, RenderedKernel, kernel_source, _BodyWriter, _dim_lines, _parenthesize
from .ops_table import render_constant, triton_dtype
from .reduction_ops import (WELFORD_TYPES, finalize_lines, init_lines, moment_lines, neutral_value, persistent_lines,
                            update_lines)
from .symbolic import SizeParameters, is_symbolic_kernel, kernel_size_expressions
from .symbolic import needs_int64 as symbolic_needs_int64


@dataclasses.dataclass
class Member:
    buffer: object  # ComputedBuffer
    role: str  # "reduction" | "full" | "row"
    body: ex.Expr  # over the group variables gx*/gr*
    store_index: sympy.Expr


@dataclasses.dataclass
class RowIteration:
    x_dims: list  # (symbol, extent), inner to outer
    r_dims: list
    rewrite: dict  # group-variable index expression -> expression over x*/r* symbols
    xnumel: int
    rnumel: int

    @property
    def x_symbols(self) -> set:
        return {s for s, _ in self.x_dims}

    @property
    def r_symbols(self) -> set:
        return {s for s, _ in self.r_dims}


def render_reduction_kernel(group, buffers: dict, name: str, sizes: SizeOracle | None = None) -> RenderedKernel:
    """sizes: the graph's SizeOracle when its sizes are symbolic (ir/sizes.py). A row of
    symbolic length gets both bodies, chosen at launch (the module docstring)."""
    members = [_member(group.rows, b) for b in group.buffers]
    plan = plan_rows(group, members, buffers, sizes)
    space, hints = plan.space, plan.hints
    outer = _is_outer_reduction(space, members)
    rblock = triton.next_power_of_2(max(hints[1], 1))
    limit = MAX_OUTER_PERSISTENT_RBLOCK if outer else MAX_PERSISTENT_RBLOCK
    looped = is_symbolic(space.rnumel) or rblock > limit
    split = 1
    if outer and looped:
        pairs = online_softmax_pairs(members)
        split = outer_split.choose_split(hints[0], hints[1], members, bool(pairs), len(_stages(members, pairs)))
    if is_symbolic(space.rnumel):
        kind = ADAPTIVE
        persistent = _write_body(space, buffers, group, members, plan, persistent=True)
        writer = _write_body(space, buffers, group, members, plan, persistent=False, after=persistent, split=split)
        short_rows = persistent.lines if split == 1 else ["if rsplit == 0:", *_indented(persistent.lines)]
        body = ["if PERSISTENT:", *_indented(short_rows), "else:", *_indented(writer.lines)]
        writer.has_checks |= persistent.has_checks
        blocks = ["XBLOCK", "RBLOCK", "PERSISTENT"]
    else:
        kind = "reduction" if looped else "persistent_reduction"
        writer = _write_body(space, buffers, group, members, plan, persistent=not looped, split=split)
        body = writer.lines
        blocks = ["XBLOCK"] if writer.persistent else ["XBLOCK", "RBLOCK"]
    stored = [m.buffer.name for m in members if m.buffer.name not in group.internal]
    params = [writer.pointer(n) for n in writer.loaded] + [writer.pointer(n, stored=True) for n in stored]
    arg_names = writer.loaded_arguments() + stored
    if split > 1:
        params, arg_names = params + ["ws_ptr", "sem_ptr"], arg_names + _split_arguments(group, members, split, buffers)
    params, arg_names = plan.parameters(params, arg_names)
    if writer.even_masks:
        blocks.append("EVEN")  # the launch's sizes fill every tile: the symbolic bounds' masks are all true
    numel_exprs = plan.numel_exprs
    even_when = dict.fromkeys(writer.even_when + (persistent.even_when if kind == ADAPTIVE else []))
    if even_when:
        numel_exprs = dict(numel_exprs, even_when=" and ".join(even_when))
    baked = rblock if kind == "persistent_reduction" else None
    source = kernel_source(name, params, blocks, _head_lines(space, writer, group, baked, split) + body)
    return RenderedKernel(name, source, kind, arg_names, hints[0], 1, group.origins(), rnumel=hints[1],
                          hint="outer" if outer else "inner", checks=writer.has_checks,
                          numel_exprs=numel_exprs, split=split)


def _split_arguments(group, members, split: int, buffers) -> list[str]:
    """The wrapper's arguments for a split kernel's workspace and counters (codegen/outer_split.py),
    sized from the graph's row count and placed on the device of a buffer the kernel stores."""
    reductions = sum(m.role == "reduction" for m in members)
    xnumel = print_index(group.rows.xnumel)
    like = next(m.buffer.name for m in members if m.buffer.name not in group.internal)
    return [f"split_workspace({reductions * split} * ({xnumel}), {like})",
            f"split_counters(({xnumel}) + 1, {like})"]


def _write_body(space, buffers, group, members, plan, persistent: bool, after=None,
                split: int = 1) -> "_ReductionWriter":
    """One body of the kernel. after: the body written before this one in the same kernel (the
    other branch of an adaptive one), whose parameter names and temporaries this one continues.
    split: row chunks a looped outer body is split into (codegen/outer_split.py)."""
    writer = _ReductionWriter(space, buffers, group, members, persistent, plan.use_int64, split)
    writer.size_renames = plan.size_params.renames if plan.size_params is not None else {}
    if after is not None:
        writer.pointers, writer.loaded, writer.counter = dict(after.pointers), list(after.loaded), after.counter
    pairs = {} if persistent else online_softmax_pairs(members)
    writer.online = {partner.buffer.name: name for name, partner in pairs.items()}
    writer.write_all(_stages(members, pairs))
    return writer


def _indented(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


@dataclasses.dataclass
class RowPlan:
    """A reduction or scan kernel's row iteration, with its sizes as the kernel will see them:
    literals for static sizes; for symbolic ones the kernel's size parameters (`size_params`),
    the example's values (`hints`, for choices of speed) and the numels' source for the
    launcher (`numel_exprs`)."""

    space: RowIteration
    hints: tuple
    use_int64: bool
    size_params: SizeParameters | None = None
    numel_exprs: dict = dataclasses.field(default_factory=dict)

    def parameters(self, params: list, arg_names: list) -> tuple[list, list]:
        """The kernel's parameters and the wrapper's arguments, size parameters last."""
        if self.size_params is None:
            return params, arg_names
        return params + self.size_params.names, arg_names + self.size_params.arguments


def plan_rows(group, members, buffers: dict, sizes: SizeOracle | None) -> RowPlan:
    space = _plan(group.rows, members)
    indirect_sizes = kernel_size_expressions(m.body for m in members)
    if not is_symbolic_kernel([space.xnumel, space.rnumel, *space.rewrite.values(), *indirect_sizes], sizes):
        return RowPlan(space, (space.xnumel, space.rnumel), _needs_int64(space, members))
    use_int64 = symbolic_needs_int64(space.xnumel * space.rnumel, buffers, [m.body for m in members],
                                     [m.buffer.name for m in members], sizes)
    hints = (sizes.hint(space.xnumel), sizes.hint(space.rnumel))
    space, size_params = _with_size_parameters(space, indirect_sizes)
    numel_exprs = {"xnumel": print_index(space.xnumel), "ynumel": "1", "rnumel": print_index(space.rnumel)}
    return RowPlan(space, hints, use_int64, size_params, numel_exprs)


def _with_size_parameters(space: RowIteration, indirect_sizes: list):
    """The row iteration over the kernel's size parameters instead of the ShapeEnv's symbols."""
    params = SizeParameters.of([space.xnumel, space.rnumel, *space.rewrite.values(), *indirect_sizes],
                               [s for s, _ in space.x_dims + space.r_dims])
    renamed = RowIteration(params.rename_dims(space.x_dims), params.rename_dims(space.r_dims),
                           {e: params.rename(v) for e, v in space.rewrite.items()},
                           params.rename(space.xnumel), params.rename(space.rnumel))
    return renamed, params


def _member(rows, buffer) -> Member:
    mapping = rows.mapping(buffer)
    store = buffer.layout.index(dim_vars(len(buffer.layout.size))).xreplace(mapping)
    return Member(buffer, rows.role(buffer), ex.substitute(buffer.body, mapping), store)


def _plan(rows, members) -> RowIteration:
    found = []
    for m in members:
        found.append(m.store_index)
        for e in ex.walk(m.body):
            if e.op in ("load", "index_expr"):
                found.append(e.args[1] if e.op == "load" else e.args[0])
    ranges = rows.ranges()
    current = {e: simplify_with_ranges(sympy.sympify(e), ranges) for e in dict.fromkeys(found)}
    x_space = list(zip(rows.x_vars, rows.x_sizes))
    r_space = list(zip(rows.r_vars, rows.r_sizes))
    x_space, current = merge_dims(x_space, current, "mx", dict(r_space))
    r_space, current = merge_dims(r_space, current, "mr", dict(x_space))
    renames = {}
    x_dims = _rename(list(reversed(x_space)), "x", renames)
    r_dims = _rename(list(reversed(r_space)), "r", renames)
    rewrite = {e: v.xreplace(renames) for e, v in current.items()}
    return RowIteration(x_dims, r_dims, rewrite, rows.xnumel, rows.rnumel)


def _rename(dims, prefix, renames):
    result = []
    for k, (symbol, extent) in enumerate(dims):
        renames[symbol] = index_symbol(prefix, k)
        result.append((renames[symbol], extent))
    return result


def _is_outer_reduction(space: RowIteration, members) -> bool:
    """True when the reductions' inputs are contiguous along rows, not along the reduced dim."""
    return rows_are_contiguous(space, [m for m in members if m.role == "reduction"])


def rows_are_contiguous(space: RowIteration, members) -> bool:
    """True when the first streamed load of `members` with a unit stride has it along the rows
    (x), not along r: such kernels need several rows a program to coalesce (reductions, scans).
    Streamed loads (varying along both x and r) are read first, then those varying along r, then
    the rest: a row's scalar, a gather's index or a vector every row reads decides only when no
    streamed load does (a streamed index that is not affine, ModularIndexing of a repeat or a
    gather's computed index, decides nothing)."""
    if not space.r_dims or not space.x_dims:
        return False
    innermost_r, innermost_x = space.r_dims[0][0], space.x_dims[0][0]
    symbols = [s for s, _ in space.x_dims + space.r_dims]
    indices = [sympy.sympify(space.rewrite.get(load.args[1], load.args[1]))
               for m in members for load in ex.loads(m.body)]
    along_r = [i for i in indices if _varies_along(i, space.r_dims)]
    streamed = [i for i in along_r if _varies_along(i, space.x_dims)]
    for index in list(dict.fromkeys(streamed + along_r + indices)):  # the first that decides
        coeffs = affine_coefficients(_without_opaque_terms(index, symbols), symbols)
        if coeffs is None:
            continue
        if coeffs.get(innermost_r, 0) == 1:
            return False
        if coeffs.get(innermost_x, 0) == 1:
            return True
    return False


def _varies_along(index, dims) -> bool:
    return any(index.has(symbol) for symbol, _ in dims)


def _without_opaque_terms(index, symbols):
    """The index without its terms free of the iteration's symbols (a gather's `1024 * row`
    where row is a loaded value): what is left says which way the load is contiguous."""
    terms = sympy.Add.make_args(sympy.expand(index))
    return sympy.Add(*[t for t in terms if any(t.has(s) for s in symbols)])


def _needs_int64(space: RowIteration, members) -> bool:
    if space.xnumel * space.rnumel > INT32_LIMIT:
        return True
    ranges = dict(space.x_dims + space.r_dims)
    ranges.update(ex.indirect_ranges(m.body for m in members))
    bounds = [upper_bound(e, ranges) for e in space.rewrite.values()]
    return any(b is None or b > INT32_LIMIT for b in bounds)


@dataclasses.dataclass
class Stage:
    reductions: list = dataclasses.field(default_factory=list)
    full_stores: list = dataclasses.field(default_factory=list)
    rows: list = dataclasses.field(default_factory=list)


def online_softmax_pairs(members) -> dict:
    """{name of a sum member of the form exp(E - M): the max member M = max(E)}: looped kernels
    compute both in one pass over E (helpers.online_softmax_update)."""
    by_name = {m.buffer.name: m for m in members}
    pairs = {}
    for m in members:
        body = m.body
        if m.role != "reduction" or m.buffer.reduction_type != "sum" or body.op != "exp":
            continue
        if body.args[0].op != "sub" or body.args[0].args[1].op != "load":
            continue
        value, shift = body.args[0].args
        partner = by_name.get(shift.args[0])
        if (partner is not None and partner.role == "reduction" and partner.buffer.reduction_type == "max"
                and partner.body == value):
            pairs[m.buffer.name] = partner
    return pairs


def _stages(members, pairs: dict) -> list[Stage]:
    """Assign members to stages: see the module docstring. A sum paired with its max (online
    softmax) runs in the max's stage."""
    available: dict[str, int] = {}  # first stage whose loop can use the value
    names = {m.buffer.name for m in members}
    placed = []
    for m in members:
        deps = {e.args[0] for e in ex.loads(m.body)} & names
        ready = max((available[d] for d in deps), default=0)
        if m.buffer.name in pairs:
            ready = available[pairs[m.buffer.name].buffer.name] - 1
        available[m.buffer.name] = ready + 1 if m.role == "reduction" else ready
        placed.append((m, ready))
    # per-row values need no loop of their own: a stage exists for reductions and full stores only
    count = max([r + 1 for m, r in placed if m.role != "row"] + [1])
    stages = [Stage() for _ in range(count)]
    for m, ready in placed:
        if m.role == "reduction":
            stages[ready].reductions.append(m)
        elif m.role == "full":
            stages[ready].full_stores.append(m)
        else:
            stages[max(ready - 1, 0)].rows.append(m)
    return stages


class _ReductionWriter(_BodyWriter):
    NARROW_LOAD_MASKS = False  # a masked lane must read 0, the sums' neutral value

    @property
    def even_masks(self) -> bool:
        """A kernel of symbolic sizes takes EVEN (the module docstring); scans do not."""
        return is_symbolic(self.space.xnumel) or is_symbolic(self.space.rnumel)

    def __init__(self, space: RowIteration, buffers, group, members, persistent: bool, use_int64: bool,
                 split: int = 1):
        self.group = group
        self.members = {m.buffer.name: m for m in members}
        self.persistent = persistent
        self.split = split
        super().__init__(space, buffers, use_int64)
        self.x_mask = "xmask" if is_symbolic(space.xnumel) or space.xnumel % MAX_XBLOCK_REDUCTION else None
        if is_symbolic(space.rnumel) or split > 1:  # every tile is masked (a chunk ends anywhere)
            self.r_mask, self.apply_r_mask = "rmask", True
        else:
            limit = triton.next_power_of_2(max(space.rnumel, 1))
            limit = limit if persistent else min(limit, MAX_RBLOCK_LOOPED)  # RBLOCK divides limit
            self.r_mask = "rmask" if space.rnumel % limit or not persistent else None
            self.apply_r_mask = space.rnumel % limit != 0
        # what var divides by: the row length, as a literal or (symbolic) the kernel's `rnumel`
        self.row_length = "rnumel" if is_symbolic(space.rnumel) else space.rnumel
        self.full_mask = " & ".join(m for m in (self.x_mask, self.r_mask if self.apply_r_mask else None) if m) or None
        self.online: dict[str, str] = {}  # max member name -> the sum member computed with it
        self.tile_reductions: dict = {}  # (type, body, correction) -> result (persistent kernels)
        self.passes = 1  # loops over each row (write_all sets it)

    def _base_mask(self):
        return None

    # --- reading values ---------------------------------------------------------------------
    def _load(self, e: ex.Expr, mask):
        name, index = e.args
        rewritten = self.space.rewrite.get(index, index)
        if (name, rewritten) in self.stored_values:
            return self.stored_values[(name, rewritten)]
        member = self.members.get(name)
        if member is not None:  # an in-group value not in registers in this loop: recompute it
            value = self.render(member.body, self._mask_of(member))
            self.stored_values[(name, rewritten)] = value
            return value
        if mask == self.full_mask and not has_indirect(rewritten):  # mask the dims the index varies along
            symbols = rewritten.free_symbols
            wanted = [self.x_mask if symbols & self.space.x_symbols else None,
                      "rmask" if self.apply_r_mask and symbols & self.space.r_symbols else None]
            mask = " & ".join(m for m in wanted if m) or None
        return super()._load(e, mask)

    def cache_hint(self, index) -> str:
        """What every row reads again (weights, masks) should stay in L2; what one pass streams
        through once should leave it first."""
        symbols = self.space.x_symbols | self.space.r_symbols
        if not index.free_symbols & self.space.r_symbols:
            return ""
        coeffs = affine_coefficients(index, sorted(symbols, key=str))
        streamed = coeffs is not None and all(coeffs.get(s, 0) for s in symbols) and \
            self._reaches_every_point_once(coeffs)
        if not streamed:
            return ", eviction_policy='evict_last'"
        # read once: evict_first (H100, 2026-11-22: sum_last 80% -> 88% of copy bandwidth,
        # var_mean 80% -> 89%, sum_first 61% -> 76%); a row read again by a later pass stays
        return ", eviction_policy='evict_first'" if self.passes == 1 else ""

    def _reaches_every_point_once(self, coeffs: dict) -> bool:
        """Whether an affine index could address a distinct element for every point of the
        kernel's domain: its span must cover as many elements as there are points (overlapping
        windows, e.g. x.unfold(0, 64, 1).sum(-1), read elements several times: no evict_first)."""
        extents = dict(self.space.x_dims + self.space.r_dims)
        values = [*coeffs.values(), *extents.values()]
        if any(is_symbolic(v) for v in values):
            return True  # symbolic sizes: assume a plain streaming read (only an L2 hint)
        span = 1 + sum(abs(int(coeffs.get(s, 0))) * (n - 1) for s, n in extents.items())
        return span >= self.space.xnumel * self.space.rnumel

    def _render(self, e: ex.Expr, mask):
        """Division by a row's value that this kernel reduces (softmax's sum) multiplies by its
        reciprocal, computed once a row: an IEEE division an element is slow on the GPU (its slow
        path takes the zeros a masked softmax produces; measured 1.6x on an H100), and this costs
        at most one rounding. A divisor read from memory alone divides exactly: the same quotient
        may be computed elsewhere by a pointwise kernel and compared with this one (amax's
        gradient: the forward's maximum against the quotient recomputed here, fuzz seed 105570)."""
        if e.op == "truediv" and e.dtype.is_floating_point and self._row_constant(e.args[1]) \
                and self._reads_row_result(e.args[1]):
            numerator = self.render(e.args[0], mask)
            inverse = self.render(ex.op("reciprocal", e.args[1], dtype=e.dtype), mask)
            return self.new_var(f"{numerator} * {inverse}")
        return super()._render(e, mask)

    def _row_constant(self, e: ex.Expr) -> bool:
        """e is the same along a row (and not a literal: those divide exactly as written)."""
        if e.op == "constant":
            return False
        for node in ex.walk(e):
            if node.op == "indirect":
                return False
            if node.op in ("load", "index_expr"):
                index = node.args[1] if node.op == "load" else node.args[0]
                rewritten = self.space.rewrite.get(index, index)
                if not isinstance(rewritten, sympy.Basic) or rewritten.free_symbols & self.space.r_symbols:
                    return False
                member = self.members.get(node.args[0]) if node.op == "load" else None
                if member is not None and member.role == "full":
                    return False
        return True

    def _reads_row_result(self, e: ex.Expr) -> bool:
        """e reads a row value this kernel computes (a reduction, or a row buffer of the group)."""
        return any(node.op == "load" and getattr(self.members.get(node.args[0]), "role", None) in ("reduction", "row")
                   for node in ex.walk(e))

    def _mask_of(self, member: Member):
        return self.full_mask if member.role == "full" else self.x_mask

    def tile(self, value: str, dtype) -> str:
        """value as a full [XBLOCK, RBLOCK] tile (reductions need one even for row values)."""
        if value.startswith(("tmp", "tl.", "(")):
            return self.new_var(f"tl.broadcast_to({value}, [XBLOCK, RBLOCK])")
        return self.new_var(f"tl.full([XBLOCK, RBLOCK], {value}, {triton_dtype(dtype)})")

    def masked_tile(self, value: str, dtype, neutral) -> str:
        tile = self.tile(value, dtype)
        if not self.apply_r_mask:
            return tile
        return self.new_var(f"tl.where(rmask, {tile}, {render_constant(neutral, dtype)})")

    # --- writing stages ---------------------------------------------------------------------
    def write_all(self, stages: list[Stage]) -> None:
        self.passes = 1 if self.persistent else len(stages)
        if self.persistent:
            self.lines += self.r_index_lines("tl.arange(0, RBLOCK)[None, :]")
        for stage in stages:
            results = self._persistent_stage(stage) if self.persistent else self._looped_stage(stage)
            start = len(self.lines)
            if self.split > 1:  # the last program of a column block goes on (codegen/outer_split.py)
                lines, results = outer_split.combine_lines(self, stage.reductions, results)
                self.lines += lines
                start = len(self.lines)
            for member, value in zip(stage.reductions, results):
                self._publish(member, value)
            for member in stage.rows:
                self._publish(member, self.render(member.body, self.x_mask))
            if self.split > 1:
                self.lines[start:] = _indented(self.lines[start:])

    def r_index_lines(self, rindex: str) -> list[str]:
        lines = [f"rindex = {rindex}"]
        if self.r_mask:
            bound = f"rindex < {'rend' if self.split > 1 else 'rnumel'}"
            even = self.even_masks and is_symbolic(self.space.rnumel)
            lines.append(f"rmask = ({bound}) | EVEN" if even else f"rmask = {bound}")
        return lines + _dim_lines(self.space.r_dims, "rindex")

    def _publish(self, member: Member, value: str) -> None:
        index = self.space.rewrite.get(member.store_index, member.store_index)
        self.stored_values[(member.buffer.name, index)] = value
        if member.buffer.name not in self.group.internal:
            self.store_at(member, index, value)

    def store_at(self, member: Member, index, value: str) -> None:
        text = print_index(index)
        if not self.varies(index):
            text += " + 0 * xindex"
        mask = self._mask_of(member)
        mask_text = f", {mask}" if mask else ""
        pointer = self.pointer(member.buffer.name, stored=True)
        self.lines.append(f"tl.store({pointer} + {_parenthesize(text)}, {value}{mask_text})")

    def _persistent_stage(self, stage: Stage) -> list[str]:
        results = [self._reduce_tile(m, stage.reductions) for m in stage.reductions]
        for m in stage.full_stores:
            self._store_full(m)
        return results

    def _reduce_tile(self, member: Member, stage_reductions: list[Member]) -> str:
        """One persistent reduction; equal reductions are computed once, and var and mean reuse
        the row sum of the same values and share the pass over its deviations (var_mean: two
        cross-thread reductions, the second of two values)."""
        buffer: ReductionBuffer = member.buffer
        rtype = buffer.reduction_type
        key = _tile_key(member)
        if key in self.tile_reductions:
            return self.tile_reductions[key]
        value = self.render(member.body, self.full_mask)
        dtype = member.body.dtype
        tile = self.masked_tile(value, dtype, neutral_value(rtype, dtype))
        if rtype not in ("sum",) + WELFORD_TYPES:
            self.tile_reductions[key] = persistent_lines(self, buffer, tile, dtype)
            return self.tile_reductions[key]
        sum_key = ("sum", member.body, 0.0)
        if sum_key not in self.tile_reductions:
            self.tile_reductions[sum_key] = self.new_var(f"helpers.sum2({tile}, 1)")
        if rtype in WELFORD_TYPES:
            self._moments(member.body, tile, dtype, stage_reductions)
        return self.tile_reductions[key]

    def _moments(self, body, tile: str, dtype, stage_reductions: list[Member]) -> None:
        """Every var and mean of `body` among the stage's reductions, from one pass."""
        alike = [m for m in stage_reductions if m.buffer.reduction_type in WELFORD_TYPES and m.body == body]
        corrections = sorted({m.buffer.correction for m in alike if m.buffer.reduction_type == "var"})
        mean_wanted = any(m.buffer.reduction_type == "mean" for m in alike)
        total = self.tile_reductions[("sum", body, 0.0)]
        variances, mean = moment_lines(self, tile, total, dtype, self.row_length, corrections, mean_wanted)
        for correction, var in variances.items():
            self.tile_reductions[("var", body, correction)] = var
        if mean is not None:
            self.tile_reductions[("mean", body, 0.0)] = mean

    def _store_full(self, member: Member) -> None:
        index = self.space.rewrite.get(member.store_index, member.store_index)
        value = self.render(member.body, self.full_mask)
        self.stored_values[(member.buffer.name, index)] = value
        if member.buffer.name not in self.group.internal:
            self.store_at(member, index, value)

    def _looped_stage(self, stage: Stage) -> list[str]:
        outer_lines, saved = self.lines, (dict(self.cache), dict(self.stored_values))
        self.lines = []
        self.lines += self.r_index_lines("roffset + tl.arange(0, RBLOCK)[None, :]")
        states, online, welford_states = [], [], {}
        paired_sums = set(self.online.values())
        for m in stage.reductions:
            if m.buffer.name in paired_sums:
                continue
            if m.buffer.reduction_type in WELFORD_TYPES and m.body in welford_states:
                states.append((m, welford_states[m.body]))  # var and mean of the same values
                continue
            value = self.render(m.body, self.full_mask)
            dtype = m.body.dtype
            state = [f"acc{self.counter}_{k}" for k in range(3)]
            self.counter += 1
            if m.buffer.name in self.online:
                online.append((m, self.members[self.online[m.buffer.name]], state))
                self._online_update(state, value, dtype, outer_lines)
                continue
            outer_lines += init_lines(m.buffer, state, dtype)
            update_lines(self, m.buffer, state, value, dtype)
            states.append((m, state))
            if m.buffer.reduction_type in WELFORD_TYPES:
                welford_states[m.body] = state
        for m in stage.full_stores:
            self._store_full(m)
        offset = "tl.full([], 0, tl.int64)" if self.use_int64 else "0"
        bounds = f"{offset}, rnumel"
        if self.split > 1:
            outer_lines += outer_split.chunk_lines(self.use_int64)
            bounds = "rstart, rend"
        loop = [f"for roffset in range({bounds}, RBLOCK):"] + ["    " + line for line in self.lines]
        self.lines = outer_lines + loop
        self.cache, self.stored_values = saved
        merged = {}
        results = {m.buffer.name: finalize_lines(self, m.buffer, state, m.body.dtype, self.row_length, merged)
                   for m, state in states}
        for row_max, total, state in online:
            results[row_max.buffer.name], results[total.buffer.name] = state[0], state[1]
        return [results[m.buffer.name] for m in stage.reductions]

    def _online_update(self, state: list[str], value: str, dtype, outer_lines: list[str]) -> None:
        """Each row keeps its running max (state[0]) and the sum of exp(x - running max)
        (state[1]), rescaled when a tile raises the max: one exp an element."""
        outer_lines.append(f"{state[0]} = tl.full([XBLOCK, 1], {render_constant(float('-inf'), dtype)}, "
                           f"{triton_dtype(dtype)})")
        outer_lines.append(f"{state[1]} = tl.full([XBLOCK, 1], 0, {triton_dtype(dtype)})")
        value = self.tile(value, dtype)
        if self.apply_r_mask:
            value = self.new_var(f"tl.where(rmask, {value}, {render_constant(float('-inf'), dtype)})")
        tile_max = self.new_var(f"helpers.max2({value}, 1)")
        self.lines.append(f"{state[1]}, {state[0]} = helpers.online_softmax_update("
                          f"{state[1]}, {state[0]}, {value}, {tile_max})")


def _tile_key(member: Member) -> tuple:
    buffer = member.buffer
    correction = buffer.correction if buffer.reduction_type == "var" else 0.0
    return (buffer.reduction_type, member.body, correction)


def _head_lines(space: RowIteration, writer: _ReductionWriter, group, baked_rblock: int | None,
                split: int = 1) -> list[str]:
    """The kernel's lines before its body: numels, the program's rows and their mask (and a
    whole-row kernel's RBLOCK, baked in; a split kernel's chunk, codegen/outer_split.py)."""
    program = "tl.program_id(0).to(tl.int64)" if writer.use_int64 else "tl.program_id(0)"
    lines = [f"# aten nodes: {', '.join(group.origins())}", f"xnumel = {print_index(space.xnumel)}",
             f"rnumel = {print_index(space.rnumel)}"]
    if baked_rblock is not None:
        lines.append(f"RBLOCK: tl.constexpr = {baked_rblock}")
    if split > 1:
        lines += outer_split.head_lines(split, "xnumel", program)
        program = "xprogram"
    lines.append(f"xindex = {program} * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
    if writer.x_mask:
        even = writer.even_masks and is_symbolic(space.xnumel)
        lines.append("xmask = (xindex < xnumel) | EVEN" if even else "xmask = xindex < xnumel")
    return lines + _dim_lines(space.x_dims, "xindex")
