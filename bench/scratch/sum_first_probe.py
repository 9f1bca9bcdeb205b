"""Probe: why sum_first (x.sum(0), 16384 x 4096 bf16) is slower with dynamic=True than static.
Compiles both, then times each generated partial kernel alone at several launch configs.
    PYTHONPATH=src python3 bench/scratch/sum_first_probe.py"""
import importlib.util
import os

import tempfile

import torch
import triton

import tritonize

x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16)


def sum_first(t):
    return t.sum(0)


def load(source, name):
    path = os.path.join(tempfile.mkdtemp(), f"{name}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


CONFIGS = [(64, 256, 8), (64, 128, 8), (32, 256, 4), (64, 64, 4), (128, 128, 8), (32, 512, 8), (64, 512, 8)]
for dynamic in (False, True):
    out, report = tritonize.run_and_explain(sum_first, x, dynamic=dynamic)
    compiled = torch.compile(sum_first, backend="tritonize", dynamic=dynamic)
    compiled(x)
    total = triton.testing.do_bench(lambda: compiled(x))
    kernels = report.kernels
    print(f"=== dynamic={dynamic}: whole call {total * 1e3:.1f} us; kernels {[k.kind for k in kernels]}")
    first = kernels[0]
    print(first.source)
    fn = load(first.source, first.name)
    partial = torch.empty(32, 4096, device="cuda", dtype=torch.float32)
    for xblock, rblock, warps in CONFIGS[:2]:
        grid = (triton.cdiv(32 * 4096, xblock),)
        if dynamic:
            def launch():
                fn[grid](x, partial, 4096, 16384, XBLOCK=xblock, RBLOCK=rblock, PERSISTENT=False, PDL=False,
                         num_warps=warps)
        else:
            def launch():
                fn[grid](x, partial, XBLOCK=xblock, RBLOCK=rblock, PDL=False, num_warps=warps)
        launch()
        torch.testing.assert_close(partial.sum(0), x.float().sum(0), rtol=1e-3, atol=1e-1)
        print(f"  XBLOCK={xblock} RBLOCK={rblock} warps={warps}: {triton.testing.do_bench(launch) * 1e3:.1f} us",
              flush=True)

# variants of the dynamic kernel's looped body, each dropping one difference from the static one
dynamic_source = kernels[0].source
VARIANTS = {
    "as generated": {},
    "no xmask": {"xmask & rmask": "rmask"},
    "xmask | True": {"xmask = xindex < xnumel": "xmask = (xindex < xnumel) | True"},
    "xmask | EVEN_X (constexpr True)": {"xmask = xindex < xnumel": "xmask = (xindex < xnumel) | EVEN_X",
                                        "PDL: tl.constexpr)": "PDL: tl.constexpr, EVEN_X: tl.constexpr)"},
}
for label, edits in VARIANTS.items():
    source = dynamic_source
    for old, new in edits.items():
        assert old in source, (label, old)
        source = source.replace(old, new)
    fn = load(source, kernels[0].name)
    for xblock, rblock, warps in CONFIGS[:2]:
        grid = (triton.cdiv(32 * 4096, xblock),)

        def launch():
            fn[grid](x, partial, 4096, 16384, XBLOCK=xblock, RBLOCK=rblock, PERSISTENT=False,
                     PDL=False, num_warps=warps,
                     **({"EVEN_X": True} if "EVEN_X" in source else {}))
        launch()
        torch.testing.assert_close(partial.sum(0), x.float().sum(0), rtol=1e-3, atol=1e-1)
        print(f"  {label}: XBLOCK={xblock} RBLOCK={rblock} warps={warps}: "
              f"{triton.testing.do_bench(launch) * 1e3:.1f} us", flush=True)
