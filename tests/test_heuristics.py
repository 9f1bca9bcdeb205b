"""Launch heuristics (runtime/heuristics.py) for a table of shapes, and the hints codegen gives them."""
import pytest
import torch

import tritonize
from tritonize.runtime.heuristics import pick_config


@pytest.mark.parametrize("kind, x, r, hint, on_gpu, blocks, warps", [
    ("persistent_reduction", 16384, 4096, "inner", True, {"XBLOCK": 1}, 8),       # softmax, var_mean
    ("persistent_reduction", 16384, 1000, "inner", True, {"XBLOCK": 2}, 4),
    ("persistent_reduction", 4096, 128, "inner", True, {"XBLOCK": 16}, 4),
    ("persistent_reduction", 4096, 16, "outer", True, {"XBLOCK": 128}, 4),
    ("reduction", 65536, 1024, "outer", True, {"XBLOCK": 64, "RBLOCK": 256}, 8),
    ("reduction", 8192, 32000, "inner", True, {"XBLOCK": 1, "RBLOCK": 4096}, 4),
    ("persistent_reduction", 16384, 4096, "inner", False, {"XBLOCK": 16}, 8),  # CPU: big blocks
])
def test_reduction_configs(kind, x, r, hint, on_gpu, blocks, warps):
    config = pick_config(kind, x, 1, r, on_gpu, hint)
    assert (config.blocks, config.num_warps) == (blocks, warps)
    assert config.grid == (-(-x // blocks["XBLOCK"]),)


@pytest.mark.parametrize("fn, hint", [
    (lambda t: t.sum(-1), "inner"),
    (lambda t: t.sum(0), "outer"),
    (lambda t: torch.softmax(t, -1), "inner"),
])
def test_codegen_hints(fn, hint):
    report = tritonize.explain(fn, torch.randn(64, 64))
    assert f"hint={hint!r}" in report.wrapper, report.wrapper
