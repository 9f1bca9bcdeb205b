"""tritonize.profile beyond the counts (issue 24): times joined to rows, roofs and bounds, the HTML
page rendered in headless Chromium, the command line, and the module that is also the function."""
import os
import shutil
import subprocess
import sys
import textwrap
import types

import pytest
import torch
import torch.nn.functional as F

import tritonize
from tritonize.profile import KernelRow, Profile, Roofs, merge_profiles, profile_from_artifacts
from tritonize.profile.timing import graph_calls, join_times

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def _row(name, kind="kernel", read=0, written=0, flops=0):
    return KernelRow(name, kind, 1, read, written, flops)


def test_the_module_is_the_function():
    import tritonize.profile as module

    assert module is tritonize.profile and callable(tritonize.profile)
    prof = tritonize.profile(lambda x: torch.sin(x) * 2, torch.randn(8, 8))
    assert [r.name for r in prof.rows] == ["triton_poi_fused_sin_mul_0"]
    assert prof.rows[0].aten == ["sin", "mul"]


def test_times_join_kernels_by_name_and_library_kernels_by_their_op():
    """Two runs: a generated kernel's launches by name; cuBLAS's kernel inside aten::mm goes to the
    mm row; a memset no row claims becomes an "other" row; times are per run, most first."""
    rows = [_row("triton_poi_fused_add_0", read=800, written=400), _row("aten.mm.default", "extern", 4000, 2000, 10 ** 6)]
    kernels = [("triton_poi_fused_add_0", 2e-6), ("triton_poi_fused_add_0", 4e-6), ("nvjet_gemm", 30e-6),
               ("nvjet_gemm", 34e-6), ("Memset (Device)", 1e-6), ("nvjet_gemm", 10e-6)]
    op_kernels = [(("aten::mm",), "nvjet_gemm", 30e-6), (("aten::mm",), "nvjet_gemm", 34e-6)]
    joined = join_times(rows, kernels, op_kernels, runs=2)
    assert [r.name for r in joined] == ["aten.mm.default", "nvjet_gemm", "triton_poi_fused_add_0", "Memset (Device)"]
    times = {r.name: r.time_s for r in joined}
    assert times == pytest.approx({"aten.mm.default": 32e-6, "triton_poi_fused_add_0": 3e-6,
                                   "nvjet_gemm": 5e-6, "Memset (Device)": 0.5e-6})
    assert [r.kind for r in joined] == ["extern", "other", "kernel", "other"]


def test_library_kernels_inside_nested_ops_and_overloads_of_one_op():
    """cuDNN's kernel runs inside aten::cudnn_convolution within aten::convolution: it goes to the
    convolution row (the review's point 8). Two overloads of one op share its time by bytes
    instead of each taking all of it (point 7)."""
    rows = [_row("aten.convolution.default", "extern", 1000, 1000, 10), _row("aten.sort.default", "extern", 300, 0),
            _row("aten.sort.stable", "extern", 100, 0)]
    op_kernels = [(("aten::cudnn_convolution", "aten::convolution"), "cudnn_fprop", 8e-6),
                  (("aten::sort",), "radix_sort", 4e-6)]
    kernels = [("cudnn_fprop", 8e-6), ("radix_sort", 4e-6)]
    times = {r.name: r.time_s for r in join_times(rows, kernels, op_kernels, runs=1)}
    assert times == pytest.approx({"aten.convolution.default": 8e-6, "aten.sort.default": 3e-6,
                                   "aten.sort.stable": 1e-6})


def test_a_kernel_launched_more_often_than_its_graph_was_compiled_scales_its_counts():
    """The counts are per call of each graph; a graph called 4 times a run (a loop around it)
    launches its kernel 4 times: bytes and operations follow the launches (the review's point 5)."""
    rows = [KernelRow("triton_poi_fused_sin_0", "kernel", 1, 100, 100, 10)]
    joined = join_times(rows, [("triton_poi_fused_sin_0", 1e-6)] * 8, [], runs=2)
    assert (joined[0].launches, joined[0].bytes, joined[0].flops, joined[0].time_s) == (4, 800, 40, pytest.approx(4e-6))


