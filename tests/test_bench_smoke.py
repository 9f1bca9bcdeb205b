"""Smoke test of the benchmark harness (bench/): the suites run on the CPU with tiny sizes.

Runs each suite as a subprocess, mostly eager only, and checks it exits cleanly and prints its
table. The model suite's worker processes are tested too: forked and fresh (--no-fork), with
tritonize and its warm-cache worker, and workers that hang or die (BENCH_WORKER_FAULT).
This keeps the harness from rotting between GPU runs; it says nothing about performance.
"""
import os
import re
import subprocess
import sys
import time

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_bench(script, *options):
    command = [sys.executable, os.path.join(REPO, "bench", script), "--device", "cpu", "--small",
               "--backends", "eager", *options]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_kernel_suite_runs_on_cpu():
    cases = ("gelu_bias", "softmax", "conv_bn_relu_residual", "dwconv_bn_silu")
    output = run_bench("kernels.py", "--cases", ",".join(cases))
    assert "case  " in output and "backend" in output and "% copy" in output and "check" in output
    assert "copy bandwidth:" in output
    rows = [line for line in output.splitlines() if line.startswith(tuple(c + " " for c in cases))]
    assert len(rows) == len(cases) and all(line.rstrip().endswith("ok") for line in rows), output


def test_kernel_suite_writes_a_profile_page(tmp_path):
    """--html: tritonize.profile of each case, merged into one page (issue 24)."""
    page = tmp_path / "suite.html"
    output = run_bench("kernels.py", "--cases", "gelu_bias,sum_first", "--html", str(page))
    text = page.read_text()
    for case in ("gelu_bias/triton_poi_fused", "sum_first/triton_red_fused"):
        assert case in output and case in text
    assert "2 graph(s)" in output and 'id="kernel-1"' in text


