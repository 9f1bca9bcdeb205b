"""How long one generated kernel takes to compile, per launch config, serially.

    python3 bench/kernel_compile_time.py KERNEL.py CONFIG [CONFIG ...] [--pointer-types bf16,fp32,...]

CONFIG is XBLOCK/WARPS for 1-D kernels, YBLOCKxXBLOCK/WARPS for 2-D tiles.

KERNEL.py is a kernel file from TRITONIZE_DEBUG_DIR (`3_kernel_*.py`). Each config is compiled
for the current GPU (sm_90 when there is none) into a fresh Triton cache, after one throw-away
compile that pays Triton's one-time costs. Reported per config: triton.compile seconds, the host
launcher's build (Triton 3.6 builds a C module per kernel signature) and the PTX size.
"""
import argparse
import os
import sys
import tempfile
import time


def load_kernel(path):
    from tritonize.runtime.loader import load_source_module

    with open(path) as source:
        module = load_source_module(source.read(), "timed_kernel", interpret=False)
    name = next(n for n in dir(module) if n.startswith("triton_"))
    return name, getattr(module, name)


def target():
    try:
        from tritonize.runtime.triton_compile import current_target
        return current_target()
    except Exception:  # noqa: BLE001  (no GPU: compile for an H100)
        return ("cuda", 90, 32)


def parse_config(text):
    blocks, warps = text.split("/")
    if "x" in blocks:
        y, x = blocks.split("x")
        return {"YBLOCK": int(y), "XBLOCK": int(x)}, int(warps)
    return {"XBLOCK": int(blocks)}, int(warps)


def has_gpu():
    import torch
    return torch.cuda.is_available()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kernel")
    parser.add_argument("configs", nargs="+", help="XBLOCK/num_warps or YBLOCKxXBLOCK/num_warps")
    parser.add_argument("--pointer-types", default="bf16",
                        help="element type of each pointer, comma-separated (the last one repeats)")
    args = parser.parse_args()
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
    from tritonize.runtime.compile_worker import compile_kernel

    name, fn = load_kernel(args.kernel)
    types = args.pointer_types.split(",")
    params = [p for p in fn.arg_names if p not in ("XBLOCK", "YBLOCK", "RBLOCK", "PDL")]
    pointers = [(types[min(i, len(types) - 1)], True) for i, _ in enumerate(params)]
    where = target()
    configs = [parse_config(c) for c in args.configs]
    tiled = "YBLOCK" in fn.arg_names
    for index, (blocks, warps) in enumerate([({"YBLOCK": 2, "XBLOCK": 16} if tiled else {"XBLOCK": 32}, 1)] + configs):
        start = time.perf_counter()  # the first: a config not measured, for Triton's one-time costs
        compiled = compile_kernel(fn, name, pointers, dict(blocks, PDL=1), warps, 1, where)
        compile_s = time.perf_counter() - start
        launcher_s = float("nan")
        if has_gpu():
            try:
                from tritonize.runtime.fast_launch import build_host_launcher
                start = time.perf_counter()
                build_host_launcher(compiled)
                launcher_s = time.perf_counter() - start
            except Exception as err:  # noqa: BLE001
                print("launcher:", err, file=sys.stderr)
        label = "warm-up" if index == 0 else f"{blocks} warps {warps}"
        print(f"{name} {label}: compile {compile_s:.2f} s, launcher {launcher_s:.2f} s, "
              f"ptx {len(compiled.asm['ptx'])} chars, regs {getattr(compiled, 'n_regs', '?')}")


if __name__ == "__main__":
    main()
