"""Shared helpers for the benchmark suites in bench/ (kernels.py, models.py).

What lives here:
  - building a callable per back end: "eager" (the function itself), "inductor" and "tritonize"
    (torch.compile with that back end), "tritonize-max" (tritonize in mode="max-autotune"), and
    counting the graphs Dynamo compiled;
  - timing: triton.testing.do_bench (median) on CUDA, a perf_counter median on the CPU;
  - a measured device-to-device copy bandwidth, the yardstick for memory-bound kernels;
  - counting device kernels launched by one call, through torch.profiler, the same way for
    every back end;
  - turning an exception into a table cell ("fails: Type: first line") instead of a crash;
  - printing a table as fixed-width text or as markdown.

Not here: what to benchmark (the suites decide) or any knowledge of tritonize internals; the
tritonize package is only imported, inside a try, when the "tritonize" back end is asked for.
"""
import json
import math
import statistics
import time
import types

import torch

BACKENDS = ("eager", "inductor", "tritonize")  # the default set
# tritonize-max: mode="max-autotune"; *-dynamic: dynamic=True (every size symbolic)
KNOWN_BACKENDS = BACKENDS + ("tritonize-max", "inductor-dynamic", "tritonize-dynamic", "inductor-ro", "tritonize-ro",
                              "tritonize-savefwd", "tritonize-nhwc", "tritonize-traced", "tritonize-freeze",
                              "inductor-freeze", "tritonize-dwgen", "tritonize-dwlib", "tritonize-noalign")


# ----------------------------------------------------------------------------- back ends

# tritonize with options: the convolutions' layout forced (issue 20; the default "auto" decides per
# graph), and training with AOTAutograd's default partition (saves more, recomputes nothing)
TRITONIZE_VARIANTS = {
    "tritonize-nhwc": {"conv_layout": "channels_last"},
    "tritonize-traced": {"conv_layout": "as_traced"},
    "tritonize-savefwd": {"partitioner": "default"},
    "tritonize-freeze": {"freeze": True},  # frozen inference (lower/freezing.py)
    "tritonize-dwgen": {"depthwise_conv": "generated"},  # depthwise convolutions generated (lower/depthwise.py)
    "tritonize-dwlib": {"depthwise_conv": "library"},  # depthwise convolutions through cuDNN
    "tritonize-noalign": {"align_matmuls": "never"},  # products of odd widths as traced (lower/product_rows.py)
}


def dynamo_graph_count():
    """FX graphs Dynamo has compiled in this process since the last reset (graph breaks add one)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def import_tritonize():
    """Imports tritonize (which registers the "tritonize" back end); a clear error if absent."""
    try:
        import tritonize  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"cannot import tritonize (run with PYTHONPATH=src): {exc}") from exc
    return tritonize


def build_backend(name, fn):
    """`fn` run by back end `name`: the function itself for eager, else torch.compile(fn, backend=name)
    ("-dynamic": dynamic=True; "-ro": mode="reduce-overhead"; "-savefwd": options partitioner="default", AOTAutograd's default partition that saves what the
    forward computed, where tritonize's default is the min-cut partitioner; "-nhwc" / "-traced":
    options conv_layout="channels_last" / "as_traced", where the default "auto" decides per graph;
    "-freeze": frozen inference, tritonize's option freeze or Inductor's config freezing;
    "-dwgen" / "-dwlib": depthwise convolutions as generated kernels / through cuDNN, where the
    default "auto" picks per shape; "-noalign": options align_matmuls="never", products of odd
    widths as traced, no padded rows)."""
    if name == "eager":
        return fn
    if name not in KNOWN_BACKENDS:
        raise ValueError(f"unknown back end {name!r}; known: {', '.join(KNOWN_BACKENDS)}")
    if name == "tritonize-max":
        return import_tritonize().compile(private_copy(fn), mode="max-autotune")
    if name in TRITONIZE_VARIANTS:
        return import_tritonize().compile(private_copy(fn), options=TRITONIZE_VARIANTS[name])
    base, _, variant = name.partition("-")
    if base == "tritonize":
        import_tritonize()
    if name == "inductor-freeze":
        return torch.compile(private_copy(fn), backend="inductor", options={"freezing": True})
    return torch.compile(private_copy(fn), backend=base, dynamic=True if variant == "dynamic" else None,
                         mode="reduce-overhead" if variant == "ro" else None)


def private_copy(fn):
    """A plain function with its own code object: Dynamo keeps compiled graphs per code object,
    so each back end's compiled copy of one function has its own cache and several can be timed
    in turn without a reset between them. Modules and other callables are returned as they are."""
    if not isinstance(fn, types.FunctionType):
        return fn
    copy = types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


def reset_compiler_state():
    """Forgets every compiled graph (in-memory state only; disk caches stay) and the counters."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()


def describe_error(exc):
    """A one-line table cell for an exception: 'fails: TypeName: first line of message'.

    Dynamo's BackendCompilerFailed only says which back end raised; the cell shows what it raised.
    """
    while getattr(exc, "inner_exception", None) is not None:
        exc = exc.inner_exception
    lines = str(exc).strip().splitlines()
    first = lines[0].strip() if lines else ""
    text = f"fails: {type(exc).__name__}: {first}" if first else f"fails: {type(exc).__name__}"
    return text[:160]


# ----------------------------------------------------------------------------- timing


