"""Errors raised by the compiler, with the context a user needs to find the cause."""
from __future__ import annotations

import os


class CompileError(RuntimeError):
    """A failure inside tritonize: names the stage, the FX node, its aten op and the user's source line."""

    def __init__(self, stage: str, message: str, node=None, kernel: str | None = None):
        self.stage = stage
        self.node_name = getattr(node, "name", None)
        self.target = str(getattr(node, "target", "")) if node is not None else None
        self.source_line = user_source_line(node)
        self.kernel = kernel
        parts = [f"tritonize {stage} failed: {message}"]
        if node is not None:
            parts.append(f"  FX node: {self.node_name} = {self.target}")
        if kernel:
            parts.append(f"  kernel: {kernel}")
        if self.source_line:
            parts.append(f"  user code: {self.source_line}")
        super().__init__("\n".join(parts))


class PrecompiledArtifactError(RuntimeError):
    """A precompiled function (tritonize.precompile) that cannot be used here: damaged, of
    another format, made with other versions or for another GPU. The message names the cause."""

    def __init__(self, message: str):
        super().__init__(f"tritonize: precompiled function not usable: {message}")


class FrozenInputChanged(RuntimeError):
    """A parameter or buffer frozen into a compiled graph (options freeze=True) was written or
    replaced since it was frozen (lower/freezing.py)."""


class Unsupported(Exception):
    """A lowering declines these particular arguments: the op runs through aten instead."""


def user_source_line(node) -> str | None:
    if node is None:
        return None
    trace = node.meta.get("stack_trace") if hasattr(node, "meta") else None
    if not trace:
        return None
    lines = [ln.strip() for ln in trace.strip().splitlines() if ln.strip()]
    # The last 'File ...' line outside tritonize (wrap_triton's frames are traced too) and the
    # code line after it are the user's own frame.
    frames = [i for i, line in enumerate(lines) if line.startswith("File ")]
    users = [i for i in frames if not _frame_path(lines[i]).startswith(_PACKAGE_DIR)] or frames
    if users:
        i = users[-1]
        code = lines[i + 1] if i + 1 < len(lines) else ""
        return f"{lines[i]}: {code}"
    return lines[-1]


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _frame_path(frame_line: str) -> str:
    """The file of a traceback line `File "path", line N, in fn`."""
    start = frame_line.find('"') + 1
    return os.path.abspath(frame_line[start:frame_line.find('"', start)])
