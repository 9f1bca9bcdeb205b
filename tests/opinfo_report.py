"""OpInfo sweep: error one-liners, summaries (total and per dtype), the printed report, and the
expected-failure file (tests/opinfo_expected_failures.py) read and written.

A result is a dict from opinfo_sweep.run_entry_full; its key is the pair (entry id, dtype name).
"""
from __future__ import annotations

import collections
import os
import pathlib
import re
import sys
import textwrap
import traceback

import torch

_TESTS = pathlib.Path(__file__).resolve().parent
_SRC = _TESTS.parent / "src"
EXPECTED_FILE = _TESTS / "opinfo_expected_failures.py"
SLOW_SECONDS = 20.0


def result_key(r: dict) -> tuple[str, str]:
    return (r["id"], r["dtype"])


def key_text(key: tuple[str, str]) -> str:
    return f"{key[0]}[{key[1]}]"


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
# summaries


def summarize(results: list[dict]) -> dict:
    """Counts over (entry, dtype) pairs. `pairs` are the ones eager runs (pass + fail)."""
    c = collections.Counter(r["status"] for r in results)
    counted = c["pass"] + c["fail"]
    no_fallback = sum(1 for r in results if r["status"] == "pass" and not r["fallbacks"])
    return {"pairs": counted, "pass": c["pass"], "pass_no_fallback": no_fallback, "fail": c["fail"],
            "eager_error": c["eager_error"], "skipped": c["skip_nondeterministic"],
            "pass_no_graph": sum(1 for r in results if r["status"] == "pass" and not r["graphs"]),
            "pass_fp32_reference": sum(1 for r in results if r.get("reference") == "eager_fp32"),
            "pass_pct": _pct(c["pass"], counted), "no_fallback_pct": _pct(no_fallback, counted)}


def _pct(n: int, d: int) -> float:
    return round(100.0 * n / d, 1) if d else 0.0


def summarize_by_dtype(results: list[dict]) -> dict[str, dict]:
    groups: dict = collections.defaultdict(list)
    for r in results:
        groups[r["dtype"]].append(r)
    return {dtype: summarize(rs) for dtype, rs in groups.items()}


def summary_line(results: list[dict]) -> str:
    s = summarize(results)
    return (f"opinfo sweep: pairs={s['pairs']} pass={s['pass']} ({s['pass_pct']}%) "
            f"pass_no_fallback={s['pass_no_fallback']} ({s['no_fallback_pct']}%) fail={s['fail']} "
            f"(eager errors {s['eager_error']}, skipped {s['skipped']})")


def dtype_table(results: list[dict]) -> list[str]:
    rows = [f"{'dtype':<10}{'pairs':>7}{'pass':>7}{'no fb':>7}{'fail':>6}{'pass%':>8}{'no fb%':>8}"
            f"{'fp32 ref':>9}{'eager err':>10}{'skipped':>8}"]
    by_dtype = summarize_by_dtype(results)
    order = list(dict.fromkeys(r["dtype"] for r in results))
    for dtype, s in [(d, by_dtype[d]) for d in order] + [("total", summarize(results))]:
        rows.append(f"{dtype:<10}{s['pairs']:>7}{s['pass']:>7}{s['pass_no_fallback']:>7}{s['fail']:>6}"
                    f"{s['pass_pct']:>8}{s['no_fallback_pct']:>8}{s['pass_fp32_reference']:>9}"
                    f"{s['eager_error']:>10}{s['skipped']:>8}")
    return rows


def _cause_key(r: dict) -> str:
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
    p(f"  (passes where Dynamo handed tritonize no graph at all: {s['pass_no_graph']}; "
      f"fp16/bf16 passes against the fp32-upcast reference: {s['pass_fp32_reference']})")
    p("")
    for row in dtype_table(results):
        p("  " + row)
    fails = [r for r in results if r["status"] == "fail"]
    groups: dict = collections.defaultdict(list)
    for r in fails:
        groups[_cause_key(r)].append(r)
    p(f"\nfailures by cause ({len(fails)}):")
    for key, rs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        frames = sorted({r["tritonize_frame"] for r in rs if r["tritonize_frame"]})
        p(f"  {len(rs):3d}  {key}" + (f"  @ {', '.join(frames[:3])}" if frames else ""))
        p("       " + " ".join(key_text(result_key(r)) for r in rs))
    p("\nfailures (entry[dtype]: reason):")
    for r in fails:
        where = [w for w in (r["tritonize_frame"], r.get("generated_frame")) if w]
        p(f"  {key_text(result_key(r))}: {r['detail']}" + (f"  @ {' | '.join(where)}" if where else ""))
    fb = collections.Counter()
    fb_pairs = collections.Counter()
    for r in results:
        fb.update(r["fallbacks"])
        fb_pairs.update(r["fallbacks"].keys())
    p(f"\nmost common fallback ops (op: pairs / calls), top {top}:")
    for op, n in fb_pairs.most_common(top):
        p(f"  {op}: {n} / {fb[op]}")
    slow = [r for r in results if r["time_s"] > SLOW_SECONDS]
    if slow:
        p(f"\nslow pairs (> {SLOW_SECONDS:.0f} s): "
          + ", ".join(f"{key_text(result_key(r))} {r['time_s']:.0f}s" for r in slow))
    p(f"\ntotal time {sum(r['time_s'] for r in results):.0f} s")


