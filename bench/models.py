"""Model suite: real models, eager vs Inductor vs tritonize, inference (bf16) and training (autocast).

    PYTHONPATH=src python3 bench/models.py                      # 6 models, inference, all back ends
    PYTHONPATH=src python3 bench/models.py --mode both          # inference and training
    PYTHONPATH=src python3 bench/models.py --quick              # gpt2 + resnet50, inference
    PYTHONPATH=src python3 bench/models.py --batch 1 --backends eager,inductor-ro,tritonize,tritonize-ro
                                                                # CUDA graphs at batch 1
    python3 bench/models.py --device cpu --small --models mlp   # smoke test, eager only on the CPU

Each (model, mode, back end) runs in a worker process of its own under a time limit (--timeout), so
a crash, a hang or an out-of-memory error costs one row, not the suite (eager's row is measured in
the first compiled back end's worker, before it compiles: one process less per model). On Linux the
suite process is a fork server (bench/workers.py): it imports torch and the packages the selected
models are built from once, never initializes CUDA nor compiles, and forks each worker, which thus
skips Python start-up and those imports; --no-fork starts a fresh `python models.py --worker`
instead (the only way elsewhere). Both run the same worker code. The parent imports nothing of the
compilers itself (Dynamo, Inductor, Triton, tritonize): each worker imports them as a fresh process
would, at the same point (what the model packages import in building the model, before any
measurement; the rest from torch.compile on), so first-call times stay comparable with the history
in docs/benchmarks.md. The warm-cache worker is a fresh fork of a parent that never compiled.

The worker builds the model from code with random weights (seed 0), runs eager once as the
reference, then the back end:

  step ms      median time of one step after warm-up, fastest of 5 rounds of 10 steps 50 ms
               apart (the shared host has slow spells; --repeat N: the fastest of N passes
               over the back ends, in turn, for spells longer than a worker) (inference: forward under no_grad, bf16
               weights; training: forward under autocast(bf16) with fp32 weights, loss =
               output.float().square().mean(), backward; no optimizer step)
  speedup      eager step time / this step time (same model and mode, separate processes)
  first call s the first call, compilation included, with cold caches (a fresh cache directory
               for the whole suite unless --reuse-caches); both first-call times are taken after
               one eager step, so library start-up is in neither
  warm call s  the first call in a second, fresh process after the first one filled the caches
  peak GiB     torch.cuda.max_memory_allocated over the timed steps (weights included)
  planned GiB  tritonize: the weights plus its memory plans' peak (explain()'s peak_memory; for
               training forward's and backward's added), to read next to the measured peak
  graphs       FX graphs Dynamo compiled (graph breaks add one)
  launches     device kernels (and memsets/memcpys) one step launches, from torch.profiler
  gen kernels  kernels the back end generated: the compiled graphs' reports for tritonize, distinct
               triton_* kernel names in the profile for Inductor
  layout copies  tritonize: kernels that only convert a buffer's layout (NCHW to NHWC, a
               transposed clone), "inside the graphs/at their edges" (explain(); 0 inside is the goal)
  accuracy     inference: cosine similarity of the output with eager's; training: cosine
               similarity of all gradients with eager's. "ok" when > 0.99 (bf16 tolerance). A
               training row under that is compared with eager's step in fp32 (no autocast, no
               TF32): "ok"/"MISMATCH" by the same threshold when eager's own bf16 gradients are
               within it of fp32, "unclear" when they are not (bf16 cannot judge that model);
               fp32_cos=compiled (eager) in the cell

Under each row: its workers' wall time ([N s], the warm-cache worker included) and their phases in
seconds since the worker was launched (start = the worker code began: Python start-up and imports
in a fresh process, next to nothing in a fork; exited = reaped by the parent, so exited - done is
the cost of process exit).
"""
import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bytecode_cache  # noqa: E402

if __name__ == "__main__":
    bytecode_cache.enable()  # before torch is imported: bench/bytecode_cache.py says why

import torch  # noqa: E402

import common  # noqa: E402
import model_zoo  # noqa: E402
import workers  # noqa: E402

