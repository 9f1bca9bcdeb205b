"""Where Triton's cache holds a kernel we compiled before, so that a warm process loads it
without `triton.compile`.

`triton.compile` finds a cached binary by a key that starts with a hash of Triton's whole
installation (`triton_key`: SHA-256 of libtriton and of every compiler, backend and language
source file). A process computes it once, in about a second on the GPU host, and every kernel
it loads waits for it: in a warm process that second was a third of our backend's first call.

This index remembers, for each compile we did, the Triton cache entry it produced (Triton's
hash and the kernel's file name). Its key has the terms of Triton's own key, with one replaced:

* the source: `ASTSource.hash()`, the JIT function's `cache_key` (its source and what it calls)
  with the signature, pointer attributes (alignment) and constexpr values we gave it;
* the backend's hash (the ptxas version and the architecture), the options Triton derives from
  ours (`parse_options(...).hash()`, which follows Triton's knobs), and Triton's
  cache-invalidating environment variables;
* instead of `triton_key`: the size and modification time of every file of the Triton package
  (directory links followed; not the C headers), about a millisecond for some 200 files. An edit
  that keeps a file's size and modification time (`cp -p` of another same-sized file) is not
  seen; Triton's `triton_key` would see it.

A hit reads the metadata group from Triton's cache directory, checks that the stored metadata
agrees (hash, target, Triton version, every option Triton derived), and builds the
`CompiledKernel` as `triton.compile` would on its own cache hit. Anything missing or different
(a cleared Triton cache, another TRITON_CACHE_DIR) is a miss and compiles normally. The index
is off with TRITONIZE_CACHE=0, and when a Triton setting would make `triton.compile` do more
than read its cache (always compile, IR dumps or overrides, a compilation listener, a
stage-inspection hook). Entries live under the cache root's `triton/` directory, checksummed
(runtime/disk_cache.py).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os

from . import disk_cache

log = logging.getLogger("tritonize.cache")

_SKIPPED_DIRS = ("include", "__pycache__")  # CUDA headers: thousands of files Triton does not hash


@functools.lru_cache(maxsize=1)
def installation_fingerprint() -> str | None:
    """Size and modification time of every file of the Triton package, computed once a process
    (like Triton's own `triton_key`); None when libtriton was not among them."""
    import triton

    root = os.path.dirname(triton.__file__)
    files, seen_dirs = [], set()
    for directory, subdirs, names in os.walk(root, followlinks=True):
        real = os.path.realpath(directory)
        if real in seen_dirs:  # a link back up the tree
            subdirs[:] = []
            continue
        seen_dirs.add(real)
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIPPED_DIRS)
        for name in sorted(names):
            path = os.path.join(directory, name)
            try:
                info = os.stat(path)
            except OSError:
                continue
            files.append((os.path.relpath(path, root), info.st_size, info.st_mtime_ns))
    if not any(os.path.basename(path).startswith("libtriton") for path, _, _ in files):
        return None
    return disk_cache.stable_hash(triton.__version__, root, files)


def _triton_does_more_than_read_its_cache() -> bool:
    """Whether a Triton setting makes `triton.compile` do more than look up its cache (then the
    index must not stand in for it)."""
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


@dataclasses.dataclass(frozen=True)
class Lookup:
    """One compile as the index sees it: its key, and what a hit is built from and checked
    against (the ASTSource, the GPUTarget and the options Triton derives from ours)."""

    key: str
    source: object
    target: object
    parsed_options: object


def lookup(source, options: dict, target) -> Lookup | None:
    """The lookup for compiling `source` (an ASTSource) with `options` for `target` (a
    GPUTarget), or None when the index must not be used."""
    if not disk_cache.caching_enabled() or _triton_does_more_than_read_its_cache():
        return None
    fingerprint = installation_fingerprint()
    if fingerprint is None:
        return None
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.compiler import make_backend

    backend = make_backend(target)
    parsed = backend.parse_options(dict(options))
    key = disk_cache.stable_hash(
        "triton-binary-v2", fingerprint, source.hash(), backend.hash(), parsed.hash(),
        sorted(get_cache_invalidating_env_vars().items()))
    return Lookup(key, source, target, parsed)


def _entry_path(key: str):
    """Where the entry for `key` lives; None when caching is off or the cache root is unsafe."""
    directory = disk_cache.entry_dir("triton")
    return None if directory is None else directory / f"{key}.json"


def load(query: Lookup):
    """The CompiledKernel recorded for this compile, read from Triton's cache; None on a miss."""
    path = _entry_path(query.key)
    entry = disk_cache.read_json(path) if path is not None else None
    if not isinstance(entry, dict):
        return None
    try:
        from triton.compiler.compiler import CompiledKernel
        from triton.runtime.cache import get_cache_manager

        metadata_file = f"{entry['file']}.json"
        group = get_cache_manager(entry["hash"]).get_group(metadata_file)
        if not group or metadata_file not in group:
            return None
        compiled = CompiledKernel(query.source, group, entry["hash"])
        problem = _disagreement(compiled, entry["hash"], query)
    except Exception as err:  # noqa: BLE001  (only a shortcut: triton.compile does it properly)
        log.debug("tritonize cache: Triton binary %s unusable: %s", query.key, err)
        return None
    if problem is not None:
        log.debug("tritonize cache: Triton binary %s does not match this compile (%s)", query.key, problem)
        return None
    return compiled


def _disagreement(compiled, hash_: str, query: Lookup) -> str | None:
    """What in Triton's stored metadata differs from this compile (None: nothing): its hash,
    target and Triton version, and each option Triton derives from ours."""
    import triton

    metadata = compiled.metadata._asdict()
    target, stored_target = query.target, metadata.get("target")
    expected = {"hash": hash_, "target": [target.backend, target.arch, target.warp_size],
                "triton_version": triton.__version__}
    found = {"hash": metadata.get("hash"),
             "target": [getattr(stored_target, field, None) for field in ("backend", "arch", "warp_size")],
             "triton_version": metadata.get("triton_version", triton.__version__)}
    for name, value in vars(query.parsed_options).items():
        if value is not None and name in metadata:
            expected[name] = json.loads(json.dumps(value, default=vars))
            found[name] = json.loads(json.dumps(metadata[name], default=vars))
    different = [name for name in expected if expected[name] != found[name]]
    return ", ".join(different) if different else None


def store(query: Lookup, compiled) -> None:
    """Remember where Triton cached `compiled` (a CompiledKernel from triton.compile)."""
    path = _entry_path(query.key)
    metadata = [name for name in getattr(compiled, "metadata_group", {}) if name.endswith(".json")]
    if path is None or not getattr(compiled, "hash", None) or len(metadata) != 1:
        return
    disk_cache.write_json(path, {"hash": compiled.hash, "file": metadata[0][:-len(".json")]})
