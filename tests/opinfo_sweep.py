"""The OpInfo sweep: every op_db entry with a float32 sample on the device, through tritonize vs eager.

Library used by tests/test_opinfo_sweep.py, and a standalone triage script:

    python tests/opinfo_sweep.py [--device cpu] [--dtype float32] [--filter SUBSTR]
                                 [--json out.json] [--write-expected] [--jobs N]

prints a summary (entries, pass, pass with no fallback, fail, eager errors, skipped), the failures
grouped by cause and the most common fallback ops. `--write-expected` rewrites
tests/opinfo_expected_failures.py (EXPECTED_FAILURES and SLOW) from the run: run it on the full
sweep (no --filter) after the compiler changed.

What one entry does (run_entry):
  * the first sample of `op.sample_inputs(device, dtype, requires_grad=False)` (seed 0);
  * the tensor leaves of (sample.input, sample.args, sample.kwargs) -- pytree-flattened, so a list
    of tensors works -- are the inputs of the compiled function; everything else is closed over;
  * eager, `tritonize.explain` (for the fallbacks) and a fresh `torch.compile(fn, backend="tritonize")`
    each get their own copy of the inputs (storage cloned, strides and aliasing kept); the outputs
    and the inputs after the call (in-place ops) are compared with torch.testing.assert_close
    (dtype checked, equal_nan=True, tolerances from helpers.tolerances, looser for the ops in
    LOOSE_TOLERANCE); non-tensor outputs are compared with ==.

Statuses:
  pass                  compiled result matches eager
  fail                  anything else: an exception while compiling or running (one-line reason),
                        or a mismatch
  eager_error           eager itself raises on the sample (or the entry has no sample): not counted
  skip_nondeterministic the result is random or uninitialized: not counted. The rule: the OpInfo
                        says so (`has_nondeterministic_output`: empty, empty_like, new_empty, ...),
                        or the op draws from the RNG (NONDETERMINISTIC below: rand*, normal,
                        bernoulli, the dropouts in training mode, rrelu in training mode,
                        fractional max pooling, ...) -- eager and compiled code draw different
                        numbers -- or it exposes uninitialized memory (resize_).
"pass with no fallback" is a pass whose tritonize.explain report has no fallbacks at all.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import os
import pathlib
import sys
import tempfile
import time
import traceback
import warnings

_TESTS = pathlib.Path(__file__).resolve().parent
_SRC = _TESTS.parent / "src"
for _p in (str(_SRC), str(_TESTS)):
    if _p not in sys.path:
        sys.path.insert(0, _p)
os.environ.setdefault("TRITONIZE_CACHE_DIR", tempfile.mkdtemp(prefix="tritonize-test-cache-"))

import torch  # noqa: E402
import torch.utils._pytree as pytree  # noqa: E402

import tritonize  # noqa: E402
from helpers import tolerances  # noqa: E402

EXPECTED_FILE = _TESTS / "opinfo_expected_failures.py"
SLOW_SECONDS = 20.0

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
})

# Op-aware tolerances (entry id or op name -> assert_close kwargs), for float32 ops whose
# compiled form legitimately reassociates or uses other transcendental implementations.
LOOSE = {"atol": 1e-4, "rtol": 1e-4}
LOOSE_TOLERANCE: dict[str, dict] = {}


def entry_id(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def sweep_entries(device: str = "cpu", dtype: torch.dtype = torch.float32) -> list:
    """The op_db entries that support `dtype` on `device`, in op_db order."""
    from torch.testing._internal.common_methods_invocations import op_db

    device_type = torch.device(device).type
    return [op for op in op_db if dtype in op.supported_dtypes(device_type)]


def is_nondeterministic(op) -> bool:
    return bool(getattr(op, "has_nondeterministic_output", False)) or entry_id(op) in NONDETERMINISTIC \
        or op.name in NONDETERMINISTIC


def tolerance_for(op, expected: torch.Tensor) -> dict:
    tol = LOOSE_TOLERANCE.get(entry_id(op)) or LOOSE_TOLERANCE.get(op.name)
    if tol and expected.dtype in (torch.float32, torch.complex64):
        return dict(tol)
    return tolerances(expected.dtype)


# ---------------------------------------------------------------------------------------------
# inputs


def _copy_leaves(leaves: list) -> list:
    """Copy the tensor leaves: storages cloned once each (aliasing among inputs is kept), then each
    tensor re-viewed with its own size, stride and offset."""
    storages: dict = {}
    out = []
    for leaf in leaves:
        if not isinstance(leaf, torch.Tensor):
            out.append(leaf)
            continue
        if leaf.layout != torch.strided or leaf.is_quantized or type(leaf) is not torch.Tensor:
            out.append(leaf.clone())
            continue
        storage = leaf.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes()) if storage.nbytes() else id(leaf)
        if key not in storages:
            storages[key] = storage.clone()
        t = torch.empty(0, dtype=leaf.dtype, device=leaf.device)
        t.set_(storages[key], leaf.storage_offset(), leaf.size(), leaf.stride())
        out.append(t)
    return out


class Call:
    """A sample as a function of its tensor leaves: `fn(*tensors)` calls the op."""

    def __init__(self, op, sample):
        self.leaves, self.spec = pytree.tree_flatten((sample.input, list(sample.args), dict(sample.kwargs)))
        self.tensor_pos = [i for i, x in enumerate(self.leaves) if isinstance(x, torch.Tensor)]
        func, leaves, spec, pos = op.op, self.leaves, self.spec, self.tensor_pos

        def fn(*tensors):
            filled = list(leaves)
            for i, t in zip(pos, tensors):
                filled[i] = t
            inp, args, kwargs = pytree.tree_unflatten(filled, spec)
            return func(inp, *args, **kwargs)

        self.fn = fn

    def fresh_inputs(self) -> list:
        return _copy_leaves([self.leaves[i] for i in self.tensor_pos])


# ---------------------------------------------------------------------------------------------
# comparison


def _same_scalar(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def compare(op, actual, expected, what: str = "output") -> None:
    a_leaves, e_leaves = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    if len(a_leaves) != len(e_leaves):
        raise AssertionError(f"{what}: {len(a_leaves)} leaves, eager has {len(e_leaves)}")
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                raise AssertionError(f"{what}[{i}]: got {type(a).__name__}, eager gives a tensor")
            try:
                torch.testing.assert_close(a, e, equal_nan=True, check_dtype=True, check_device=True,
                                           check_layout=True, **tolerance_for(op, e))
            except AssertionError as err:
                raise AssertionError(f"{what}[{i}]: {_mismatch_summary(err)}") from None
        elif not _same_scalar(a, e):
            raise AssertionError(f"{what}[{i}]: got {a!r}, eager gives {e!r}")


def _mismatch_summary(err: AssertionError) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    keep = [ln for ln in lines if ln.startswith(("Mismatched", "Greatest", "Expected", "The values for attribute"))]
    return "; ".join(keep) if keep else (lines[0] if lines else "mismatch")


# ---------------------------------------------------------------------------------------------
# errors


def _chain(err: BaseException) -> list:
    seen, out = set(), []
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        out.append(err)
        err = err.__cause__ or err.__context__
    return out


def _frames(err: BaseException) -> list:
    return traceback.extract_tb(err.__traceback__) if err.__traceback__ else []


def _rel(path: str) -> str:
    try:
        return str(pathlib.Path(path).resolve().relative_to(_SRC.parent))
    except ValueError:
        return path


def tritonize_frame(err: BaseException) -> str | None:
    """The last frame in src/tritonize (searching the innermost exception of the chain first)."""
    src = str(_SRC / "tritonize")
    for e in reversed(_chain(err)):
        hits = [f for f in _frames(e) if os.path.abspath(f.filename).startswith(src)]
        if hits:
            f = hits[-1]
            return f"{_rel(f.filename)}:{f.lineno} ({f.name})"
    return None


def generated_frame(err: BaseException) -> str | None:
    """The last frame in generated code (a module in TRITONIZE_CACHE_DIR), with its source line."""
    cache = os.path.abspath(os.environ.get("TRITONIZE_CACHE_DIR", "/nonexistent"))
    for e in reversed(_chain(err)):
        hits = [f for f in _frames(e) if os.path.abspath(f.filename).startswith(cache)]
        if hits:
            f = hits[-1]
            return f"generated {os.path.basename(f.filename)}:{f.lineno}: {(f.line or '').strip()[:120]}"
    return None


def root_error(err: BaseException) -> BaseException:
    """The exception that tells the cause: the innermost of the chain, skipping Dynamo's wrappers."""
    chain = _chain(err)
    for e in chain:  # a tritonize CompileError carries the node and stage
        if type(e).__name__ == "CompileError":
            return e
    return chain[-1]