MODES = ("inference", "training")
QUICK_MODELS = ["gpt2", "resnet50"]
COSINE_THRESHOLD = 0.99
HEADERS = ["model", "mode", "backend", "step ms", "speedup", "first call s", "warm call s",
           "peak GiB", "planned GiB", "graphs", "launches", "gen kernels", "layout copies", "accuracy"]
FINAL_KEYS = ("step_s", "warm_call_s", "environment", "error")  # a worker that sent none failed


# ============================================================================ worker side


def main_output(output):
    """The tensor a model's output stands for: itself, .logits, .last_hidden_state, or the first."""
    if isinstance(output, torch.Tensor):
        return output
    for key in ("logits", "last_hidden_state"):
        value = getattr(output, key, None)
        if isinstance(value, torch.Tensor):
            return value
    return common.flatten_tensors(output)[0]


class Workload:
    """A model with its example inputs, ready to step in one mode on one device."""

    def __init__(self, spec, mode, small, device, batch=None):
        dtype = torch.bfloat16 if mode == "inference" else torch.float32
        with torch.device(device):
            model = spec.build(small)
        self.model = model_zoo.disable_dropout(model).to(device=device, dtype=dtype)
        self.model.train(mode == "training")
        batch = batch or (2 if small else spec.batch[mode])
        self.inputs = spec.make_inputs(batch, small, dtype, device)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.mode, self.device = mode, device

    def forward_fn(self):
        model = self.model

        def forward(*inputs):
            return main_output(model(*inputs))

        return forward

    def step_fn(self, forward, autocast=True):
        """One step calling `forward` (eager or compiled); returns what accuracy compares.
        autocast=False (training): the same step in fp32, the reference for bf16 gradients."""
        inputs, params = self.inputs, self.params
        if self.mode == "inference":
            def step():
                with torch.no_grad():
                    return forward(*inputs)
            return step
        device_type = torch.device(self.device).type

        def step():
            for p in params:
                p.grad = None
            with torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=autocast):
                output = forward(*inputs)
            # square, not a plain mean: a plain mean sends the same gradient for every sample, and
            # training-mode batch norm removes what is common to the batch
            loss = output.float().square().mean()
            loss.backward()
            return [loss.detach()] + [p.grad for p in params]
        return step


def to_cpu(value):
    return [t.detach().cpu() for t in common.flatten_tensors(value)]


def accuracy(mode, actual, reference, fp32_reference=None):
    """'ok cos=...' or 'MISMATCH cos=...' comparing outputs (inference) or gradients (training)
    with eager's. A training result under the threshold is looked at again against eager's step
    in fp32 (fp32_reference: a function giving those gradients, called only then): if eager's
    bf16 gradients are themselves within the threshold of fp32, the compiled ones must be too
    ('ok' or 'MISMATCH'); if they are not, bf16 cannot judge this model ('unclear': seen with
    batch norm in training mode, ResNet-50 at cosine 0.39 under both compilers)."""
    if mode == "inference":
        label, cos = "cos", common.cosine_similarity(actual, reference)
    else:
        label, cos = "grad_cos", common.cosine_similarity(actual[1:], reference[1:])
    text = f"{label}={cos:.4f}"
    if cos > COSINE_THRESHOLD or fp32_reference is None:
        return f"{'ok' if cos > COSINE_THRESHOLD else 'MISMATCH'} {text}"
    try:
        reference32 = fp32_reference()
    except Exception as exc:  # noqa: BLE001 -- the compiled result is not at fault
        return f"MISMATCH {text} (fp32 reference failed: {common.describe_error(exc)})"
    compiled32 = common.cosine_similarity(actual[1:], reference32[1:])
    eager32 = common.cosine_similarity(reference[1:], reference32[1:])
    if eager32 <= COSINE_THRESHOLD:
        verdict = "unclear"
    else:
        verdict = "ok" if compiled32 > COSINE_THRESHOLD else "MISMATCH"
    return f"{verdict} {text} fp32_cos={compiled32:.4f} (eager {eager32:.4f})"


