"""The OpInfo sweep with dynamic shapes (issue 17): every float32 op_db entry's first sample,
compiled with `torch.compile(dynamic=True)` (every size symbolic, ints in the sample's arguments
too), against eager.

Every pair must pass: a symbolic graph our lowering cannot take yet runs through aten as a whole
(correct, and counted as a fallback by `python tests/opinfo_sweep.py --dynamic`, which prints the
native share); a wrong result or an error fails. Eager errors and random ops are skipped.
"""
from __future__ import annotations

import pytest
import torch

import opinfo_sweep as sweep
from conftest import DEVICE

PAIRS = sweep.sweep_pairs(DEVICE, ("float32",))

# Not ours: torch itself cannot trace the sample with dynamic=True (Dynamo fails with the eager
# back end as well).
TORCH_LIMITATIONS = {
    "max_pool2d_with_indices_backward": "the op's schema takes int[] and Dynamo passes SymInts",
}


@pytest.mark.parametrize("op", [pytest.param(op, id=sweep.entry_id(op)) for op, _ in PAIRS])
def test_opinfo_dynamic(op):
    r = sweep.run_entry_full(op, DEVICE, torch.float32, dynamic=True)
    if r["status"] in ("eager_error", "skip_nondeterministic"):
        pytest.skip(f"{r['status']}: {r['detail']}")
    if op.name in TORCH_LIMITATIONS:
        if r["status"] == "pass":
            pytest.fail(f"{op.name} passes now: remove it from TORCH_LIMITATIONS", pytrace=False)
        pytest.xfail(TORCH_LIMITATIONS[op.name])
    assert r["status"] == "pass", f"{r['category']}: {r['detail']}\n  fallbacks: {r['fallbacks']}"
