"""Loading generated source as Python modules, for the GPU (Triton JIT) or the CPU (interpreter).

Source is written once to the modules directory (runtime/disk_cache.py: private, mode 0700)
under its content hash and imported from there (Triton needs a real file to read kernel source).
CPU modules are executed with TRITON_INTERPRET set only while they load, so only our own kernels
are interpreted; their `libdevice`, `helpers` and `checks` names are then bound to the interpreter
twins (and the helpers' reduce and scan to runtime/interpreter_tiles.py), and `range` to
runtime/interpreter_range.py. Before the first CPU module loads, the work-arounds for interpreter
bugs in runtime/interpreter_fixes.py are applied.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import itertools
import os
import pathlib
import sys
import threading

from .disk_cache import module_dir, write_atomic

# Kernel sources import these by name. Import them here, outside any interpreter scope, so the
# regular modules (what GPU kernels call) exist before a CPU kernel loads under TRITON_INTERPRET.
from . import index_checks, triton_helpers  # noqa: E402,F401

_LOCK = threading.Lock()
_MODULES: dict = {}
_PRIVATE_IDS = itertools.count()


def cache_dir() -> pathlib.Path:
    """Where generated modules are written (see runtime/disk_cache.py for the rules)."""
    return module_dir()


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:24]


@contextlib.contextmanager
def interpret_scope(enabled: bool):
    previous = os.environ.get("TRITON_INTERPRET")
    if enabled:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = previous


def _write_source(source: str, stem: str) -> pathlib.Path:
    path = module_dir() / f"{stem}.py"
    try:
        unchanged = path.read_text() == source
    except OSError:
        unchanged = False
    if not unchanged:
        write_atomic(path, source.encode())
    return path


def _exec_module(path: pathlib.Path, module_name: str, interpret: bool):
    if interpret:
        from . import interpreter_fixes

        interpreter_fixes.apply()
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    with interpret_scope(interpret):
        spec.loader.exec_module(module)
    return module


def interpreter_helpers():
    """runtime/triton_helpers.py loaded a second time, as interpreted functions."""
    key = ("helpers", True)
    with _LOCK:
        if key not in _MODULES:
            from . import interpreter_tiles

            path = pathlib.Path(__file__).with_name("triton_helpers.py")
            module = _exec_module(path, "tritonize_interpreter_helpers", True)
            from . import interpreter_libdevice

            module.libdevice = interpreter_libdevice
            module.reduce_along = interpreter_tiles.reduce_along
            module.scan_along = interpreter_tiles.scan_along
            interpreter_tiles.register_numpy_reductions(module)
            _MODULES[key] = module
        return _MODULES[key]


def load_source_module(source: str, prefix: str, interpret: bool, shared: bool = True):
    """Import `source` as a module (once per distinct source and target).

    shared=False gives a module of its own (for wrappers whose CONSTANTS differ from those of
    another graph with the same source)."""
    digest = source_hash(source)
    key = (digest, interpret)
    with _LOCK:
        if shared and key in _MODULES:
            return _MODULES[key]
    path = _write_source(source, f"{prefix}_{digest}")
    name = f"tritonize_{prefix}_{digest}_{'cpu' if interpret else 'gpu'}"
    module = _exec_module(path, name if shared else f"{name}_{next(_PRIVATE_IDS)}", interpret)
    if interpret:
        from . import interpreter_checks, interpreter_libdevice
        from .interpreter_range import interpreter_range

        module.range = interpreter_range
        module.libdevice = interpreter_libdevice
        module.helpers = interpreter_helpers()
        module.checks = interpreter_checks
    if not shared:
        return module
    with _LOCK:
        _MODULES.setdefault(key, module)
        return _MODULES[key]
