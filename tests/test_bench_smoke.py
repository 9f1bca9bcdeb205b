"""Smoke test of the benchmark harness (bench/): the suites run on the CPU with tiny sizes.

Runs each suite as a subprocess, eager only, and checks it exits cleanly and prints its table.
This keeps the harness from rotting between GPU runs; it says nothing about performance.
"""
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_bench(script, *options):
    command = [sys.executable, os.path.join(REPO, "bench", script), "--device", "cpu", "--small",
               "--backends", "eager", *options]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_kernel_suite_runs_on_cpu():
    output = run_bench("kernels.py", "--cases", "gelu_bias,softmax")
    assert "case  " in output and "backend" in output and "% copy" in output and "check" in output
    assert "copy bandwidth:" in output
    rows = [line for line in output.splitlines() if line.startswith(("gelu_bias ", "softmax "))]
    assert len(rows) == 2 and all(line.rstrip().endswith("ok") for line in rows), output


def test_model_suite_runs_on_cpu():
    output = run_bench("models.py", "--models", "mlp", "--mode", "inference")
    assert "model  " in output and "step ms" in output and "accuracy" in output
    rows = [line for line in output.splitlines() if line.startswith("mlp ")]
    assert len(rows) == 1 and "fails" not in rows[0] and rows[0].rstrip().endswith("ref"), output


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
    for script in ("launch_overhead.py", "autotune_check.py"):
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