def one_line(err: BaseException) -> str:
    root = root_error(err)
    msg = " ".join(str(root).split())
    # Dynamo appends its own boilerplate to messages
    for cut in (" Set TORCHDYNAMO_VERBOSE=1", " from user code:", " You can suppress this exception",
                " For more information", " Developer debug context:"):
        msg = msg.split(cut)[0]
    msg = f"{type(root).__name__}: {msg}"
    return msg[:300]


# ---------------------------------------------------------------------------------------------
# one entry


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def run_entry(op, device: str = "cpu", dtype: torch.dtype = torch.float32):
    """Returns (status, detail, fallbacks); see run_entry_full for everything recorded."""
    r = run_entry_full(op, device, dtype)
    return r["status"], r["detail"], collections.Counter(r["fallbacks"])


def run_entry_full(op, device: str = "cpu", dtype: torch.dtype = torch.float32) -> dict:
    start = time.perf_counter()
    result = {"id": entry_id(op), "status": "fail", "category": None, "detail": "", "fallbacks": {},
              "graphs": None, "kernels": None, "externs": {}, "tritonize_frame": None, "generated_frame": None}
    try:
        with _quiet():
            _run(op, device, dtype, result)
    except Exception as err:  # never let one entry break the sweep
        result.update(status="fail", category="sweep_error", detail=f"sweep: {one_line(err)}")
    finally:
        torch._dynamo.reset()
    result["time_s"] = round(time.perf_counter() - start, 3)
    return result


