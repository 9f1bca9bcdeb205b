"""Shared test setup: the device under test (CPU interpreter by default, CUDA with
TRITONIZE_TEST_DEVICE=cuda), a private cache directory, and the two ways torch.compile captures
user Triton kernels."""
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


def make_dynamo_see_triton(monkeypatch) -> None:
    """On the CPU, make Dynamo capture `kernel[grid](...)` itself, as torch's triton_kernel_wrapper
    operator, the way it does on a GPU. Like torch 2.11's, its Triton kernel variable then cannot
    answer isinstance() (later torch versions can), so code Dynamo traces is checked not to ask."""
    import torch.utils._triton
    from torch._dynamo.variables.functions import TritonKernelVariable

    monkeypatch.setattr(torch.utils._triton, "has_triton", lambda: True)
    python_type = TritonKernelVariable.python_type

    def python_type_but_not_for_isinstance(self):
        frame = sys._getframe(1)
        for _ in range(4):
            if frame is None:
                break
            if frame.f_code.co_name == "call_isinstance":
                raise NotImplementedError("isinstance() of a Triton kernel, as in torch 2.11")
            frame = frame.f_back
        return python_type(self)

    monkeypatch.setattr(TritonKernelVariable, "python_type", python_type_but_not_for_isinstance)


@pytest.fixture
def dynamo_sees_triton(monkeypatch):
    """Dynamo captures plain kernel[grid] calls (on a GPU; made so on the CPU)."""
    if DEVICE != "cuda":
        make_dynamo_see_triton(monkeypatch)


# How torch.compile captures wrap_triton calls: "dynamo" (Dynamo's own Triton support, always so
# on a GPU) or "tritonize" (our opaque call, where Dynamo has no Triton: a CPU-only machine).
CAPTURE_PATHS = ["dynamo"] if DEVICE == "cuda" else ["tritonize", "dynamo"]


@pytest.fixture(params=CAPTURE_PATHS)
def capture(request, monkeypatch) -> str:
    if request.param == "dynamo" and DEVICE != "cuda":
        make_dynamo_see_triton(monkeypatch)
    return request.param


@pytest.fixture
def exact_convolutions():
    """cuDNN convolutions default to TF32 on a GPU: gradients would differ in the 3rd digit.
    (flags(), not assignment: torch's own test helpers may have frozen the global flags.)"""
    cudnn = torch.backends.cudnn
    with cudnn.flags(enabled=cudnn.enabled, benchmark=cudnn.benchmark, deterministic=cudnn.deterministic,
                     allow_tf32=False):
        yield


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty tritonize cache root for this test (caching on), with the caches' counters reset."""
    from tritonize.caching import dynamo_cache, graph_cache
    from tritonize.runtime import disk_cache

    monkeypatch.setenv("TRITONIZE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRITONIZE_CACHE", raising=False)
    disk_cache._checked_root.cache_clear()
    graph_cache.STATS.clear()
    dynamo_cache.STATS.clear()
    yield tmp_path / "cache"
    disk_cache._checked_root.cache_clear()


@pytest.fixture(params=["repoint storages", "repoint tensors"])
def repoint(request, monkeypatch):
    """CUDA graphs: both ways of evacuating a kept output (runtime/cuda_graph_pool.evacuate): torch
    2.12+ re-points the storage; torch 2.11 can only re-point the tensors handed out (and copies
    from then on when the caller made views)."""
    from tritonize.runtime import cuda_graph_pool

    if request.param == "repoint tensors":
        monkeypatch.setattr(cuda_graph_pool, "REPOINT_STORAGES", False)
    elif not cuda_graph_pool.REPOINT_STORAGES:
        pytest.skip("this torch cannot re-point a storage")
    return request.param
