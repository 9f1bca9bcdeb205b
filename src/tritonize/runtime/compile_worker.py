"""Compiling one kernel config with Triton, with nothing but Triton: shared by this process and
by compile worker processes, which run this file as a script.

A worker is `python compile_worker.py`: it imports Triton and neither torch nor the tritonize
package (whose `__init__` imports torch), so it starts in a fraction of a second. Generated
kernel modules import `tritonize.runtime.triton_helpers` and `index_checks`; the worker makes
`tritonize` and `tritonize.runtime` empty package entries pointing at this source tree, so those
two modules (which import only Triton) load without the package's `__init__`.

Protocol (runtime/compile_processes.py is the other side): one JSON object a line on stdin,
either {"ping": true} or a job {"module_path", "kernel_name", "args": [[kind, aligned], ...],
"blocks": [[name, value], ...], "num_warps", "num_stages", "target": [backend, arch, warp_size],
"debug"}; for each, one line `REPLY {"error": null or "why"}` on stdout, after a first line
`READY` once Triton is imported and has hashed its installation. The replies go to a copy of the
worker's original stdout; file descriptor 1 itself is pointed at stderr (which the parent
discards), so what Triton, ptxas or C code print cannot end up inside a reply line. The worker
compiles into Triton's disk cache (TRITON_CACHE_DIR, inherited); the requesting process then
compiles the same job itself, which is a cache hit. End of input ends the worker.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import types

REPLY = "REPLY "
READY = "READY"


def compile_options(num_warps: int, num_stages: int, debug: bool, blocks: dict) -> dict:
    """Triton's options for a generated kernel. No contraction of a multiply and an add into
    one fma: eager rounds each op's result, and a value stored by one op and recomputed by the
    next (x*x - mean(x*x) over a single element) must cancel exactly, as it does in eager."""
    options = {"num_warps": num_warps, "num_stages": num_stages, "enable_fp_fusion": False}
    if debug:
        options.update(debug=True, sanitize_overflow=False)
    if blocks.get("PDL"):  # the kernel waits for the previous grid: launch it early
        options["launch_pdl"] = True
    return options


def build_source(jit_fn, kernel_name: str, args, blocks: dict, target):
    """Triton's ASTSource for this specialization ((pointer kind, aligned) per pointer
    parameter, ("#i32" or "#i64", multiple of 16) per int parameter) and these constexpr values."""
    from triton.compiler import ASTSource, make_backend

    backend = make_backend(target)
    signature, constexprs, attrs = {}, {}, {}
    pointers = iter(args)
    for index, name in enumerate(jit_fn.arg_names):
        if name in blocks:
            signature[name] = "constexpr"
            constexprs[(index,)] = blocks[name]
            continue
        try:
            kind, aligned = next(pointers)
        except StopIteration:
            raise TypeError(f"kernel {kernel_name}: no argument for parameter {name}") from None
        signature[name] = kind[1:] if kind.startswith("#") else "*" + kind  # "#i32": an int argument
        attrs[(index,)] = backend.parse_attr("D" if aligned else "")
    if next(pointers, None) is not None:
        raise TypeError(f"kernel {kernel_name}: more arguments than parameters")
    return ASTSource(jit_fn, signature, constexprs, attrs)


def compile_kernel(jit_fn, kernel_name: str, args, blocks: dict, num_warps: int, num_stages: int,
                   target: tuple, debug: bool = False):
    """A Triton CompiledKernel (not loaded on a device)."""
    from triton.backends.compiler import GPUTarget

    gpu_target = GPUTarget(*target)
    source = build_source(jit_fn, kernel_name, args, blocks, gpu_target)
    return compile_source(source, gpu_target, compile_options(num_warps, num_stages, debug, blocks))


def compile_source(source, gpu_target, options: dict):
    """triton.compile of an ASTSource built by build_source (a CompiledKernel, not loaded)."""
    import triton

    return triton.compile(source, target=gpu_target, options=options)


# ----------------------------------------------------------------------------- the worker side


def stub_packages() -> None:
    """`tritonize` and `tritonize.runtime` as bare packages over this tree (see the docstring)."""
    runtime = os.path.dirname(os.path.abspath(__file__))
    for name, path in (("tritonize", os.path.dirname(runtime)), ("tritonize.runtime", runtime)):
        package = types.ModuleType(name)
        package.__path__ = [path]
        sys.modules[name] = package


def load_kernel_module(path: str, loaded: dict):
    if path not in loaded:
        spec = importlib.util.spec_from_file_location(f"tritonize_worker_kernel_{len(loaded)}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        loaded[path] = module
    return loaded[path]


def handle(message: dict, loaded: dict) -> str | None:
    """None when the job compiled (or the message was a ping), else what went wrong."""
    if message.get("ping"):
        return None
    try:
        module = load_kernel_module(message["module_path"], loaded)
        compile_kernel(getattr(module, message["kernel_name"]), message["kernel_name"],
                       [tuple(a) for a in message["args"]], dict(message["blocks"]), message["num_warps"],
                       message["num_stages"], tuple(message["target"]), message.get("debug", False))
    except Exception as err:  # noqa: BLE001  (the requesting process compiles again and raises it)
        return f"{type(err).__name__}: {err}"
    return None


def hash_triton_installation() -> None:
    """Triton's cache keys start with a hash of its own installation (compiler sources and the
    libtriton library, hundreds of MB), computed on the first key of a process and then kept
    (functools.lru_cache, which lets concurrent first callers each compute it). Compute it once,
    now; nothing if this Triton has no such function."""
    try:
        from triton.runtime.cache import triton_key
    except ImportError:
        return
    triton_key()


def serve(stdin, stdout) -> None:
    hash_triton_installation()  # before the first job (and before READY)
    stdout.write(READY + "\n")  # jobs now take compile time only
    stdout.flush()
    loaded: dict = {}
    for line in stdin:
        if not line.strip():
            continue
        stdout.write(REPLY + json.dumps({"error": handle(json.loads(line), loaded)}) + "\n")
        stdout.flush()


if __name__ == "__main__":
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]  # this directory's modules are not top-level modules
    stub_packages()
    # The protocol gets its own copy of fd 1; fd 1 itself (Triton's prints, ptxas, C code)
    # goes where stderr goes, so nothing else can land inside a REPLY line.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin, protocol)
