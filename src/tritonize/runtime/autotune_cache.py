"""Autotune results on disk: a hit skips compiling the other candidates and timing them.

Key: the kernel's source, its kind, sizes and hint, the argument specialization (dtypes and
16-byte alignment), the mode, the candidate list, the GPU's name and the Triton and tritonize
versions (tritonize's is a hash of its source files, so a change to the heuristics or codegen
invalidates old results). Value: the chosen config and the timings that chose it, as JSON.
Entries are checksummed and written atomically (runtime/disk_cache.py).
"""
from __future__ import annotations

import logging

import triton

from . import disk_cache
from .heuristics import KernelShape, LaunchConfig, config_from_json, is_valid

log = logging.getLogger("tritonize.cache")


def cache_key(source: str, shape: KernelShape, spec, mode: str, gpu_name: str, configs: list) -> str:
    return disk_cache.stable_hash(
        "autotune-v1", source, [shape.kind, shape.xnumel, shape.ynumel, shape.rnumel, shape.hint],
        repr(spec), mode, [str(c) for c in configs], gpu_name, triton.__version__,
        disk_cache.tritonize_version())


def load(key: str, shape: KernelShape) -> LaunchConfig | None:
    """The cached best config, if there is an intact entry naming a valid config."""
    directory = disk_cache.entry_dir("autotune")
    if directory is None:
        return None
    entry = disk_cache.read_json(directory / f"{key}.json")
    if entry is None:
        return None
    try:
        config = config_from_json(shape, entry["best"])
    except (KeyError, TypeError, ValueError) as err:
        log.debug("tritonize cache: ignoring malformed autotune entry %s: %s", key, err)
        return None
    if not is_valid(shape, config):  # out of the codegen bounds: masks would be missing
        log.debug("tritonize cache: autotune entry %s names an invalid config %s", key, config)
        return None
    return config


def store(key: str, kernel_name: str, best: LaunchConfig, timings: dict, mode: str) -> None:
    directory = disk_cache.entry_dir("autotune")
    if directory is None:
        return
    entry = {"kernel": kernel_name, "best": best.to_json(), "mode": mode,
             "timings_us": {str(c): round(t * 1e6, 3) for c, t in timings.items() if t != float("inf")}}
    disk_cache.write_json(directory / f"{key}.json", entry)