def test_profile_check_runs_on_cpu():
    """bench/profile_check.py (issue 24): the suite's figure and the profile's, per case."""
    command = [sys.executable, os.path.join(REPO, "bench", "profile_check.py"), "--device", "cpu", "--small",
               "--cases", "softmax"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    output = result.stdout
    assert "profile / suite" in output and "softmax" in output and "not timed" in output


def test_model_suite_runs_on_cpu():
    output = run_bench("models.py", "--models", "mlp", "--mode", "inference")
    assert "model  " in output and "step ms" in output and "accuracy" in output
    rows = [line for line in output.splitlines() if line.startswith("mlp ")]
    assert len(rows) == 1 and "fails" not in rows[0] and rows[0].rstrip().endswith("ref"), output


def run_model_suite(*options, fault=None):
    """bench/models.py on the CPU with tiny models (tritonize from src/); its stdout. `fault`:
    the worker fault to provoke (BENCH_WORKER_FAULT, see bench/workers.py)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"))
    env.pop("BENCH_WORKER_FAULT", None)
    if fault:
        env["BENCH_WORKER_FAULT"] = fault
    command = [sys.executable, os.path.join(REPO, "bench", "models.py"), "--device", "cpu",
               "--small", *options]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def table_rows(output, models):
    """The final table's rows for `models`, split into cells (the accuracy cell split too)."""
    return [line.split() for line in output.splitlines() if line.startswith(tuple(m + " " for m in models))]


def test_model_suite_writes_a_profile_page_per_model(tmp_path):
    """--html-dir: each tritonize row's worker also writes tritonize.profile's page (issue 24),
    training with its backward compiled and counted."""
    output = run_model_suite("--models", "mlp", "--mode", "both", "--backends", "eager,tritonize",
                             "--skip-warm", "--html-dir", str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp_inference.html", "mlp_training.html"], output
    training = (tmp_path / "mlp_training.html").read_text()
    assert "aten.mm.default" in training and 'id="kernel-0"' in training


def assert_measured_with_warm_call(output, models):
    """Every (model, eager/tritonize) row measured, and tritonize's with a warm-call time."""
    rows = table_rows(output, models)
    assert [(r[0], r[2]) for r in rows] == [(m, b) for m in models for b in ("eager", "tritonize")], output
    assert not any("fails" in " ".join(r) for r in rows), output
    for row in (r for r in rows if r[2] == "tritonize"):
        assert float(row[6]) > 0 and row[-2] == "ok", output  # warm call s; accuracy verdict


def test_model_suite_repeats_passes_and_keeps_one_row_per_back_end():
    """--repeat 2: two passes over the back ends in turn; the table has one row each."""
    output = run_model_suite("--models", "mlp", "--backends", "eager,tritonize", "--repeat", "2")
    assert "mlp inference: pass 2 of 2" in output, output
    final = output[output.rindex("model  "):]
    rows = table_rows(final, ["mlp"])
    assert [row[2] for row in rows] == ["eager", "tritonize"], final
    assert rows[1][-1].startswith("ok") or rows[1][-2] == "ok", final


def test_repeated_passes_keep_the_fastest_good_step_and_note_the_others():
    """--repeat's merge: the first good pass's fields, the fastest step among the good passes; a
    pass that failed or did not match eager is never the row's time, and the row says so."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import models

    ok = {"step_s": 0.004, "first_call_s": 9.0, "accuracy": "ok cos=1.0000", "wall_s": 20.0}
    faster_ok = {"step_s": 0.003, "first_call_s": 2.0, "accuracy": "ok cos=1.0000", "wall_s": 10.0}
    mismatch = {"step_s": 0.001, "first_call_s": 2.0, "accuracy": "MISMATCH cos=0.5000", "wall_s": 10.0}
    merged = models.fastest_of([ok, mismatch, faster_ok, {"error": "fails: timeout"}])
    assert merged["step_s"] == 0.003 and merged["first_call_s"] == 9.0 and merged["wall_s"] == 40.0
    assert merged["accuracy"] == "ok cos=1.0000; pass 2: MISMATCH cos=0.5000; pass 4: fails: timeout"
    assert models.fastest_of([mismatch, {"error": "x"}]) is mismatch
    eager = {"step_s": 0.01, "first_call_s": 0.1, "accuracy": "ref"}
    assert "wall_s" not in models.fastest_of([eager, dict(eager, step_s=0.02)])


def test_model_suite_forks_workers_on_cpu():
    """The default path on Linux: workers forked from the suite process, warm-cache workers
    included, each reporting its phases up to being reaped."""
    output = run_model_suite("--models", "mlp,transformer_block", "--backends", "eager,tritonize")
    assert "workers: forked from this process" in output, output
    assert_measured_with_warm_call(output, ["mlp", "transformer_block"])
    assert output.count("warm phases (s since launch): start") == 2, output
    assert re.search(r"done [\d.]+, exited [\d.]+", output), output


def test_model_suite_runs_fresh_subprocesses_with_no_fork():
    output = run_model_suite("--models", "mlp", "--backends", "eager,tritonize", "--no-fork")
    assert "workers: fresh subprocesses (--no-fork)" in output, output
    assert_measured_with_warm_call(output, ["mlp"])


def process_gone(pid):
    """True once `pid` has exited (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("how", ["fork", "no-fork"])
def test_model_suite_worker_timeout_kills_its_process_group(tmp_path, how):
    """A hung worker becomes a timeout row, and neither it nor the process it started lives on.
    (10 s: a fresh worker on a loaded 2-core machine took over 3 s to start and log its pids.)"""
    options = ["--models", "mlp", "--backends", "eager", "--timeout", "10", "--log-dir", str(tmp_path)]
    output = run_model_suite(*options, *(["--no-fork"] if how == "no-fork" else []), fault="hang")
    rows = table_rows(output, ["mlp"])
    assert len(rows) == 1 and " ".join(rows[0]).endswith("fails: timeout after 10 s"), output
    log = (tmp_path / "mlp-inference-eager.log").read_text()
    pids = [int(p) for p in re.search(r"worker pid (\d+), grandchild pid (\d+)", log).groups()]
    deadline = time.monotonic() + 10
    while not all(process_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(process_gone(pid) for pid in pids), (pids, log)


@pytest.mark.parametrize("how", ["fork", "no-fork"])
def test_model_suite_worker_dying_without_result_is_a_row(how):
    """A worker that exits without sending its results gives a row with its exit code and last
    output line; the suite goes on to the next model."""
    options = ["--models", "mlp,transformer_block", "--backends", "eager"]
    output = run_model_suite(*options, *(["--no-fork"] if how == "no-fork" else []), fault="exit")
    rows = [" ".join(r) for r in table_rows(output, ["mlp", "transformer_block"])]
    assert len(rows) == 2, output
    assert all(r.endswith("fails: worker exit code 3: fault: leaving without a result") for r in rows), output


def test_fork_server_imports_no_compiler():
    """The suite process imports nothing of the compilers before forking (their import belongs to
    each worker, as in a fresh process) and does not initialize CUDA."""
    script = """if True:
        import sys
        sys.path.insert(0, "bench")
        import models
        models.preload_packages(["mlp", "transformer_block"])
        loaded = [m for m in sys.modules if m.split(".")[0] in ("triton", "tritonize")
                  or m.startswith(("torch._dynamo", "torch._inductor"))]
        assert not loaded, loaded
        assert not models.torch.cuda.is_initialized()
        """
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compile_cache_bench_runs_on_cpu():
    """Cold and warm processes on the CPU: the warm one must hit the graph cache and the Dynamo-level
    cache (the MLP's one inference graph)."""
    command = [sys.executable, os.path.join(REPO, "bench", "compile_cache.py"), "--device", "cpu", "--small",
               "--models", "mlp", "--backends", "tritonize", "--no-floor"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "src")))
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("mlp ")]
    assert len(rows) == 1 and re.search(r"1 hit, 0 miss\s+1 hit, 0 miss, 0 unkeyed", rows[0]), result.stdout
    assert "fails" not in rows[0], result.stdout


def test_precompile_start_bench_runs_on_cpu():
    """An eager process, then five for tritonize: cold, warm, save, and the two loads, which
    Dynamo never traces."""
    command = [sys.executable, os.path.join(REPO, "bench", "precompile_start.py"), "--device", "cpu", "--small",
               "--models", "mlp", "--backends", "tritonize"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "src")))
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("mlp ")]
    assert len(rows) == 1 and rows[0][:2] == ["mlp", "tritonize"] and rows[0][-1] == "1/1/1/0/0", result.stdout
    assert "-" not in rows[0][2:12], result.stdout


