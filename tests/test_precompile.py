"""AOT precompile (tritonize/caching/precompiled.py): a function compiled with torch's aot_compile and
tritonize, saved, then loaded and run in a fresh process that neither traces with Dynamo nor
compiles; damaged, foreign and mismatched artifacts fail with a clear error; training graphs and
other graphs that cannot be saved are refused, saying why; torch's guards still apply."""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import torch

import tritonize
from tritonize.caching import dynamo_cache, precompiled
from tritonize.backend import make_backend
from tritonize.runtime import disk_cache
from helpers import assert_same
from precompile_models import build

TESTS = str(pathlib.Path(__file__).resolve().parent)
SRC = str(pathlib.Path(__file__).resolve().parents[1] / "src")

pytestmark = pytest.mark.skipif(not hasattr(torch._dynamo, "aot_compile"), reason="torch has no aot_compile")


def save(tmp_path, name, device):
    """Precompile model `name` under no_grad into tmp_path; (path, model, x, compiled output)."""
    model, x = build(name, device)
    path = tmp_path / f"{name}.tritonize"
    with torch.no_grad():
        compiled = tritonize.precompile(model, (x,), path)
        out = compiled(x)
        assert_same(out, model(x))
    return path, model, x, out


# ----------------------------------------------------------------------------- a fresh process

LOAD_SCRIPT = """
import json, sys
path, name, device, tests = sys.argv[1:5]
sys.path.insert(0, tests)
import torch
import tritonize, tritonize.backend
from tritonize.caching import dynamo_cache, graph_cache
from torch._dynamo.utils import counters
from precompile_models import build

def refuse(*args, **kwargs):
    raise AssertionError("the loaded function compiled something")

graph_cache.compile_graph = refuse  # our compiler
tritonize.backend.aot_module_simplified = refuse  # AOTAutograd
from torch._dynamo.symbolic_convert import InstructionTranslator
InstructionTranslator.run = refuse  # Dynamo's trace of a function
model, x = build(name, device)
fn = tritonize.load_precompiled(path, model)
with torch.no_grad():
    expected = model(x)
    out = fn(x)
    again = fn(x)
torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
torch.testing.assert_close(again, out, atol=0, rtol=0)
print("RESULT " + json.dumps({"frames": dict(counters["frames"]), "stats": dict(counters["stats"]),
                              "dynamo": dict(dynamo_cache.STATS), "graph": dict(graph_cache.STATS),
                              "out": out.cpu().flatten().tolist()}))
"""


def load_in_fresh_process(path, name, device, env_changes) -> dict:
    env = dict(os.environ, PYTHONPATH=SRC, **env_changes)
    if "TRITONIZE_CACHE" not in env_changes:
        env.pop("TRITONIZE_CACHE", None)
    result = subprocess.run([sys.executable, "-c", LOAD_SCRIPT, str(path), name, device, TESTS],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.mark.parametrize("name,caching", [("mlp", "off"), ("transformer_block", "empty"), ("decorated", "empty")])
def test_a_fresh_process_loads_and_runs_without_dynamo_or_compiling(tmp_path, cache, device, name, caching):
    """The loading process has an empty tritonize cache (or none at all): the artifact holds the
    whole graph. It matches eager, and the compiled output of the saving process; Dynamo traces
    no frame and neither AOTAutograd nor our compiler runs. "decorated" has the identity guards
    torch cannot save (a decorated forward, a builtin activation held by the module)."""
    path, _, _, saved_out = save(tmp_path, name, device)
    if name == "decorated":  # the decorated forward's function and the activation, at least
        assert len(precompiled._read(path)[0]["identity"]) >= 2
    fresh = tmp_path / "fresh-cache"
    env = {"TRITONIZE_CACHE": "0"} if caching == "off" else {"TRITONIZE_CACHE_DIR": str(fresh)}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "fresh-triton")
    loaded = load_in_fresh_process(path, name, device, env)
    assert loaded["frames"] == {} and "unique_graphs" not in loaded["stats"]
    assert loaded["dynamo"] == {} and loaded["graph"] == {}
    assert_same(torch.tensor(loaded["out"]), saved_out.cpu().flatten())
    if caching == "empty":  # no cache entry was needed, none was written
        assert not (fresh / "graphs").exists() and not (fresh / "dynamo").exists()


