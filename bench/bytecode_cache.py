"""Python bytecode caching for the benchmark processes, as a normal installation has it.

pip writes `.pyc` files when it installs a package, so an ordinary process imports torch, Triton
and the model packages from bytecode. The GPU machine's environment does not: its site-packages
have no `__pycache__` and it sets PYTHONDONTWRITEBYTECODE=1, so every process compiles every
module it imports from source (`import torch` alone: ~4 s there). That cost lands inside first
calls (Dynamo, AOTAutograd, Inductor and Triton import modules lazily) and would make compile
times measure the Python compiler, not the back ends.

`enable()` (called by the suites before they import torch) points this process and its children
at a bytecode cache directory (PYTHONPYCACHEPREFIX) and lets Python write there; `prime()` fills
it once with `compileall` for the packages the suites import, before anything is measured, so
cold and warm processes of every back end start from the same bytecode. BENCH_PYCACHE=0 leaves
the environment as it is; BENCH_PYCACHE=<dir> picks the directory (default: a directory under
the system's temporary directory, kept between runs).
"""
import importlib.util
import os
import subprocess
import sys
import tempfile

PACKAGES = ("torch", "triton", "transformers", "timm", "torchvision", "sympy", "networkx", "functorch", "tritonize")


def directory() -> str | None:
    setting = os.environ.get("BENCH_PYCACHE", "").strip()
    if setting.lower() in ("0", "off", "false", "no"):
        return None
    return setting or os.path.join(tempfile.gettempdir(), f"tritonize-bench-pycache-{os.getuid()}")


def enable() -> str | None:
    """Use and fill the bytecode cache in this process and the processes it starts; the
    directory, or None when BENCH_PYCACHE=0."""
    where = directory()
    if where is None:
        return None
    os.makedirs(where, mode=0o700, exist_ok=True)
    if not private_directory(where):
        print(f"bytecode cache: {where} is not a private directory of this user; not used", file=sys.stderr)
        return None
    sys.pycache_prefix = where
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = where
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    return where


def private_directory(path: str) -> bool:
    """A real directory (not a link) owned by this user that nobody else can write to: Python
    runs the bytecode it finds there."""
    import stat

    info = os.lstat(path)
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and info.st_mode & 0o022 == 0


def package_dirs(names=PACKAGES) -> list[str]:
    """The source directories of those packages that are installed."""
    found = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            found.extend(spec.submodule_search_locations)
    return found


def prime(timeout_s: float = 600) -> float:
    """Compile the packages' modules into the cache (already cached ones are skipped); the
    seconds it took. A failure here only makes later imports slower, so it is not raised."""
    where = directory()
    if where is None or not os.path.isdir(where) or not private_directory(where):
        return 0.0
    import time

    begin = time.perf_counter()
    command = [sys.executable, "-m", "compileall", "-q", "-j", "0", *package_dirs()]
    env = dict(os.environ, PYTHONPYCACHEPREFIX=where)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"bytecode cache: compileall did not finish: {exc}", file=sys.stderr)
    return time.perf_counter() - begin
