"""Probe: time variants of llama's first RMSNorm kernel (dynamic vs static differences)."""
import os, sys, tempfile, importlib.util, torch, triton
SRC = open(sys.argv[1]).read()
VARIANTS = {
    "dynamic as generated": SRC,
    "eps constant": SRC.replace("tmp12 = tl.full([], in_scalar0, tl.float64)", "tmp12 = tl.full([], 1e-6, tl.float64)"),
    "eps fp32 arg": SRC.replace("tl.full([], in_scalar0, tl.float64)", "tl.full([], in_scalar0, tl.float32)"),
    "xnumel constant": SRC.replace("xnumel = ks0 * ks1", "xnumel = 768"),
    "no checks": SRC.replace("checks.check_index_masked", "pass  # "),
}
x = torch.randint(0, 32000, (8, 96), device="cuda")
table = torch.randn(32000, 1024, device="cuda", dtype=torch.bfloat16)
weight = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
out = torch.empty(768, 1024, device="cuda", dtype=torch.bfloat16)
tmp = tempfile.mkdtemp()
for i, (label, src) in enumerate(VARIANTS.items()):
    path = os.path.join(tmp, f"variant_{i}.py")
    open(path, "w").write(src)
    spec = importlib.util.spec_from_file_location(f"variant_{i}", path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    kernel = getattr(mod, [n for n in dir(mod) if n.startswith("triton_red")][0])
    for xb, rb, nw in ((64, 256, 8), (1, 1024, 4), (4, 512, 4), (8, 256, 8)):
        grid = (triton.cdiv(768, xb),)
        run = lambda: kernel[grid](x, table, weight, 1e-6, out, 8, 96, XBLOCK=xb, RBLOCK=rb, PDL=False, num_warps=nw, num_stages=1)
        run(); torch.cuda.synchronize()
        us = triton.testing.do_bench(run, warmup=20, rep=100) * 1e3
        print(f"{label:24s} XBLOCK={xb:3d} RBLOCK={rb:4d} warps={nw}: {us:7.1f} us")
    if i == 0:
        asm = kernel.cache[0] if hasattr(kernel, "cache") else None
