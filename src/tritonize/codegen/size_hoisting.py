"""Size expressions of a symbolic wrapper, evaluated once a call.

The wrapper's `call` binds each size symbol once from its inputs (`s0 = arg0_1.size(0)`). The
sizes, strides and kernel arguments that follow are printed as expressions over those symbols
(`(s0 * s1, 64)`, a kernel's `64 * s1`), and the same expression often appears many times in one
call. `hoist_size_expressions` names each expression that appears more than once
(`size0 = s0 * s1`), right after the symbols are bound, and every use reads the name.

It works on the rendered lines through Python's own parser: an expression is a maximal
arithmetic subtree (+ - * // / %, unary minus, min/max) whose names are all symbols bound at the
top of the call. Data-dependent sizes bound later in the call (`u0`, lower/unbacked.py) are
never hoisted above their binding, since an expression naming one is not over top symbols alone.
Replacement is by source position, so comments and the rest of each line stay as written.
"""
from __future__ import annotations

import ast
import re
from collections import Counter

ARITHMETIC = (ast.BinOp, ast.UnaryOp)
EXTREMA = ("min", "max")


def hoist_size_expressions(lines: list[str], first_body_line: int, symbols: set[str],
                           prefix: str = "size") -> list[str]:
    """lines: the `call` function's source lines; lines[first_body_line:] are searched (the
    lines before it bind the symbols, and the names go right there). Returns the new lines."""
    if not symbols:
        return lines
    found = _expressions(lines, first_body_line, symbols)
    counts = Counter(text for _, _, _, text in found)
    repeated = [text for text, n in counts.items() if n > 1]
    if not repeated:
        return lines
    while any(re.search(rf"\b{prefix}\d", line) for line in lines):  # a name the wrapper already uses
        prefix += "_"
    names = {text: f"{prefix}{i}" for i, text in enumerate(repeated)}
    edited = list(lines)
    for row, start, end, text in sorted(found, key=lambda f: (f[0], -f[1])):  # right to left in a line
        if text in names:
            start, end = _without_grouping(edited[row], start, end)
            edited[row] = edited[row][:start] + names[text] + edited[row][end:]
    definitions = [f"    {name} = {text}" for text, name in names.items()]
    return edited[:first_body_line] + definitions + edited[first_body_line:]


def _without_grouping(line: str, start: int, end: int) -> tuple[int, int]:
    """Widen [start, end) over the parentheses that only group it (`((s0 * s0), 1)`), not a
    call's (`f(s0 * s0)`), so that the name replaces them too."""
    if start >= 1 and end < len(line) and line[start - 1] == "(" and line[end] == ")":
        before = line[start - 2] if start >= 2 else " "
        if not (before.isalnum() or before in "_)]"):
            return start - 1, end + 1
    return start, end


def _expressions(lines: list[str], first_body_line: int, symbols: set[str]) -> list[tuple]:
    """(row, start column, end column, normalized text) of each maximal size expression."""
    found = []
    for row in range(first_body_line, len(lines)):
        tree = _parse_line(lines[row])
        if tree is None:
            continue
        text = lines[row].strip()
        indent = len(lines[row]) - len(lines[row].lstrip())
        _collect(tree, symbols, text, indent, row, found)
    return found


def _parse_line(line: str):
    """The line as a statement (indentation removed), or None if it is not one by itself."""
    try:
        return ast.parse(line.strip())
    except SyntaxError:
        return None


def _collect(node, symbols: set[str], text: str, indent: int, row: int, found: list) -> None:
    if (isinstance(node, ARITHMETIC + (ast.Call,)) and _is_size_expression(node, symbols)
            and any(isinstance(n, ast.Name) and n.id in symbols for n in ast.walk(node))):  # not `-1`
        start, end = _column(text, node.col_offset), _column(text, node.end_col_offset)
        found.append((row, indent + start, indent + end, ast.unparse(node)))
        return
    for child in ast.iter_child_nodes(node):
        _collect(child, symbols, text, indent, row, found)


def _column(text: str, byte_offset: int) -> int:
    """The character index of a UTF-8 byte offset (the parser's columns are in bytes: a string
    argument with an accented letter shifts everything after it)."""
    return len(text.encode()[:byte_offset].decode())


def _is_size_expression(node, symbols: set[str]) -> bool:
    """Whether `node` computes a number from top-bound symbols and integer constants alone."""
    if isinstance(node, ast.Name):
        return node.id in symbols
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.BinOp):
        return _is_size_expression(node.left, symbols) and _is_size_expression(node.right, symbols)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.USub) and _is_size_expression(node.operand, symbols)
    if isinstance(node, ast.Call):
        return (isinstance(node.func, ast.Name) and node.func.id in EXTREMA and not node.keywords
                and all(_is_size_expression(a, symbols) for a in node.args))
    return False
