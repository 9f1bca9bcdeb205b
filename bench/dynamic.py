"""Dynamic shapes against static compiles, eager and Inductor, in one run (issue 17).

    PYTHONPATH=src python bench/dynamic.py [--models gpt2,bert,llama] [--lengths 96,131,200,256,384]
        [--batch 8] [--dtype bfloat16] [--device cuda] [--small] [--auto-batches 2,4,6,8,12]
        [--generate 64] [--train-lengths 96,131,200] [--profile 131 [--host-profile 30]]
        [--markdown out.md]     (an empty --lengths or --auto-batches skips that part)

(a) Each model, inference, at every sequence length: eager; Inductor with dynamic=True;
    tritonize compiled for that length alone (static: one compile per length), tritonize with
    dynamic=True (one compile for all) and plain torch.compile (auto: static at the first
    length, then Dynamo's automatic dynamic, which keeps float attributes specialized). The
    five are timed in turns, round after round (each compile has a back end object of its own,
    so Dynamo keeps them apart): milliseconds per step, and how many graphs ran through aten as
    a whole (tritonize's warnings say so).
    A sixth column compiles tritonize with dynamic=True under Dynamo's specialize_float (float
    attributes constant, a cheap guard each; floats_specialized). Two more columns: what Dynamo
    itself costs a call under dynamic=True beyond a static compile (a back end that replays its
    first outputs, timed both ways: its guards, above all those of the float attributes that
    AOTAutograd had specialized, paid by every back end), and the dynamic compile's time less
    that cost, against the static compile. The notes give each dynamic graph's float64 inputs.
(b) Automatic dynamic: plain torch.compile (no dynamic=) called with several batch sizes: how
    many compiles, and whether the second one was generated or ran through aten.
(c) With --generate N: transformers' generate() of N new tokens with its default (growing)
    cache (--generate-cache none: without one, the whole sequence at every step), tokens per
    second per back end (the fastest of three runs after a first one); --generate-profile K
    profiles the compiled back ends' runs (kernels, cProfile top K).
(d) With --train-lengths: a training step (forward, loss, backward) of each model but BERT at
    those lengths, dynamic=True: ms per step, and each back end's largest gradient difference
    from eager's.
--profile N: tritonize static and dynamic at length N (the dynamic compile first called at the
    first --lengths entry, as in (a)): wall ms per step against the GPU's kernel time per step
    (torch.profiler), and the kernels that take longest, to tell a host-bound step from slow
    kernels.

--small builds tiny models for a CPU smoke run (tests/test_bench_smoke.py-style); the figures
that count come from the GPU.
"""
import argparse
import contextlib
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import dynamo_graph_count, format_markdown, import_tritonize, synchronize, time_iterations  # noqa: E402
from model_zoo import SPECS_BY_NAME  # noqa: E402

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


@contextlib.contextmanager
def aten_warnings(found: list):
    """Collects tritonize's warnings that a whole graph ran through aten."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    found += [str(w.message) for w in caught if "runs through aten" in str(w.message)]


def build_model(name, args):
    torch.manual_seed(0)
    model = SPECS_BY_NAME[name].build(args.small).eval()
    return model.to(device=args.device, dtype=DTYPES[args.dtype])


def tokens(model, batch, length, device):
    vocab = model.config.vocab_size
    return torch.randint(0, vocab, (batch, length), device=device)


def compiled(model, backend, dynamic):
    torch._dynamo.reset()
    if backend == "eager":
        return model
    return torch.compile(model, backend=backend, dynamic=dynamic)


def time_step(fn, x, device):
    """ms per call: the fastest of 5 rounds' medians of 10 calls (the GPU host has slow spells)."""
    with torch.no_grad():
        return time_iterations(lambda: fn(x), device, warmup=3, iters=10, rounds=5, pause_s=0.1)