def _run(op, device, dtype, result) -> None:
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

    stage = "explain"
    try:
        report = tritonize.explain(call.fn, *call.fresh_inputs())
        result.update(fallbacks=dict(report.fallbacks), graphs=report.graphs, kernels=len(report.kernels),
                      externs=dict(report.externs))
        stage = "compiled run"
        torch._dynamo.reset()
        compiled_inputs = call.fresh_inputs()
        actual = torch.compile(call.fn, backend="tritonize")(*compiled_inputs)
    except Exception as err:
        frame = tritonize_frame(err)
        result.update(status="fail", category="tritonize_error" if frame else "error",
                      detail=f"{stage}: {one_line(err)}", tritonize_frame=frame,
                      generated_frame=generated_frame(err))
        return
    try:
        compare(op, actual, expected, "output")
        compare(op, compiled_inputs, eager_inputs, "input after call")
    except AssertionError as err:
        result.update(status="fail", category="wrong_result", detail=f"mismatch: {' '.join(str(err).split())[:300]}")
        return
    result.update(status="pass", category=None, detail="")


# ---------------------------------------------------------------------------------------------
# summary


def summarize(results: list[dict]) -> dict:
    c = collections.Counter(r["status"] for r in results)
    counted = c["pass"] + c["fail"]
    return {"entries": counted, "pass": c["pass"],
            "pass_no_fallback": sum(1 for r in results if r["status"] == "pass" and not r["fallbacks"]),
            "fail": c["fail"], "eager_error": c["eager_error"], "skipped": c["skip_nondeterministic"],
            "pass_no_graph": sum(1 for r in results if r["status"] == "pass" and not r["graphs"])}


def summary_line(results: list[dict]) -> str:
    s = summarize(results)
    return (f"opinfo sweep: entries={s['entries']} pass={s['pass']} pass_no_fallback={s['pass_no_fallback']} "
            f"fail={s['fail']} (eager errors {s['eager_error']}, skipped {s['skipped']})")


