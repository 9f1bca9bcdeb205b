"""The GPU launch path with a fake GPU: compile at import, autotune on the first call with the
written arguments protected, the autotune cache, the generated fast launcher and its guard, and
the decision to use it (Triton's launch-hook knobs; the compiler's own kernels of every kind).

The fake environment stands in for CUDA: its "compiled kernels" run on CPU tensors, found by
the integer pointers the fast launcher passes, exactly as Triton's launcher receives them."""
import re
import threading
import time
import types

import pytest
import triton
import torch

import tritonize
from tritonize.backend import make_backend
from tritonize.runtime import disk_cache, triton_compile
from tritonize.runtime.fast_launch import LoadedKernel, build_host_launcher, generate_launcher, hook_installed, launch_hooks_active
from tritonize.runtime.heuristics import DeviceInfo, KernelShape
from tritonize.runtime.launcher import CudaEnvironment, GpuKernel
from tritonize.runtime.loader import load_source_module
from tritonize.runtime.triton_compile import ArgSpec

SOURCE = """
@triton.jit
def fake_kernel(in_out_ptr0, in_ptr0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    tmp0 = tl.load(in_out_ptr0 + x) + tl.load(in_ptr0 + x)
    tl.store(in_out_ptr0 + x, tmp0)
"""
SHAPE = KernelShape("reduction", 4096, 1, 4096)  # two default candidates (inner, outer): autotuned


class FakeJit:
    def __init__(self, arg_names=("in_out_ptr0", "in_ptr0", "XBLOCK", "RBLOCK")):
        self.arg_names = list(arg_names)
        self.generic_calls = []

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.generic_calls.append((grid, kwargs))
            args[0].add_(args[1])
        return run


class Handle:
    def __init__(self, value):
        self.value = value

    def done(self):
        return True

    def result(self):
        return self.value


class FakeEnv:
    fast_path = True

    def __init__(self, costs=None):
        self.submitted, self.timed, self.launches = [], [], []
        self.costs = costs or {}
        self.tensors = {}  # data_ptr -> tensor, so fake kernels can find their arguments
        self.device = 0
        self.pool = self

    # pool
    def submit(self, jit_fn, job, prepare=None):
        self.submitted.append(job)
        self.prepares = getattr(self, "prepares", []) + [prepare]
        return Handle(job)

    def counts(self):
        return len(self.submitted), len(self.submitted)

    # device facts
    def device_index(self):
        return self.device

    def current_device(self):
        return self.device

    def stream(self, index):
        return 7000 + index

    def target(self, index):
        return ("cuda", 90, 32)

    def device_info(self, index):
        return DeviceInfo()

    def gpu_name(self, index):
        return "Fake GPU"

    def load(self, job, index):
        def run(gx, gy, gz, stream, function, metadata, launch_md, enter, exit_hook, *args):
            self.launches.append({"grid": (gx, gy, gz), "stream": stream, "function": function, "args": args})
            inout, inp = self.tensors.get(args[0]), self.tensors.get(args[1])
            if inout is not None:  # (timing runs write clones, which are not registered)
                inout.add_(inp)  # the kernel: in_out_ptr0 += in_ptr0
        return LoadedKernel(run, function=hash(job.blocks), packed_metadata=job.num_warps)

    def time_many(self, launches):
        seconds = []
        for launch in launches:
            launch()
            config = self.launches[-1]["args"][2:]
            self.timed.append(config)
            seconds.append(self.costs.get(config, 1e-3))
        return seconds

    def register(self, *tensors):
        for t in tensors:
            self.tensors[t.data_ptr()] = t
        return tensors


@pytest.fixture(autouse=True)
def private_cache(cache):
    """Every test here gets its own empty cache root (conftest's `cache` fixture)."""
    yield cache


def make_kernel(env, mode="default", dtypes=(torch.float32, torch.float32)):
    return GpuKernel(FakeJit(), "fake_kernel", SOURCE, SHAPE, mode, "/nonexistent.py", dtypes, env=env)