def own_backend(name: str):
    """A back end object of its own wrapping `name`: Dynamo's cache entries check the back end
    they were compiled by, so static and dynamic compiles of one model live side by side and
    can be timed in turns."""
    from torch._dynamo.backends.registry import lookup_backend

    inner = lookup_backend(name)

    def backend(gm, example_inputs, **kwargs):
        backend.float_inputs.append(float_inputs(gm))
        return inner(gm, example_inputs, **kwargs)
    backend.float_inputs = []
    return backend


def float_inputs(gm) -> int:
    """Float attributes a Dynamo graph takes as float64 tensors, which Dynamo makes at every call
    (dynamic=True; AOTAutograd's scalar pass restarts Dynamo to specialize those it cannot keep)."""
    return sum(bool(getattr(node.meta.get("grapharg"), "pass_arg_as_tensor", False))
               for node in gm.graph.nodes if node.op == "placeholder")


def replaying_backend():
    """A back end that runs each graph once and then returns those outputs at every call: timed,
    it measures what Dynamo itself costs a call (its guards; under dynamic=True above all those of
    the float attributes AOTAutograd had specialized, see floats_specialized), which every back
    end pays."""
    def backend(gm, example_inputs, **kwargs):
        backend.float_inputs.append(float_inputs(gm))
        outputs = []

        def run(*args):
            if not outputs:
                outputs.append(gm(*args))
            return outputs[0]
        return run
    backend.float_inputs = []
    return backend


def interleaved_ms(fns: dict, x, device, rounds=5, iters=10) -> dict:
    """{column: ms per call}: each round times every column in turn (the median of `iters`
    calls), so a slow spell of the host falls on all columns alike; the fastest round counts."""
    best = {column: float("inf") for column in fns}
    with torch.no_grad():
        for fn in fns.values():
            for _ in range(3):
                fn(x)
        synchronize(device)
        for _ in range(rounds):
            for column, fn in fns.items():
                seconds = time_iterations(lambda: fn(x), device, warmup=1, iters=iters, rounds=1)
                best[column] = min(best[column], seconds * 1e3)
    return best


def sequence_lengths(name, args):
    """(a): per back end, ms per step at every length, the columns timed in turns; how many
    graphs were compiled and ran through aten."""
    model = build_model(name, args)
    torch._dynamo.reset()
    inputs = {n: tokens(model, args.batch, n, args.device) for n in args.lengths}
    backends = {"inductor dyn": own_backend("inductor"), "tritonize dyn": own_backend("tritonize"),
                "tritonize dyn, floats specialized": own_backend("tritonize"), "dynamo dyn": replaying_backend()}
    inductor = torch.compile(model, backend=backends["inductor dyn"], dynamic=True)
    tritonize_dynamic = torch.compile(model, backend=backends["tritonize dyn"], dynamic=True)
    # plain torch.compile: static at the first length, then Dynamo's automatic dynamic, which
    # keeps float attributes specialized (a cheap guard each)
    tritonize_auto = torch.compile(model, backend=own_backend("tritonize"))
    replay_dynamic = torch.compile(model, backend=backends["dynamo dyn"], dynamic=True)
    columns = ("eager", "inductor dynamic", "tritonize static", "tritonize dynamic", "tritonize auto",
               "tritonize dynamic, floats specialized")
    times, found = {}, []
    start_graphs = dynamo_graph_count()
    with aten_warnings(found):
        floats_static = floats_specialized(model, backends["tritonize dyn, floats specialized"],
                                           inputs[args.lengths[0]])
        for n, x in inputs.items():
            static = torch.compile(model, backend=own_backend("tritonize"), dynamic=False)  # this length alone
            replay_static = torch.compile(model, backend=replaying_backend(), dynamic=False)
            fns = dict(zip(columns + ("dynamo static", "dynamo dynamic"),
                           (model, inductor, static, tritonize_dynamic, tritonize_auto, floats_static,
                            replay_static, replay_dynamic)))
            times.update({(column, n): ms for column, ms in interleaved_ms(fns, x, args.device).items()})
    for reason in sorted(set(found)):
        print(f"{name}: {reason[:400]}")
    rows = []
    for n in args.lengths:
        static, dynamic = times[("tritonize static", n)], times[("tritonize dynamic", n)]
        inductor, auto = times[("inductor dynamic", n)], times[("tritonize auto", n)]
        tax = times[("dynamo dynamic", n)] - times[("dynamo static", n)]
        floats = times[("tritonize dynamic, floats specialized", n)]
        rows.append([name, n] + [f"{times[(c, n)]:.3f}" for c in columns] +
                    [f"{dynamic / static:.2f}", f"{dynamic / inductor:.2f}", f"{auto / static:.2f}",
                     f"{floats / static:.2f}", f"{tax * 1e3:.0f}", f"{(dynamic - tax) / static:.2f}"])
    notes = (f"{dynamo_graph_count() - start_graphs} graphs compiled in all "
             f"({len(args.lengths)} static ones, one dynamic one per back end and two for "
             f"tritonize auto if none broke, and the replaying back end's), "
             f"{len(found)} through aten; float64 inputs of each dynamic graph as compiled: "
             + ", ".join(f"{column} {backend.float_inputs}" for column, backend in backends.items()))
    return rows, notes


