"""Print the Triton kernels Inductor and tritonize generate for kernel-suite cases, side by side.

    PYTHONPATH=src python3 bench/kernel_sources.py --cases sum_last,sum_first --out /tmp/sources

For each case it writes `<case>.inductor.py` (Inductor's whole output module: kernels with their
heuristics decorators, and the wrapper with grids) and `<case>.tritonize.py` (our kernels, each
with the launch config the heuristics picked, and our wrapper) under --out, and prints a one-line
summary per case. Used to find why one back end's kernel is faster than the other's on a case.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import kernels  # noqa: E402


def inductor_source(case, inputs) -> str:
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    compiled = torch.compile(case.fn, backend="inductor")
    _, codes = run_and_get_code(compiled, *inputs)
    return "\n\n# ---- next module ----\n\n".join(codes)


def launch_configs() -> dict:
    """Kernel name -> the launch config its GeneratedKernel picked (the loaded wrappers hold
    them; a bench tool may look them up through the garbage collector)."""
    import gc

    from tritonize.runtime.launcher import GeneratedKernel

    return {obj.name: obj.config for obj in gc.get_objects() if type(obj) is GeneratedKernel}


def tritonize_source(case, inputs) -> str:
    tritonize = common.import_tritonize()
    torch._dynamo.reset()
    report = tritonize.explain(case.fn, *inputs)
    configs = launch_configs()
    parts = []
    for kernel in report.kernels:
        parts.append(f"# kernel {kernel.name} ({kernel.kind}) config={configs.get(kernel.name)}\n"
                     f"{kernel.source}")
    parts.append("# ---- wrapper ----\n" + report.wrapper)
    return "\n\n".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", required=True, help="comma-separated kernel-suite case names")
    parser.add_argument("--out", required=True, help="directory for the sources")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for name in args.cases.split(","):
        case = kernels.CASES_BY_NAME[name]
        torch.manual_seed(0)
        inputs = case.make_inputs(args.device, torch.bfloat16, args.small)
        for backend, dump in (("inductor", inductor_source), ("tritonize", tritonize_source)):
            try:
                text = dump(case, inputs)
            except Exception as exc:  # one back end failing must not hide the other's source
                text = f"# fails: {common.describe_error(exc)}"
            path = os.path.join(args.out, f"{name}.{backend}.py")
            with open(path, "w") as handle:
                handle.write(text)
            print(f"{name}: {backend} -> {path} ({len(text.splitlines())} lines)")


if __name__ == "__main__":
    main()