def free_device_memory(device):
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


class ReferenceFailed(Exception):
    """The eager run that every back end is compared with failed (so the model, not the back end)."""


def measure(args, workload, backend):
    """Everything but generated kernels, as a dict of numbers and strings."""
    device = args.device
    if args.first_call_only:
        # One eager step first, as in the cold worker: library start-up (cuBLAS, cuDNN, lazy
        # module loading) is then in neither first-call time.
        common.timed_first_call(workload.step_fn(workload.forward_fn()), device)
        common.reset_compiler_state()
        step = workload.step_fn(common.build_backend(backend, workload.forward_fn()))
        return {"warm_call_s": common.timed_first_call(step, device)[1]}
    try:
        eager_step = workload.step_fn(workload.forward_fn())
        reference, eager_first = common.timed_first_call(eager_step, device)
        reference = to_cpu(reference)
    except Exception as exc:
        raise ReferenceFailed(common.describe_error(exc).replace("fails: ", "", 1)) from exc
    if backend == "eager" or args.also_eager:
        eager = measure_steps(args, eager_step, "eager", eager_first, "ref", None)
        if backend == "eager":
            return eager
        emit(args, {"eager": eager})
    common.reset_compiler_state()
    step, recorder = compiled_step(workload, backend)
    actual, first_call = common.timed_first_call(step, device)
    fp32 = (lambda: fp32_gradients(workload)) if workload.mode == "training" else None
    check = accuracy(workload.mode, to_cpu(actual), reference, fp32)
    del actual, reference
    weights = sum(t.numel() * t.element_size() for t in
                  list(workload.model.parameters()) + list(workload.model.buffers()))
    return measure_steps(args, step, backend, first_call, check, recorder, weights)


def fp32_gradients(workload):
    """Eager's training step without autocast and without TF32 (matmuls and convolutions in
    full fp32), its loss and gradients on the CPU: what a bf16 result is judged against when it
    misses eager's bf16 gradients."""
    step = workload.step_fn(workload.forward_fn(), autocast=False)
    precision, cudnn_tf32 = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("highest")  # also turns cuBLAS's allow_tf32 off
    torch.backends.cudnn.allow_tf32 = False
    try:
        return to_cpu(step())
    finally:
        torch.set_float32_matmul_precision(precision)
        torch.backends.cudnn.allow_tf32 = cudnn_tf32


def phase(args, name):
    """Note when a worker phase ended (time.monotonic(), one clock with the parent's), for the
    parent's log."""
    if hasattr(args, "phases"):
        args.phases.append((name, time.monotonic()))


def measure_steps(args, step, backend, first_call, check, recorder, weights=0):
    """Step time, peak memory, launches and kernel counts of a step whose first call is done."""
    device = args.device
    phase(args, f"{backend} first call")
    free_device_memory(device)
    seconds = common.time_iterations(step, device, warmup=args.warmup, iters=args.iters, rounds=args.rounds)
    phase(args, f"{backend} timing")
    peak = torch.cuda.max_memory_allocated() if torch.device(device).type == "cuda" else None
    names = common.device_kernel_names(step, device)
    phase(args, f"{backend} profile")
    result = {"step_s": seconds, "first_call_s": first_call, "peak_bytes": peak,
              "graphs": common.dynamo_graph_count() if backend != "eager" else None,
              "launches": None if names is None else len(names), "accuracy": check}
    if backend == "inductor" and names is not None:
        result["generated"] = len({n for n in names if n.startswith("triton")})
    if backend != "eager" and recorder is not None:
        result["generated"] = tritonize_generated_kernels(recorder)
        result["layout_copies"] = layout_copies(recorder)
        result["planned_bytes"] = planned_peak(recorder, weights)
    return result