def floats_specialized(model, backend, x):
    """tritonize with dynamic=True, compiled (on its first call, here) under Dynamo's
    specialize_float: float attributes (eps, dropout's p, the attention's scaling) are constants
    with a cheap guard each. Under dynamic=True Dynamo otherwise traces them as symbols, and once
    AOTAutograd's scalar pass has them specialized (it restarts Dynamo), it still checks each one
    a call through its Python shape guard and a float64 tensor made from it: the larger part of
    Dynamo's own cost of dynamic=True, which every back end pays. (A recompile at a later
    length would trace without the setting; none is expected under dynamic=True.)"""
    fn = torch.compile(model, backend=backend, dynamic=True)
    with torch._dynamo.config.patch(specialize_float=True), torch.no_grad():
        fn(x)
    return fn


def automatic_dynamic(name, args):
    """(b): plain torch.compile over several batch sizes."""
    model = build_model(name, args)
    fn = compiled(model, "tritonize", None)
    found: list = []
    start = dynamo_graph_count()
    with aten_warnings(found), torch.no_grad():
        for batch in args.auto_batches:
            x = tokens(model, batch, args.lengths[0], args.device)
            torch.testing.assert_close(fn(x).logits.float(), model(x).logits.float(), atol=0.1, rtol=0.05)
    return [name, ",".join(map(str, args.auto_batches)), dynamo_graph_count() - start, len(found),
            found[0][:120] if found else ""]


def generate_rate(name, args, use_cache=True):
    """(c): tokens per second of generate() with the default (growing) cache, per back end;
    use_cache=False recomputes the whole sequence at every step (model_zoo's models are built
    without a cache, for the inference table)."""
    model = build_model(name, args)
    model.generation_config.pad_token_id = model.generation_config.eos_token_id
    model.config.use_cache = model.generation_config.use_cache = use_cache
    prompt = tokens(model, 4, 16, args.device)
    row = [name, args.generate, "default" if use_cache else "none"]
    forward = model.forward
    for backend in ("eager", "inductor", "tritonize"):
        torch._dynamo.reset()
        model.forward = forward if backend == "eager" else torch.compile(forward, backend=backend)
        found: list = []
        with aten_warnings(found), torch.no_grad():
            run = lambda: model.generate(prompt, max_new_tokens=args.generate, min_new_tokens=args.generate,
                                         do_sample=False)
            run()
            seconds = min(_timed(run, args.device) for _ in range(3))  # the host has slow spells
            if backend != "eager" and args.generate_profile:
                print("\n".join(generate_profile(run, args, f"{name} {backend} cache {row[2]}")), flush=True)
        row.append(f"{prompt.shape[0] * args.generate / seconds:.0f}" + (f" ({len(found)} aten)" if found else ""))
    model.forward = forward
    return row


def _timed(run, device) -> float:
    synchronize(device)
    start = time.perf_counter()
    run()
    synchronize(device)
    return time.perf_counter() - start


