"""The index of Triton binaries (runtime/triton_binaries.py): a compile done before is read
from Triton's cache without `triton.compile`, and only when every input of Triton's own key is
unchanged. Real sm_90 compiles: Triton compiles for an NVIDIA target on any machine."""
import os
import subprocess
import sys

import pytest
import torch

from tritonize.runtime import compile_worker, triton_binaries, triton_compile
from tritonize.runtime.loader import load_source_module
from tritonize.runtime.triton_compile import ArgSpec, CompileJob, compile_config

SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def binary_index_kernel(in_ptr0, out_ptr0, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(out_ptr0 + xindex, tl.load(in_ptr0 + xindex) * 2.0)
'''
SPEC = ArgSpec.assumed([torch.float32, torch.float32], 0)


def job(xblock=256, warps=2):
    return CompileJob("unused.py", "binary_index_kernel", SPEC, (("XBLOCK", xblock),), warps, 1, ("cuda", 90, 32))


@pytest.fixture
def caches(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("TRITONIZE_CACHE_DIR", str(tmp_path / "tritonize"))
    return tmp_path


@pytest.fixture
def kernel():
    return load_source_module(SOURCE, "binary_index", interpret=False).binary_index_kernel


def no_triton_compile(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("triton.compile was called on an index hit")

    monkeypatch.setattr(compile_worker, "compile_kernel", refuse)
    monkeypatch.setattr(triton_compile, "hash_triton_installation", refuse)


def test_a_second_compile_is_read_from_the_index_without_triton_compile(caches, kernel, monkeypatch):
    first = compile_config(kernel, job())
    no_triton_compile(monkeypatch)
    again = compile_config(kernel, job())
    assert again.hash == first.hash and again.asm["cubin"] == first.asm["cubin"]
    assert again.metadata.num_warps == 2 and again.src.fn is kernel


def test_anything_in_triton_key_that_changes_is_a_miss(caches, kernel, monkeypatch):
    compile_config(kernel, job())
    base = triton_compile._binary_key(kernel, job())
    assert base is not None and base == triton_compile._binary_key(kernel, job())
    assert triton_compile._binary_key(kernel, job(xblock=512)) != base
    assert triton_compile._binary_key(kernel, job(warps=4)) != base
    monkeypatch.setenv("TRITON_DISABLE_LINE_INFO", "1")  # one of Triton's cache-invalidating variables
    assert triton_compile._binary_key(kernel, job()) != base
    monkeypatch.delenv("TRITON_DISABLE_LINE_INFO")
    monkeypatch.setattr(triton_binaries, "installation_fingerprint", lambda: "another Triton")
    assert triton_compile._binary_key(kernel, job()) != base


def test_the_fingerprint_follows_the_installation_files(tmp_path, monkeypatch):
    import triton

    fake = tmp_path / "triton"
    (fake / "compiler").mkdir(parents=True)
    (fake / "compiler" / "compiler.py").write_text("a")
    monkeypatch.setattr(triton, "__file__", str(fake / "__init__.py"))
    triton_binaries.installation_fingerprint.cache_clear()
    try:
        before = triton_binaries.installation_fingerprint()
        (fake / "compiler" / "compiler.py").write_text("ab")
        triton_binaries.installation_fingerprint.cache_clear()
        assert triton_binaries.installation_fingerprint() != before
    finally:
        triton_binaries.installation_fingerprint.cache_clear()


def test_a_cleared_triton_cache_compiles_again(caches, kernel, monkeypatch):
    first = compile_config(kernel, job())
    monkeypatch.setenv("TRITON_CACHE_DIR", str(caches / "another-triton-cache"))
    again = compile_config(kernel, job())  # the index names an entry this cache does not have
    assert again.hash == first.hash
    assert any((caches / "another-triton-cache").iterdir())


def test_a_corrupt_index_entry_compiles_and_is_rewritten(caches, kernel):
    first = compile_config(kernel, job())
    (entry,) = (caches / "tritonize" / "triton").iterdir()
    entry.write_bytes(entry.read_bytes()[:-5])
    assert compile_config(kernel, job()).hash == first.hash
    assert triton_binaries.load(entry.stem, None) is not None  # rewritten whole


def test_the_index_is_off_without_caching_or_when_triton_must_compile(caches, kernel, monkeypatch):
    from triton import knobs

    monkeypatch.setenv("TRITONIZE_CACHE", "0")
    assert triton_compile._binary_key(kernel, job()) is None
    monkeypatch.delenv("TRITONIZE_CACHE")
    assert triton_compile._binary_key(kernel, job()) is not None
    monkeypatch.setattr(knobs.compilation, "always_compile", True)
    assert triton_compile._binary_key(kernel, job()) is None


HIT_IN_A_NEW_PROCESS = '''
import sys, torch, triton.runtime.cache as cache
from tritonize.runtime import compile_worker, triton_compile
from tritonize.runtime.loader import load_source_module
sys.path.insert(0, {tests!r})
from test_triton_binaries import SOURCE, job

def refuse(*args, **kwargs):
    raise AssertionError("Triton's installation hash or triton.compile on an index hit")

cache.triton_key = refuse
compile_worker.compile_kernel = refuse
kernel = load_source_module(SOURCE, "binary_index", interpret=False).binary_index_kernel
print("hash", triton_compile.compile_config(kernel, job()).hash)
'''


def test_a_new_process_loads_the_binary_without_hashing_triton(caches, kernel):
    first = compile_config(kernel, job())
    script = HIT_IN_A_NEW_PROCESS.format(tests=os.path.dirname(__file__))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"hash {first.hash}" in done.stdout