def compiled_step(workload, backend):
    """(step, recorder): the workload's step compiled by `backend`. For tritonize the recorder
    collects each compiled graph's artifacts (what explain() reports) during the measured run,
    so counting its kernels needs no second compile; None for other back ends."""
    if backend != "tritonize" and backend not in common.TRITONIZE_VARIANTS:
        return workload.step_fn(common.build_backend(backend, workload.forward_fn())), None
    common.import_tritonize()
    from tritonize.backend import make_backend
    from tritonize.config import make_options

    recorder: list = []
    options = make_options(common.TRITONIZE_VARIANTS.get(backend, {}))
    compiled = torch.compile(common.private_copy(workload.forward_fn()),
                             backend=make_backend(options, recorder))
    return workload.step_fn(compiled), recorder


def planned_peak(recorder, weights: int) -> int:
    """The memory plans' peak (codegen/memory_plan.py) plus the weights, to set next to the
    measured peak: the largest graph's planned peak (inference), or forward's and backward's
    summed (training, an upper bound: the forward's saved activations are in both)."""
    graphs = [a for a in recorder if a != "graph"]
    forward = max((a.peak_memory for a in graphs if a.role != "backward"), default=0)
    backward = max((a.peak_memory for a in graphs if a.role == "backward"), default=0)
    return weights + forward + backward


def tritonize_generated_kernels(recorder):
    """Generated kernels of every compiled graph (forward and backward when training), "n (+k
    fallback)" when ops ran through aten."""
    graphs = [a for a in recorder if a != "graph"]
    count = sum(len(a.kernels) for a in graphs)
    fallback_count = sum(len(a.fallbacks) for a in graphs)
    return f"{count} (+{fallback_count} fallback)" if fallback_count else count


def layout_copies(recorder) -> str:
    """"inside/at the edges": the compiled graphs' kernels that only convert a layout (explain())."""
    graphs = [a for a in recorder if a != "graph"]
    return "/".join(str(sum(a.layout_copies[k] for a in graphs)) for k in (0, 1))


def emit(args, result):
    """Sends a result dict to the parent (stdout when the worker was started by hand)."""
    workers.send(args.result_fd, result)


def run_worker(args):
    """Measures one (model, mode, back end) and sends the results to the parent; returns 0.

    With --environment-only it sends the environment line instead: the probe the fork server
    forks first, which also shows that a forked child can use the device."""
    if args.environment_only:
        emit(args, {"environment": common.environment_line(args.device)})
        return 0
    workers.inject_test_fault()
    backend, spec = args.backends, model_zoo.SPECS_BY_NAME[args.models]
    torch.manual_seed(0)
    torch.set_float32_matmul_precision("high")
    args.phases = [("start", time.monotonic())]
    try:
        workload = Workload(spec, args.mode, args.small, args.device, args.batch)
        phase(args, "build")
        emit(args, measure(args, workload, backend))
        if args.html_dir and backend == "tritonize" and not args.first_call_only:
            write_profile_page(args, workload)
        phase(args, "done")
        emit(args, {"phases": args.phases})
    except (model_zoo.MissingPackage, ReferenceFailed) as exc:
        traceback.print_exc()
        label = "" if isinstance(exc, model_zoo.MissingPackage) else "eager reference: "
        emit(args, {"error": f"fails: {label}{exc}"})
    except Exception as exc:  # a failure is a row in the parent's table
        traceback.print_exc()
        emit(args, {"error": common.describe_error(exc)})
    return 0


def write_profile_page(args, workload) -> None:
    """tritonize.profile of the suite's step (training: forward under autocast, loss, backward),
    written to --html-dir as MODEL_MODE.html (issue 24)."""
    import tritonize

    prof = tritonize.profile(workload.step_fn(workload.forward_fn()))
    os.makedirs(args.html_dir, exist_ok=True)
    path = os.path.join(args.html_dir, f"{args.models}_{workload.mode}.html")
    prof.save_html(path, title=f"tritonize: {args.models} {workload.mode} ({args.device})")
    print(prof)


# ============================================================================ parent side


