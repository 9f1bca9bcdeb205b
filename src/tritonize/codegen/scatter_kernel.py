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
from ..ir.symbols import dim_vars, upper_bound
from .index_printer import print_index
from .indirect import bind, resolve
from .iteration import plan_iteration
from .kernel import INT32_LIMIT, RenderedKernel, _assemble, _BodyWriter, _parenthesize


def render_scatter_kernel(op: ScatterOp, buffers: dict, name: str) -> RenderedKernel:
    dims = dim_vars(len(op.size))
    roots = [b.index for b in op.bindings] + [op.value]
    space = plan_iteration(op.size, dims, contiguous_strides(op.size), _index_expressions(op, roots))
    writer = _BodyWriter(space, buffers, _needs_int64(space, op))
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
    if op.mode == "add":
        writer.lines.append(f"tl.atomic_add({address}, {value}{mask_text}, sem='relaxed')")
    else:
        writer.lines.append(f"tl.store({address}, {value}{mask_text})")
    params = [writer.pointer(n) for n in writer.loaded] + [pointer]
    source = _assemble(name, params, space, writer, op)
    return RenderedKernel(name, source, "pointwise", writer.loaded_arguments() + [op.target], space.xnumel, space.ynumel,
                          op.origins(), checks=writer.has_checks)


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
