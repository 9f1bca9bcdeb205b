"""Where Triton's cache holds a kernel we compiled before, so that a warm process loads it
without `triton.compile`.

`triton.compile` finds a cached binary by a key that starts with a hash of Triton's whole
installation (`triton_key`: SHA-256 of libtriton and of every compiler, backend and language
source file). A process computes it once, in about a second on the GPU host, and every kernel
it loads waits for it: in a warm process that second was a third of our backend's first call.

This index remembers, for each compile we did, the Triton cache entry it produced (Triton's
hash and the kernel's file name). Its key is what Triton's key depends on, each taken from
something cheap:

* the installation: the size and modification time of every file in the Triton package (not
  C headers), instead of their contents (about a millisecond for some 200 files);
* the kernel: the JIT function's `cache_key` (its source and what it calls), the pointer
  specialization, the constexpr values, warps, stages, target and debug flag;
* the backend's hash (the ptxas version and the architecture), the options Triton derives
  from ours (`parse_options(...).hash()`, which follows Triton's knobs), and Triton's
  cache-invalidating environment variables.

A hit reads the metadata group from Triton's cache directory and builds the `CompiledKernel`
as `triton.compile` would on its own cache hit. Anything missing (a cleared Triton cache,
another TRITON_CACHE_DIR) is a miss and compiles normally. The index is off with
TRITONIZE_CACHE=0, and when a Triton setting would make `triton.compile` do more than read its
cache (always compile, IR dumps or overrides, a compilation listener, a stage-inspection hook).
Entries live under the cache root's `triton/` directory, checksummed (runtime/disk_cache.py).
"""
from __future__ import annotations

import functools
import logging
import os

from . import disk_cache

log = logging.getLogger("tritonize.cache")

_SKIPPED_DIRS = ("include", "__pycache__")  # CUDA headers: thousands of files Triton does not hash


@functools.lru_cache(maxsize=1)
def installation_fingerprint() -> str:
    """Size and modification time of every file of the Triton package (per process, like
    Triton's own `triton_key`)."""
    import triton

    root = os.path.dirname(triton.__file__)
    files = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIPPED_DIRS)
        for name in sorted(names):
            path = os.path.join(directory, name)
            try:
                info = os.stat(path)
            except OSError:
                continue
            files.append((os.path.relpath(path, root), info.st_size, info.st_mtime_ns))
    return disk_cache.stable_hash(triton.__version__, root, files)


def _triton_does_more_than_read_its_cache() -> bool:
    try:
        from triton import knobs
    except ImportError:
        return True
    compilation = getattr(knobs, "compilation", None)
    runtime = getattr(knobs, "runtime", None)
    return bool(compilation is None or getattr(compilation, "always_compile", False)
                or getattr(compilation, "override", False) or getattr(compilation, "dump_ir", False)
                or getattr(compilation, "listener", None) is not None
                or getattr(runtime, "add_stages_inspection_hook", None) is not None)


def index_key(jit_fn, kernel_name: str, args, blocks: dict, options: dict, target) -> str | None:
    """The key of one compile, or None when the index must not be used."""
    if not disk_cache.caching_enabled() or _triton_does_more_than_read_its_cache():
        return None
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.compiler import make_backend

    backend = make_backend(target)
    parsed = backend.parse_options(dict(options))
    return disk_cache.stable_hash(
        "triton-binary-v1", installation_fingerprint(), jit_fn.cache_key, kernel_name, list(args),
        sorted(blocks.items()), sorted(options.items()), [target.backend, target.arch, target.warp_size],
        backend.hash(), parsed.hash(), sorted(get_cache_invalidating_env_vars().items()))


def _entry_path(key: str):
    directory = disk_cache.entry_dir("triton")
    return None if directory is None else directory / f"{key}.json"


def load(key: str, source):
    """The CompiledKernel recorded under `key`, read from Triton's cache; None on a miss.
    `source` is the ASTSource `triton.compile` would have been given (the launcher needs it)."""
    path = _entry_path(key)
    entry = disk_cache.read_json(path) if path is not None else None
    if not isinstance(entry, dict):
        return None
    try:
        from triton.compiler.compiler import CompiledKernel
        from triton.runtime.cache import get_cache_manager

        group = get_cache_manager(entry["hash"]).get_group(f"{entry['file']}.json")
        if not group or f"{entry['file']}.json" not in group:
            return None
        return CompiledKernel(source, group, entry["hash"])
    except Exception as err:  # noqa: BLE001  (only a shortcut: triton.compile does it properly)
        log.debug("tritonize cache: Triton binary %s unusable: %s", key, err)
        return None


def store(key: str, compiled) -> None:
    """Remember where Triton cached `compiled` (a CompiledKernel from triton.compile)."""
    path = _entry_path(key)
    metadata = [name for name in getattr(compiled, "metadata_group", {}) if name.endswith(".json")]
    if path is None or not getattr(compiled, "hash", None) or len(metadata) != 1:
        return
    disk_cache.write_json(path, {"hash": compiled.hash, "file": metadata[0][:-len(".json")]})