def test_the_l2_flush_is_one_kernel_of_its_own_name_that_zeroes_its_buffer():
    """Each profiled run starts after this kernel (left out of the profile by its name) writes
    zeros over a buffer twice the L2 cache."""
    from tritonize.profile import flush

    buffer = torch.arange(3 * flush.BLOCK + 5, dtype=torch.int32)
    flush.flush_l2(buffer)
    assert torch.equal(buffer, torch.zeros_like(buffer))
    assert f"def {flush.KERNEL_NAME}(" in flush.SOURCE


def _graph(costs, kernel_names):
    kernels = [types.SimpleNamespace(name=n, source=f"def {n}(): pass", fused_nodes=[]) for n in kernel_names]
    return types.SimpleNamespace(kernels=kernels, costs=costs, wrapper="")


def test_graphs_count_as_often_as_the_timed_runs_ran_them():
    """A forward and its backward compiled, a run calling the forward only: the backward's rows
    (its product, its kernel) are not counted, and the mm row is the forward's alone (the
    review's GPT-2 training page had the backward's products against the forward's time: 468%
    of the matmul roof). A graph launching its kernel twice a call, seen 8 times in 2 runs, ran
    twice a run; a graph of library calls only counts once; one whose only kernel shares its
    name with another graph's counts once when that name was seen."""
    forward = _graph([("triton_poi_fused_sin_0", "kernel", 100, 100, 10), ("aten.mm.default", "extern", 400, 100, 800)],
                     ["triton_poi_fused_sin_0"])
    backward = _graph([("triton_poi_fused_cos_mul_0", "kernel", 200, 100, 20),
                       ("aten.mm.default", "extern", 400, 100, 800)], ["triton_poi_fused_cos_mul_0"])
    loop = _graph([("triton_poi_fused_add_1", "kernel", 8, 8, 1)] * 2, ["triton_poi_fused_add_1"])
    library = _graph([("aten.mm.default", "extern", 40, 10, 80)], [])
    shared = _graph([("triton_poi_fused_sin_0", "kernel", 100, 100, 10)], ["triton_poi_fused_sin_0"])
    kernels = [("triton_poi_fused_sin_0", 1e-6)] * 2 + [("triton_poi_fused_add_1", 1e-6)] * 8 + [("gemm", 1e-6)] * 2
    artifacts = [forward, backward, loop, library, shared]
    calls = graph_calls(artifacts, kernels, [], runs=2)
    assert calls == [1, 0, 2, 1, 1]
    prof = profile_from_artifacts(artifacts[:2], calls[:2])
    assert [(r.name, r.launches, r.bytes, r.flops) for r in prof.rows] == [
        ("aten.mm.default", 1, 500, 800), ("triton_poi_fused_sin_0", 1, 200, 10)]
    assert prof.graphs_not_run == 1 and "1 graph(s) compiled and not run" in str(prof)
    # none of the graphs' work on the GPU (a script's CPU graphs on a machine with one): not timed
    assert graph_calls([forward, backward], [("gemm", 1e-6)], [], runs=1) is None
    # a forward of library calls only whose backward is not run (the review's linear layer): the
    # forward's addmm ran on the GPU, so the profile is timed and the backward is not counted
    linear = _graph([("aten.addmm.default", "extern", 400, 100, 800)], [])
    bias_grad = _graph([("aten.mm.default", "extern", 400, 100, 800), ("triton_red_fused_sum_0", "kernel", 64, 4, 16)],
                       ["triton_red_fused_sum_0"])
    assert graph_calls([linear, bias_grad], [("gemm", 1e-6)], [(("aten::addmm",), "gemm", 1e-6)], runs=1) == [1, 0]
    # a kernel defined twice in a graph's steps but launched once a call (a step skipped): 1 call
    twice = _graph([("triton_poi_fused_add_1", "kernel", 8, 8, 1)] * 2, ["triton_poi_fused_add_1"])
    assert graph_calls([twice], [("triton_poi_fused_add_1", 1e-6)] * 3, [], runs=3) == [1]


