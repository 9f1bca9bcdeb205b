"""Compile time, cold and warm: a fresh process with empty caches, then a second fresh process
that finds the caches the first one filled, for tritonize and Inductor on the same models.

    PYTHONPATH=src python3 bench/compile_cache.py                    # gpt2, transformer_block, mlp (~4 min on an H100)
    PYTHONPATH=src python3 bench/compile_cache.py --models gpt2,resnet50 --backends tritonize
    python3 bench/compile_cache.py --device cpu --small --models mlp --backends tritonize   # smoke test

Each (model, back end) gets its own empty cache root (TRITONIZE_CACHE_DIR, TRITON_CACHE_DIR,
TORCHINDUCTOR_CACHE_DIR). The cold process and then the warm process each build the model (seed 0,
inference, bf16 on the GPU) and time the first call, compilation included, to its result
(synchronized): "cold s" and "warm s". "process s" is the warm worker's whole run, imports and
model building included. For tritonize the warm run reports its graph-cache hits/misses (a warm
run that misses is a bug) and its Dynamo-level cache hits/misses (tritonize/caching/dynamo_cache.py: a hit
skips AOTAutograd as well; graphs it does not store, such as ones that mutate their inputs, miss
every time). "floor s" (tritonize rows) is a third fresh process with backend="eager": Dynamo's
trace and guards alone, the part of a warm first call that no cache of a back end can skip (a
warm call that hits the Dynamo-level cache for every graph pays Dynamo, then loads its kernels). "backend s
cold/warm" (tritonize) is the time spent inside the backend during the first call: AOTAutograd
and our compiler when cold, the cache lookups when warm (GPU kernels finish compiling while the
first call runs, outside it). Goals (issue 5):
warm / cold <= 0.25 for tritonize, and tritonize cold <= 0.5 x Inductor cold. A failure or
timeout is a row, not a crash.
"""
import argparse
import json
import os
import shutil
import subprocess
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

RESULT_MARK = "COMPILE_CACHE_RESULT "
DEFAULT_MODELS = "gpt2,transformer_block,mlp"
HEADERS = ["model", "backend", "cold s", "warm s", "warm/cold", "floor s", "process s", "backend s cold/warm",
           "graph cache (warm)", "dynamo cache (warm)", "note"]


# ============================================================================ worker side


def run_worker(args):
    import models  # bench/models.py: the same workloads as the model suite

    start = time.perf_counter()
    result = {}
    try:
        spec = model_zoo.SPECS_BY_NAME[args.models]
        torch.manual_seed(0)
        torch.set_float32_matmul_precision("high")
        workload = models.Workload(spec, "inference", args.small, args.device)
        backend_seconds = []
        if args.backends == "dynamo":  # Dynamo's trace and guards alone: the floor
            step = workload.step_fn(torch.compile(workload.forward_fn(), backend="eager"))
        elif args.backends == "tritonize":
            step = workload.step_fn(timed_tritonize(workload.forward_fn(), backend_seconds))
        else:
            step = workload.step_fn(common.build_backend(args.backends, workload.forward_fn()))
        begin = time.perf_counter()
        _, seconds = first_call(args, step)
        result["first_call_s"] = seconds
        result["dynamo_phases"] = dynamo_phases()
        if args.backends == "tritonize":
            from tritonize.caching import dynamo_cache, graph_cache
            from tritonize.runtime.triton_compile import shared_pool

            result["graph_cache"] = dict(graph_cache.STATS)
            result["dynamo_cache"] = dict(dynamo_cache.STATS)
            result["backend_s"] = sum(backend_seconds)
            result["kernel_compiles"] = shared_pool().compile_stats(since=begin)

    except model_zoo.MissingPackage as exc:
        result["error"] = f"fails: {exc}"
    except Exception as exc:  # a row in the parent's table
        traceback.print_exc()
        result["error"] = common.describe_error(exc)
    result["process_s"] = time.perf_counter() - start
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


def first_call(args, step):
    """(result, seconds) of the first call; under cProfile when --profile-dir is given, whose
    stats go to <dir>/<model>-<backend>-<n>.prof (n = 1 for the cold process, 2 for the warm one,
    3 for the floor) and whose top functions by cumulative time go to stderr."""
    if not args.profile_dir:
        return common.timed_first_call(step, args.device)
    import cProfile
    import pstats

    os.makedirs(args.profile_dir, exist_ok=True)
    stem = os.path.join(args.profile_dir, f"{args.models}-{args.backends}")
    number = 1
    while os.path.exists(f"{stem}-{number}.prof"):
        number += 1
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        return common.timed_first_call(step, args.device)
    finally:
        profiler.disable()
        profiler.dump_stats(f"{stem}-{number}.prof")
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(40)


def dynamo_phases() -> dict:
    """Seconds per phase that torch times with dynamo_timed (Dynamo's trace, the backend call,
    building guards...), summed over this process's compiles."""
    try:
        headers, values = torch._dynamo.utils.compile_times(repr="csv", aggregate=True)
        return {h: round(float(v), 3) for h, v in zip(headers, values)}
    except Exception as exc:  # a torch without these metrics: the row goes on
        return {"error": common.describe_error(exc)}


def timed_tritonize(fn, seconds: list):
    """torch.compile(fn, backend="tritonize"), adding the time spent in the backend to `seconds`."""
    common.import_tritonize()
    from tritonize.backend import tritonize_backend

    def backend(gm, example_inputs):
        begin = time.perf_counter()
        try:
            return tritonize_backend(gm, example_inputs)
        finally:
            seconds.append(time.perf_counter() - begin)

    return torch.compile(common.private_copy(fn), backend=backend)


