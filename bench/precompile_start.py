"""Start-up with AOT precompile: the first call of a process that loads a precompiled function
(no Dynamo trace, nothing compiled) against torch.compile's first call, cold and warm, for
tritonize and Inductor, and against eager's first call.

    PYTHONPATH=src python3 bench/precompile_start.py                                  # GPU, bf16: gpt2, transformer_block, mlp
    PYTHONPATH=src python3 bench/precompile_start.py --device cpu --small --models mlp,transformer_block,gpt2 --backends tritonize

Each model gets one process that calls it eagerly ("eager first s": the floor of any first call,
cuDNN/cuBLAS set-up included), then, for each back end, its own empty cache root
(TRITONIZE_CACHE_DIR, TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR) and five fresh worker processes
(`--worker`), in order:

  cold s        torch.compile(backend=...) first call, caches empty
  warm s        the same in a second process, caches filled by the first (Dynamo's trace is
                still paid)
  save s        precompile + save in a third process (caches warm; for information):
                tritonize.precompile for tritonize; for Inductor torch's own API,
                torch.compile(fullgraph=True).aot_compile(...).save_compiled_function(...)
                with torch's default guard filter
  precomp s     a process that loads the saved function and calls it: the load and the first
                call, timed together ("load s" is the load alone); caches as warm as for "warm s"
                (tritonize.load_precompiled; torch.compiler.load_compiled_function for Inductor)
  precomp empty s  the same with an empty cache root of its own: the file alone (on a GPU
                tritonize's kernels compile and autotune again; on the CPU they are interpreted)

Every process builds the model the same way (bench/models.py Workload: seed 0, inference, bf16 on
the GPU) and compiles the same function, forward(model, *inputs) -> the main output tensor (the
model is an argument: a precompiled function reads the weights of the model it is given). Times
exclude Python start-up, imports (tritonize included) and model building. Ratios: precomp/cold,
warm/cold and precomp/warm. "dynamo traces" counts the functions Dynamo traced in each process,
cold/warm/save/load/load-empty (0 for the loads: they skipped Dynamo). A failure or timeout is a
row, not a crash.
"""
import argparse
import contextlib
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

bytecode_cache.enable()  # before torch is imported: bench/bytecode_cache.py says why

import torch  # noqa: E402

import common  # noqa: E402
import model_zoo  # noqa: E402
import models  # noqa: E402  (bench/models.py: the same workloads as the model suite)

RESULT_MARK = "PRECOMPILE_START_RESULT "
DEFAULT_MODELS = "gpt2,transformer_block,mlp"
ROLES = ("cold", "warm", "save", "load", "load-empty")
BACKENDS = ("tritonize", "inductor")
HEADERS = ["model", "backend", "eager first s", "cold s", "warm s", "save s", "precomp s", "load s", "precomp empty s", "precomp/cold",
           "warm/cold", "precomp/warm", "dynamo traces", "note"]


# ============================================================================ worker side


def forward(model, *inputs):
    """What every process compiles: the model on its inputs, to its main output tensor."""
    return models.main_output(model(*inputs))


def run_worker(args):
    result = {}
    try:
        spec = model_zoo.SPECS_BY_NAME[args.models]
        torch.manual_seed(0)
        torch.set_float32_matmul_precision("high")
        workload = models.Workload(spec, "inference", args.small, args.device)
        tritonize = common.import_tritonize()
        traces = count_dynamo_traces()
        result.update(ROLE_STEPS[args.role](args, workload, tritonize))
        result["dynamo_traces"] = len(traces)
    except model_zoo.MissingPackage as exc:
        result["error"] = f"skipped: {exc}"
    except Exception as exc:  # a row in the parent's table
        traceback.print_exc()
        result["error"] = common.describe_error(exc)
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


def count_dynamo_traces() -> list:
    """A list that gets an entry each time Dynamo starts tracing a function (its root
    InstructionTranslator runs; inlined calls have translators of another class)."""
    from torch._dynamo.symbolic_convert import InstructionTranslator

    traces, run = [], InstructionTranslator.run

    def counted_run(self):
        traces.append(1)
        return run(self)

    InstructionTranslator.run = counted_run
    return traces


def eager_first_call(args, workload, tritonize):
    _, seconds = common.timed_first_call(lambda: call(forward, workload), args.device)
    return {"first_call_s": seconds}


def compile_first_call(args, workload, tritonize):
    compiled = torch.compile(forward, backend=args.backend)
    _, seconds = common.timed_first_call(lambda: call(compiled, workload), args.device)
    return {"first_call_s": seconds}


def save(args, workload, tritonize):
    begin = time.perf_counter()
    example = (workload.model,) + tuple(workload.inputs)
    with torch.no_grad():
        if args.backend == "tritonize":
            tritonize.precompile(forward, example, args.artifact)
        else:  # torch's own API, with its default guard filter
            with aot_compile_enabled():
                aot_fn = torch.compile(forward, fullgraph=True, backend=args.backend).aot_compile((example, {}))
            aot_fn.save_compiled_function(args.artifact)
    return {"save_s": time.perf_counter() - begin}