def test_bounds_shares_and_flags_against_the_roofs():
    roofs = Roofs("fake", bytes_per_s=1e12, flops_per_s=1e14)  # ridge: 100 operations a byte
    copy = _row("copy", read=10 ** 6, written=10 ** 6)  # 2 MB: 2 us at the roof
    product = _row("aten.mm.default", "extern", 10 ** 6, 10 ** 6, 10 ** 9)  # 1 GFLOP: 10 us
    copy.time_s, product.time_s = 2.5e-6, 40e-6
    assert roofs.ridge == 100
    assert copy.bound(roofs) == ("memory", pytest.approx(2e-6)) and copy.share(roofs) == pytest.approx(0.8)
    assert product.bound(roofs) == ("compute", pytest.approx(1e-5)) and product.share(roofs) == pytest.approx(0.25)
    prof = Profile([product, copy], graphs=1, runs=1, step_s=60e-6, launches=2, roofs=roofs)
    assert prof.flagged == [product] and prof.kernel_s == pytest.approx(42.5e-6)
    assert prof.outside_kernels_s == pytest.approx(17.5e-6)
    table = str(prof)
    assert "compute     25% !" in table and "memory     80%" in table and "17.500 ms" not in table


def test_the_cpu_profile_has_no_times(device):
    prof = tritonize.profile(lambda x: torch.softmax(x, -1), torch.randn(16, 32, device=device))
    if device == "cpu":
        assert prof.runs == 0 and prof.step_s is None and all(r.time_s is None for r in prof.rows)
    else:  # the GPU times each kernel and measures its roofs
        assert prof.runs > 0 and prof.step_s > 0 and prof.launches >= 1 and prof.roofs.bytes_per_s > 1e9
        assert all(r.time_s > 0 for r in prof.rows if r.kind == "kernel")


def _chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("headless Chromium is not installed (make test installs Debian's chromium)")
    return path


def _render(page, tmp_path):
    """(the DOM after Chromium ran the page, the screenshot as an array)."""
    import matplotlib.image

    chromium = _chromium()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    url = f"file://{page}"
    dom = subprocess.run([chromium, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, *flags, f"--screenshot={shot}", "--window-size=1100,900", url],
                   capture_output=True, timeout=120, check=True)
    return dom, matplotlib.image.imread(str(shot))


@pytest.mark.parametrize("timed", [False, True], ids=["counts", "timed"])
def test_the_html_page_renders_with_one_point_per_kernel(tmp_path, timed):
    pytest.importorskip("matplotlib")
    x, w = torch.randn(32, 64), torch.randn(64, 48)
    prof = tritonize.profile(lambda x, w: F.gelu(x @ w).softmax(-1) + x[:, :48].cos(), x, w)
    if timed:  # the GPU's figures, made up: the page draws the roofs and sizes points by time
        prof.runs, prof.step_s, prof.launches = 1, 1e-3, len(prof.rows)
        prof.roofs = Roofs("fake", 2e12, 5e14)
        for i, row in enumerate(prof.rows):
            row.time_s = 1e-5 * (i + 1)
    assert len(prof.rows) >= 2
    page = tmp_path / "profile.html"
    prof.save_html(str(page))
    dom, shot = _render(page, tmp_path)
    assert dom.count('class="kernel"') == len(prof.rows)
    for i, row in enumerate(prof.rows):
        assert f'id="kernel-{i}"' in dom and row.name in dom
    assert ("roofline" in dom) == timed and ("roofs: 2000 GB/s" in dom) == timed
    assert dom.count("<tr>") == len(prof.rows) + 1  # the header and a row each
    assert shot.std() > 0.01  # not blank


def test_recording_blocks_nest():
    """The inner block's recorder leaves when it ends, the outer one when it does (they were
    removed by equality: the inner exit took the outer's equal list away; review point 1)."""
    from tritonize.backend import _OBSERVERS, recording_graphs

    f = torch.compile(lambda x: x.cos() + 1, backend="tritonize")
    torch._dynamo.reset()
    with recording_graphs() as outer:
        with recording_graphs() as inner:
            f(torch.randn(4))
        assert _OBSERVERS == [outer] and _OBSERVERS[0] is outer
    assert _OBSERVERS == [] and inner == outer and "graph" in outer


