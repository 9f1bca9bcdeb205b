"""Running a user's @triton.jit kernel on CPU tensors through Triton's interpreter.

A user kernel was decorated in a process that imported Triton normally, so it is a JITFunction,
not an interpreted function, and so are the helpers it calls (its own @triton.jit helpers and
Triton's standard library: tl.cdiv, tl.sigmoid, tl.max...). Calling a JITFunction from Python
raises. For the duration of one interpreted launch, `JITFunction.__call__` is therefore pointed
at the interpreter: a nested call runs the helper's interpreter rewrite with the language patched
for the helper's own module, and restores it afterwards. Nothing else changes, and everything is
restored when the launch ends.
"""
from __future__ import annotations

import contextlib
import threading

_LOCK = threading.RLock()
_REWRITTEN: dict = {}  # python function -> its interpreter rewrite


def _rewritten(fn):
    from triton.runtime.interpreter import InterpretedFunction

    if fn not in _REWRITTEN:
        _REWRITTEN[fn] = InterpretedFunction(fn).rewrite()
    return _REWRITTEN[fn]


def _call_helper_interpreted(jit_function, *args, **kwargs):
    from triton.runtime import interpreter

    body = _rewritten(jit_function.fn)
    scope = interpreter._patch_lang(jit_function.fn)
    try:
        return body(*args, **kwargs)
    finally:
        if scope is not None:
            scope.restore()


@contextlib.contextmanager
def helpers_interpreted():
    """While active, calling a @triton.jit function runs it in the interpreter."""
    from triton.runtime.jit import JITFunction

    with _LOCK:
        original = JITFunction.__dict__["__call__"]
        JITFunction.__call__ = _call_helper_interpreted
        try:
            yield
        finally:
            JITFunction.__call__ = original


def run_interpreted(jit_function, grid: tuple, arguments: dict) -> None:
    """Run `jit_function` over `grid` on CPU tensors; every parameter is passed by name."""
    from triton.runtime.interpreter import InterpretedFunction

    with helpers_interpreted():
        InterpretedFunction(jit_function.fn)[tuple(grid)](**arguments)
