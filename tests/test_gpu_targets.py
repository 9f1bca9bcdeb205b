"""Generated scan, random-number and dtype-rule kernels compile for an H100 (sm_90) on any machine.

The CPU suite runs kernels through Triton's interpreter, which forgives what the GPU compiler
does not (a loop-carried value changing dtype, an int literal widening a carry). Triton compiles
for a fixed target without a GPU, so each kernel a graph launches is compiled here for sm_90 with
the argument dtypes it was actually launched with, down to a cubin, as the runtime compiles them
there: with programmatic dependent launch, waiting for the previous grid before any memory access.
"""
import pytest
import torch
import torch.nn.functional as F
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import tritonize
from tritonize.runtime import heuristics, launcher, loader

POINTER_TYPES = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16",
                 torch.float64: "*fp64", torch.int64: "*i64", torch.int32: "*i32", torch.bool: "*i1",
                 torch.int8: "*i8", torch.uint8: "*u8", torch.int16: "*i16"}

GRAPHS = {
    "scans": (lambda x: (x.cumsum(-1), torch.cummax(x, 0), torch.logcumsumexp(x * 2, 1)),
              lambda: torch.randn(8, 100)),
    "looped_scans": (lambda x: (torch.cummin(x, -1), x.cumsum(-1) + 1, torch.logcumsumexp(x, -1)),
                     lambda: torch.randn(2, 5000)),
    "integer_scans": (lambda x: (x.cumsum(-1), torch.cummax(x, -1), (x > 0).cumsum(0)),
                      lambda: torch.randint(-5, 5, (3, 3000), dtype=torch.int32)),
    "bf16_scans": (lambda x: (x.cumsum(-1), torch.cummax(x, -1)), lambda: torch.randn(4, 100).bfloat16()),
    "random": (lambda x: (torch.rand_like(x), torch.randn_like(x).bfloat16(), F.dropout(x, 0.3),
                          torch.bernoulli(x.sigmoid())), lambda: torch.randn(64, 30)),
    # dtype rules (tests/test_dtypes.py): shifts, integer pow and gcd are helper loops and masks
    "int8_semantics": (lambda x: (x << (x % 9), x >> (x % 10), x ** (x % 5).abs(), torch.gcd(x, x + 3),
                                  torch.lcm(x, x - 1), x // 3, x % 7, torch.signbit(x)),
                       lambda: torch.randint(-100, 100, (40, 30), dtype=torch.int8)),
    "int64_semantics": (lambda x: (x << (x % 70), x >> 63, 3 ** (x % 40), x ** x, torch.gcd(x, x.flip(0)),
                                   x.to(torch.uint8) * -1, torch.isinf(x)),
                        lambda: torch.randint(-2**40, 2**40, (40, 30))),
    # integer divisors are checked for zero on the CPU only: on the GPU the check is a no-op call
    "integer_divisors": (lambda x: (x // (x.abs() + 1), x % (x.abs() + 1), torch.fmod(x, x.abs() + 2),
                                    torch.div(x, x.abs() + 1, rounding_mode="trunc"),
                                    torch.cat([x // (x.abs() + 1), x]), (x % (x.abs() + 1)).sum(-1)),
                         lambda: torch.randint(-100, 100, (40, 30), dtype=torch.int32)),
    "fp64_math": (lambda x: (x.abs().sqrt(), x.exp(), x.sin(), x.abs().rsqrt(), x.sigmoid(),
                             torch.special.bessel_j0(x), torch.special.ndtri(x.sigmoid()), torch.special.erfcx(x),
                             torch.special.spherical_bessel_j0(x), torch.ldexp(x, x.long()), torch.digamma(x),
                             torch.special.modified_bessel_k0(x.abs()), torch.special.modified_bessel_k1(x),
                             torch.special.scaled_modified_bessel_k0(x), torch.special.scaled_modified_bessel_k1(x)),
                  lambda: torch.randn(40, 30, dtype=torch.float64)),
    "special_fp32": (lambda x: (torch.special.bessel_y0(x.abs()), torch.special.bessel_y1(x.abs()),
                                torch.special.bessel_j1(x), torch.special.modified_bessel_i0(x),
                                torch.special.i1(x), torch.angle(x), x.half().bfloat16(), x.bfloat16(),
                                torch.digamma(x * 10), torch.special.modified_bessel_k1(x.abs())),
                     lambda: torch.randn(40, 30)),
    "movement": (lambda x: (torch.slice_scatter(x, x[1:7:2] * 2, 0, 1, 7, 2), torch.diagonal_scatter(x, x[0]),
                            x.repeat(2, 3), x.unfold(1, 4, 3), *x.split([10, 20], dim=1)),
                 lambda: torch.randn(30, 30)),
}


def _launches(monkeypatch, fn, x) -> tuple[list, dict]:
    """Run fn compiled on the CPU; return its kernels and, per kernel, the argument dtypes of its
    launch and the block sizes the heuristics would pick first on a GPU."""
    launched = {}
    call = launcher.InterpretedKernel.__call__

    def record(self, *args):
        gpu_config = heuristics.candidates(self.shape, "default", on_gpu=True)[0]
        launched[self.name] = ([a.dtype for a in args], dict(gpu_config.blocks))
        return call(self, *args)

    monkeypatch.setattr(launcher.InterpretedKernel, "__call__", record)
    report = tritonize.explain(fn, x)
    assert not report.fallbacks, report.fallbacks
    return report.kernels, launched


def _jit_module(source: str, tmp_path, name: str):
    """Kernel source imported in compiled (not interpreted) mode, with a compiled helpers module."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    module = loader._exec_module(path, f"gpu_target_{name}", interpret=False)
    helpers_path = loader.pathlib.Path(loader.__file__).with_name("triton_helpers.py")
    module.helpers = loader._exec_module(helpers_path, "gpu_target_helpers", interpret=False)
    return module


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_kernels_compile_for_sm90(monkeypatch, tmp_path, graph):
    fn, make_input = GRAPHS[graph]
    kernels, launched = _launches(monkeypatch, fn, make_input())
    assert kernels
    for kernel in kernels:
        dtypes, blocks = launched[kernel.name]
        blocks["PDL"] = True  # what the runtime sets on sm_90 (programmatic dependent launch)
        jit_fn = getattr(_jit_module(kernel.source, tmp_path, kernel.name), kernel.name)
        pointers = [a for a in jit_fn.arg_names if a not in blocks]
        signature = {a: POINTER_TYPES[d] for a, d in zip(pointers, dtypes, strict=True)}
        signature.update({b: "constexpr" for b in blocks})
        compiled = triton.compile(ASTSource(fn=jit_fn, signature=signature, constexprs=blocks),
                                  target=GPUTarget("cuda", 90, 32), options={"launch_pdl": True})
        assert compiled.asm.get("cubin"), kernel.name
        ptx = compiled.asm["ptx"]
        accesses = ("ld.global", "st.global", "atom.", "red.", "cp.async")
        first_access = min(ptx.index(op) for op in accesses if op in ptx)
        assert ptx.index("griddepcontrol.wait") < first_access, kernel.name
        assert compiled.metadata.launch_pdl, kernel.name


def _dwconv_bn_silu(x, weight, mean, var, gamma, beta):
    y = F.conv2d(x, weight, padding=1, groups=x.shape[1])
    return F.silu(F.batch_norm(y, mean, var, gamma, beta, training=False))


@pytest.mark.parametrize("dynamic", [False, True])
def test_channels_last_copies_of_a_dynamic_convolution_load_and_store_vectors(monkeypatch, dynamic):
    """A depthwise convolution's channels-last copies (its input to NHWC, its epilogue back to
    NCHW) with symbolic sizes: H * W is a stride and a divisor of their index math. Passed as a
    parameter of its own (codegen/symbolic.py), Triton's specialization of an int divisible by 16
    makes it known aligned (12 * 12 = 144), and the sm_90 code loads and stores vectors, as the
    static kernels do; computed in the kernel from H (12, not divisible by 16) it was not."""
    c = 16
    inputs = (torch.randn(2, c, 12, 12), torch.randn(c, 1, 3, 3), torch.randn(c), torch.rand(c) + 1,
              torch.randn(c), torch.randn(c))
    options = {"conv_layout": "channels_last", "depthwise_conv": "library"}  # cuDNN's call
    ptx_of = _sm90_ptx(monkeypatch, _dwconv_bn_silu, inputs, options, dynamic=dynamic)
    assert len(ptx_of) == 2, list(ptx_of)
    for name, ptx in ptx_of.items():
        assert "ld.global.v" in ptx and "st.global.v" in ptx, name


def test_a_generated_depthwise_convolution_reads_its_filter_in_vectors(monkeypatch):
    """The generated convolution (lower/depthwise.py) of a bf16 channels-last input: each tap's
    weights for a thread's neighbouring channels are consecutive (the filter reordered tap-major),
    so the sm_90 code reads them in vectors like the input, with no 16-bit load of one element
    (read in (channels, 1, 3, 3) order, 9 elements apart, they were 144 such loads)."""
    c = 64
    inputs = (torch.randn(2, c, 12, 12).bfloat16().to(memory_format=torch.channels_last),
              torch.randn(c, 1, 3, 3).bfloat16(), torch.randn(c).bfloat16(), torch.rand(c).bfloat16() + 1,
              torch.randn(c).bfloat16(), torch.randn(c).bfloat16())
    options = {"conv_layout": "channels_last", "depthwise_conv": "generated"}
    ptx_of = _sm90_ptx(monkeypatch, _dwconv_bn_silu, inputs, options, tolerance=0.05)
    (convolution,) = [ptx for name, ptx in ptx_of.items() if name != "triton_poi_fused_convolution_0"]  # 0: the filter
    assert "ld.global.v4" in convolution and "ld.global.b16" not in convolution


def _sm90_ptx(monkeypatch, fn, inputs, options: dict, dynamic=False, tolerance=None) -> dict:
    """fn compiled with tritonize on the CPU (values checked against eager), then each kernel it
    launched compiled for sm_90 with its launch's arguments and the first GPU config: name -> PTX."""
    from tritonize.runtime.triton_compile import ArgSpec, CompileJob, compile_config

    launched = {}
    call = launcher.InterpretedKernel.__call__

    def record(self, *args):
        config = heuristics.candidates(self.shape, "default", on_gpu=True)[0]
        launched[self.name] = (ArgSpec.of(args, 0), dict(config.blocks, PDL=True), config.num_warps)
        return call(self, *args)

    monkeypatch.setattr(launcher.InterpretedKernel, "__call__", record)
    recorder = []
    backend = tritonize.make_backend(tritonize.make_options(options), recorder=recorder)
    compiled_fn = torch.compile(fn, backend=backend, dynamic=dynamic)
    torch.testing.assert_close(compiled_fn(*inputs), fn(*inputs), atol=tolerance, rtol=tolerance)
    sources = {k.name: k.source for art in recorder if art != "graph" for k in art.kernels}
    assert set(launched) == set(sources), (launched, sources)
    ptx_of = {}
    for name, (spec, blocks, num_warps) in launched.items():
        module = loader.load_source_module(sources[name], "kernel", interpret=False)
        job = CompileJob(module.__file__, name, spec, tuple(sorted(blocks.items())), num_warps, 1, ("cuda", 90, 32))
        ptx_of[name] = compile_config(getattr(module, name), job).asm["ptx"]
    return ptx_of