def worker_options(args, model, mode, backend, first_call_only=False, also_eager=False, attempt=0):
    """The worker's command-line options for one (model, mode, back end); the profile page
    (--html-dir) from the first --repeat pass only."""
    options = ["--worker", "--models", model, "--mode", mode, "--backends", backend,
               "--device", args.device, "--warmup", str(args.warmup), "--iters", str(args.iters),
               "--rounds", str(args.rounds)]
    if args.small:
        options.append("--small")
    if args.batch:
        options += ["--batch", str(args.batch)]
    if args.html_dir and attempt == 0:
        options += ["--html-dir", args.html_dir]
    if first_call_only:
        options.append("--first-call-only")
    if also_eager:
        options.append("--also-eager")
    return options


def run_worker_process(args, options, tag):
    """Runs one worker (forked or a fresh subprocess, as args.fork says) under the time limit;
    returns its result dict: "error" when it ended without its results, phases in seconds since
    launch with "exited" (reaped) added."""
    log_path = os.path.join(args.log_dir, tag + ".log") if args.log_dir else None
    outcome = workers.run(options, main, __file__, args.timeout, log_path, fork=args.fork)
    result = outcome.results
    if not any(key in result for key in FINAL_KEYS):
        result["error"] = outcome.failure(args.timeout)
    if result.get("phases"):
        result["phases"] = [(name, at - outcome.launched) for name, at in result["phases"]]
        result["phases"].append(("exited", outcome.reaped - outcome.launched))
    return result


def prepare_environment(args):
    """Sets the workers' environment in this process (forks and subprocesses inherit it, and the
    fork server imports under it): no downloads, and fresh shared cache directories unless
    --reuse-caches. Returns the cache root to remove at the end, or None."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # models are built from configs; never download
    if args.reuse_caches:
        return None
    root = tempfile.mkdtemp(prefix="tritonize-bench-cache-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(root, "triton")
    os.environ["TRITONIZE_CACHE_DIR"] = os.path.join(root, "tritonize")
    return root


def preload_packages(models):
    """Imports in the fork server, once, what building the selected models imports (not CUDA:
    see workers.cuda_check_without_init). A package that fails here is left to the workers, whose
    rows say why. Returns (the packages imported, seconds)."""
    start, loaded = time.perf_counter(), []
    with workers.cuda_check_without_init():
        for spec in (model_zoo.SPECS_BY_NAME[name] for name in models):
            try:
                model_zoo.preload(spec)
            except Exception:  # noqa: BLE001 -- the worker meets it again and makes it a row
                continue
            if spec.package and spec.package not in loaded:
                loaded.append(spec.package)
    return loaded, time.perf_counter() - start


def prepare_workers(args, models):
    """Decides how workers start (args.fork) and readies the fork server; returns (environment
    line, how workers start). The environment line comes from a first forked worker (naming the
    GPU initializes CUDA, which this process must not do); if that probe fails, the workers
    fall back to fresh subprocesses."""
    args.fork = not args.no_fork and workers.fork_supported()
    if not args.fork:
        why = "--no-fork" if args.no_fork else "fork is used on Linux only"
        return common.environment_line(args.device), f"workers: fresh subprocesses ({why})"
    packages, seconds = preload_packages(models)
    hazard = workers.fork_hazard()
    probe = {"error": hazard} if hazard else run_worker_process(
        args, ["--worker", "--environment-only", "--device", args.device], "environment")
    if "error" in probe:
        args.fork = False
        return (common.environment_line(args.device),
                f"workers: fresh subprocesses (a forked worker failed: {probe['error']})")
    imported = ", ".join(["torch"] + packages)
    return probe["environment"], (f"workers: forked from this process (imported {imported} in "
                                  f"{seconds:.1f} s; {workers.thread_note()})")


def run_one(args, model, mode, backend, also_eager=False, attempt=0):
    """One back end's row (its worker and, unless --skip-warm or in a later --repeat pass, the
    warm-cache worker). With also_eager the worker measures the eager row too, under the key
    "eager" (one process less)."""
    package = model_zoo.SPECS_BY_NAME[model].package
    start = time.perf_counter()
    tag = f"{model}-{mode}-{backend}" + (f"-pass{attempt + 1}" if args.repeat > 1 else "")
    if not model_zoo.package_available(package):
        result = {"error": f"fails: missing package {package}"}
    else:
        result = run_worker_process(
            args, worker_options(args, model, mode, backend, also_eager=also_eager, attempt=attempt), tag)
    if also_eager:
        result.setdefault("eager", {"error": result.get("error", "fails: eager not measured")})
    if backend != "eager" and "error" not in result and not args.skip_warm and attempt == 0:
        warm = run_worker_process(
            args, worker_options(args, model, mode, backend, first_call_only=True), tag + "-warm")
        result["warm_call_s"] = warm.get("warm_call_s", warm.get("error", "fails"))
        result["warm_phases"] = warm.get("phases")
    result["wall_s"] = time.perf_counter() - start
    return result


def fmt(value, digits):
    """A number with `digits` decimals; anything else (a note, None) as format_cell shows it."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.{digits}f}"
    return common.format_cell(value)