def _cause_key(r: dict) -> str:
    import re
    d = r["detail"]
    if r["category"] == "wrong_result":
        return "wrong result (mismatch)"
    d = re.sub(r" FX node: .*| user code: .*", "", d)
    d = re.sub(r"\d+", "N", d)
    return f"[{r['category']}] {d[:120]}"


def print_report(results: list[dict], top: int = 30, out=sys.stdout) -> None:
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p(summary_line(results))
    s = summarize(results)
    p(f"  (passes where Dynamo handed tritonize no graph at all: {s['pass_no_graph']})")
    fails = [r for r in results if r["status"] == "fail"]
    groups: dict = collections.defaultdict(list)
    for r in fails:
        groups[_cause_key(r)].append(r)
    p(f"\nfailures by cause ({len(fails)}):")
    for key, rs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        frames = sorted({r["tritonize_frame"] for r in rs if r["tritonize_frame"]})
        p(f"  {len(rs):3d}  {key}" + (f"  @ {', '.join(frames[:3])}" if frames else ""))
        p("       " + " ".join(r["id"] for r in rs))
    p("\nfailures (id: reason):")
    for r in fails:
        where = [w for w in (r["tritonize_frame"], r.get("generated_frame")) if w]
        p(f"  {r['id']}: {r['detail']}" + (f"  @ {' | '.join(where)}" if where else ""))
    fb = collections.Counter()
    fb_entries = collections.Counter()
    for r in results:
        fb.update(r["fallbacks"])
        fb_entries.update(r["fallbacks"].keys())
    p(f"\nmost common fallback ops (op: entries / calls), top {top}:")
    for op, n in fb_entries.most_common(top):
        p(f"  {op}: {n} / {fb[op]}")
    slow = [r for r in results if r["time_s"] > SLOW_SECONDS]
    if slow:
        p(f"\nslow entries (> {SLOW_SECONDS:.0f} s): " + ", ".join(f"{r['id']} {r['time_s']:.0f}s" for r in slow))
    p(f"\ntotal time {sum(r['time_s'] for r in results):.0f} s")


def load_expected(path: pathlib.Path = EXPECTED_FILE) -> dict:
    """The names defined by the expected-failure file (empty when it does not exist)."""
    ns: dict = {}
    if path.exists():
        exec(compile(path.read_text(), str(path), "exec"), ns)
    return ns


def expected_failures(device: str = "cpu") -> dict:
    """The table for `device`: CUDA_EXPECTED_FAILURES on a GPU once it was generated there,
    EXPECTED_FAILURES (generated on the CPU) otherwise."""
    ns = load_expected()
    if torch.device(device).type == "cuda" and ns.get("CUDA_EXPECTED_FAILURES") is not None:
        return ns["CUDA_EXPECTED_FAILURES"]
    return ns.get("EXPECTED_FAILURES", {})


def slow_entries() -> set:
    return set(load_expected().get("SLOW", ()))


def _table(name: str, failures: dict | None) -> list[str]:
    if failures is None:
        return [f"{name} = None", ""]
    lines = [f"{name} = {{"]
    for key in sorted(failures):
        lines.append(f"    {key!r}: {failures[key]!r},")
    return lines + ["}", ""]


def table_reason(r: dict) -> str:
    """One line for the expected-failure table: category, reason, last tritonize frame."""
    import re
    detail = re.sub(r" user code: .*", "", " ".join(r["detail"].split()))[:160]
    frame = f" @ {r['tritonize_frame'].split(' ')[0]}" if r["tritonize_frame"] else ""
    return f"{r['category']}: {detail}{frame}"


