"""Data-dependent (unbacked) sizes: sizes only the data decides, such as `nonzero`'s row count or
`.item()` under `capture_scalar_outputs`. The ShapeEnv names them u0, u1...

* The op that decides one runs through aten: it has no lowering, or its lowering declines. The
  wrapper reads the size from what the op returned, right after the call
  (`ExternCall.after`, e.g. `u0 = buf3.size(0)`). Everything after it is generated with u0 as
  a size parameter, like any symbolic size.
* A size derived from one by a generated op gets our own expression for it. For example,
  `x[:u0]` has u1 = min(u0, 10) rows. The binding is written after the call that bound the
  symbols the expression reads.
* The graph's runtime asserts on them (`_assert_scalar`: u0 >= 0) run at the same place.
* Heuristics take a guess for an unbacked size (ir/sizes.py, `SizeOracle.hint`). Nothing is
  guarded on one.

Where the ShapeEnv says a node's value holds a new symbol: `node.meta["unbacked_bindings"]`,
{symbol: key path into the value}, such as `.size()[0]` (under the names the ShapeEnv renamed
them to afterwards: `resolve_unbacked_bindings`).
"""
from __future__ import annotations

import operator

import sympy
import torch

from ..codegen.index_printer import print_condition, print_index
from ..errors import Unsupported
from ..ir.nodes import ExternCall, TensorValue
from ..ir.sizes import as_size, is_symbolic
from .registry import lowering

aten = torch.ops.aten


def bind_unbacked(ctx, node, value) -> bool:
    """Bind each size `node` introduces (its unbacked_bindings) where the wrapper can read it.
    False when a generated op's value has no expression for one (its lowering took the traced
    size as it is): the op must then run through aten, and its result tells."""
    bindings = node.meta.get("unbacked_bindings") or {}
    if bindings and ctx.sizes.shape_env is not None:  # (the names the rest of the graph uses)
        from torch.fx.experimental.symbolic_shapes import resolve_unbacked_bindings

        bindings = resolve_unbacked_bindings(ctx.sizes.shape_env, bindings)
    for symbol, keypath in bindings.items():
        symbol = as_size(symbol)
        if symbol in ctx.unbacked:
            continue
        call = _producing_call(ctx, node)
        if call is not None:
            call.after.append(f"{symbol} = {{result}}{_keypath_text(keypath, node)}")
            ctx.unbacked[symbol] = call
            continue
        expression = _keypath_value(value, keypath)
        if expression is None or expression == symbol:
            return False
        _bind_to_expression(ctx, node, symbol, expression)
    return True


def _producing_call(ctx, node) -> ExternCall | None:
    """The aten call that computed `node` (the last operation, when the node ran through aten)."""
    last = ctx.operations[-1] if ctx.operations else None
    if isinstance(last, ExternCall) and last.origin == ctx.origin():
        return last
    return None


def _bind_to_expression(ctx, node, symbol, expression) -> None:
    """symbol = our expression for it, written after the call that bound the last symbol the
    expression reads."""
    reads = [s for s in sympy.sympify(expression).free_symbols if s in ctx.unbacked]
    if not reads:
        raise Unsupported(f"{node.name} ({node.target}) decides a data-dependent size ({symbol}) "
                          "from no data-dependent value")
    call = _latest(ctx, reads)
    call.after.append(f"{symbol} = {print_index(expression)}")
    ctx.unbacked[symbol] = call


def _latest(ctx, symbols) -> ExternCall:
    order = {id(op): k for k, op in enumerate(ctx.operations)}
    return max((ctx.unbacked[s] for s in symbols), key=lambda call: order[id(call)])


def _keypath_text(keypath, node) -> str:
    """The key path as Python text applied to the call's result: `.size()[0]`, `[1].stride()[0]`."""
    from torch.fx.experimental.symbolic_shapes import CallMethodKey

    text = ""
    for key in keypath:
        if isinstance(key, CallMethodKey):
            text += f".{key.name}()"
        elif isinstance(key, torch.utils._pytree.SequenceKey):
            text += f"[{key.idx}]"
        else:
            raise Unsupported(f"{node.name} ({node.target}): a data-dependent size at {keypath}")
    return text


def _keypath_value(value, keypath):
    """The key path applied to our lowered value (a generated op's result); None where it
    leads to nothing we know."""
    from torch.fx.experimental.symbolic_shapes import CallMethodKey

    for key in keypath:
        if isinstance(key, CallMethodKey) and key.name == "size" and isinstance(value, TensorValue):
            value = value.size
        elif isinstance(key, torch.utils._pytree.SequenceKey) and isinstance(value, (tuple, list)):
            value = value[key.idx]
        else:
            return None
    return value


# --- the graph's runtime asserts on sizes ---------------------------------------------------

COMPARISONS = {operator.ge: sympy.Ge, operator.gt: sympy.Gt, operator.le: sympy.Le, operator.lt: sympy.Lt,
               operator.eq: sympy.Eq, operator.ne: sympy.Ne}
for _op, _relation in COMPARISONS.items():
    lowering(_op)(lambda ctx, node, a, b, _relation=_relation: _compare(_relation, a, b))


def _compare(relation, a, b):
    if not (is_symbolic(a) or is_symbolic(b)):
        return bool(relation(sympy.sympify(a), sympy.sympify(b)))
    return relation(sympy.sympify(a), sympy.sympify(b))


@lowering(aten._assert_scalar.default)
def lower_assert_scalar(ctx, node, condition, message):
    """Checked in the wrapper after the call that bound its data-dependent sizes; a condition
    over sizes read from the inputs is Dynamo's guards' to check."""
    if condition is True or condition == sympy.true:
        return None
    if condition is False or condition == sympy.false:
        raise Unsupported(f"{node.name}: {message}")
    reads = [s for s in condition.free_symbols if s in ctx.unbacked]
    if reads:
        text = f"assert {print_condition(condition)}, {message!r}"
        _latest(ctx, reads).after.append(text.replace("{", "{{").replace("}", "}}"))  # (a format string)
    return None


@lowering(aten.sym_constrain_range_for_size.default, aten.sym_constrain_range.default)
def lower_constrain_range(ctx, node, *args, **kwargs):
    """The ShapeEnv's knowledge of a size's range: already in the symbols' ranges."""
    return None
