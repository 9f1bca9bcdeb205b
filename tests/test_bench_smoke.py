"""Smoke test of the benchmark harness (bench/): both suites run on the CPU with tiny sizes.

Runs each suite as a subprocess, eager only, and checks it exits cleanly and prints its table.
This keeps the harness from rotting between GPU runs; it says nothing about performance.
"""
import os
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
