"""Shared test setup: the device under test (CPU interpreter by default, CUDA with
TRITONIZE_TEST_DEVICE=cuda), a private cache directory, and helpers that count kernels."""
from __future__ import annotations

import os
import sys
import tempfile

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
os.environ.setdefault("TRITONIZE_CACHE_DIR", tempfile.mkdtemp(prefix="tritonize-test-cache-"))

DEVICE = os.environ.get("TRITONIZE_TEST_DEVICE", "cpu")
DTYPES = [torch.float32, torch.bfloat16] if DEVICE == "cuda" else [torch.float32]


@pytest.fixture
def device() -> str:
    return DEVICE


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
