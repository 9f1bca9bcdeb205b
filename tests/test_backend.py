"""The user-facing surface: backend registration, options, errors, debug dumps, the wrapper."""
import os
import pathlib
import subprocess
import sys
import warnings

import pytest
import torch

import tritonize
from tritonize.errors import CompileError
from helpers import assert_same

SRC = str(pathlib.Path(__file__).resolve().parents[1] / "src")


def test_backend_name_works_after_import(device):
    x = torch.randn(5, device=device)
    assert_same(torch.compile(lambda t: t.sin() + 1, backend="tritonize")(x), x.sin() + 1)


def test_compile_entry_point_and_options(device):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).to(device)
    x = torch.randn(3, 4, device=device)
    compiled = tritonize.compile(model, options={"fallback": "eager"})
    assert_same(compiled(x), model(x), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="unknown option"):
        tritonize.compile(model, options={"no_such_option": 1})
    with pytest.raises(ValueError, match="unknown mode"):
        tritonize.compile(model, mode="fastest")


def test_torch_compile_mode_reaches_the_compiler(monkeypatch, device):
    """torch.compile hands `mode` to a custom back end as a keyword: it becomes Options.mode (it
    was ignored, so mode="max-autotune" did not autotune); an unknown mode is a clear error, and
    "reduce-overhead" records CUDA graphs on the GPU and says it has no effect on the CPU."""
    import tritonize.backend as backend_module

    seen = []
    real = backend_module.make_backend
    monkeypatch.setattr(backend_module, "make_backend", lambda options, *a, **k: seen.append(options) or real(options))
    x = torch.randn(5, device=device)
    for mode in ("max-autotune", "max-autotune-no-cudagraphs", "default"):
        torch._dynamo.reset()
        assert_same(torch.compile(lambda t: t.cos() * 2, backend="tritonize", mode=mode)(x), x.cos() * 2)
        assert seen[-1].mode == mode
    torch._dynamo.reset()
    with _says_no_cuda_graphs_on_the_cpu(device):
        f = torch.compile(lambda t: t.cos() * 3, backend="tritonize", mode="reduce-overhead")
        for _ in range(3):  # plain, recorded, replayed on the GPU
            assert_same(f(x), x.cos() * 3)
    assert seen[-1].mode == "reduce-overhead"
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown mode 'fastest'"):
        torch.compile(lambda t: t.cos() * 4, backend="tritonize", mode="fastest")(x)
    torch._dynamo.reset()
    with _says_no_cuda_graphs_on_the_cpu(device):
        assert_same(tritonize.compile(lambda t: t.cos() * 5, mode="reduce-overhead")(x), x.cos() * 5)


def _says_no_cuda_graphs_on_the_cpu(device):
    if device == "cpu":
        return pytest.warns(UserWarning, match="a CPU graph has no CUDA graphs")
    return warnings.catch_warnings(action="error", category=UserWarning)


