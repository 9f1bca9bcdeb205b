"""Loading generated source as Python modules, for the GPU (Triton JIT) or the CPU (interpreter).

Source is written once to the cache directory under its content hash and imported from there
(Triton needs a real file to read kernel source). CPU modules are executed with TRITON_INTERPRET
set only while they load, so only our own kernels are interpreted; their `libdevice`, `helpers`
and `checks` names are then bound to the interpreter twins (and the helpers' reduce and scan to
runtime/interpreter_tiles.py), and `range` to runtime/interpreter_range.py. Before the first CPU
module loads, the work-arounds for interpreter bugs in runtime/interpreter_fixes.py are applied.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import pathlib
import sys
import threading

# Kernel sources import these by name. Import them here, outside any interpreter scope, so the
# regular modules (what GPU kernels call) exist before a CPU kernel loads under TRITON_INTERPRET.
from . import index_checks, triton_helpers  # noqa: E402,F401

_LOCK = threading.Lock()
_MODULES: dict = {}


def cache_dir() -> pathlib.Path:
    root = os.environ.get("TRITONIZE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "tritonize")
    path = pathlib.Path(root)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


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
    directory = cache_dir() / "modules"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{stem}.py"
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(source)
        os.replace(tmp, path)
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
            module.reduce_along = interpreter_tiles.reduce_along
            module.scan_along = interpreter_tiles.scan_along
            _MODULES[key] = module
        return _MODULES[key]


def load_source_module(source: str, prefix: str, interpret: bool):
    """Import `source` as a module (once per distinct source and target)."""
    digest = source_hash(source)
    key = (digest, interpret)
    with _LOCK:
        if key in _MODULES:
            return _MODULES[key]
    path = _write_source(source, f"{prefix}_{digest}")
    module = _exec_module(path, f"tritonize_{prefix}_{digest}_{'cpu' if interpret else 'gpu'}", interpret)
    if interpret:
        from . import interpreter_checks, interpreter_libdevice
        from .interpreter_range import interpreter_range

        module.range = interpreter_range
        module.libdevice = interpreter_libdevice
        module.helpers = interpreter_helpers()
        module.checks = interpreter_checks
    with _LOCK:
        _MODULES.setdefault(key, module)
        return _MODULES[key]