def test_the_loaded_module_function_reads_the_weights_of_the_module_it_is_given(tmp_path, cache, device):
    path, _, x, _ = save(tmp_path, "mlp", device)
    other, _ = build("mlp", device, seed=1)
    with torch.no_grad():
        assert_same(tritonize.load_precompiled(path, other)(x), other(x))


def test_a_function_with_keyword_arguments(tmp_path, cache, device):
    def fn(x, *, scale):
        return (x * scale).sin() + x.cos().sum(dim=-1, keepdim=True)

    x, scale = torch.randn(4, 8, device=device), torch.randn(8, device=device)
    path = tmp_path / "fn.tritonize"
    assert_same(tritonize.precompile(fn, (x,), path, example_kwargs={"scale": scale})(x, scale=scale),
                fn(x, scale=scale))
    assert_same(tritonize.load_precompiled(path)(x, scale=scale * 2), fn(x, scale=scale * 2))


# ----------------------------------------------------------------------------- torch's guards


def test_guards_reject_another_shape_or_dtype_as_torch_does(tmp_path, cache, device):
    path, model, x, _ = save(tmp_path, "mlp", device)
    fn = tritonize.load_precompiled(path, model)
    with torch.no_grad():
        y = torch.randn_like(x)
        assert_same(fn(y), model(y))
        with pytest.raises(RuntimeError, match="[Gg]uard"):
            fn(torch.randn(7, 16, device=device))
        with pytest.raises(RuntimeError, match="[Gg]uard"):
            fn(x.double())


# ----------------------------------------------------------------------------- damaged or foreign files


def our_payload(data: bytes) -> tuple[int, int]:
    """(start, end) of the backend's framed graph payload inside torch's bytes (after the file's
    own frame and header)."""
    start = data.index(disk_cache.MAGIC + b" ", 1)
    header = data[start:data.index(b"\n", start)]
    return start, start + len(header) + 1 + int(header.split(b" ")[1])


def test_a_corrupt_payload_is_a_clear_error(tmp_path, cache, device):
    path = save(tmp_path, "mlp", device)[0]
    data = bytearray(path.read_bytes())
    start, end = our_payload(bytes(data))
    data[end - 20] ^= 0x01  # one bit, inside the wrapper's source
    path.write_bytes(bytes(data))
    with pytest.raises(tritonize.PrecompiledArtifactError, match="is damaged \\(checksum mismatch\\)"):
        tritonize.load_precompiled(path)  # the file's own frame
    with pytest.raises(tritonize.PrecompiledArtifactError, match="graph is damaged \\(checksum mismatch\\)"):
        dynamo_cache.CachedInference.deserialize_compile_artifacts(bytes(data[start:end]))  # the graph's


def test_a_truncated_file_or_payload_is_a_clear_error(tmp_path, cache, device):
    path = save(tmp_path, "mlp", device)[0]
    data = path.read_bytes()
    start, end = our_payload(data)
    with pytest.raises(tritonize.PrecompiledArtifactError, match="damaged \\(length .* \\(truncated\\?\\)\\)"):
        dynamo_cache.CachedInference.deserialize_compile_artifacts(data[start:end - 100])
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(tritonize.PrecompiledArtifactError, match="is damaged \\(length .* \\(truncated\\?\\)\\)"):
        tritonize.load_precompiled(path)


def test_other_versions_are_a_clear_error(tmp_path, cache, device, monkeypatch):
    real = precompiled.versions()
    monkeypatch.setattr(precompiled, "versions", lambda: dict(real, torch="2.0.0", triton="9.9"))
    path = save(tmp_path, "mlp", device)[0]
    monkeypatch.undo()
    message = f"other versions: torch 2.0.0 (now {real['torch']}), triton 9.9 (now {real['triton']}); "
    with pytest.raises(tritonize.PrecompiledArtifactError, match=re.escape(message)):
        tritonize.load_precompiled(path)