def test_compiles_at_import_tunes_on_first_call_then_launches_fast():
    env = FakeEnv(costs={(64, 256): 0.5e-3})  # the "outer" config (XBLOCK=64, RBLOCK=256) is fastest
    kernel = make_kernel(env)
    assert len(env.submitted) == len(kernel.configs) == 2 and not env.launches
    assert all(job.spec.args == (("fp32", True), ("fp32", True)) for job in env.submitted)
    inout, inp = env.register(torch.zeros(16), torch.ones(16))
    kernel(inout, inp)
    assert torch.equal(inout, torch.ones(16))  # timing ran on a clone: one application only
    assert len(env.timed) == 2 and kernel.config.blocks == {"XBLOCK": 64, "RBLOCK": 256}
    assert kernel.launch is not kernel._fallback
    env.launches.clear()
    kernel(inout, inp)
    (launch,) = env.launches
    assert launch["args"] == (inout.data_ptr(), inp.data_ptr(), 64, 256)  # ints, then block sizes
    assert launch["grid"] == (4096 // 64, 1, 1) and launch["stream"] == 7000
    assert torch.equal(inout, torch.full((16,), 2.0)) and len(env.submitted) == 2


def test_autotune_cache_hit_compiles_one_config_and_times_nothing():
    first = FakeEnv(costs={(64, 256): 0.5e-3})
    kernel = make_kernel(first)
    kernel(*first.register(torch.zeros(4), torch.ones(4)))
    second = FakeEnv()  # a new process: same kernel, warm cache
    kernel = make_kernel(second)
    assert [dict(j.blocks) for j in second.submitted] == [{"XBLOCK": 64, "RBLOCK": 256}]
    inout, inp = second.register(torch.zeros(4), torch.ones(4))
    kernel(inout, inp)
    assert second.timed == [] and torch.equal(inout, torch.ones(4))


def test_damaged_autotune_entry_means_tuning_again():
    env = FakeEnv(costs={(64, 256): 0.5e-3})
    make_kernel(env)(*env.register(torch.zeros(4), torch.ones(4)))
    (entry,) = (disk_cache.entry_dir("autotune")).iterdir()
    entry.write_bytes(entry.read_bytes()[:-5])
    again = FakeEnv(costs={(1, 4096): 0.1e-3})
    kernel = make_kernel(again)
    assert len(again.submitted) == 2
    kernel(*again.register(torch.zeros(4), torch.ones(4)))
    assert len(again.timed) == 2 and kernel.config.blocks == {"XBLOCK": 1, "RBLOCK": 4096}


def test_other_specializations_get_their_own_variant():
    env = FakeEnv()
    kernel = make_kernel(env)
    inout, inp = env.register(torch.zeros(8), torch.ones(8))
    kernel(inout, inp)
    submitted = len(env.submitted)
    misaligned = torch.zeros(9)[1:]  # 4 bytes past an aligned address
    env.register(misaligned)
    kernel(misaligned, inp)  # the guard fails: a variant compiled for an unaligned pointer
    assert torch.equal(misaligned, torch.ones(8))
    assert env.submitted[-1].spec.args == (("fp32", False), ("fp32", True)) and len(env.submitted) > submitted
    fast = kernel.launch
    kernel(misaligned, inp)  # known now: no new compile
    count = len(env.submitted)
    kernel(inout, inp)
    assert kernel.launch is fast and len(env.submitted) == count and torch.equal(inout, torch.full((8,), 2.0))
    doubles = env.register(torch.zeros(8, dtype=torch.float64), torch.ones(8, dtype=torch.float64))
    kernel(*doubles)
    assert env.submitted[-1].spec.args == (("fp64", True), ("fp64", True))
    assert torch.equal(doubles[0], torch.ones(8, dtype=torch.float64))


def test_launch_hooks_use_the_generic_path():
    env = FakeEnv()
    env.fast_path = False
    kernel = make_kernel(env)
    inout, inp = torch.zeros(4), torch.ones(4)
    kernel(inout, inp)
    ((grid, kwargs),) = kernel.fn.generic_calls
    assert grid == kernel.config.grid and kwargs["XBLOCK"] == kernel.config.blocks["XBLOCK"]
    assert kwargs["num_warps"] == kernel.config.num_warps and torch.equal(inout, torch.ones(4))


def test_without_dtypes_compiling_waits_for_the_first_call():
    env = FakeEnv()
    kernel = make_kernel(env, dtypes=None)
    assert env.submitted == []
    kernel(*env.register(torch.zeros(4), torch.ones(4)))
    assert len(env.submitted) == 2


def test_generated_launcher_guard():
    calls, fallbacks = [], []
    loaded = LoadedKernel(lambda *a: calls.append(a), function=11, packed_metadata="meta")
    spec = ArgSpec(1, (("fp32", True), ("i64", False)))
    device = [1]
    launch = generate_launcher(["a_ptr", "XBLOCK", "b_ptr"], {"XBLOCK": 128}, (5,), spec,
                               [torch.float32, torch.int64], loaded, stream=lambda d: 100 + d,
                               current_device=lambda: device[0], fallback=lambda *a: fallbacks.append(a))
    a, b = torch.zeros(8), torch.zeros(8, dtype=torch.int64)
    launch(a, b[1:])  # b was compiled unaligned: any address is fine
    assert calls == [(5, 1, 1, 101, 11, "meta", None, None, None, a.data_ptr(), 128, b[1:].data_ptr())]
    launch(a[1:], b)  # a must stay aligned
    launch(a.double(), b)  # wrong dtype
    device[0] = 0
    launch(a, b)  # another device
    assert len(calls) == 1 and len(fallbacks) == 3
    launch.unchecked(a[1:], b)
    assert len(calls) == 2


def test_size_arguments_are_specialized_and_guarded_like_triton():
    """Symbolic sizes reach kernels as ints: specialized on divisibility by 16 (and int32 range),
    like Triton's JIT, and the launch grid is computed from them at each launch."""
    assert ArgSpec.of([torch.zeros(4), 32, 7], 0).args == (("fp32", True), ("#i32", True), ("#i32", False))
    assert ArgSpec.of([2**33], 0).args == (("#i64", True),)
    calls, fallbacks = [], []
    loaded = LoadedKernel(lambda *a: calls.append(a), function=11, packed_metadata="meta")
    spec = ArgSpec(0, (("fp32", True), ("#i32", True), ("#i32", False)))
    launch = generate_launcher(["a_ptr", "ks0", "ks1", "XBLOCK"], {"XBLOCK": 128}, ("((ks0 * ks1) + 127) // 128",),
                               spec, [torch.float32, None, None], loaded, stream=lambda d: 100 + d,
                               current_device=lambda: 0, fallback=lambda *a: fallbacks.append(a))
    a = torch.zeros(8)
    launch(a, 32, 7)
    assert calls == [(2, 1, 1, 100, 11, "meta", None, None, None, a.data_ptr(), 32, 7, 128)]
    launch(a, 48, 9)  # still a multiple of 16, and not: the same variant, another grid
    assert calls[-1][0] == 4 and calls[-1][10:12] == (48, 9)
    launch(a, 33, 7)  # ks0 no longer a multiple of 16
    launch(a, 32, 16)  # ks1 now is one: Triton would compile that variant, so do we
    launch(a, 2**31 + 16, 7)  # past int32
    assert len(calls) == 2 and len(fallbacks) == 3


def test_a_single_candidate_is_launched_without_cloning(monkeypatch):
    entered = []
    monkeypatch.setattr("tritonize.runtime.launcher.WrittenArgs.__enter__", lambda self: entered.append(1))
    env = FakeEnv()
    jit = FakeJit(["in_out_ptr0", "in_ptr0", "XBLOCK"])
    kernel = GpuKernel(jit, "fake_kernel", SOURCE, KernelShape("pointwise", 1 << 20, 1, 1), "default",
                       "/nonexistent.py", (torch.float32, torch.float32), env=env)
    assert len(env.submitted) == 1
    inout, inp = env.register(torch.zeros(4), torch.ones(4))
    kernel(inout, inp)
    assert entered == [] and env.timed == [] and torch.equal(inout, torch.ones(4))


def test_broken_compile_glue_falls_back_to_triton_with_a_warning():
    class BrokenPool(FakeEnv):
        def submit(self, jit_fn, job, prepare=None):
            self.submitted.append(job)
            return Handle(TypeError("ASTSource() got an unexpected keyword argument"))

        def load(self, job, index):
            raise job.value if isinstance(job, Handle) else TypeError("not a compiled kernel")

    env = BrokenPool()
    kernel = make_kernel(env)
    inout, inp = torch.zeros(4), torch.ones(4)
    with pytest.warns(UserWarning, match="fast launch unavailable"):
        kernel(inout, inp)
    kernel(inout, inp)
    assert len(kernel.fn.generic_calls) == 2 and torch.equal(inout, torch.full((4,), 2.0))


# ----------------------------------------------------------------------------- fast-path decision


def test_launch_hook_knobs_without_a_hook_leave_the_fast_path_on():
    # Triton >= 3.5 keeps an (empty) HookChain in the knob where older versions keep None; taking
    # the chain object itself for an installed hook sent every GPU kernel down the generic path
    assert not launch_hooks_active()
    assert CudaEnvironment().fast_path
    assert not hook_installed(None) and hook_installed(lambda metadata: None)
    assert not hook_installed(types.SimpleNamespace(calls=[]))
    assert hook_installed(types.SimpleNamespace(calls=[lambda metadata: None]))


def test_an_installed_launch_hook_turns_the_fast_path_off(monkeypatch):
    from triton import knobs

    def profiler_hook(metadata):
        pass

    chain = knobs.runtime.launch_enter_hook
    if hasattr(chain, "add"):  # Triton >= 3.5
        chain.add(profiler_hook)
        try:
            assert launch_hooks_active() and not CudaEnvironment().fast_path
        finally:
            chain.remove(profiler_hook)
    else:
        monkeypatch.setattr(knobs.runtime, "launch_enter_hook", profiler_hook)
        assert launch_hooks_active()
        monkeypatch.undo()
    assert not launch_hooks_active()


class RecordingEnv(FakeEnv):
    """Loads real generated kernels' "binaries" as launch recorders (nothing runs); decides on the
    fast path as CudaEnvironment does."""

    fast_path = CudaEnvironment.fast_path

    def load(self, job, index):
        def run(gx, gy, gz, stream, function, metadata, launch_md, enter, exit_hook, *args):
            self.launches.append({"grid": (gx, gy, gz), "job": job, "args": args})
        return LoadedKernel(run, function=hash(job.blocks), packed_metadata=job.num_warps)


LOAD_KERNEL = re.compile(r"= load_kernel\('''\n(.*?)\n''', '(\w+)', (kind=.*?\n\s+arg_dtypes=.*?)\)$", re.S | re.M)

LOAD_SYMBOLIC_KERNEL = re.compile(r"= load_kernel\('''\n(.*?)\n''', '(\w+)', (kind=.*?numel_exprs=\{.*?\}),", re.S | re.M)

GENERATED = {  # each compiles to at least one kernel of the kind named
    "pointwise": (lambda x: x * 2 + 1, lambda: [torch.randn(64, 64)]),
    "pointwise_2d": (lambda x: x.t() + x, lambda: [torch.randn(64, 64)]),
    "persistent_reduction": (lambda x: x.softmax(-1), lambda: [torch.randn(64, 64)]),
    "reduction_inner": (lambda x: x.sum(-1), lambda: [torch.randn(64, 9000)]),
    "reduction_outer": (lambda x: x.sum(0), lambda: [torch.randn(20000, 4)]),
    "scan": (lambda x: x.cumsum(-1), lambda: [torch.randn(8, 100)]),
    "looped_scan": (lambda x: x.cumsum(-1), lambda: [torch.randn(2, 5000)]),
    "random_seed_tensor": (lambda x: torch.nn.functional.dropout(x, 0.5), lambda: [torch.randn(64, 64)]),
    "index_checks": (lambda x, i: x[i], lambda: [torch.randn(64, 8), torch.randint(0, 64, (10,))]),
}


def generated_kernels(fn, inputs):
    """(source, name, load_kernel keyword arguments) of each kernel the compiler generates."""
    wrapper = tritonize.explain(fn, *inputs).wrapper
    found = []
    for source, name, kwargs in LOAD_KERNEL.findall(wrapper):
        found.append((source, name, eval(f"dict({kwargs})", {"torch": torch})))
    assert found, wrapper
    return found


@pytest.mark.parametrize("case", sorted(GENERATED))
def test_generated_kernels_of_every_kind_launch_through_the_fast_path(case):
    """The compiler's own kernels (not hand-written ones) as the GPU runtime sees them: the first
    call builds a variant, later calls go straight to the generated launcher with integer
    pointers and the chosen block sizes."""
    fn, make_inputs = GENERATED[case]
    kinds = set()
    for source, name, kw in generated_kernels(fn, make_inputs()):
        module = load_source_module(source, "kernel", interpret=False)  # a real JITFunction, not run
        shape = KernelShape(kw["kind"], kw["xnumel"], kw["ynumel"], kw["rnumel"], kw["hint"])
        env = RecordingEnv()
        kernel = GpuKernel(getattr(module, name), name, source, shape, "default", module.__file__,
                           kw["arg_dtypes"], env=env, debug=kw.get("checks", False))
        assert len(env.submitted) == len(kernel.configs)  # compiles started at import
        args = [torch.zeros(16, dtype=dtype) for dtype in kw["arg_dtypes"]]
        kernel(*args)
        assert kernel.launch is not kernel._fallback and len(kernel.variants) == 1, (case, name)
        env.launches.clear()
        kernel(*args)
        (launch,) = env.launches
        blocks = dict(kernel.config.blocks, PDL=True)  # sm_90: every kernel waits for the previous grid
        expected = [blocks[p] if p in blocks else None for p in module.__dict__[name].arg_names]
        pointers = iter(a.data_ptr() for a in args)
        assert list(launch["args"]) == [next(pointers) if v is None else v for v in expected]
        assert launch["grid"] == (kernel.config.grid[0], 1, 1) and dict(launch["job"].blocks) == blocks
        assert launch["job"].debug == kw.get("checks", False)
        assert launch["job"].options()["launch_pdl"] is True
        kinds.add(kw["kind"])
    assert case.startswith(tuple(kinds)) or case in ("random_seed_tensor", "index_checks"), kinds


def test_a_new_size_class_becomes_the_hot_launcher():
    """Symbolic sizes: a size no longer divisible by 16 is another specialization; once built,
    calls at that size go straight to its launcher, not through the fallback at every launch."""
    kernel, env = symbolic_kernel(lambda x: x * 2 + 1, torch.randn(5, 3))
    fallbacks = []
    original = kernel._fallback
    kernel._fallback = kernel.launch = lambda *args: fallbacks.append(args) or original(*args)
    pointers = [torch.zeros(1 << 16), torch.zeros(1 << 16)]
    for rows in (16, 131, 131, 131, 16, 16, 2048, 2048, 2001):
        kernel.launch(*pointers, rows, 16)
        assert env.launches[-1]["grid"][0] == -(-rows * 16 // kernel.config.blocks["XBLOCK"])
    # each change of divisibility or of size bucket (numel 256, 4096, 32768) goes through the
    # fallback once; 2001 rows are in 2048's bucket, and no longer divisible by 16
    assert len(fallbacks) == 5 and sorted(bucket for _, bucket in kernel.variants) == [
        (256, 1, 1), (4096, 1, 1), (32768, 1, 1), (32768, 1, 1)]
    configs = {str(job.blocks) for job in env.submitted}
    assert len(env.submitted) == len(configs) * len({job.spec for job in env.submitted})  # shared binaries


def test_arguments_the_fast_path_cannot_take_use_tritons_path():
    env = FakeEnv()
    kernel = make_kernel(env)
    inout = torch.zeros(4)
    kernel(inout, True)  # a bool where a pointer is expected: no specialization
    assert len(kernel.fn.generic_calls) == 1 and kernel.launch == kernel._fallback and not kernel.variants


@pytest.mark.parametrize("arch, env_value, expected", [(90, None, True), (100, None, True), (80, None, False),
                                                       (90, "0", False)])
def test_programmatic_dependent_launch_only_where_the_device_has_it(monkeypatch, arch, env_value, expected):
    """PDL (the kernel may start before the previous one ends; its first statement waits) is set
    for compute capability >= 9.0 unless TRITONIZE_PDL=0; elsewhere the constexpr is False and
    the launch is an ordinary one."""
    if env_value is None:
        monkeypatch.delenv("TRITONIZE_PDL", raising=False)
    else:
        monkeypatch.setenv("TRITONIZE_PDL", env_value)

    class ArchEnv(RecordingEnv):
        def target(self, index):
            return ("cuda", arch, 32)

    fn, make_inputs = GENERATED["pointwise"]
    source, name, kw = next(iter(generated_kernels(fn, make_inputs())))
    assert "helpers.wait_for_previous_grid(PDL)" in source.split("def ")[1].splitlines()[1]
    module = load_source_module(source, "kernel", interpret=False)
    shape = KernelShape(kw["kind"], kw["xnumel"], kw["ynumel"], kw["rnumel"], kw["hint"])
    env = ArchEnv()
    kernel = GpuKernel(getattr(module, name), name, source, shape, "default", module.__file__,
                       kw["arg_dtypes"], env=env)
    args = [torch.zeros(16, dtype=dtype) for dtype in kw["arg_dtypes"]]
    kernel(*args)
    env.launches.clear()
    kernel(*args)
    (launch,) = env.launches
    assert dict(launch["job"].blocks)["PDL"] is expected
    assert launch["job"].options().get("launch_pdl", False) is expected


def test_every_compile_also_builds_the_host_launcher_in_its_worker():
    env = FakeEnv()
    make_kernel(env)
    assert env.prepares and all(p is build_host_launcher for p in env.prepares)


def recording_runtime(monkeypatch, calls: list, on_target):
    """CudaEnvironment with nothing started, whose shared environment records its pool warm-up,
    its targets (`on_target(index)`) and Triton's installation hash in `calls`."""
    class Recorder:
        _targets: dict = {}
        pool = types.SimpleNamespace(warm_up=lambda: calls.append("pool"))

        def target(self, index):
            on_target(index)
            self._targets[index] = ("cuda", 90, 32)

    recorder = Recorder()
    monkeypatch.setattr(CudaEnvironment, "_shared", None)
    monkeypatch.setattr(CudaEnvironment, "_started", set())
    monkeypatch.setattr(CudaEnvironment, "_pool_started", False)
    monkeypatch.setattr(triton_compile, "hash_triton_installation", lambda: calls.append("hash"))
    monkeypatch.setattr(CudaEnvironment, "shared", classmethod(lambda cls: recorder))
    return recorder


def test_the_gpu_runtime_starts_on_a_background_thread_once(monkeypatch):
    calls = []
    recorder = recording_runtime(monkeypatch, calls, lambda i: calls.append((i, threading.current_thread().name)))
    CudaEnvironment.start_in_background(1).join(10)
    assert calls == ["pool", (1, "tritonize-cuda-start"), "hash"]
    monkeypatch.setattr(CudaEnvironment, "_shared", recorder)
    assert CudaEnvironment.start_in_background(1) is None


def test_a_graph_from_the_cache_starts_the_driver_but_not_the_compile_pool(monkeypatch):
    calls = []
    recorder = recording_runtime(monkeypatch, calls, calls.append)
    CudaEnvironment.start_in_background(0, compiling=False).join(10)
    assert calls == [0]
    monkeypatch.setattr(CudaEnvironment, "_shared", recorder)
    assert CudaEnvironment.start_in_background(0, compiling=False) is None
    CudaEnvironment.start_in_background(0, compiling=True).join(10)  # a later graph misses
    assert calls == [0, "pool", 0, "hash"]
    assert CudaEnvironment.start_in_background(0, compiling=True) is None


def test_a_failing_gpu_runtime_start_is_quiet_and_not_repeated(monkeypatch):
    def broken(cls):
        calls.append(1)
        raise RuntimeError("no driver")

    calls = []
    monkeypatch.setattr(CudaEnvironment, "_shared", None)
    monkeypatch.setattr(CudaEnvironment, "_started", set())
    monkeypatch.setattr(CudaEnvironment, "_pool_started", False)
    monkeypatch.setattr(CudaEnvironment, "shared", classmethod(broken))
    errors = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args))
    CudaEnvironment.start_in_background(0).join(10)
    assert CudaEnvironment.start_in_background(0) is None
    assert calls == [1] and errors == []


