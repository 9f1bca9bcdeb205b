"""Scratch: which attention ops reach tritonize for BERT / GPT-2 on CUDA (Dynamo graph and aten graph)."""
import collections, os, sys
import torch, torch.nn.functional as F
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_zoo
from models import Workload
import tritonize
from tritonize.backend import tritonize_backend

def spy(gm, example_inputs):
    ops = collections.Counter(str(n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method"))
    print("  dynamo graph attention-ish ops:", {k: v for k, v in ops.items() if any(s in k for s in ("attention", "softmax", "matmul", "bmm", "baddbmm"))})
    for n in gm.graph.nodes:
        if "scaled_dot" in str(n.target):
            print("   sdpa node:", n.format_node()[:300])
            for a in list(n.args) + list(n.kwargs.values()):
                if isinstance(a, torch.fx.Node) and "example_value" in a.meta:
                    v = a.meta["example_value"]; print("     arg", a.name, tuple(v.shape), v.stride(), v.dtype)
            break
    return tritonize_backend(gm, example_inputs)

for name in sys.argv[1:]:
    torch._dynamo.reset()
    spec = model_zoo.SPECS_BY_NAME[name]
    w = Workload(spec, "inference", False, "cuda")
    f = torch.compile(w.forward_fn(), backend=spy)
    print("==", name)
    with torch.no_grad():
        report = tritonize.explain(w.forward_fn(), *w.inputs)
        f(*w.inputs)
    print("  externs:", dict(report.externs), "fallbacks:", dict(report.fallbacks))
    for k in report.kernels:
        if any("amax" in n or "softmax" in n for n in k.fused_nodes):
            print("  softmax kernel:", k.name, k.fused_nodes[:12])

torch._dynamo.reset()
q = torch.randn(8, 12, 512, 64, device="cuda", dtype=torch.bfloat16)
for label, mask in [("none", None), ("bf16 [B,1,1,S] expanded", torch.zeros(8, 1, 1, 512, device="cuda", dtype=torch.bfloat16).expand(8, 1, 512, 512)),
                    ("bf16 [B,1,S,S]", torch.zeros(8, 1, 512, 512, device="cuda", dtype=torch.bfloat16)), ("bool [B,1,S,S]", torch.ones(8, 1, 512, 512, device="cuda", dtype=torch.bool))]:
    torch._dynamo.reset()
    r = tritonize.explain(lambda q, m: F.scaled_dot_product_attention(q, q, q, attn_mask=m), q, mask)
    print("sdpa mask", label, "externs", dict(r.externs), "kernels", len(r.kernels))
