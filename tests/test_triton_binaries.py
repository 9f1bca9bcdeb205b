"""The index of Triton binaries (runtime/triton_binaries.py): a compile done before is read
from Triton's cache without `triton.compile`, and only when every input of Triton's own key is
unchanged. Real sm_90 compiles: Triton compiles for an NVIDIA target on any machine."""
import dataclasses
import os
import subprocess
import sys

import pytest
import torch

from tritonize.runtime import compile_worker, disk_cache, triton_binaries, triton_compile
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


def key_of(kernel, compile_job):
    from triton.backends.compiler import GPUTarget

    target = GPUTarget(*compile_job.target)
    query = triton_compile._index_lookup(triton_compile.build_source(kernel, compile_job, target), compile_job, target)
    return None if query is None else query.key


def no_triton_compile(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("triton.compile was called on an index hit")

    monkeypatch.setattr(compile_worker, "compile_source", refuse)
    monkeypatch.setattr(triton_compile, "hash_triton_installation", refuse)


def test_a_second_compile_is_read_from_the_index_without_triton_compile(caches, kernel, monkeypatch):
    first = compile_config(kernel, job())
    no_triton_compile(monkeypatch)
    again = compile_config(kernel, job())
    assert again.hash == first.hash and again.asm["cubin"] == first.asm["cubin"]
    assert again.metadata.num_warps == 2 and again.src.fn is kernel


def test_anything_in_triton_key_that_changes_is_a_miss(caches, kernel, monkeypatch):
    compile_config(kernel, job())
    base = key_of(kernel, job())
    assert base is not None and base == key_of(kernel, job())
    assert key_of(kernel, job(xblock=512)) != base
    assert key_of(kernel, job(warps=4)) != base
    unaligned = dataclasses.replace(job(), spec=ArgSpec(0, (("fp32", True), ("fp32", False))))
    assert key_of(kernel, unaligned) != base  # the source Triton gets (its pointer attributes)
    monkeypatch.setenv("TRITON_DISABLE_LINE_INFO", "1")  # one of Triton's cache-invalidating variables
    assert key_of(kernel, job()) != base
    monkeypatch.delenv("TRITON_DISABLE_LINE_INFO")
    monkeypatch.setattr(triton_binaries, "installation_fingerprint", lambda: "another Triton")
    assert key_of(kernel, job()) != base


def test_a_change_in_how_we_build_triton_source_is_a_miss(caches, kernel, monkeypatch):
    first = compile_config(kernel, job())
    build = compile_worker.build_source

    def all_unaligned(jit_fn, kernel_name, args, blocks, target):
        return build(jit_fn, kernel_name, [(kind, False) for kind, _ in args], blocks, target)

    monkeypatch.setattr(compile_worker, "build_source", all_unaligned)
    again = compile_config(kernel, job())
    assert again.hash != first.hash and "tt.divisibility = 16" not in again.asm["ttir"]


def test_a_stored_binary_that_disagrees_with_the_compile_is_a_miss(caches, kernel):
    two_warps = compile_config(kernel, job(warps=2))
    index = caches / "tritonize" / "triton"
    (entry,) = index.iterdir()
    # the entry of a 4-warp compile, pointing at the 2-warp binary: a bug of ours, say
    (index / f"{key_of(kernel, job(warps=4))}.json").write_bytes(entry.read_bytes())
    four_warps = compile_config(kernel, job(warps=4))
    assert four_warps.metadata.num_warps == 4 and four_warps.hash != two_warps.hash


def fake_triton(tmp_path, monkeypatch):
    import triton

    fake = tmp_path / "triton"
    (fake / "compiler").mkdir(parents=True)
    (fake / "_C").mkdir()
    (fake / "_C" / "libtriton.so").write_text("lib")
    (fake / "compiler" / "compiler.py").write_text("a")
    monkeypatch.setattr(triton, "__file__", str(fake / "__init__.py"))
    return fake


def fingerprint():
    triton_binaries.installation_fingerprint.cache_clear()
    try:
        return triton_binaries.installation_fingerprint()
    finally:
        triton_binaries.installation_fingerprint.cache_clear()


def test_the_fingerprint_follows_the_installation_files(tmp_path, monkeypatch):
    fake = fake_triton(tmp_path, monkeypatch)
    before = fingerprint()
    assert before is not None
    (fake / "compiler" / "compiler.py").write_text("b")  # same size, another time
    os.utime(fake / "compiler" / "compiler.py", ns=(1, 10**18))
    assert fingerprint() != before
    backend = tmp_path / "outside" / "backend"  # a development install links its backends in
    backend.mkdir(parents=True)
    (backend / "compiler.py").write_text("x")
    (fake / "backends").symlink_to(backend.parent)
    (backend / "loop").symlink_to(fake)  # a link back up the tree is walked once
    linked = fingerprint()
    (backend / "compiler.py").write_text("xy")
    assert fingerprint() != linked
    (fake / "_C" / "libtriton.so").unlink()
    assert fingerprint() is None  # not a Triton installation: no fingerprint, no index


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
    assert disk_cache.read_json(entry) is None
    assert compile_config(kernel, job()).hash == first.hash
    assert disk_cache.read_json(entry) is not None  # rewritten whole


def test_the_index_is_off_without_caching_or_when_triton_must_compile(caches, kernel, monkeypatch):
    from triton import knobs

    monkeypatch.setenv("TRITONIZE_CACHE", "0")
    assert key_of(kernel, job()) is None
    monkeypatch.delenv("TRITONIZE_CACHE")
    assert key_of(kernel, job()) is not None
    monkeypatch.setattr(knobs.compilation, "always_compile", True)
    assert key_of(kernel, job()) is None


HIT_IN_A_NEW_PROCESS = '''
import sys, torch, triton.runtime.cache as cache
from tritonize.runtime import compile_worker, triton_compile
from tritonize.runtime.loader import load_source_module
sys.path.insert(0, {tests!r})
from test_triton_binaries import SOURCE, job

def refuse(*args, **kwargs):
    raise AssertionError("Triton's installation hash or triton.compile on an index hit")

cache.triton_key = refuse
compile_worker.compile_source = refuse
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