def table_row(model, mode, backend, result, eager_result):
    if "error" in result:
        return [model, mode, backend] + ["-"] * 10 + [result["error"]]
    eager = backend == "eager"
    eager_s = eager_result.get("step_s") if eager_result else None
    peak = result.get("peak_bytes")
    return [model, mode, backend, fmt(result["step_s"] * 1e3, 2),
            fmt(eager_s / result["step_s"], 2) if eager_s else "n/a",
            fmt(result["first_call_s"], 2), "-" if eager else fmt(result.get("warm_call_s"), 2),
            None if peak is None else fmt(peak / 2**30, 2),
            "-" if result.get("planned_bytes") is None else fmt(result["planned_bytes"] / 2**30, 2),
            "-" if eager else result.get("graphs"), result.get("launches"),
            "-" if eager else result.get("generated"), result.get("layout_copies", "-"), result["accuracy"]]


def summary_lines(results, backends, modes, elapsed):
    """Geomean speedup vs eager per back end and mode, tritonize vs Inductor, compile, memory."""
    lines = []

    def is_number(value):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0

    def pairs(backend, other, mode_list, key):
        for (model, mode, b), r in results.items():
            o = results.get((model, mode, other), {})
            if b == backend and mode in mode_list and is_number(r.get(key)) \
                    and is_number(o.get(key)):
                yield r[key], o[key]

    for backend in [b for b in backends if b != "eager"]:
        parts = []
        for label, mode_list in [(m, [m]) for m in modes] + ([("all", modes)] if len(modes) > 1 else []):
            values = [e / t for t, e in pairs(backend, "eager", mode_list, "step_s")]
            mean = common.geomean(values)
            parts.append(f"{label} {mean:.2f}x (n={len(values)})" if mean else f"{label} n/a")
        lines.append(f"geomean speedup vs eager, {backend}: " + ", ".join(parts))
    for ours, theirs in (("tritonize", "inductor"), ("tritonize-ro", "inductor-ro"),
                         ("tritonize-ro", "inductor"), ("tritonize-dynamic", "inductor-dynamic")):
        if ours in backends and theirs in backends:
            values = [i / t for t, i in pairs(ours, theirs, modes, "step_s")]
            mean = common.geomean(values)
            lines.append(f"{ours} vs {theirs} ({theirs} time / {ours} time, >1 = {ours} faster): "
                         + (f"{mean:.2f}x (n={len(values)})" if mean else "n/a"))
    if "tritonize-ro" in backends and "tritonize" in backends:  # CUDA graphs' memory (issue 18)
        ratios = [r / p for r, p in pairs("tritonize-ro", "tritonize", modes, "peak_bytes")]
        if ratios:
            lines.append(f"peak memory tritonize-ro / tritonize: geomean {common.geomean(ratios):.3f}, "
                         f"max {max(ratios):.3f} (n={len(ratios)})")
    for backend in backends:
        first = [r["first_call_s"] for (_, _, b), r in results.items()
                 if b == backend and isinstance(r.get("first_call_s"), float)]
        memory = [p / e for p, e in pairs(backend, "eager", modes, "peak_bytes")]
        mean_first = common.geomean(first)
        text = f"{backend}: geomean first call " + (f"{mean_first:.2f} s" if mean_first else "n/a")
        if backend != "eager" and memory:
            text += f", geomean peak memory / eager {common.geomean(memory):.2f}"
        warm = [r["warm_call_s"] / r["first_call_s"] for (_, _, b), r in results.items()
                if b == backend and isinstance(r.get("warm_call_s"), float) and r.get("first_call_s")]
        if warm:
            text += f", warm / cold first call {common.geomean(warm):.2f} (max {max(warm):.2f})"
        lines.append(text)
    walls = [r["wall_s"] for r in results.values() if isinstance(r.get("wall_s"), float)]
    lines.append(f"suite wall time {elapsed:.0f} s, start to table; the rows' workers "
                 f"{sum(walls):.0f} s ({len(walls)} rows, warm-cache processes included)")
    return lines