# ---------------------------------------------------------------------------------------------
# the float64 mode (tests/opinfo_float64.py)

UNJUDGED = ("float64_error", "float64_changed", "no_upcast")


def summarize_float64(results: list[dict]) -> dict:
    """Counts of the --against-float64 sweep. `pairs` are the ones eager runs: no_worse + worse +
    fail (tritonize raised) + the unjudged statuses (UNJUDGED); `unjudged_ordinary_pass` are
    those of the unjudged that pass the ordinary rule."""
    c = collections.Counter(r["status"] for r in results)
    counted = c["no_worse"] + c["worse"] + c["fail"] + sum(c[s] for s in UNJUDGED)
    return {"pairs": counted, "no_worse": c["no_worse"], "worse": c["worse"], "fail": c["fail"],
            **{s: c[s] for s in UNJUDGED},
            "unjudged_ordinary_pass": sum(1 for r in results
                                          if r["status"] in UNJUDGED and r.get("ordinary") == "pass"),
            "matched_float64": sum(1 for r in results if r.get("matched_float64")),
            "eager_error": c["eager_error"], "skipped": c["skip_nondeterministic"],
            "no_worse_pct": _pct(c["no_worse"], counted)}


def summarize_float64_by_dtype(results: list[dict]) -> dict[str, dict]:
    groups: dict = collections.defaultdict(list)
    for r in results:
        groups[r["dtype"]].append(r)
    return {dtype: summarize_float64(rs) for dtype, rs in groups.items()}


def float64_dtype_table(results: list[dict]) -> list[str]:
    columns = (("pairs", 7), ("no_worse", 10), ("worse", 7), ("fail", 6), ("float64_error", 11),
               ("float64_changed", 13), ("no_upcast", 11), ("unjudged_ordinary_pass", 12),
               ("eager_error", 11), ("skipped", 9))
    titles = {"float64_error": "f64 error", "float64_changed": "f64 changed", "unjudged_ordinary_pass": "(ord pass)",
              "eager_error": "eager err"}
    rows = [f"{'dtype':<10}" + "".join(f"{titles.get(k, k):>{w}}" for k, w in columns)]
    by_dtype = summarize_float64_by_dtype(results)
    order = list(dict.fromkeys(r["dtype"] for r in results))
    for dtype, s in [(d, by_dtype[d]) for d in order] + [("total", summarize_float64(results))]:
        rows.append(f"{dtype:<10}" + "".join(f"{s[k]:>{w}}" for k, w in columns))
    return rows


def errors_text(e: dict | None) -> str:
    if not e:
        return "no floating leaf"
    return (f"{e['leaf']}: tritonize {e['tritonize_abs']:.3g} abs ({e['tritonize_abs_eps']:.2f} eps at max|ref|, "
            f"{e['tritonize_rel_eps']:.2f} eps rel) vs eager {e['eager_abs']:.3g} abs "
            f"({e['eager_abs_eps']:.2f}, {e['eager_rel_eps']:.2f})")


def print_float64_report(results: list[dict], closest: int = 15, out=sys.stdout) -> None:
    """The --against-float64 summary: counts per dtype, every worse pair with both errors, the
    failures, the pairs not judged and why, and the no-worse pairs closest to their bound."""
    p = lambda *a: print(*a, file=out)  # noqa: E731
    s = summarize_float64(results)
    p(f"opinfo sweep against float64: pairs={s['pairs']} no_worse={s['no_worse']} ({s['no_worse_pct']}%) "
      f"worse={s['worse']} fail={s['fail']} not judged={sum(s[k] for k in UNJUDGED)} "
      f"(eager errors {s['eager_error']}, skipped {s['skipped']})")
    p("")
    for row in float64_dtype_table(results):
        p("  " + row)
    sections = (("worse than eager (entry[dtype]: worst leaf, errors against float64)", "worse", True),
                ("tritonize raised", "fail", False),
                ("float64 run raises", "float64_error", False),
                ("float64 run changes the result's structure, shape or dtype", "float64_changed", False),
                ("nothing to upcast", "no_upcast", False))
    for title, status, with_errors in sections:
        rs = [r for r in results if r["status"] == status]
        p(f"\n{title} ({len(rs)}):")
        for r in rs:
            ordinary = f" [ordinary rule: {r['ordinary']}]" if r.get("ordinary") else ""
            p(f"  {key_text(result_key(r))}{_sample_text(r)}: {r['detail']}{ordinary}")
            if with_errors:
                p(f"      {errors_text(r.get('errors'))}")
    matched = [r for r in results if r.get("matched_float64")]
    p(f"\ninteger/bool leaves equal to the float64 run's, not eager's ({len(matched)}):")
    for r in matched:
        p(f"  {key_text(result_key(r))}{_sample_text(r)}: {', '.join(r['matched_float64'])}")
    held = [r for r in results if r.get("ordinary_leaves")]
    p(f"\nfloat64 leaves held to the ordinary rule ({len(held)}):")
    for r in held:
        p(f"  {key_text(result_key(r))}{_sample_text(r)}: {', '.join(r['ordinary_leaves'])} [{r['status']}]")
    judged = [r for r in results if r["status"] == "no_worse" and r.get("errors")]
    judged.sort(key=lambda r: -r["errors"]["margin"])
    p(f"\nno-worse pairs closest to their bound (margin = error / bound, top {closest}):")
    for r in judged[:closest]:
        p(f"  {key_text(result_key(r))}{_sample_text(r)} margin {r['errors']['margin']:.2f}: "
          f"{errors_text(r['errors'])}")
    p(f"\ntotal time {sum(r['time_s'] for r in results):.0f} s")


