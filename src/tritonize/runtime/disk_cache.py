"""The on-disk cache: where it lives, whether it is safe to use, and checksummed entries.

Layout under the cache root (`TRITONIZE_CACHE_DIR`, default `$XDG_CACHE_HOME/tritonize` or
`~/.cache/tritonize`):

    modules/   generated source files imported by the loader (Triton needs real files)
    autotune/  one JSON entry per tuned kernel (runtime/autotune_cache.py)
    graphs/    one entry per compiled graph (tritonize/caching/graph_cache.py)
    dynamo/    one entry per Dynamo graph that skips AOTAutograd (tritonize/caching/dynamo_cache.py)
    triton/    one entry per kernel compile: where Triton's cache holds its binary
               (runtime/triton_binaries.py)

Rules:
* `TRITONIZE_CACHE=0` turns the autotune, graph, Dynamo-level and Triton-binary caches off.
  Generated modules are still written (Triton reads kernel source from files), to a private
  temporary directory.
* The root and every directory under it are created with mode 0700. A directory that another
  user owns or can write to is never used: code and data loaded from it could have been planted.
  The cache then falls back to a private temporary directory (for modules) or is off (entries),
  and a warning says why.
* An entry is a header line (magic, payload length, SHA-256 of the payload) and the payload.
  A truncated or corrupt entry reads as a miss, is reported at debug level and is rewritten by
  the next store. Entries are written to a unique temporary file in the same directory and
  renamed into place, so concurrent writers never leave a mixed file: the last rename wins and
  every reader sees one whole entry.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import pathlib
import stat
import tempfile
import threading
import warnings

log = logging.getLogger("tritonize.cache")

MAGIC = b"tritonize-cache-v1"
_LOCK = threading.Lock()
_PRIVATE_DIRS: dict = {}


class UnsafeCacheDir(Exception):
    """The directory could be written by another user (or is not ours)."""


def caching_enabled() -> bool:
    return os.environ.get("TRITONIZE_CACHE", "1").strip().lower() not in ("0", "false", "off", "no")


def default_root() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "tritonize"


def configured_root() -> pathlib.Path:
    return pathlib.Path(os.environ.get("TRITONIZE_CACHE_DIR") or default_root())


def check_private(path: pathlib.Path) -> None:
    """Raise UnsafeCacheDir unless `path` is a directory we own that no one else can write."""
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeCacheDir(f"{path} is not a directory (or is a symbolic link)")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise UnsafeCacheDir(f"{path} belongs to user id {info.st_uid}, not to us ({os.getuid()})")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeCacheDir(f"{path} can be written by other users (mode {oct(info.st_mode & 0o777)})")


def _check_parents(path: pathlib.Path) -> None:
    """A parent that others can write without the sticky bit lets them swap our directory."""
    for parent in path.resolve().parents:
        info = os.stat(parent)
        open_to_others = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if open_to_others and not info.st_mode & stat.S_ISVTX:
            raise UnsafeCacheDir(f"{parent} can be written by other users and is not sticky")


def ensure_private_dir(path: pathlib.Path) -> pathlib.Path:
    """Create `path` (mode 0700) if needed and check that it is private; returns it."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    check_private(path)
    return path


@functools.lru_cache(maxsize=None)
def _checked_root(root: str) -> pathlib.Path | None:
    path = pathlib.Path(root)
    try:
        ensure_private_dir(path)
        _check_parents(path)
        return path
    except (OSError, UnsafeCacheDir) as err:
        warnings.warn(f"tritonize: not using cache directory {root}: {err}")
        return None


def cache_root() -> pathlib.Path | None:
    """The checked cache root, or None when it is unsafe or cannot be created."""
    return _checked_root(str(configured_root()))


def entry_dir(kind: str) -> pathlib.Path | None:
    """The directory for entries of one kind ("autotune", "graphs"), or None if caching is off."""
    if not caching_enabled():
        return None
    root = cache_root()
    if root is None:
        return None
    try:
        return ensure_private_dir(root / kind)
    except (OSError, UnsafeCacheDir) as err:
        log.warning("tritonize: cache directory %s unusable: %s", root / kind, err)
        return None


def module_dir() -> pathlib.Path:
    """Where generated modules are written: the cache root's modules/, else a private temp dir."""
    root = cache_root() if caching_enabled() else None
    if root is not None:
        try:
            return ensure_private_dir(root / "modules")
        except (OSError, UnsafeCacheDir) as err:
            log.warning("tritonize: %s unusable, using a private directory: %s", root / "modules", err)
    with _LOCK:
        pid = os.getpid()
        if pid not in _PRIVATE_DIRS:  # one per process (a forked child makes its own)
            _PRIVATE_DIRS[pid] = pathlib.Path(tempfile.mkdtemp(prefix="tritonize-modules-"))
        return _PRIVATE_DIRS[pid]


# ----------------------------------------------------------------------------- entries


def frame(payload: bytes) -> bytes:
    """The payload behind a header line: magic, length and SHA-256 (see the module docstring)."""
    digest = hashlib.sha256(payload).hexdigest().encode()
    return MAGIC + b" " + str(len(payload)).encode() + b" " + digest + b"\n" + payload


def unframe(data: bytes) -> bytes:
    """The payload of framed data; ValueError naming what is wrong (header, length, checksum)."""
    header, sep, payload = data.partition(b"\n")
    parts = header.split(b" ")
    if not sep or len(parts) != 3 or parts[0] != MAGIC:
        raise ValueError("bad header")
    if int(parts[1]) != len(payload):
        raise ValueError(f"length {len(payload)}, header says {int(parts[1])} (truncated?)")
    if hashlib.sha256(payload).hexdigest().encode() != parts[2]:
        raise ValueError("checksum mismatch")
    return payload


def write_atomic(path: pathlib.Path, data: bytes) -> None:
    """Write `data` to `path` through a unique temporary file renamed into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_entry(path: pathlib.Path) -> bytes | None:
    """The payload of a whole, uncorrupted entry; None if missing or damaged (logged at debug)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        log.debug("tritonize cache: cannot read %s: %s", path, err)
        return None
    try:
        return unframe(data)
    except ValueError as err:
        log.debug("tritonize cache: ignoring damaged entry %s (%s); it will be rewritten", path, err)
        return None


def write_entry(path: pathlib.Path, payload: bytes) -> bool:
    """Store an entry; False (logged at debug) when the disk refuses."""
    try:
        write_atomic(path, frame(payload))
        return True
    except OSError as err:
        log.debug("tritonize cache: cannot write %s: %s", path, err)
        return False


def read_json(path: pathlib.Path):
    payload = read_entry(path)
    if payload is None:
        return None
    try:
        return json.loads(payload)
    except ValueError as err:
        log.debug("tritonize cache: ignoring unreadable JSON in %s (%s)", path, err)
        return None


def write_json(path: pathlib.Path, value) -> bool:
    return write_entry(path, json.dumps(value, sort_keys=True).encode())


# ----------------------------------------------------------------------------- versions


@functools.lru_cache(maxsize=None)
def tritonize_version() -> str:
    """A hash of the package's source files: any change to tritonize invalidates the caches."""
    package = pathlib.Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def stable_hash(*parts) -> str:
    """SHA-256 of the parts' JSON (sorted keys), shortened: a file-name-safe cache key."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:40]