# ============================================================================ parent side


def run_process(args, env, model, backend):
    command = [sys.executable, os.path.abspath(__file__), "--worker", "--models", model, "--backends", backend,
               "--device", args.device] + (["--small"] if args.small else []) \
        + (["--profile-dir", args.profile_dir] if args.profile_dir else [])
    begin = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"fails: timeout after {args.timeout} s"}
    wall = time.perf_counter() - begin
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            result = json.loads(line[len(RESULT_MARK):])
            result["process_s"] = wall
            return result
    last = [line for line in done.stderr.splitlines() if line.strip()][-1:] or ["no output"]
    return {"error": f"fails: exit code {done.returncode}: {last[0][:120]}"}


def measure(args, model, backend):
    root = tempfile.mkdtemp(prefix="tritonize-compile-cache-")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRITONIZE_CACHE_DIR=os.path.join(root, "tritonize"),
               TRITON_CACHE_DIR=os.path.join(root, "triton"), TORCHINDUCTOR_CACHE_DIR=os.path.join(root, "inductor"))
    env.pop("TRITONIZE_CACHE", None)
    try:
        cold = run_process(args, env, model, backend)
        if "error" in cold:
            return cold, {}
        warm = run_process(args, env, model, backend)
        if backend == "tritonize" and not args.no_floor and "error" not in warm:
            floor = run_process(args, env, model, "dynamo")
            warm["floor_s"] = floor.get("first_call_s", floor.get("error"))
        return cold, warm
    finally:
        shutil.rmtree(root, ignore_errors=True)


def table_row(model, backend, cold, warm):
    if "error" in cold or "error" in warm:
        return [model, backend, cold.get("first_call_s", "-"), warm.get("first_call_s", "-"), "-", "-", "-", "-",
                "-", "-", cold.get("error") or warm.get("error")]
    ratio = warm["first_call_s"] / cold["first_call_s"]
    stats, dynamo = warm.get("graph_cache"), warm.get("dynamo_cache")
    cache = f"{stats.get('hit', 0)} hit, {stats.get('miss', 0)} miss" if stats is not None else "-"
    dynamo_cache = "-"
    if dynamo is not None:
        dynamo_cache = f"{dynamo.get('hit', 0)} hit, {dynamo.get('miss', 0)} miss, {dynamo.get('uncached', 0)} unkeyed"
    note = "warm run missed the graph cache" if stats and stats.get("miss") else ""
    backend_s = "-"
    if "backend_s" in cold and "backend_s" in warm:
        backend_s = f"{cold['backend_s']:.2f} / {warm['backend_s']:.2f}"
    return [model, backend, cold["first_call_s"], warm["first_call_s"], ratio, warm.get("floor_s", "-"),
            warm["process_s"], backend_s, cache, dynamo_cache, note]


def summary_lines(rows):
    lines = []
    by_key = {(r[0], r[1]): r for r in rows if isinstance(r[2], float) and isinstance(r[3], float)}
    ratios = [r[4] for (m, b), r in by_key.items() if b == "tritonize"]
    if ratios:
        lines.append(f"tritonize warm/cold: max {max(ratios):.2f}, geomean {common.geomean(ratios):.2f} "
                     f"(goal <= 0.25: {'met' if max(ratios) <= 0.25 else 'NOT met'})")
    floors = [(r[3] - r[5]) / r[2] for (m, b), r in by_key.items() if b == "tritonize" and isinstance(r[5], float)]
    if floors:
        lines.append(f"tritonize (warm - floor) / cold: max {max(floors):.2f} (the share of a warm first call "
                     "beyond Dynamo's trace and guards: loading the compiled graph and its kernels, and the first run)")
    pairs = [(r[2], by_key[(m, "inductor")][2]) for (m, b), r in by_key.items()
             if b == "tritonize" and (m, "inductor") in by_key]
    if pairs:
        values = [t / i for t, i in pairs]
        lines.append(f"tritonize cold / inductor cold: max {max(values):.2f}, geomean {common.geomean(values):.2f} "
                     f"(goal <= 0.5: {'met' if max(values) <= 0.5 else 'NOT met'})")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--backends", default="tritonize,inductor")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="tiny models, for a smoke test")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per process")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    parser.add_argument("--no-floor", action="store_true",
                        help="skip the third process that measures Dynamo's trace and guards alone (backend eager)")
    parser.add_argument("--profile-dir", help="profile each first call with cProfile; .prof files go here")
    parser.add_argument("--json", metavar="FILE", help="also write every process's raw result (Dynamo's phase "
                        "times, kernel compile counts and seconds) as JSON")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return run_worker(args)
    models = common.parse_list(args.models, list(model_zoo.SPECS_BY_NAME), "models", strict=False)
    backends = common.parse_list(args.backends, ["tritonize", "inductor"], "back ends")
    environment = common.environment_line(args.device)
    print(environment, flush=True)
    print(f"bytecode cache primed in {bytecode_cache.prime():.1f} s", flush=True)
    rows, raw = [], []
    for model in models:
        for backend in backends:
            cold, warm = measure(args, model, backend)
            rows.append(table_row(model, backend, cold, warm))
            raw.append({"model": model, "backend": backend, "cold": cold, "warm": warm})
            print("  " + "  ".join(common.format_cell(c, 2) for c in rows[-1]), flush=True)
    print()
    print(common.format_table(HEADERS, rows))
    summary = summary_lines(rows)
    print("\n".join(summary))
    common.write_reports(args.markdown, args.json, environment, HEADERS, rows, raw, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