def test_the_backend_starts_no_gpu_runtime_for_cpu_graphs(monkeypatch):
    from tritonize import backend

    monkeypatch.setattr(CudaEnvironment, "start_in_background", classmethod(lambda cls, index, compiling: 1 / 0))
    backend.start_gpu_runtime([torch.zeros(2), 3], compiling=True)


def test_alike_host_launchers_build_one_at_a_time(monkeypatch):
    from triton.runtime import driver

    from tritonize.runtime import fast_launch

    def compiled(*signature, pdl=True):
        return types.SimpleNamespace(src=types.SimpleNamespace(signature=dict(enumerate(signature))),
                                     metadata=types.SimpleNamespace(launch_pdl=pdl, launch_cooperative_grid=False))

    a, b = compiled("*fp32", "*bf16", "constexpr"), compiled("*i64", "*fp16", "constexpr")
    assert fast_launch.launcher_shape(a) == fast_launch.launcher_shape(b)
    assert fast_launch.launcher_shape(a) != fast_launch.launcher_shape(compiled("*fp32", "constexpr"))
    assert fast_launch.launcher_shape(a) != fast_launch.launcher_shape(compiled("*fp32", "*bf16", "constexpr", pdl=False))
    running, most = [0], [0]

    def build(src, metadata):
        running[0] += 1
        most[0] = max(most[0], running[0])
        time.sleep(0.05)
        running[0] -= 1

    monkeypatch.setattr(driver, "_active", types.SimpleNamespace(launcher_cls=build))
    def build_all(kernels):
        most[0] = 0
        threads = [threading.Thread(target=fast_launch.build_host_launcher, args=(k,)) for k in kernels]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
            assert not thread.is_alive()
        return most[0]

    assert build_all([a, b, a, b]) == 1
    other = compiled("*fp32", "constexpr")  # another shape builds alongside
    slow_start = threading.Barrier(2)

    def build_together(src, metadata):
        slow_start.wait(5)
        build(src, metadata)

    monkeypatch.setattr(driver, "_active", types.SimpleNamespace(launcher_cls=build_together))
    assert build_all([a, other]) == 2