def test_compile_pool_bench_runs_on_cpu():
    """Triton compiles for sm_90 without a GPU: every pool compiles both kernels without errors."""
    command = [sys.executable, os.path.join(REPO, "bench", "compile_pool.py"), "--kernels", "2", "--workers", "2",
               "--pools", "serial,threads"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "src")))
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith(("serial ", "threads "))]
    assert [r[0] for r in rows] == ["serial", "threads"] and all(r[-1] == "0" for r in rows), result.stdout


def test_gpu_only_benches_import():
    """launch_overhead.py and autotune_check.py need CUDA; here they must at least load."""
    for script in ("launch_overhead.py", "autotune_check.py", "saved_tensors.py"):
        result = subprocess.run([sys.executable, os.path.join(REPO, "bench", script), "--help"], cwd=REPO,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0 and "usage" in result.stdout, result.stderr


def test_kernel_suite_compares_default_and_max_autotune_on_cpu():
    """The tritonize-max back end (mode="max-autotune") runs next to default mode and the summary
    gives their ratio (on the CPU both run the first pick: this checks the harness only)."""
    command = [sys.executable, os.path.join(REPO, "bench", "kernels.py"), "--device", "cpu", "--small",
               "--backends", "tritonize,tritonize-max", "--cases", "gelu_bias", "--rounds", "1"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "src")))
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("gelu_bias ")]
    assert len(rows) == 2 and all(line.rstrip().endswith("ok") for line in rows), result.stdout
    assert "max-autotune vs default" in result.stdout, result.stdout