def test_another_format_or_gpu_is_a_clear_error(tmp_path, cache, device):
    data = save(tmp_path, "mlp", device)[0].read_bytes()
    header, _, graph = disk_cache.unframe(data[slice(*our_payload(data))]).partition(b"\n")

    def with_header(**changes):
        changed = json.dumps(dict(json.loads(header), **changes)).encode()
        return disk_cache.frame(changed + b"\n" + graph)

    load = dynamo_cache.CachedInference.deserialize_compile_artifacts
    with pytest.raises(tritonize.PrecompiledArtifactError, match="format 'tritonize-precompiled-v0'"):
        load(with_header(format="tritonize-precompiled-v0"))
    message = "runs on cuda:0 .* no CUDA GPU" if not torch.cuda.is_available() else "made for cuda:0 = Imaginary GPU"
    with pytest.raises(tritonize.PrecompiledArtifactError, match=message):
        load(with_header(gpus=[["cuda:0", "Imaginary GPU", [1, 0]]]))
    assert load(with_header()).compiled.artifacts.wrapper == json.loads(graph)["wrapper"]  # unchanged: loads


# ----------------------------------------------------------------------------- graphs that cannot be saved


def test_a_training_graph_is_refused_saying_why_and_plain_compile_still_trains(tmp_path, cache, device):
    model, x = build("mlp", device)
    with pytest.raises(tritonize.CompileError, match="it is a training graph: grad mode is on and 4 of its "
                                                     "inputs require grad"):
        tritonize.precompile(model, (x,), tmp_path / "never.tritonize")
    assert not (tmp_path / "never.tritonize").exists()
    torch._dynamo.reset()
    loss = torch.compile(model, backend="tritonize")(x).square().mean()
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    expected = model(x).square().mean()
    expected.backward()
    assert_same([loss] + grads, [expected] + [p.grad for p in model.parameters()])


def test_an_input_mutation_or_an_aliased_output_is_refused_saying_why(tmp_path, cache, device):
    def mutate(x):
        x.add_(1)
        return x.sin()

    def alias(x):
        return x.t(), x.sin()

    x = torch.randn(4, 6, device=device)
    with pytest.raises(tritonize.CompileError, match="cannot be precompiled: an input is mutated\n"
                                                     "  traced from: .*test_precompile.py.*x.add_\\(1\\)"):
        tritonize.precompile(mutate, (x.clone(),))
    with pytest.raises(tritonize.CompileError, match="cannot be precompiled: an output is alias_of_input"):
        tritonize.precompile(alias, (x,))


# ----------------------------------------------------------------------------- plain torch.compile


def spied_backend(returned: list):
    backend = make_backend()

    def spy(gm, example_inputs):
        compiled = backend(gm, example_inputs)
        returned.append(type(compiled).__name__)
        return compiled

    return spy


@pytest.mark.parametrize("caching", ["on", "off"])
def test_plain_compile_runs_inference_graphs_through_the_runner_of_a_hit(cache, device, monkeypatch, caching):
    """A trivial inference graph gets CachedInference on a miss too (with caching off as well),
    so aot_compile can save it; results are eager's; a training graph keeps AOTAutograd's."""
    if caching == "off":
        monkeypatch.setenv("TRITONIZE_CACHE", "0")
    x, w = torch.randn(4, 8, device=device), torch.randn(8, 8, device=device)

    def fn(x, w):
        return (x @ w).relu() + x.sin()

    returned = []
    with torch.no_grad():
        for _ in range(2):
            torch._dynamo.reset()
            assert_same(torch.compile(fn, backend=spied_backend(returned))(x, w), fn(x, w))
    torch._dynamo.reset()
    leaf = w.clone().requires_grad_(True)
    out = torch.compile(fn, backend=spied_backend(returned))(x, leaf)
    out.sum().backward()
    expected_leaf = w.clone().requires_grad_(True)
    fn(x, expected_leaf).sum().backward()
    assert_same((out, leaf.grad), (fn(x, w), expected_leaf.grad))
    assert returned[:2] == ["CachedInference", "CachedInference"] and returned[2] != "CachedInference"
    assert dynamo_cache.STATS == ({"miss": 2, "store": 1, "hit": 1, "not_stored": 1} if caching == "on"
                                  else {"uncached": 3})


def test_aot_compile_is_recognized_by_the_flags_torch_sets_for_it():
    config = torch._functorch.config
    assert not precompiled.under_aot_compile()
    flags = {flag: True for flag in precompiled.AOT_COMPILE_FLAGS if hasattr(config, flag)}
    with config.patch(flags):
        assert precompiled.under_aot_compile() == (len(flags) == len(precompiled.AOT_COMPILE_FLAGS))
        with precompiled.plain_aot_autograd(True):
            assert not any(getattr(config, flag) for flag in flags)
        assert all(getattr(config, flag) for flag in flags)