def symbolic_kernel(fn, example):
    """The GpuKernel (on a RecordingEnv) of the one kernel `fn` compiles to with dynamic=True."""
    recorder = []
    torch.compile(fn, backend=make_backend(recorder=recorder), dynamic=True)(example)
    wrapper = next(r for r in recorder if r != "graph").wrapper
    (source, name, kwargs), = LOAD_SYMBOLIC_KERNEL.findall(wrapper)
    kw = eval(f"dict({kwargs})", {"torch": torch})
    module = load_source_module(source, "kernel", interpret=False)
    shape = KernelShape(kw["kind"], kw["xnumel"], kw["ynumel"], kw["rnumel"], kw["hint"])
    env = RecordingEnv()
    return GpuKernel(getattr(module, name), name, source, shape, "default", module.__file__, None, env=env,
                     numel_exprs=kw["numel_exprs"]), env


def test_an_adaptive_reduction_runs_persistent_or_looped_by_size_bucket():
    """A row of symbolic length: each bucket's configs choose the body. Rows that fit in
    registers run the persistent body with RBLOCK the bucket's row length; longer rows loop."""
    kernel, env = symbolic_kernel(lambda x: x.softmax(-1), torch.randn(5, 3))
    assert kernel.kind == "adaptive_reduction"
    pointers = [torch.zeros(1 << 16), torch.zeros(1 << 16)]
    for rows, length in ((8, 100), (8, 120), (3, 9000), (8, 100)):
        kernel.launch(*pointers, rows, length)
        blocks = dict(env.launches[-1]["job"].blocks)
        if length <= 8192:
            assert blocks["PERSISTENT"] == 1 and blocks["RBLOCK"] == triton.next_power_of_2(length)
        else:
            assert blocks["PERSISTENT"] == 0 and blocks["RBLOCK"] <= 4096
    assert sorted(key[1] for key in kernel.variants) == [(4, 1, 16384), (8, 1, 128)]

    calls = []  # Triton's own launch path (a profiler's hooks): the bucket's config, not the last one
    kernel.fn = type("Recorder", (), {"arg_names": kernel.fn.arg_names,
                                      "__getitem__": lambda self, grid: lambda *a, **kw: calls.append(kw)})()
    kernel._generic(*pointers, 8, 100)
    kernel._generic(*pointers, 2, 5000)
    assert (calls[0]["PERSISTENT"], calls[0]["RBLOCK"]) == (1, 128)
    assert (calls[1]["PERSISTENT"], calls[1]["RBLOCK"]) == (1, 8192)


