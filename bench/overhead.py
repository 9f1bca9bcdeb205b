"""Launch-bound workloads with and without CUDA graphs (issue 18), every back end in one run (GPU).

    PYTHONPATH=src python3 bench/overhead.py            # about 2 minutes on an H100

Each workload is timed for eager, Inductor (default and mode="reduce-overhead") and tritonize
(default and reduce-overhead), the back ends taking turns over a few rounds (the fastest round's
median counts; bench/common.time_iterations):
  mlp     24 blocks of Linear(256), LayerNorm and GELU at batch 1, float32, inference;
  decode  one-token decode step of a small decoder (4 layers, 256 wide, 4 heads, bf16): the
          token's K and V written into a preallocated cache with index_copy_, attention over the
          cache with a mask of the filled positions; the cache and the position change every call.
  sizes   the mlp stack at batch sizes 1 to 16 in turn (a serving loop: every call another size;
          ms per call averaged over the sizes), for eager, Inductor reduce-overhead (a recording
          per size) and tritonize reduce-overhead without (8 sizes recorded, the rest launched
          plain) and with padding to the buckets
          1, 2, 4, 8, 16 ("tritonize-ro-buckets": five recordings). Also printed: the first pass
          over the sizes after compiling (the recordings' cost).
  adam    one Adam step (torch.optim.Adam, foreach) over the mlp stack's 72 parameters: eager
          against `opt.step` compiled by each back end (with reduce-overhead, a recording whose
          parameters and moments are updated in place).
Each compiled result is checked against eager (and the cache the compiled step wrote against the
cache eager wrote). ms per call; "peak MiB" is torch.cuda.max_memory_allocated over the timing.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

BACKENDS = ["eager", "inductor", "inductor-ro", "tritonize", "tritonize-ro"]


def mlp_stack(device):
    torch.manual_seed(0)
    layers = []
    for _ in range(24):
        layers += [torch.nn.Linear(256, 256), torch.nn.LayerNorm(256), torch.nn.GELU()]
    return torch.nn.Sequential(*layers).to(device).eval()


class DecoderStep(torch.nn.Module):
    """A small decoder's one-token step over a fixed-size KV cache (buffers, updated in place)."""

    def __init__(self, layers=4, dim=256, heads=4, vocab=4096, max_len=256):
        super().__init__()
        self.heads, self.dim = heads, dim
        self.embed = torch.nn.Embedding(vocab, dim)
        self.blocks = torch.nn.ModuleList(
            torch.nn.ModuleDict({"norm1": torch.nn.LayerNorm(dim), "qkv": torch.nn.Linear(dim, 3 * dim),
                                 "out": torch.nn.Linear(dim, dim), "norm2": torch.nn.LayerNorm(dim),
                                 "up": torch.nn.Linear(dim, 4 * dim), "down": torch.nn.Linear(4 * dim, dim)})
            for _ in range(layers))
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)
        for i in range(layers):
            self.register_buffer(f"k{i}", torch.zeros(1, heads, max_len, dim // heads))
            self.register_buffer(f"v{i}", torch.zeros(1, heads, max_len, dim // heads))
        self.register_buffer("slots", torch.arange(max_len))

    def forward(self, token, position):
        x = self.embed(token)  # (1, 1, dim)
        mask = (self.slots <= position).view(1, 1, 1, -1)
        for i, block in enumerate(self.blocks):
            q, k, v = block["qkv"](block["norm1"](x)).view(1, 1, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            cache_k, cache_v = getattr(self, f"k{i}"), getattr(self, f"v{i}")
            cache_k.index_copy_(2, position.view(1), k)
            cache_v.index_copy_(2, position.view(1), v)
            attention = torch.nn.functional.scaled_dot_product_attention(q, cache_k, cache_v, attn_mask=mask)
            x = x + block["out"](attention.transpose(1, 2).reshape(1, 1, self.dim))
            x = x + block["down"](torch.nn.functional.gelu(block["up"](block["norm2"](x))))
        return self.head(self.norm(x))


def run_mlp(names, rounds):
    model = mlp_stack("cuda")
    x = torch.randn(1, 256, device="cuda")
    with torch.no_grad():
        expected = model(x)
        rows = []
        for name in names:
            fn = common.build_backend(name, model)
            ok = all(torch.allclose(fn(x), expected, atol=1e-4, rtol=1e-4) for _ in range(4))
            rows.append((name, fn, ok))
        return _time_rows("mlp", rows, lambda fn: fn(x), rounds)


SIZES = list(range(1, 17))
BUCKETS = (1, 2, 4, 8, 16)


def build(name, model):
    if name == "tritonize-ro-buckets":
        common.import_tritonize()
        return torch.compile(model, backend="tritonize",  # (torch.compile takes mode or options)
                             options={"mode": "reduce-overhead", "cudagraph_buckets": BUCKETS})
    return common.build_backend(name, model)


def run_sizes(names, rounds):
    model = mlp_stack("cuda")
    inputs = [torch.randn(batch, 256, device="cuda") for batch in SIZES]
    names = [n for n in names if n in ("eager", "inductor-ro", "tritonize-ro")] + ["tritonize-ro-buckets"]
    rows, first_pass = [], {}
    with torch.no_grad():
        expected = [model(x) for x in inputs]
        for name in names:
            fn = build(name, model)
            fn(inputs[0]), fn(inputs[1])  # compile: static at the first size, then dynamic
            torch.cuda.synchronize()
            start = time.perf_counter()
            ok = all(torch.allclose(fn(x), e, atol=1e-4, rtol=1e-4) for x, e in zip(inputs, expected))
            torch.cuda.synchronize()
            first_pass[name] = (time.perf_counter() - start) * 1e3
            ok &= all(torch.allclose(fn(x), e, atol=1e-4, rtol=1e-4) for x, e in zip(inputs, expected))
            rows.append((name, fn, ok))
        def one_pass(fn):  # a timed "call" is a pass over every size (a median of single calls
            for x in inputs:  # would hide the slow sizes)
                fn(x)

        results = [(w, name, ms / len(inputs), peak, ok) for w, name, ms, peak, ok
                   in _time_rows("sizes", rows, one_pass, rounds)]
    print("first pass over sizes 1-16 after compiling (ms, recordings included): "
          + ", ".join(f"{name} {ms:.1f}" for name, ms in first_pass.items()))
    return results


def run_adam(names, rounds):
    """Each back end steps its own copy of the model from the same state, with the same gradients;
    the compiled result is compared with eager's after the checking steps."""
    import copy

    model = mlp_stack("cuda")
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-2
    reference = copy.deepcopy(model)
    reference_opt = torch.optim.Adam(reference.parameters(), lr=1e-3)
    for _ in range(4):
        reference_opt.step()
    rows = []
    for name in names:
        copy_of = copy.deepcopy(model)
        opt = torch.optim.Adam(copy_of.parameters(), lr=1e-3)
        fn = opt.step if name == "eager" else common.build_backend(name, opt.step)
        for _ in range(4):
            fn()
        ok = all(torch.allclose(p, q, atol=1e-5, rtol=1e-4) for p, q in zip(copy_of.parameters(), reference.parameters()))
        rows.append((name, fn, ok))
    return _time_rows("adam", rows, lambda fn: fn(), rounds)


def run_decode(names, rounds):
    torch.manual_seed(0)
    reference = DecoderStep().cuda().to(torch.bfloat16).eval()
    rows = []
    with torch.no_grad():
        for name in names:
            model = DecoderStep().cuda().to(torch.bfloat16).eval()
            model.load_state_dict(reference.state_dict())
            fn = common.build_backend(name, model)
            ok = True
            for step in range(6):
                token, position = torch.tensor([[step + 3]], device="cuda"), torch.tensor(step, device="cuda")
                ok &= torch.allclose(fn(token, position).float(), reference(token, position).float(), atol=3e-2, rtol=3e-2)
            ok &= all(torch.allclose(getattr(model, f"{kv}{i}").float(), getattr(reference, f"{kv}{i}").float(),
                                     atol=3e-2, rtol=3e-2) for kv in "kv" for i in range(4))
            for i in range(4):  # every back end starts from the same cache
                getattr(reference, f"k{i}").zero_(), getattr(reference, f"v{i}").zero_()
            rows.append((name, fn, ok))
        state = {"step": 0}

        def step_of(fn):
            state["step"] = (state["step"] + 1) % 200
            return fn(torch.tensor([[7]], device="cuda"), torch.tensor(state["step"], device="cuda"))

        return _time_rows("decode", rows, step_of, rounds)


def _time_rows(workload, rows, call, rounds):
    times = {name: [] for name, _, _ in rows}
    peaks = {}
    for _ in range(rounds):
        for name, fn, _ in rows:
            torch.cuda.reset_peak_memory_stats()
            times[name].append(common.time_iterations(lambda: call(fn), "cuda", warmup=10, iters=50))
            peaks[name] = torch.cuda.max_memory_allocated() / 2**20
    return [(workload, name, min(times[name]) * 1e3, peaks[name], ok) for name, _, ok in rows]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--workloads", default="mlp,decode,sizes,adam")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    names = [n for n in args.backends.split(",") if n]
    print(common.environment_line("cuda"))
    results = []
    for workload in [w for w in args.workloads.split(",") if w]:
        try:
            workloads = {"mlp": run_mlp, "decode": run_decode, "sizes": run_sizes, "adam": run_adam}
            results += workloads[workload](names, args.rounds)
        except Exception as exc:  # a row that says so, never a silent gap
            results.append((workload, "all", float("nan"), float("nan"), common.describe_error(exc)))
    eager = {w: ms for w, name, ms, _, _ in results if name == "eager"}
    headers = ["workload", "backend", "ms/call", "x eager", "peak MiB", "matches eager"]
    rows = [(w, name, f"{ms:.3f}", f"{eager.get(w, float('nan')) / ms:.2f}", f"{peak:.1f}", ok)
            for w, name, ms, peak, ok in results]
    print(common.format_markdown(headers, rows))


if __name__ == "__main__":
    main()
