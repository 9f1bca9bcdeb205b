"""Every option of tritonize in one typed place.

Options reach the compiler explicitly (`Options` is passed down the pipeline); the environment
only supplies defaults. `patch()` overrides defaults inside a `with` block, for tests.

| option      | values                    | default                | meaning                                   |
|-------------|---------------------------|------------------------|-------------------------------------------|
| mode        | "default", "max-autotune", "max-autotune-no-cudagraphs", "reduce-overhead" | "default" | how hard to search launch configs (the max-autotune modes search widely); reduce-overhead records CUDA graphs (runtime/cuda_graphs.py; no effect on the CPU). torch.compile's `mode=` arrives here |
| cudagraph_sizes | int                   | 8                      | reduce-overhead: sizes recorded per graph; past it, plain launches and a warning |
| cudagraph_capture | "cuda", "fake"      | "cuda"                 | "fake": tests on the CPU record with a stand-in that re-runs the wrapper into the recorded outputs |
| cudagraph_buckets | tuple of ints       | ()                     | reduce-overhead: run a size that no operation mixes at the next of these sizes up (padding), and cut the outputs back; () records every size as it is |
| fallback    | "error", "eager"          | "error"                | on a compiler failure: raise CompileError, or run that graph through aten with a warning |
| debug_dir   | path or None              | $TRITONIZE_DEBUG_DIR   | write every stage's output per graph      |
| cache_dir   | path or None              | $TRITONIZE_CACHE_DIR   | where generated modules are written       |
| partitioner | "min_cut", "default"      | "min_cut"              | training: how AOTAutograd splits the joint graph. "min_cut" (AOTAutograd's min-cut partitioner, as Inductor uses) saves less and recomputes cheap ops in the backward; "default" (AOTAutograd's default_partition) saves what the forward computed. Random ops are never recomputed |
| fallback_random | bool                  | $TRITONIZE_FALLBACK_RANDOM=1 | random ops through aten: eager's numbers bit for bit (default: our Philox, eager's distributions, other numbers) |
| conv_layout | "auto", "as_traced", "channels_last" | "auto"   | "channels_last": 2-D convolutions and the 4-D buffers around them in NHWC memory order (cuDNN's fast kernels; lower/conv_layout.py); graph outputs keep eager's strides. "auto": channels-last for inference graphs with fp16/bf16 convolutions on CUDA, as traced otherwise (the decision is a note in explain()) |
| depthwise_conv | "auto", "library", "generated" | "auto"   | depthwise 2-D convolutions: aten's (cuDNN) call, or a generated kernel that fuses what follows (lower/depthwise.py). "auto": generated for the shapes where the H100 measured it faster (3x3 windows of stride 2, small outputs) in channels-last graphs, the library call otherwise |
| align_matmuls | "auto", "always", "never" | "auto"             | products (mm, addmm) with a leading dimension that is not a multiple of 16 bytes (odd vocabularies) run on operands whose rows start at 16-byte boundaries (runtime matmul_aligned), and values our kernels compute for them are stored with padded rows (lower/product_rows.py). "auto": on CUDA; "always": every device (tests on the CPU); "never": as traced |
| freeze      | bool                      | False                  | inference: the model's parameters and buffers are constants (their weights must not change; a changed one raises FrozenInputChanged): computations of weights alone run once at compile time, batch norms fold into the convolutions before them (lower/freezing.py) |

Environment knobs read by the runtime (runtime/ must not import this module): TRITONIZE_CACHE=0
(no disk caches), TRITONIZE_DYNAMO_CACHE=0, TRITONIZE_COMPILE_POOL / TRITONIZE_COMPILE_WORKERS,
TRITONIZE_PROGRESS=0|1, TRITONIZE_PDL=0 (no programmatic dependent launch on Hopper and later).
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os

MODES = ("default", "max-autotune", "reduce-overhead", "max-autotune-no-cudagraphs")
FALLBACKS = ("error", "eager")
CAPTURES = ("cuda", "fake")
PARTITIONERS = ("default", "min_cut")
CONV_LAYOUTS = ("auto", "as_traced", "channels_last")
DEPTHWISE_CONVS = ("auto", "library", "generated")
ALIGN_MATMULS = ("auto", "always", "never")


@dataclasses.dataclass(frozen=True)
class Options:
    mode: str = "default"
    fallback: str = "error"
    debug_dir: str | None = None
    cache_dir: str | None = None
    fallback_random: bool = False
    cudagraph_sizes: int = 8
    cudagraph_capture: str = "cuda"
    cudagraph_buckets: tuple = ()
    partitioner: str = "min_cut"
    conv_layout: str = "auto"
    freeze: bool = False
    depthwise_conv: str = "auto"
    align_matmuls: str = "auto"

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"tritonize: unknown mode {self.mode!r}; expected one of {MODES}")
        if self.fallback not in FALLBACKS:
            raise ValueError(f"tritonize: unknown fallback {self.fallback!r}; expected one of {FALLBACKS}")
        if self.partitioner not in PARTITIONERS:
            raise ValueError(f"tritonize: unknown partitioner {self.partitioner!r}; expected one of {PARTITIONERS}")
        if self.conv_layout not in CONV_LAYOUTS:
            raise ValueError(f"tritonize: unknown conv_layout {self.conv_layout!r}; expected one of {CONV_LAYOUTS}")
        if self.depthwise_conv not in DEPTHWISE_CONVS:
            raise ValueError(f"tritonize: unknown depthwise_conv {self.depthwise_conv!r}; expected one of {DEPTHWISE_CONVS}")
        if self.align_matmuls not in ALIGN_MATMULS:
            raise ValueError(f"tritonize: unknown align_matmuls {self.align_matmuls!r}; expected one of {ALIGN_MATMULS}")
        if self.cudagraph_capture not in CAPTURES:
            raise ValueError(f"tritonize: unknown cudagraph_capture {self.cudagraph_capture!r}; "
                             f"expected one of {CAPTURES}")
        if any(not isinstance(b, int) or b < 1 for b in self.cudagraph_buckets):
            raise ValueError(f"tritonize: cudagraph_buckets must be positive ints, not {self.cudagraph_buckets!r}")
        object.__setattr__(self, "cudagraph_buckets", tuple(sorted(set(self.cudagraph_buckets))))
        if self.cudagraph_sizes < 1:
            raise ValueError(f"tritonize: cudagraph_sizes must be at least 1, not {self.cudagraph_sizes}")


_OVERRIDES: contextvars.ContextVar[dict] = contextvars.ContextVar("tritonize_option_overrides", default={})


def make_options(options: dict | Options | None = None, **kwargs) -> Options:
    """Options from (in increasing priority) the environment, patch(), `options`, kwargs."""
    if isinstance(options, Options):
        return dataclasses.replace(options, **kwargs)
    values = {"debug_dir": os.environ.get("TRITONIZE_DEBUG_DIR") or None,
              "cache_dir": os.environ.get("TRITONIZE_CACHE_DIR") or None,
              "fallback_random": os.environ.get("TRITONIZE_FALLBACK_RANDOM", "0") not in ("", "0")}
    values.update(_OVERRIDES.get())
    unknown = set(options or {}) - {f.name for f in dataclasses.fields(Options)}
    if unknown:
        raise ValueError(f"tritonize: unknown option(s) {sorted(unknown)}")
    values.update(options or {})
    values.update(kwargs)
    return Options(**values)


def code_options(options: Options) -> list:
    """The options that change the generated code: part of every cache key."""
    return [options.mode, options.fallback, options.fallback_random, options.partitioner, options.conv_layout,
            options.freeze, options.depthwise_conv, options.align_matmuls]


@contextlib.contextmanager
def patch(**overrides):
    token = _OVERRIDES.set({**_OVERRIDES.get(), **overrides})
    try:
        yield
    finally:
        _OVERRIDES.reset(token)
