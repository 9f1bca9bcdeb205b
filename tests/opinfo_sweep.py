"""The OpInfo sweep: every (op_db entry, dtype) pair the device supports, through tritonize vs eager.

Library used by tests/test_opinfo_sweep.py, and a standalone triage script:

    python tests/opinfo_sweep.py [--device cpu] [--dtypes float32,int64,...] [--filter SUBSTR]
                                 [--json out.json] [--write-expected] [--jobs N] [-v] [--dynamic]

prints a summary (pairs, pass, pass with no fallback, fail, eager errors, skipped; total and per
dtype), the failures grouped by cause and the most common fallback ops. `--write-expected`
rewrites tests/opinfo_expected_failures.py (EXPECTED_FAILURES and SLOW) from the run: run it on
the full sweep (all dtypes, no --filter) after the compiler changed.

The pairs: for each op_db entry, each dtype of SWEEP_DTYPES (float32, float64, float16, bfloat16,
int32, int64, bool, int8, uint8, int16) in `op.supported_dtypes(device)`. Complex and other
dtypes are not swept (our kernels do not generate them; such ops run through aten).

What one pair does (run_entry_full):
  * the first sample of `op.sample_inputs(device, dtype, requires_grad=False)` (seed 0);
  * the tensor leaves of (sample.input, sample.args, sample.kwargs) -- pytree-flattened, so a list
    of tensors works -- are the inputs of the compiled function; everything else is closed over;
  * eager and `tritonize.run_and_explain` (a fresh compilation: its outputs, and the report
    with the fallbacks) each get their own copy of the inputs
    (storage cloned, strides and aliasing kept); the outputs
    and the inputs after the call (in-place ops) are compared by the rule in tests/opinfo_compare.py
    (same-dtype eager reference, per-dtype tolerances; fp16/bf16 may match the fp32-upcast
    reference instead).

Statuses:
  pass                  compiled result matches eager
  fail                  anything else: an exception while compiling or running (one-line reason),
                        or a mismatch
  eager_error           eager itself raises on the sample (or the pair has no sample): not counted
  skip_nondeterministic the result is random or uninitialized: not counted. The rule: the OpInfo
                        says so (`has_nondeterministic_output`: empty, empty_like, new_empty, ...),
                        or the op draws from the RNG (NONDETERMINISTIC below: rand*, normal,
                        bernoulli, the dropouts in training mode, rrelu in training mode,
                        fractional max pooling, ...) -- eager and compiled code draw different
                        numbers -- or it exposes uninitialized memory (resize_).
"pass with no fallback" is a pass whose tritonize.explain report has no fallbacks at all.
--dynamic compiles each sample with torch.compile(dynamic=True): every size symbolic (issue 17's
sweep: a graph our symbolic lowering cannot take runs through aten as a whole, a fallback).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import sys
import tempfile
import time
import warnings

_TESTS = pathlib.Path(__file__).resolve().parent
_SRC = _TESTS.parent / "src"
for _p in (str(_SRC), str(_TESTS)):
    if _p not in sys.path:
        sys.path.insert(0, _p)
os.environ.setdefault("TRITONIZE_CACHE_DIR", tempfile.mkdtemp(prefix="tritonize-test-cache-"))

import torch  # noqa: E402

import tritonize  # noqa: E402
from opinfo_compare import Call, compare_with_eager, entry_id  # noqa: E402
from opinfo_report import (  # noqa: E402,F401  (re-exported for tests/test_opinfo_sweep.py)
    EXPECTED_FILE,
    SLOW_SECONDS,
    expected_failures,
    key_text,
    one_line,
    print_report,
    result_key,
    slow_entries,
    summarize,
    summarize_by_dtype,
    summary_line,
    dtype_table,
    generated_frame,
    tritonize_frame,
    write_expected,
)

SWEEP_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "bool",
                "int8", "uint8", "int16")

# Ops that draw from the RNG or expose uninitialized memory (see the module docstring). Entry ids.
NONDETERMINISTIC = frozenset({
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial",
    "normal", "normal.in_place", "normal.number_mean", "uniform",
    "rand_like", "randn", "randn_like", "randint", "randint_like",
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout.with_train",
    "nn.functional.rrelu",  # its sample has training=True
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "resize_",  # grows into uninitialized memory
    # uninitialized memory (has_nondeterministic_output is not set on every torch version)
    "empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided",
    "torch.ops.aten._efficient_attention_forward",  # returns the RNG seed and offset it drew
    "torch.ops.aten._flash_attention_forward",  # the same (CUDA only)
})

# Why an entry cannot pass, where the one-line error does not say it (entry id -> reason);
# --write-expected writes these instead of the generated reasons.
_UINT8_UPSAMPLE = ("eager's uint8 upsampling kernel rounds in fixed point; the graph tritonize gets is "
                   "torch's float decomposition (applied at the Autograd key, before any backend), which "
                   "differs from eager by 1 on some elements; tritonize matches the decomposition exactly")
KNOWN_REASONS: dict[str, str] = {
    "nn.functional.interpolate.bilinear": _UINT8_UPSAMPLE,
    "nn.functional.interpolate.bicubic": _UINT8_UPSAMPLE,
    "nn.functional.upsample_bilinear": _UINT8_UPSAMPLE,
}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def sweep_pairs(device: str = "cpu", dtypes=SWEEP_DTYPES, substring: str | None = None) -> list:
    """(op, dtype) for each op_db entry and each of `dtypes` it supports on `device`, entry-major
    in op_db order."""
    from torch.testing._internal.common_methods_invocations import op_db

    device_type = torch.device(device).type
    wanted = [getattr(torch, d) if isinstance(d, str) else d for d in dtypes]
    pairs = []
    for op in op_db:
        if substring and substring not in entry_id(op):
            continue
        supported = op.supported_dtypes(device_type)
        pairs += [(op, dtype) for dtype in wanted if dtype in supported]
    return pairs


def sweep_entries(device: str = "cpu", dtype: torch.dtype = torch.float32) -> list:
    """The op_db entries that support `dtype` on `device`, in op_db order."""
    return [op for op, _ in sweep_pairs(device, [dtype])]


def is_elementwise(op) -> bool:
    """A unary or binary ufunc OpInfo (the elementwise entries of op_db)."""
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo, UnaryUfuncInfo

    return isinstance(op, (UnaryUfuncInfo, BinaryUfuncInfo))


def is_nondeterministic(op) -> bool:
    return bool(getattr(op, "has_nondeterministic_output", False)) or entry_id(op) in NONDETERMINISTIC \
        or op.name in NONDETERMINISTIC


# ---------------------------------------------------------------------------------------------
# one pair


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def run_entry_full(op, device: str = "cpu", dtype: torch.dtype = torch.float32, dynamic: bool = False) -> dict:
    start = time.perf_counter()
    result = {"id": entry_id(op), "dtype": dtype_name(dtype), "status": "fail", "category": None,
              "detail": "", "reference": None, "fallbacks": {}, "graphs": None, "kernels": None,
              "externs": {}, "tritonize_frame": None, "generated_frame": None}
    try:
        with _quiet():
            _run(op, device, dtype, result, dynamic)
    except Exception as err:  # never let one pair break the sweep
        result.update(status="fail", category="sweep_error", detail=f"sweep: {one_line(err)}")
    finally:
        torch._dynamo.reset()
    result["time_s"] = round(time.perf_counter() - start, 3)
    return result


def _run(op, device, dtype, result, dynamic: bool = False) -> None:
    if is_nondeterministic(op):
        result.update(status="skip_nondeterministic", detail="random or uninitialized output")
        return
    torch.manual_seed(0)
    try:
        sample = next(iter(op.sample_inputs(device, dtype, requires_grad=False)), None)
    except Exception as err:
        result.update(status="eager_error", detail=f"sample_inputs: {one_line(err)}")
        return
    if sample is None:
        result.update(status="eager_error", detail="no sample input")
        return
    call = Call(op, sample)

    eager_inputs = call.fresh_inputs()
    try:
        expected = call.fn(*eager_inputs)
    except Exception as err:
        result.update(status="eager_error", detail=f"eager: {one_line(err)}")
        return

    try:
        compiled_inputs = call.fresh_inputs()
        actual, report = tritonize.run_and_explain(call.fn, *compiled_inputs, dynamic=True if dynamic else None)
        result.update(fallbacks=dict(report.fallbacks), graphs=report.graphs, kernels=len(report.kernels),
                      externs=dict(report.externs))
    except Exception as err:
        frame = tritonize_frame(err)
        result.update(status="fail", category="tritonize_error" if frame else "error",
                      detail=f"compiled run: {one_line(err)}", tritonize_frame=frame,
                      generated_frame=generated_frame(err))
        return
    try:
        reference = compare_with_eager(op, call, actual, compiled_inputs, expected, eager_inputs)
    except AssertionError as err:
        result.update(status="fail", category="wrong_result", detail=f"mismatch: {' '.join(str(err).split())[:300]}")
        return
    result.update(status="pass", category=None, detail="", reference=reference)


# ---------------------------------------------------------------------------------------------
# standalone


def _run_chunk(args) -> list[dict]:
    keys, device, dynamic = args
    dtypes = sorted({d for _, d in keys})
    by_key = {(entry_id(op), dtype_name(dt)): (op, dt) for op, dt in sweep_pairs(device, dtypes)}
    results = []
    for key in keys:
        op, dtype = by_key[key]
        results.append(run_entry_full(op, device, dtype, dynamic))
    return results


def _parse_dtypes(text: str) -> tuple[str, ...]:
    names = tuple(d.strip() for d in text.split(",") if d.strip())
    for name in names:
        if not isinstance(getattr(torch, name, None), torch.dtype):
            raise SystemExit(f"--dtypes: {name!r} is not a torch dtype")
    return names


def run_pairs(pairs: list, device: str, jobs: int = 1, verbose: bool = False, dynamic: bool = False) -> list[dict]:
    if jobs <= 1:
        results = []
        for op, dtype in pairs:
            r = run_entry_full(op, device, dtype, dynamic)
            results.append(r)
            if verbose:
                print(f"{key_text(result_key(r))}: {r['status']} {r['time_s']:.1f}s {r['detail'][:150]}", flush=True)
        return results
    import multiprocessing as mp

    keys = [(entry_id(op), dtype_name(dt)) for op, dt in pairs]
    chunks = [keys[k::jobs * 8] for k in range(jobs * 8)]
    results = []
    with mp.get_context("spawn").Pool(jobs) as pool:
        for chunk in pool.imap_unordered(_run_chunk, [(c, device, dynamic) for c in chunks if c]):
            results += chunk
    order = {k: n for n, k in enumerate(keys)}
    return sorted(results, key=lambda r: order[result_key(r)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=os.environ.get("TRITONIZE_TEST_DEVICE", "cpu"))
    ap.add_argument("--dtypes", "--dtype", default=",".join(SWEEP_DTYPES),
                    help="comma-separated dtype names (default: all swept dtypes)")
    ap.add_argument("--filter", default=None, help="only entries whose id contains this substring")
    ap.add_argument("--json", default=None, help="write the per-pair results here")
    ap.add_argument("--write-expected", action="store_true",
                    help=f"rewrite {EXPECTED_FILE.name} from this run's failures (full runs only)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each pair as it finishes")
    ap.add_argument("--dynamic", action="store_true", help="compile with dynamic=True (symbolic sizes)")
    args = ap.parse_args(argv)
    dtypes = _parse_dtypes(args.dtypes)
    pairs = sweep_pairs(args.device, dtypes, args.filter)
    start = time.perf_counter()
    results = run_pairs(pairs, args.device, args.jobs, args.verbose, args.dynamic)
    wall = time.perf_counter() - start
    print_report(results)
    print(f"wall time {wall:.0f} s ({args.jobs} job(s)), device {args.device}, dtypes {','.join(dtypes)}")
    if args.json:
        meta = {"device": args.device, "dtypes": dtypes, "filter": args.filter, "wall_s": round(wall, 1),
                "summary": summarize(results), "by_dtype": summarize_by_dtype(results),
                "torch": torch.__version__}
        pathlib.Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    if args.write_expected:
        if args.dynamic:
            print("--write-expected ignored with --dynamic (the expected failures are the static sweep's)")
        elif args.filter or set(dtypes) != set(SWEEP_DTYPES):
            print("--write-expected ignored with --filter or --dtypes (it needs a full run)")
        else:
            write_expected(results, args.device, known_reasons=KNOWN_REASONS)
            print(f"wrote {EXPECTED_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