def generate_profile(run, args, title: str) -> list:
    """--generate-profile: one generate() under torch.profiler (GPU kernel time against wall
    time) and under cProfile (where the host's time goes, by own time)."""
    import cProfile
    import io
    import pstats

    from torch.profiler import ProfilerActivity, profile

    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA if args.device == "cuda" else ProfilerActivity.CPU]) as prof:
        run()
        synchronize(args.device)
    wall = time.perf_counter() - start
    kernels: dict = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            kernels[event.name] = kernels.get(event.name, 0.0) + event.device_time
    lines = [f"{title}: wall {wall * 1e3:.1f} ms (profiled), kernels {sum(kernels.values()) / 1e3:.1f} ms, "
             f"{sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)} launches"]
    lines += [f"    {us / 1e3:8.2f} ms  {kernel[:100]}" for kernel, us in sorted(kernels.items(), key=lambda kv: -kv[1])[:12]]
    lines += _wrapper_share(run, args) if "tritonize" in title else []
    profiler = cProfile.Profile()
    profiler.enable()
    run()
    synchronize(args.device)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(args.generate_profile)
    return lines + ["    " + line for line in text.getvalue().splitlines() if line.strip()][-args.generate_profile - 2:]


def training_lengths(name, args):
    """(d): a training step (forward, loss, backward) at every length, dynamic=True: ms per step
    per back end, and the largest gradient difference from eager's (relative to its largest)."""
    model = build_model(name, args).train()
    torch.manual_seed(0)
    inputs = {n: tokens(model, args.batch, n, args.device) for n in args.train_lengths}
    rows = {n: [name, n] for n in args.train_lengths}
    reference = {}
    for backend in ("eager", "inductor", "tritonize"):
        fn = compiled(model, backend, True)
        for n, x in inputs.items():
            def step():
                model.zero_grad(set_to_none=True)
                fn(x, labels=x).loss.backward()
            start = time.perf_counter()
            step()
            synchronize(args.device)
            print(f"  (d) {name} {backend} seq {n}: first step {time.perf_counter() - start:.1f} s",
                  file=sys.stderr, flush=True)
            grads = [p.grad.float() for p in model.parameters() if p.grad is not None]
            if backend == "eager":
                reference[n] = grads
                error = 0.0
            else:
                error = max(float((g - r).abs().max() / r.abs().max().clamp_min(1e-6)) for g, r in zip(grads, reference[n]))
            ms = time_iterations(step, args.device, warmup=2, iters=5, rounds=3, pause_s=0.1) * 1e3
            rows[n] += [f"{ms:.3f}"] + ([] if backend == "eager" else [f"{error:.3f}"])
    model.zero_grad(set_to_none=True)
    return list(rows.values())


def kernel_times(fn, x, device, steps=5):
    """{kernel name: microseconds per step} over `steps` calls, through torch.profiler."""
    with torch.no_grad():
        return step_kernel_times(lambda: fn(x), device, steps)


def step_kernel_times(step, device, steps=5) -> dict:
    """{kernel name: (microseconds, launches) per step} of `step()` (profiled after one call)."""
    from torch.profiler import ProfilerActivity, profile

    if device != "cuda":
        return {}
    step()
    synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        synchronize(device)
    totals: dict = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            us, launches = totals.get(event.name, (0.0, 0))
            totals[event.name] = (us + event.device_time / steps, launches + 1 / steps)
    return totals