def synchronize(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def median_time_s(fn, device, warmup_ms=25, rep_ms=100, cpu_iters=5):
    """Median time of one call of `fn` in seconds, warm-up excluded.

    CUDA: triton.testing.do_bench (flushes L2 between calls). CPU: perf_counter over a few calls.
    """
    if torch.device(device).type == "cuda":
        import triton.testing

        ms = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
        return ms / 1e3
    fn()
    times = []
    for _ in range(cpu_iters):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_iterations(fn, device, warmup=3, iters=10, rounds=1, pause_s=0.05):
    """Seconds per call: the median over `iters` calls after `warmup` calls (CUDA events on GPU),
    in `rounds` rounds `pause_s` apart, the fastest round's median. The shared GPU host has slow
    spells (a model's step ~1.5x slower for a while, in any process): several rounds spread over
    time keep one spell from deciding a row.

    For whole-model steps, where do_bench's L2 flush and its time-based repeat count are not
    wanted.
    """
    if rounds < 1 or iters < 1:
        raise ValueError(f"time_iterations needs rounds >= 1 and iters >= 1, got {rounds} and {iters}")
    for _ in range(warmup):
        fn()
    synchronize(device)
    medians = []
    for round_index in range(rounds):
        if round_index:
            time.sleep(pause_s)
        medians.append(_median_of_calls(fn, device, iters))
    return min(medians)


def _median_of_calls(fn, device, iters):
    if torch.device(device).type != "cuda":
        times = []
        for _ in range(iters):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return statistics.median(times)
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(iters)]
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in pairs) / 1e3


def timed_first_call(fn, device):
    """(result, seconds) of one call including compilation, synchronized."""
    synchronize(device)
    start = time.perf_counter()
    result = fn()
    synchronize(device)
    return result, time.perf_counter() - start


def copy_bandwidth_gbs(device, nbytes=None):
    """Measured device-to-device copy bandwidth in GB/s: (bytes read + bytes written) / time."""
    if nbytes is None:
        nbytes = (1 << 30) if torch.device(device).type == "cuda" else (64 << 20)
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).random_()
    dst = torch.empty_like(src)
    seconds = median_time_s(lambda: dst.copy_(src), device, warmup_ms=50, rep_ms=300)
    del src, dst
    return 2 * nbytes / seconds / 1e9


# ----------------------------------------------------------------------------- kernel counts


def device_kernel_names(fn, device):
    """Names of the device activities (kernels, memsets, memcpys) one call of `fn` launches.

    Recorded with torch.profiler, the same way for every back end. None on the CPU, where
    generated kernels (Triton interpreter) and aten ops are not comparable units.
    """
    if torch.device(device).type != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        synchronize(device)
    return [event.name for event in prof.events() if event.device_type == DeviceType.CUDA]


def count_device_kernels(fn, device):
    """How many device activities one call of `fn` launches (None on the CPU)."""
    names = device_kernel_names(fn, device)
    return None if names is None else len(names)


# ----------------------------------------------------------------------------- comparisons


def flatten_tensors(value):
    """The tensors inside nested tuples/lists/dicts, in a stable order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for key in sorted(value) for t in flatten_tensors(value[key])]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in flatten_tensors(item)]
    return []


def cosine_similarity(actual, expected):
    """Cosine similarity of two tensors (or nests of tensors) taken as one flat vector each.

    Accumulated tensor by tensor in fp64 on the CPU, so large gradient sets need no big copy.
    """
    got, want = flatten_tensors(actual), flatten_tensors(expected)
    if len(got) != len(want) or any(a.shape != b.shape for a, b in zip(got, want)):
        return float("nan")
    dot = norm_a = norm_b = 0.0
    for a, b in zip(got, want):
        a, b = a.detach().cpu().double().reshape(-1), b.detach().cpu().double().reshape(-1)
        dot += float(a @ b)
        norm_a += float(a @ a)
        norm_b += float(b @ b)
    if norm_a == 0 or norm_b == 0:
        return 1.0 if norm_a == norm_b else 0.0
    return dot / math.sqrt(norm_a * norm_b)


def geomean(values):
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


# ----------------------------------------------------------------------------- tables


def format_cell(value, digits=1):
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.{digits}f}"
    return str(value)


def format_table(headers, rows):
    """Plain fixed-width text: a header line, a rule, one line per row."""
    cells = [[format_cell(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


def format_markdown(headers, rows):
    """The same table as GitHub markdown (pipes in cells escaped)."""
    def cell(value):
        return format_cell(value).replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_reports(markdown_path, json_path, environment, headers, rows, raw, summary=()):
    """The table as markdown (after the environment line, then `summary` as a list) and the raw
    results as JSON, to the files asked for (None: not written)."""
    if markdown_path:
        with open(markdown_path, "w") as out:
            out.write(environment + "\n\n" + format_markdown(headers, rows) + "\n")
            if summary:
                out.write("\n" + "\n".join(f"- {line}" for line in summary) + "\n")
    if json_path:
        with open(json_path, "w") as out:
            json.dump(raw, out, indent=1)


def environment_line(device):
    """One line naming the device and library versions, for the top of a report."""
    import platform

    parts = [f"torch {torch.__version__}"]
    try:
        import triton

        parts.append(f"triton {triton.__version__}")
    except ImportError:
        parts.append("triton absent")
    if torch.device(device).type == "cuda":
        parts.insert(0, torch.cuda.get_device_name())
    else:
        parts.insert(0, f"cpu ({platform.processor() or platform.machine()})")
    parts.append(f"python {platform.python_version()}")
    return ", ".join(parts)


def parse_list(text, known, what, strict=True):
    """Splits 'a,b' into names checked against `known`.

    strict: an unknown name stops the run. Otherwise it is reported and skipped, so that one
    stale name in a script does not cost a whole GPU run; no known name at all still stops it.
    """
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown and (strict or len(unknown) == len(names)):
        raise SystemExit(f"unknown {what}: {', '.join(unknown)}; known: {', '.join(known)}")
    if unknown:
        print(f"warning: skipping unknown {what}: {', '.join(unknown)}; known: {', '.join(known)}")
    return [n for n in names if n in known]