def test_a_failing_script_still_gets_its_profile_and_exit_code(tmp_path):
    """A script that exits with a code, after compiling, from another directory, importing a
    module beside it (the review's points 2 and 3)."""
    (tmp_path / "helper_module.py").write_text("SCALE = 3\n")
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import sys
        import torch
        from helper_module import SCALE
        torch.compile(lambda x: torch.exp(x) * SCALE, backend="tritonize")(torch.randn(8))
        sys.exit(3)
    """))
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "tritonize.profile", str(script)], capture_output=True, text=True,
                          env=env, timeout=300, cwd=os.path.dirname(SRC))
    assert done.returncode == 3, done.stderr[-2000:]
    assert "exp, mul" in done.stdout and "1 kernels and calls in 1 graph(s)" in done.stdout


def test_the_page_leaves_matplotlibs_backend_alone(tmp_path):
    """The page draws on a Figure of its own (pyplot's backend would have been switched to Agg,
    a notebook's inline figures with it: the review's point 10)."""
    matplotlib = pytest.importorskip("matplotlib")
    before = matplotlib.get_backend()
    matplotlib.use("pdf")
    try:
        tritonize.profile(lambda x: x.sin(), torch.randn(8)).save_html(str(tmp_path / "p.html"))
        assert matplotlib.get_backend() == "pdf"
    finally:
        matplotlib.use(before)


def test_the_command_line_profiles_the_graphs_a_script_compiles(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import sys
        import torch
        f = torch.compile(lambda x: torch.relu(x) * 3, backend="tritonize")
        f(torch.randn(16, 16))
        print("script argument", sys.argv[1:])
    """))
    page = tmp_path / "out.html"
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "tritonize.profile", str(script), "--html", str(page), "--", "--flag"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "script argument ['--flag']" in done.stdout
    kernel = next(word for word in done.stdout.split() if word.startswith("triton_poi_fused"))
    assert "relu, mul" in done.stdout and "1 kernels and calls in 1 graph(s)" in done.stdout
    assert kernel in page.read_text()


def test_profiles_of_a_suite_merge_into_one():
    """Each case's rows and sources under its label; times, wall times and launches added."""
    roofs = Roofs("fake", 1e12, 1e14)
    first = Profile([_row("k_0", read=100)], graphs=1, runs=2, step_s=5e-6, launches=1, roofs=roofs,
                    sources={"k_0": "src a"}, wrappers=["wrapper a"])
    first.rows[0].time_s = 1e-6
    second = Profile([_row("k_0", read=300), _row("aten.mm.default", "extern", 10, 10, 10)], graphs=2,
                     sources={"k_0": "src b"}, wrappers=["wrapper b"])
    merged = merge_profiles({"one": first, "two": second})
    assert [r.name for r in merged.rows] == ["one/k_0", "two/k_0", "two/aten.mm.default"]
    assert merged.sources == {"one/k_0": "src a", "two/k_0": "src b"} and merged.wrappers == ["wrapper a", "wrapper b"]
    assert (merged.graphs, merged.runs, merged.step_s, merged.launches, merged.roofs) == (3, 1, 5e-6, 1, roofs)
    assert first.rows[0].name == "k_0"  # the parts are left as they were


def test_a_timed_script_profile_has_no_wall_time_and_still_renders(tmp_path):
    """A script's profile is timed without a wall time (session.profile_script): the table and
    the page say what they have (the page's summary multiplied step_s, None there)."""
    row = _row("triton_poi_fused_add_0", read=800, written=400)
    row.time_s = 2e-6
    prof = Profile([row], graphs=1, runs=1, step_s=None, launches=1, roofs=Roofs("fake", 1e12, 1e14))
    assert "a run: 0.002 ms in kernels, 1 launches" in str(prof)
    prof.save_html(str(tmp_path / "p.html"))
    assert "a run: 0.002 ms in kernels, 1 launches" in (tmp_path / "p.html").read_text()