def test_sizes_that_fill_the_tiles_launch_the_kernel_compiled_with_even():
    """A reduction of symbolic sizes takes EVEN, or-ed into its bounds' masks: a launch whose
    sizes fill every tile (here 64 rows of 128: XBLOCK divides the rows, RBLOCK is the row) runs
    the binary compiled with EVEN=True; 64 rows of 100, in the same size bucket, the one with
    EVEN=False, compiled for the bucket's chosen config alone (not tuned again); back at 128
    the first variant is found again, nothing compiled. Triton's own launch path passes EVEN too."""
    kernel, env = symbolic_kernel(lambda x: x.softmax(-1), torch.randn(5, 3))
    assert kernel.has_even and "EVEN" in kernel.fn.arg_names
    pointers = [torch.zeros(1 << 16), torch.zeros(1 << 16)]
    position = kernel.fn.arg_names.index("EVEN")

    def launch(rows, length):
        kernel.launch(*pointers, rows, length)
        last = env.launches[-1]
        return dict(last["job"].blocks), last["args"][position]

    blocks, even = launch(64, 128)
    assert 64 % blocks["XBLOCK"] == 0 and (blocks["PERSISTENT"], blocks["RBLOCK"]) == (1, 128)
    assert blocks["EVEN"] is True and even == 1
    compiled = len(env.submitted)
    blocks, even = launch(64, 100)
    assert blocks["EVEN"] is False and even == 0 and len(env.submitted) == compiled + 1
    assert {k: v for k, v in blocks.items() if k != "EVEN"} == dict(kernel.config.blocks, PDL=True)
    assert launch(64, 128)[0]["EVEN"] is True and launch(64, 100)[0]["EVEN"] is False
    assert len(env.submitted) == compiled + 1 and sorted(key[2] for key in kernel.variants) == [False, True]

    calls = []
    kernel.fn = type("Recorder", (), {"arg_names": kernel.fn.arg_names,
                                      "__getitem__": lambda self, grid: lambda *a, **kw: calls.append(kw)})()
    kernel._generic(*pointers, 64, 128)
    kernel._generic(*pointers, 64, 100)
    assert [c["EVEN"] for c in calls] == [True, False]