def print_phases(label, phases):
    """One log line: a worker's phases, in seconds since it was launched."""
    if phases:
        print(f"    {label} (s since launch): " + ", ".join(f"{n} {t:.1f}" for n, t in phases),
              flush=True)


def measure_backends(args, model, mode, backends, attempt=0) -> list:
    """[(back end, result)] of one pass over the back ends for (model, mode), each row printed
    as it is measured. Eager is measured inside the first compiled back end's worker when
    there is one."""
    compiled = [b for b in backends if b != "eager"]
    eager_inside = "eager" in backends and bool(compiled)
    found = {}
    for backend in compiled if eager_inside else backends:
        result = run_one(args, model, mode, backend, also_eager=eager_inside and backend == compiled[0],
                         attempt=attempt)
        measured = [("eager", result.pop("eager")), (backend, result)] if "eager" in result else [(backend, result)]
        for name, value in measured:
            found[name] = value
            row = table_row(model, mode, name, value, found.get("eager"))
            wall = value.get("wall_s")
            print("  " + "  ".join(common.format_cell(c) for c in row) + (f"   [{wall:.0f} s]" if wall else ""),
                  flush=True)
        print_phases("phases", result.pop("phases", None))
        print_phases("warm phases", result.pop("warm_phases", None))
    return [(name, found[name]) for name in backends if name in found]


def fastest_of(values: list) -> dict:
    """One row from a back end's passes (--repeat): the first good pass's fields (the first pass's
    first call is the cold one), the fastest step time among the good passes (no error, no
    MISMATCH), and each other pass's failure or verdict noted in the accuracy cell."""
    def good(value):
        return "error" not in value and not str(value.get("accuracy", "")).startswith("MISMATCH")

    kept = [v for v in values if good(v)]
    if not kept:
        return values[0]
    merged = dict(kept[0])
    merged["step_s"] = min(v["step_s"] for v in kept)
    walls = [v["wall_s"] for v in values if isinstance(v.get("wall_s"), float)]
    if walls:
        merged["wall_s"] = sum(walls)
    notes = [f"pass {i + 1}: {v.get('error') or v.get('accuracy')}" for i, v in enumerate(values) if not good(v)]
    if notes:
        merged["accuracy"] = "; ".join([str(merged["accuracy"])] + notes)
    return merged


def run_suite(args, models, modes, backends):
    """Every row, printed as it is measured; returns (results, rows, environment line)."""
    cache_root = prepare_environment(args)
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
    results, rows = {}, []
    try:
        environment, how = prepare_workers(args, models)
        print(environment + "\n" + how, flush=True)
        for model in models:
            for mode in modes:
                runs: dict = {}
                for attempt in range(args.repeat):
                    if args.repeat > 1:
                        print(f"  {model} {mode}: pass {attempt + 1} of {args.repeat}", flush=True)
                    for name, value in measure_backends(args, model, mode, backends, attempt):
                        runs.setdefault(name, []).append(value)
                for name, values in sorted(runs.items(), key=lambda item: item[0] != "eager"):
                    results[(model, mode, name)] = fastest_of(values)
                    rows.append(table_row(model, mode, name, results[(model, mode, name)],
                                          results.get((model, mode, "eager"))))
    finally:
        if cache_root:
            shutil.rmtree(cache_root, ignore_errors=True)
    return results, rows, environment