def training_profile(name, args) -> list:
    """--train-profile N: Inductor's and tritonize's dynamic training steps at length N (compiled
    at the first of --train-lengths, as (d) runs them), timed in turns round after round; then
    each one's kernels (time, launches) and, with --host-profile, where tritonize's host time goes."""
    model = build_model(name, args).train()
    n, first = args.train_profile, (args.train_lengths or [args.train_profile])[0]
    torch._dynamo.reset()
    steps = {}
    for backend in ("eager", "inductor", "tritonize"):
        fn = model if backend == "eager" else torch.compile(model, backend=own_backend(backend), dynamic=True)

        def step(x, fn=fn):
            model.zero_grad(set_to_none=True)
            fn(x, labels=x).loss.backward()
        step(tokens(model, args.batch, first, args.device))
        steps[backend] = step
    x = tokens(model, args.batch, n, args.device)
    best = {backend: float("inf") for backend in steps}
    for _ in range(5):
        for backend, step in steps.items():
            ms = time_iterations(lambda: step(x), args.device, warmup=2, iters=5, rounds=1) * 1e3
            best[backend] = min(best[backend], ms)
    lines = [f"{name} training seq {n}, timed in turns: " + ", ".join(f"{b} {ms:.3f} ms" for b, ms in best.items())]
    for backend in ("inductor", "tritonize"):
        kernels = step_kernel_times(lambda: steps[backend](x), args.device)
        gpu = sum(us for us, _ in kernels.values()) / 1e3
        launches = sum(count for _, count in kernels.values())
        lines.append(f"{name} training seq {n} {backend}: kernels {gpu:.3f} ms, {launches:.0f} launches, "
                     f"{len(kernels)} distinct kernels")
        for kernel, (us, count) in sorted(kernels.items(), key=lambda kv: -kv[1][0])[:args.profile_top]:
            lines.append(f"    {us:9.1f} us  x{count:4.1f}  {kernel[:100]}")
    if args.host_profile:
        lines += host_profile(lambda _: steps["tritonize"](x), x, args, grad=True)
    model.zero_grad(set_to_none=True)
    return lines


def profile_length(name, args):
    """--profile: wall time against kernel time, tritonize static and dynamic and Inductor dynamic,
    at one length."""
    model = build_model(name, args)
    n = args.profile
    x = tokens(model, args.batch, n, args.device)
    lines = []
    for column, backend, dynamic in (("static", "tritonize", False), ("dynamic", "tritonize", True),
                                     ("Inductor dynamic", "inductor", True)):
        fn = compiled(model, backend, dynamic)
        with torch.no_grad():
            if dynamic and args.lengths and args.lengths[0] != n:
                fn(tokens(model, args.batch, args.lengths[0], args.device))  # configs chosen there, as in (a)
        wall = time_step(fn, x, args.device) * 1e3
        kernels = kernel_times(fn, x, args.device)
        gpu = sum(us for us, _ in kernels.values()) / 1e3
        lines.append(f"{name} seq {n} {column}: wall {wall:.3f} ms, kernels {gpu:.3f} ms, "
                     f"{len(kernels)} distinct kernels")
        for kernel, (us, _) in sorted(kernels.items(), key=lambda kv: -kv[1][0])[:args.profile_top]:
            lines.append(f"    {us:9.1f} us  {kernel[:110]}")
        if args.host_profile:
            lines += host_profile(fn, x, args)
    return lines


def host_profile(fn, x, args, steps=20, grad=False):
    """--host-profile: where the host's time goes over `steps` calls (cProfile, by own time)."""
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    with torch.set_grad_enabled(grad):
        profiler.enable()
        for _ in range(steps):
            fn(x)
        synchronize(args.device)
        profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).sort_stats("tottime")
    stats.print_stats(args.host_profile)
    lines = ["    " + line for line in text.getvalue().splitlines() if line.strip()][-args.host_profile - 2:]
    callers = io.StringIO()  # who makes the calls a static step does not (torch.as_tensor, 2026-11-25)
    stats.stream = callers
    stats.print_callers(5)
    return lines + ["    " + line for line in callers.getvalue().splitlines() if line.strip()][-40:]