def _sample_text(r: dict) -> str:
    """" (sample k of n)" for a pair run on several samples: the one its result is from."""
    return f" (sample {r['sample']} of {r['samples']})" if r.get("samples") else ""


# ---------------------------------------------------------------------------------------------
# the expected-failure file


def load_expected(path: pathlib.Path = EXPECTED_FILE) -> dict:
    """The names defined by the expected-failure file (empty when it does not exist)."""
    ns: dict = {}
    if path.exists():
        exec(compile(path.read_text(), str(path), "exec"), ns)
    return ns


def expected_failures(device: str = "cpu") -> dict:
    """The table for `device`, (entry id, dtype name) -> reason: CUDA_EXPECTED_FAILURES on a GPU
    once it was generated there, EXPECTED_FAILURES (generated on the CPU) otherwise."""
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
        pieces = textwrap.wrap(failures[key], 96, drop_whitespace=False) or [""]
        lines.append(f"    {key!r}:")
        lines += [f"        {piece!r}" for piece in pieces[:-1]] + [f"        {pieces[-1]!r},"]
    return lines + ["}", ""]


def table_reason(r: dict) -> str:
    """One line for the expected-failure table: category, reason, last tritonize frame."""
    detail = re.sub(r" user code: .*", "", " ".join(r["detail"].split()))[:160]
    frame = f" @ {r['tritonize_frame'].split(' ')[0]}" if r["tritonize_frame"] else ""
    return f"{r['category']}: {detail}{frame}"


HEADER = '''"""OpInfo sweep: expected failures ((entry id, dtype) -> "category: reason"). Generated by

    python tests/opinfo_sweep.py --write-expected               # EXPECTED_FAILURES, SLOW
    python tests/opinfo_sweep.py --write-expected --device cuda # CUDA_EXPECTED_FAILURES

from a full run (all dtypes, no --filter). tests/test_opinfo_sweep.py fails a pair listed here that
passes. On CUDA the CPU table is used until CUDA_EXPECTED_FAILURES is generated. Categories:
tritonize_error (an exception with a frame in src/tritonize), error (an exception elsewhere:
Dynamo, AOTAutograd, the op itself), wrong_result (compiled result differs from eager),
sweep_error (the sweep itself). A reason written by hand (a comment above the entry) is lost on
regeneration: keep such explanations in KNOWN_REASONS in tests/opinfo_sweep.py.
"""
'''


def write_expected(results: list[dict], device: str = "cpu", path: pathlib.Path = EXPECTED_FILE,
                   known_reasons: dict | None = None) -> None:
    """Rewrite the file: the table of `device` from this run's failures; the other device's table
    is kept, and so is SLOW unless this is a CPU run (SLOW is measured on the CPU interpreter).
    known_reasons (entry id -> text) replaces the generated reason of every dtype of that entry."""
    old = load_expected(path)
    known_reasons = known_reasons or {}
    failures = {}
    for r in results:
        if r["status"] == "fail":
            known = known_reasons.get(r["id"])
            failures[result_key(r)] = f"{r['category']}: {known}" if known else table_reason(r)
    cpu_table, cuda_table = old.get("EXPECTED_FAILURES", {}), old.get("CUDA_EXPECTED_FAILURES")
    slow = dict(old.get("SLOW_SECONDS_SEEN", {}))
    if torch.device(device).type == "cuda":
        cuda_table = failures
    else:
        cpu_table = failures
        slow = {result_key(r): round(r["time_s"]) for r in results if r["time_s"] > SLOW_SECONDS}
    lines = [HEADER]
    lines += _table("EXPECTED_FAILURES", cpu_table)
    lines += _table("CUDA_EXPECTED_FAILURES", cuda_table)
    lines += [f"# Pairs slower than {SLOW_SECONDS:.0f} s on the CPU in the generating run (still run; marked slow).",
              "SLOW_SECONDS_SEEN = {"]
    lines += [f"    {k!r}: {slow[k]}," for k in sorted(slow)]
    lines += ["}", "SLOW = set(SLOW_SECONDS_SEEN)", ""]
    path.write_text("\n".join(lines))