# ============================================================================ command line


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", help="comma-separated models (default: the 6 real models; "
                        "with --small all, including mlp and transformer_block)")
    parser.add_argument("--backends", help="comma-separated back ends "
                        "(default: eager,inductor,tritonize on CUDA, eager on the CPU)")
    parser.add_argument("--mode", default="inference", choices=["inference", "training", "both"])
    parser.add_argument("--quick", action="store_true", help="gpt2 and resnet50, inference only")
    parser.add_argument("--device", help="cuda or cpu (default: cuda if available)")
    parser.add_argument("--small", action="store_true", help="tiny models, for a smoke test")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per worker process")
    parser.add_argument("--batch", type=int, help="batch size of every model (default: the model's own)")
    parser.add_argument("--warmup", type=int, help="warm-up steps (default 3, small 1)")
    parser.add_argument("--iters", type=int, help="timed steps a round (default 10, small 3)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="timing rounds, 50 ms apart; the fastest round's median counts (default 5)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="passes over the back ends of each model, in turn; a row's step time is its "
                             "fastest pass (the GPU host has slow spells that last longer than a worker)")
    parser.add_argument("--skip-warm", action="store_true",
                        help="skip the second process that measures warm-cache compile time")
    parser.add_argument("--reuse-caches", action="store_true",
                        help="use the usual Inductor/Triton cache dirs instead of fresh ones")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    parser.add_argument("--log-dir", help="write each worker's stdout and stderr here")
    parser.add_argument("--html-dir", help="also write tritonize.profile's page of each model there (tritonize rows)")
    parser.add_argument("--no-fork", action="store_true",
                        help="start each worker as a fresh Python process instead of forking it")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--first-call-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--also-eager", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--environment-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(workers.RESULT_FD_OPTION, type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat needs at least 1")
    if args.warmup is None:
        args.warmup = 1 if args.small else 3
    if args.iters is None:
        args.iters = 3 if args.small else 10
    return args


def selection(args):
    """(models, modes, backends) from the options and their defaults."""
    if args.quick:
        models, modes = QUICK_MODELS, ["inference"]
    else:
        default = [s.name for s in model_zoo.SPECS] if args.small else model_zoo.REAL_MODELS
        models = default if not args.models else args.models.split(",")
        modes = list(MODES) if args.mode == "both" else [args.mode]
    if args.quick and args.models:
        models = args.models.split(",")
    models = common.parse_list(",".join(models), list(model_zoo.SPECS_BY_NAME), "models",
                               strict=False)
    on_cuda = torch.device(args.device).type == "cuda"
    default_backends = ",".join(common.BACKENDS) if on_cuda else "eager"
    backends = common.parse_list(args.backends or default_backends, common.KNOWN_BACKENDS, "back ends")
    return models, modes, backends


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return run_worker(args)
    if args.list:
        for spec in model_zoo.SPECS:
            print(f"{spec.name:18} {spec.package or 'torch':13} {spec.about}")
        return 0
    start = time.perf_counter()
    # asked without initializing CUDA: this process may fork the workers
    cuda = workers.cuda_available_without_init()
    args.device = args.device or ("cuda" if cuda else "cpu")
    if torch.device(args.device).type == "cuda" and not cuda:
        raise SystemExit("CUDA is not available; use --device cpu --small for a smoke test")
    models, modes, backends = selection(args)
    print(f"bytecode cache primed in {bytecode_cache.prime():.1f} s", flush=True)
    results, rows, environment = run_suite(args, models, modes, backends)
    summary = summary_lines(results, backends, modes, time.perf_counter() - start)
    print()
    print(common.format_table(HEADERS, rows))
    print("\n".join(summary))
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(f"{environment}; accuracy: cosine similarity vs eager > {COSINE_THRESHOLD}\n\n")
            out.write(common.format_markdown(HEADERS, rows) + "\n\n")
            out.write("\n".join(f"- {line}" for line in summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