def aot_compile_enabled():
    config = torch._dynamo.config
    return config.patch(enable_aot_compile=True) if hasattr(config, "enable_aot_compile") else contextlib.nullcontext()


def load_first_call(args, workload, tritonize):
    common.synchronize(args.device)
    begin = time.perf_counter()
    if args.backend == "tritonize":
        loaded = tritonize.load_precompiled(args.artifact)
    else:
        with open(args.artifact, "rb") as file:
            loaded = torch.compiler.load_compiled_function(file)
    load_s = time.perf_counter() - begin
    _, seconds = common.timed_first_call(lambda: call(loaded, workload), args.device)
    return {"load_s": load_s, "first_call_s": load_s + seconds}


def call(fn, workload):
    with torch.no_grad():
        return fn(workload.model, *workload.inputs)


ROLE_STEPS = {"eager": eager_first_call, "cold": compile_first_call, "warm": compile_first_call, "save": save, "load": load_first_call,
              "load-empty": load_first_call}


# ============================================================================ parent side


def run_process(args, env, model, role, artifact, backend="eager"):
    command = [sys.executable, os.path.abspath(__file__), "--worker", "--role", role, "--models", model,
               "--backend", backend, "--device", args.device, "--artifact", artifact] + (["--small"] if args.small else [])
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"fails: timeout after {args.timeout} s"}
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    last = [line for line in done.stderr.splitlines() if line.strip()][-1:] or ["no output"]
    return {"error": f"fails: exit code {done.returncode}: {last[0][:120]}"}


def cache_env(root):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRITONIZE_CACHE_DIR=os.path.join(root, "tritonize"),
               TRITON_CACHE_DIR=os.path.join(root, "triton"), TORCHINDUCTOR_CACHE_DIR=os.path.join(root, "inductor"))
    env.pop("TRITONIZE_CACHE", None)
    return env


def measure(args, model, backend):
    """{role: result} for one model and back end; stops at the first failing process."""
    root = tempfile.mkdtemp(prefix="tritonize-precompile-start-")
    empty_root = os.path.join(root, "empty")
    artifact = os.path.join(root, f"{model}.{backend}")
    results = {}
    try:
        for role in ROLES:
            env = cache_env(empty_root if role == "load-empty" else os.path.join(root, "shared"))
            results[role] = run_process(args, env, model, role, artifact, backend)
            if "error" in results[role]:
                break
        return results
    finally:
        shutil.rmtree(root, ignore_errors=True)


def table_row(model, backend, eager_s, results):
    errors = [f"{role}: {r['error']}" for role, r in results.items() if "error" in r]
    value = {role: results.get(role, {}) for role in ROLES}
    cold, warm = value["cold"].get("first_call_s"), value["warm"].get("first_call_s")
    loaded, empty = value["load"].get("first_call_s"), value["load-empty"].get("first_call_s")

    def ratio(a, b):
        return a / b if a is not None and b else None

    traces = [value[r].get("dynamo_traces") for r in ROLES if "dynamo_traces" in value[r]]
    numbers = [cold, warm, value["save"].get("save_s"), loaded, value["load"].get("load_s"), empty,
               ratio(loaded, cold), ratio(warm, cold), ratio(loaded, warm)]
    cells = ["-" if n is None else f"{n:.2f}" for n in [eager_s] + numbers]
    return [model, backend] + cells + ["/".join(str(t) for t in traces) or "-", "; ".join(errors)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--backend", default="tritonize", help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="tiny models, for a smoke test")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per process")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    parser.add_argument("--json", metavar="FILE", help="also write every process's raw result as JSON")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--role", choices=("eager",) + ROLES, help=argparse.SUPPRESS)
    parser.add_argument("--artifact", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return run_worker(args)
    models = common.parse_list(args.models, list(model_zoo.SPECS_BY_NAME), "models", strict=False)
    environment = common.environment_line(args.device)
    print(environment, flush=True)
    print(f"bytecode cache primed in {bytecode_cache.prime():.1f} s", flush=True)
    rows, raw = [], []
    for model in models:
        eager = run_process(args, cache_env(tempfile.gettempdir()), model, "eager", "-")
        for backend in common.parse_list(args.backends, list(BACKENDS), "backends"):
            results = measure(args, model, backend)
            rows.append(table_row(model, backend, eager.get("first_call_s"), results))
            raw.append({"model": model, "backend": backend, "eager": eager, **results})
            print("  " + "  ".join(common.format_cell(c) for c in rows[-1]), flush=True)
    print()
    print(common.format_table(HEADERS, rows))
    common.write_reports(args.markdown, args.json, environment, HEADERS, rows, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
