"""render_scatter_kernel: one ScatterOp (ir/scatter.py) -> a pointwise Triton kernel that writes
into its target at indirect positions.

The kernel iterates over the updates like a pointwise kernel (same iteration planning, masks and
int64 rule), binds the index values with their bounds checks (codegen/indirect.py), computes the
value, and stores it (`tl.store`) or adds it atomically (`tl.atomic_add`, relaxed: only the sum
matters). The target is already allocated and filled by the copy kernel before it.
"""
from __future__ import annotations

import sympy

from ..ir import expr as ex
from ..ir.nodes import contiguous_strides
from ..ir.scatter import ScatterOp
from ..ir.sizes import SizeOracle
from ..ir.symbols import dim_vars, upper_bound
from .index_printer import print_index
from .indirect import bind, resolve
from .iteration import IterationSpace, plan_iteration
from .kernel import INT32_LIMIT, RenderedKernel, _assemble, _BodyWriter, _parenthesize
from .symbolic import SizeParameters, is_symbolic_kernel, kernel_size_expressions
from .symbolic import needs_int64 as symbolic_needs_int64


def render_scatter_kernel(op: ScatterOp, buffers: dict, name: str, sizes: SizeOracle | None = None) -> RenderedKernel:
    """sizes: the graph's SizeOracle when its sizes are symbolic (the kernel then takes them as
    parameters, as codegen/kernel.py's kernels do)."""
    dims = dim_vars(len(op.size))
    roots = [b.index for b in op.bindings] + [op.value]
    expressions = _index_expressions(op, roots)
    extents = [b.size for b in op.bindings] + kernel_size_expressions(roots)
    symbolic = is_symbolic_kernel([*op.size, *expressions, *extents], sizes)
    space = plan_iteration(op.size, dims, contiguous_strides(op.size), expressions, sizes.hint if symbolic else int)
    size_params = None
    if symbolic:
        use_int64 = symbolic_needs_int64(space.xnumel * space.ynumel, buffers, roots, [op.target], sizes)
        hints = (sizes.hint(space.xnumel), sizes.hint(space.ynumel))
        size_params = SizeParameters.of([space.xnumel, space.ynumel, *space.rewrite.values(), *extents],
                                        [s for s, _ in space.x_dims + space.y_dims])
        space = IterationSpace(size_params.rename_dims(space.x_dims), size_params.rename_dims(space.y_dims),
                               {e: size_params.rename(v) for e, v in space.rewrite.items()})
    else:
        use_int64, hints = _needs_int64(space, op), (space.xnumel, space.ynumel)
    writer = _BodyWriter(space, buffers, use_int64, sizes if symbolic else None)
    if size_params is not None:
        writer.size_renames = size_params.renames
    mask = writer.base_mask
    for b in op.bindings:
        bind(writer, b.symbol, b.index, b.size, b.wrap, b.check, mask)
    value = writer.render(op.value, mask)
    target = resolve(writer, space.rewrite[op.index])
    index_text = print_index(target)
    if not space.is_2d or not mask:  # give the address the full block shape (the index may be a scalar)
        index_text += " + 0 * xindex" if not space.is_2d else " + 0 * (xindex + yindex)"
    else:  # the mask has the block shape; masked lanes point at element 0 and write nothing
        index_text = f"tl.where({mask}, {index_text}, 0)"
    pointer = writer.pointer(op.target, stored=True)
    mask_text = f", {mask}" if mask else ""
    address = f"{pointer} + {_parenthesize(index_text)}"
    if op.mode in ATOMICS:
        writer.lines.append(f"{ATOMICS[op.mode]}({address}, {value}{mask_text}, sem='relaxed')")
    elif op.mode == "nan":  # only the updates that are NaN (lower/scatter_reduce.py), asked in fp32
        is_nan = writer.new_var(f"{value}.to(tl.float32) != {value}.to(tl.float32)")  # (the interpreter's bf16)
        writer.lines.append(f"tl.store({address}, {value}, {f'{mask} & ' if mask else ''}{is_nan})")
    else:
        writer.lines.append(f"tl.store({address}, {value}{mask_text})")
    params = [writer.pointer(n) for n in writer.loaded] + [pointer]
    arg_names = writer.loaded_arguments() + [op.target]
    numel_exprs = {}
    if size_params is not None:
        params += size_params.names
        arg_names += size_params.arguments
        numel_exprs = {"xnumel": print_index(space.xnumel), "ynumel": print_index(space.ynumel)}
    source = _assemble(name, params, space, writer, op)
    return RenderedKernel(name, source, "pointwise", arg_names, *hints, op.origins(), checks=writer.has_checks,
                          numel_exprs=numel_exprs)


ATOMICS = {"add": "tl.atomic_add", "max": "tl.atomic_max", "min": "tl.atomic_min"}


def _index_expressions(op: ScatterOp, roots) -> list:
    found = [op.index]
    for root in roots:
        for e in ex.walk(root):
            if e.op in ("load", "index_expr"):
                found.append(e.args[1] if e.op == "load" else e.args[0])
    return list(dict.fromkeys(sympy.sympify(f) for f in found))


def _needs_int64(space, op: ScatterOp) -> bool:
    if space.xnumel * space.ynumel > INT32_LIMIT:
        return True
    ranges = dict(space.x_dims + space.y_dims)
    ranges.update({b.symbol: b.size for b in op.bindings})
    ranges.update(ex.indirect_ranges([op.value] + [b.index for b in op.bindings]))
    for expr in space.rewrite.values():
        bound = upper_bound(expr, ranges)
        if bound is None or bound > INT32_LIMIT:
            return True
    return False