def _wrapper_share(run, args) -> list:
    """Host time inside tritonize's compiled graphs (their wrappers: launches and aten calls)
    against the wall time of one generate(), unprofiled."""
    from tritonize.pipeline import CompiledGraph

    inside = [0.0, 0]
    original = CompiledGraph.__call__

    def timed(self, graph_args):
        start = time.perf_counter()
        try:
            return original(self, graph_args)
        finally:
            inside[0] += time.perf_counter() - start
            inside[1] += 1

    CompiledGraph.__call__ = timed
    try:
        start = time.perf_counter()
        run()
        synchronize(args.device)
        wall = time.perf_counter() - start
    finally:
        CompiledGraph.__call__ = original
    return [f"    wall {wall * 1e3:.1f} ms, inside tritonize's wrappers {inside[0] * 1e3:.1f} ms over {inside[1]} calls"]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gpt2,bert,llama")
    parser.add_argument("--lengths", default="96,131,200,256,384")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="tiny models (CPU smoke run)")
    parser.add_argument("--auto-batches", default="2,4,6,8,12")
    parser.add_argument("--generate", type=int, default=0, help="new tokens for (c); 0 skips it")
    parser.add_argument("--generate-cache", default="default", choices=["default", "none", "both"],
                        help="(c) with the default growing cache, without a cache, or both")
    parser.add_argument("--generate-profile", type=int, default=0,
                        help="(c): profile the compiled back ends' generate(), cProfile's top N")
    parser.add_argument("--train-lengths", default="", help="(d): training step lengths; empty skips it")
    parser.add_argument("--train-profile", type=int, default=0,
                        help="(d): profile the training step at this length; 0 skips it")
    parser.add_argument("--recompiles", action="store_true", help="log Dynamo's recompilations and why")
    parser.add_argument("--profile", type=int, default=0, help="length to profile; 0 skips it")
    parser.add_argument("--profile-top", type=int, default=25)
    parser.add_argument("--host-profile", type=int, default=0, help="with --profile: cProfile's top N")
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    args.lengths = [int(n) for n in args.lengths.split(",") if n]  # empty: skip (a)
    args.auto_batches = [int(n) for n in args.auto_batches.split(",") if n]  # empty: skip (b)
    args.train_lengths = [int(n) for n in args.train_lengths.split(",") if n]  # empty: skip (d)
    return args


def _shown(lines: list) -> list:
    """Print a finished part at once (a run cut short keeps what it measured)."""
    print("\n".join(lines), flush=True)
    return lines


def main(argv=None):
    args = parse_args(argv)
    import_tritonize()
    torch._dynamo.config.cache_size_limit = max(64, torch._dynamo.config.cache_size_limit)
    if args.recompiles:
        torch._logging.set_logs(recompiles=True)
    print(f"device {args.device} ({torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}), "
          f"torch {torch.__version__}, {args.dtype}, batch {args.batch}")
    header = ["model", "seq", "eager ms", "inductor dyn ms", "tritonize static ms", "tritonize dyn ms",
              "tritonize auto ms", "tritonize dyn, floats specialized ms", "dyn/static", "dyn/inductor",
              "auto/static", "dyn floats specialized/static", "dynamo's dynamic us", "(dyn - dynamo's) / static"]
    rows, notes, text = [], [], []
    for name in args.models if args.lengths else []:
        model_rows, note = sequence_lengths(name, args)
        rows += model_rows
        notes.append(f"{name}: {note}")
    if rows:
        text += _shown([format_markdown(header, rows), "", *notes])
    if args.auto_batches and args.lengths:
        auto = [automatic_dynamic(name, args) for name in args.models]
        auto_header = ["model", "batches", "compiles", "graphs through aten", "first reason"]
        text += _shown(["", format_markdown(auto_header, auto)])
    if args.train_lengths:
        train_header = ["model", "seq", "eager ms", "inductor dyn ms", "inductor grad err",
                        "tritonize dyn ms", "tritonize grad err"]
        text += _shown(["", format_markdown(train_header, [row for name in args.models if name != "bert"
                                                           for row in training_lengths(name, args)])])
    if args.train_profile:
        for name in args.models:
            text += _shown(["", *training_profile(name, args)])
    if args.profile:
        for name in args.models:
            text += _shown(["", *profile_length(name, args)])
    if args.generate:
        caches = {"default": [True], "none": [False], "both": [True, False]}[args.generate_cache]
        text += _shown(["", format_markdown(
            ["model", "new tokens", "cache", "eager tok/s", "inductor tok/s", "tritonize tok/s"],
            [generate_rate(name, args, cache) for name in args.models if name != "bert" for cache in caches])])
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write("\n".join(text) + "\n")


if __name__ == "__main__":
    main()