def test_training_accuracy_falls_back_to_the_fp32_gradients():
    """A bf16 training result far from eager's bf16 gradients is judged against the fp32 step:
    'ok' or 'MISMATCH' by the same threshold when eager's gradients agree with fp32, 'unclear'
    when even eager's do not; the fp32 step runs only when needed."""
    import torch

    sys.path.insert(0, os.path.join(REPO, "bench"))
    import models

    generator = torch.Generator().manual_seed(0)
    fp32 = torch.randn(1000, generator=generator)

    def near(scale):
        return fp32 + scale * torch.randn(1000, generator=generator)

    loss = torch.tensor(1.0)
    as_step = lambda grad: [loss, grad]  # noqa: E731 - what a training step returns
    calls = []

    def reference():
        calls.append(1)
        return as_step(fp32)

    # eager's bf16 gradients and the compiled ones each within 0.995 of fp32, on opposite sides:
    # 0.98 to each other, so only the fp32 step can call the compiled result right
    noise = 0.1 * torch.randn(1000, generator=generator)
    eager, compiled = fp32 + noise, fp32 - noise
    ok = models.accuracy("training", as_step(compiled), as_step(eager), reference)
    assert ok.startswith("ok grad_cos=0.98") and "fp32_cos=0.99" in ok, ok
    # wrong: 3 of 10 blocks of the gradient zeroed, the rest exact (cos to fp32 ~0.84)
    wrong = fp32.clone()
    wrong[:300] = 0
    bad = models.accuracy("training", as_step(wrong), as_step(eager), reference)
    assert bad.startswith("MISMATCH") and "fp32_cos=" in bad, bad
    # eager's bf16 gradients themselves far from fp32: bf16 cannot judge
    unclear = models.accuracy("training", as_step(near(0.8)), as_step(near(0.8)), reference)
    assert unclear.startswith("unclear"), unclear
    calls.clear()
    assert models.accuracy("training", as_step(eager), as_step(eager), reference) == "ok grad_cos=1.0000"
    assert not calls  # agreeing with eager needs no fp32 step
    assert models.accuracy("inference", near(0.8), eager).startswith("MISMATCH cos=")


def test_the_bytecode_cache_is_used_only_from_a_private_directory(tmp_path, monkeypatch):
    """Python runs the bytecode it finds there: a directory others can write to is refused."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import bytecode_cache

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert not bytecode_cache.private_directory(str(shared))
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    assert bytecode_cache.private_directory(str(mine))
    monkeypatch.setenv("BENCH_PYCACHE", str(shared))
    monkeypatch.setattr(sys, "pycache_prefix", sys.pycache_prefix)
    assert bytecode_cache.enable() is None and sys.pycache_prefix != str(shared)
    assert bytecode_cache.prime() == 0.0


def test_distributed_bench_runs_its_setups_on_cpu():
    """bench/distributed.py at world size 1 (gloo): every setup and back end a row with a time."""
    import socket

    with socket.socket() as probe:  # a free port for the process group's store
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"), MASTER_PORT=str(port))
    command = [sys.executable, os.path.join(REPO, "bench", "distributed.py"), "--device", "cpu", "--small",
               "--setups", "ddp,fsdp2,tp", "--backends", "eager,tritonize", "--steps", "1", "--warmup", "1"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith(("ddp ", "fsdp2 ", "tp "))]
    assert [(r[0], r[1]) for r in rows] == [(s, b) for s in ("ddp", "fsdp2", "tp") for b in ("eager", "tritonize")]
    assert all(float(r[3]) > 0 for r in rows), result.stdout


def test_distributed_bench_counts_the_overlapped_share_of_communication():
    """bench/distributed.py's figures from one rank's kernels (profiler times in microseconds):
    communication kernels 10 + 10 us, 5 of them under a compute kernel; compute 15 + 10 us."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import distributed

    kernels = [(0, 10, "ncclDevKernel_AllReduce_Sum_f32"), (5, 20, "nvjet_gemm"), (30, 40, "ncclDevKernel_AllGather"),
               (50, 60, "triton_poi_fused_add_0")]
    assert distributed.communication_figures(kernels, steps=1) == (0.025, 0.02, 0.25)
    assert distributed.communication_figures(kernels[1:2], steps=1) == (0.015, 0.0, None)


def test_distributed_bench_records_the_profiled_steps_only():
    """The overlap figures read the profiler's events after its schedule ends: the steps after the
    unrecorded first one, not an empty cycle started after them (which left every figure 0 on the
    GPU)."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import distributed
    from torch.profiler import ProfilerActivity

    calls = []
    events = distributed.recorded_events(lambda: calls.append(torch.ones(4).cumsum(0)), 2, ProfilerActivity.CPU,
                                         lambda: None)
    assert len(calls) == 3
    assert sum("cumsum" in name for _, _, name in events) == 2


def test_depthwise_sweep_runs_on_cpu():
    """bench/depthwise_sweep.py --small: a row per shape with a time for every back end."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"))
    command = [sys.executable, os.path.join(REPO, "bench", "depthwise_sweep.py"), "--device", "cpu", "--small",
               "--rounds", "1"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line.split(" | ") for line in result.stdout.splitlines() if line.startswith("row: ")]
    assert len(rows) == 2 and all(len(r) == 12 for r in rows), result.stdout
    assert all(float(cell) > 0 for r in rows for cell in r[5:10]), result.stdout