def test_backend_found_without_import_when_installed():
    """Through the torch_dynamo_backends entry point (needs the package installed)."""
    from importlib.metadata import entry_points

    if "tritonize" not in entry_points(group="torch_dynamo_backends").names:
        pytest.skip("tritonize is not installed (running from source)")
    code = ("import torch\nf = torch.compile(lambda x: x * 2 + 1, backend='tritonize')\n"
            "x = torch.randn(4)\nassert torch.equal(f(x), x * 2 + 1)\nprint('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ok" in out.stdout


def _break_lowering(monkeypatch):
    from tritonize.lower import registry

    def broken(ctx, node, *args, **kwargs):
        raise ZeroDivisionError("planted bug")

    monkeypatch.setitem(registry.LOWERINGS, torch.ops.aten.sin, broken)


def user_function_with_sin(x):
    return torch.sin(x) * 3  # the line the error must name


def test_compile_error_names_stage_node_and_source_line(monkeypatch, device):
    _break_lowering(monkeypatch)
    with pytest.raises(Exception) as info:
        torch.compile(user_function_with_sin, backend="tritonize")(torch.randn(4, device=device))
    error = info.value
    while error is not None and not isinstance(error, CompileError):
        error = error.__cause__ or error.__context__  # Dynamo wraps backend errors
    assert isinstance(error, CompileError)
    text = str(error)
    assert "lowering" in text and "aten.sin" in text and "planted bug" in text
    assert "return torch.sin(x) * 3" in text


def test_fallback_eager_option_warns_and_matches(monkeypatch, device):
    _break_lowering(monkeypatch)
    x = torch.randn(4, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = tritonize.compile(user_function_with_sin, options={"fallback": "eager"})(x)
    assert_same(out, user_function_with_sin(x))
    assert any("planted bug" in str(w.message) for w in caught)


def test_debug_dir_writes_every_stage(tmp_path, device):
    with tritonize.config.patch(debug_dir=str(tmp_path)):
        report = tritonize.explain(lambda x: (x + 1).relu(), torch.randn(8, device=device))
    files = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert files[0].startswith("0_aten_graph") and files[-1].startswith("4_wrapper")
    assert any(f.startswith("1_ir") for f in files) and any(f.startswith("3_kernel") for f in files)
    assert report.graphs == 1


def test_graph_run_through_aten_warns_with_the_reason(monkeypatch, device):
    import tritonize.pipeline as pipeline
    from tritonize.errors import Unsupported

    def refuse(*args, **kwargs):
        raise Unsupported("a planted reason")

    monkeypatch.setattr(pipeline, "lower_graph", refuse)
    x = torch.randn(7, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert_same(torch.compile(user_function_with_sin, backend="tritonize")(x), user_function_with_sin(x))
        report = tritonize.explain(user_function_with_sin, x)
    assert report.fallbacks == {"<whole graph>": 1}
    assert "a planted reason" in report.fallback_reasons["<whole graph>"]
    messages = [str(w.message) for w in caught if "a planted reason" in str(w.message)]
    assert len(messages) == 2 and all(m.startswith("tritonize: graph") for m in messages)


def test_wrapper_runs_as_a_script(tmp_path, device):
    report = tritonize.explain(lambda x, y: x * y + 1, torch.randn(64, device=device),
                               torch.randn(64, device=device))
    script = tmp_path / "wrapper.py"
    script.write_text(report.wrapper)
    env = dict(os.environ, PYTHONPATH=SRC)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "median" in out.stdout


def test_report_prints_readably(device):
    report = tritonize.explain(lambda x: torch.histc(x.sin(), 4), torch.randn(6, device=device))
    text = str(report)
    assert "kernel triton_poi_fused_sin" in text and "fallback aten.histc.default x1" in text
    assert report.kernels[0].kind == "pointwise"


def test_kernels_on_tensors_of_another_device_run_through_aten():
    """A GPU kernel handed a CPU tensor would crash at launch: such a graph goes to aten, named."""
    from tritonize.errors import Unsupported
    from tritonize.ir.nodes import InputBuffer, Layout
    from tritonize.pipeline import check_kernel_devices

    def buffer(name, device):
        return InputBuffer(name, Layout((4,), (1,), 0, torch.float32, torch.device(device)), 0)

    buffers = {"arg0_1": buffer("arg0_1", "cuda"), "const_c": buffer("const_c", "cpu")}
    check_kernel_devices([("triton_poi_0", ["arg0_1"])], buffers, "cuda")
    with pytest.raises(Unsupported, match="triton_poi_1 would be launched on const_c, a cpu tensor"):
        check_kernel_devices([("triton_poi_0", ["arg0_1"]), ("triton_poi_1", ["arg0_1", "const_c"])],
                             buffers, "cuda")
    check_kernel_devices([("triton_poi_1", ["const_c"])], buffers, "cpu")


def test_interpreted_kernels_do_not_replace_the_gpu_helpers():
    code = ("import torch, tritonize\n"
            "f = torch.compile(lambda x: torch.maximum(x, x * 2).sum(), backend='tritonize')\n"
            "f(torch.randn(8))\n"
            "from tritonize.runtime import triton_helpers\n"
            "from triton.runtime.jit import JITFunction\n"
            "assert type(triton_helpers.maximum) is JITFunction, type(triton_helpers.maximum)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