def write_expected(results: list[dict], device: str = "cpu", path: pathlib.Path = EXPECTED_FILE) -> None:
    """Rewrite the file: the table of `device` from this run's failures; the other device's table
    is kept, and so is SLOW unless this is a CPU run (SLOW is measured on the CPU interpreter)."""
    old = load_expected(path)
    failures = {r["id"]: table_reason(r) for r in results if r["status"] == "fail"}
    cpu_table, cuda_table = old.get("EXPECTED_FAILURES", {}), old.get("CUDA_EXPECTED_FAILURES")
    slow = dict(old.get("SLOW_SECONDS_SEEN", {}))
    if torch.device(device).type == "cuda":
        cuda_table = failures
    else:
        cpu_table = failures
        slow = {r["id"]: round(r["time_s"]) for r in results if r["time_s"] > SLOW_SECONDS}
    lines = ['"""OpInfo sweep: expected failures (entry id -> "category: reason"). Generated by',
             "",
             "    python tests/opinfo_sweep.py --write-expected              # EXPECTED_FAILURES, SLOW",
             "    python tests/opinfo_sweep.py --write-expected --device cuda # CUDA_EXPECTED_FAILURES",
             "",
             "from a full run. tests/test_opinfo_sweep.py fails an entry listed here that passes. On CUDA the",
             "CPU table is used until CUDA_EXPECTED_FAILURES is generated. Categories: tritonize_error (an",
             "exception with a frame in src/tritonize), error (an exception elsewhere: Dynamo, AOTAutograd),",
             "wrong_result (compiled result differs from eager), sweep_error (the sweep itself).",
             '"""',
             ""]
    lines += _table("EXPECTED_FAILURES", cpu_table)
    lines += _table("CUDA_EXPECTED_FAILURES", cuda_table)
    lines += [f"# Entries slower than {SLOW_SECONDS:.0f} s on the CPU in the generating run (still run; marked slow).",
              "SLOW_SECONDS_SEEN = {"]
    lines += [f"    {k!r}: {slow[k]}," for k in sorted(slow)]
    lines += ["}", "SLOW = set(SLOW_SECONDS_SEEN)", ""]
    path.write_text("\n".join(lines))


# ---------------------------------------------------------------------------------------------
# standalone


def _run_chunk(args) -> list[dict]:
    ids, device, dtype_name = args
    dtype = getattr(torch, dtype_name)
    by_id = {entry_id(op): op for op in sweep_entries(device, dtype)}
    return [run_entry_full(by_id[i], device, dtype) for i in ids]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=os.environ.get("TRITONIZE_TEST_DEVICE", "cpu"))
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--filter", default=None, help="only entries whose id contains this substring")
    ap.add_argument("--json", default=None, help="write the per-entry results here")
    ap.add_argument("--write-expected", action="store_true",
                    help=f"rewrite {EXPECTED_FILE.name} from this run's failures (full runs only)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each entry as it finishes")
    args = ap.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    ops = [op for op in sweep_entries(args.device, dtype) if not args.filter or args.filter in entry_id(op)]
    start = time.perf_counter()
    results: list[dict] = []
    if args.jobs > 1:
        import multiprocessing as mp

        chunks = [[entry_id(op) for op in ops[k::args.jobs * 4]] for k in range(args.jobs * 4)]
        with mp.get_context("spawn").Pool(args.jobs) as pool:
            for chunk in pool.imap_unordered(_run_chunk, [(c, args.device, args.dtype) for c in chunks if c]):
                results += chunk
        order = {entry_id(op): k for k, op in enumerate(ops)}
        results.sort(key=lambda r: order[r["id"]])
    else:
        for op in ops:
            r = run_entry_full(op, args.device, dtype)
            results.append(r)
            if args.verbose:
                print(f"{r['id']}: {r['status']} {r['time_s']:.1f}s {r['detail'][:150]}", flush=True)
    wall = time.perf_counter() - start
    print_report(results)
    print(f"wall time {wall:.0f} s ({args.jobs} job(s)), device {args.device}, dtype {args.dtype}")
    if args.json:
        meta = {"device": args.device, "dtype": args.dtype, "filter": args.filter, "wall_s": round(wall, 1),
                "summary": summarize(results), "torch": torch.__version__}
        pathlib.Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    if args.write_expected:
        if args.filter:
            print("--write-expected ignored with --filter (it needs a full run)")
        else:
            write_expected(results, args.device)
            print(f"wrote {EXPECTED_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
