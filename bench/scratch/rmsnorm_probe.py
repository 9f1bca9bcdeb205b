"""Probe: why the first RMSNorm kernel of llama (embedding + mean of squares) is 8x slower with
dynamic=True than static on the GPU. Logs autotune choices and generic-path launches."""
import logging, sys, torch
sys.path.insert(0, "bench")
from model_zoo import SPECS_BY_NAME
import tritonize
from tritonize.runtime import launcher
from tritonize.runtime.heuristics import candidates

logging.basicConfig(level=logging.WARNING, format="%(message)s")
logging.getLogger("tritonize.autotune").setLevel(logging.DEBUG)
generic_calls = {}
orig_generic = launcher.GpuKernel._generic
def generic(self, *args):
    generic_calls[self.name] = generic_calls.get(self.name, 0) + 1
    return orig_generic(self, *args)
launcher.GpuKernel._generic = generic
orig_build = launcher.GpuKernel._build
def build(self, spec, args, bucket=None):
    out = orig_build(self, spec, args, bucket)
    if "embedding" in self.name:
        print("BUILD", self.name, "bucket", bucket, "config", self.config, "spec", spec)
        shape = self.shape if bucket is None else self.bucket_shape(bucket)
        print("   shape", shape, "candidates", [str(c) for c in self._shape_and_configs(bucket)[1]])
    return out
launcher.GpuKernel._build = build
from tritonize.runtime import autotune
orig_select = autotune.select
def select(name, shape, configs, *a, **k):
    sel = orig_select(name, shape, configs, *a, **k)
    if "embedding" in name:
        print("SELECT", name, sel.reason, {str(c): round(t * 1e6, 1) for c, t in sel.timings.items()})
    return sel
autotune.select = select

torch.manual_seed(0)
model = SPECS_BY_NAME["llama"].build(False).eval().to(device="cuda", dtype=torch.bfloat16)
for dynamic in (False, True):
    torch._dynamo.reset()
    fn = torch.compile(model, backend="tritonize", dynamic=dynamic)
    x = torch.randint(0, 32000, (8, 96), device="cuda")
    with torch.no_grad():
        for _ in range(3):
            fn(x)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                fn(x)
            torch.cuda.synchronize()
    for e in prof.key_averages():
        if "embedding" in e.key:
            print("dynamic" if dynamic else "static", e.key, f"{e.device_time_total / e.count:.1f} us x{e.count}")
    print("generic launches", generic_calls); generic_calls.clear()
