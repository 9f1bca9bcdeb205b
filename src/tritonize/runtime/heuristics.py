"""Launch configurations for generated kernels: the first pick, and the candidates to autotune.

Kernel kinds and the block parameters their source declares (`tl.constexpr`):
* "pointwise": XBLOCK (1-D), or YBLOCK and XBLOCK (2-D tiles, for transposed reads);
* "reduction": XBLOCK rows a program, RBLOCK elements of a row an iteration (looped);
* "persistent_reduction": XBLOCK; RBLOCK is baked into the source (the whole row at once);
* "scan": XBLOCK rows a program, RBLOCK baked like a persistent reduction (the whole row);
* "looped_scan": XBLOCK rows a program, RBLOCK positions of a row an iteration (with a carry);
* "adaptive_reduction": a reduction whose row length is symbolic. Its source holds both bodies
  behind a PERSISTENT constexpr; a size bucket whose rows fit in registers runs the persistent
  body (blocks XBLOCK, RBLOCK = the bucket's row length, PERSISTENT=1), longer rows the looped
  one (XBLOCK, RBLOCK, PERSISTENT=0). Its configs are those of the body's kind (`adaptive_body`).
Static sizes (xnumel, ynumel, rnumel) are baked into kernels too; the grid is 1-D over programs.

Every config respects MAX_BLOCK_1D / MAX_BLOCK_2D / MAX_XBLOCK_REDUCTION: block sizes are
powers of two no larger than these, so codegen may leave masks out when a size is a multiple of
them. A looped reduction masks its r range when rnumel % RBLOCK != 0, so any power-of-two RBLOCK
is valid there. Blocks are clamped to the sizes (no block larger than next_power_of_2(numel)) and
the number of programs to the 1-D grid limit.

`candidates(shape, mode, on_gpu)` lists configs, the measured first pick first (the defaults
measured on an H100, docs/benchmarks.md; `pick_config` returns it). In "default" mode that is the
only config of pointwise kernels and looped scans; reductions and whole-row scans add at most two
alternatives to time, since their best shape depends on the memory layout and the register
pressure. In "max-autotune" mode a wider set follows, which runtime/autotune.py refines by
coordinate descent (`neighbors`). On the CPU (Triton's interpreter) only the first pick is used:
bigger blocks mean fewer interpreted programs.
"""
from __future__ import annotations

import dataclasses
import re

import triton

MAX_BLOCK_1D = 8192
MAX_BLOCK_2D = 256
MAX_XBLOCK_REDUCTION = 128
MAX_PERSISTENT_RBLOCK = 8192  # rows up to this many elements are reduced in registers
MAX_OUTER_PERSISTENT_RBLOCK = 64  # the same for rows strided in memory (outer reductions)
MAX_RBLOCK_LOOPED = 4096  # widest step of a looped reduction or scan (they mask r: any power of two)
MAX_PERSISTENT_SCAN_RBLOCK = 2048  # longer rows are scanned in chunks with a carry
CPU_MAX_SCAN_RBLOCK = 1 << 12  # looped scans in the interpreter (looped_scan_config)
CPU_MIN_SCAN_CHUNKS = 4
MAX_GRID = 2**31 - 1
MIN_NARROW_XBLOCK = 8  # columns a program of a looped outer reduction, at the fewest
# rows a step of a split outer reduction's alternatives, at most (the first pick's 256 twice):
# a long chunk would otherwise offer tiles of 32 x 4096 elements, which spill and compile slowly
MAX_SPLIT_ALTERNATIVE_RBLOCK = 512
MIN_OUTER_XBLOCK = 32  # rows a program of an outer persistent reduction (coalesced loads)
MAX_WARPS = 32
ADAPTIVE = "adaptive_reduction"
KINDS = ("pointwise", "reduction", "persistent_reduction", "scan", "looped_scan", ADAPTIVE)
LOOPED = ("reduction", "looped_scan")  # kinds with an RBLOCK parameter and a loop over r
HINTS = (None, "inner", "outer")


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """What the heuristics need to know about the GPU (defaults: an H100 SXM)."""

    sm_count: int = 132
    regs_per_sm: int = 65536
    max_threads_per_sm: int = 2048
    warp_size: int = 32


@dataclasses.dataclass(frozen=True)
class KernelShape:
    kind: str
    xnumel: int
    ynumel: int = 1
    rnumel: int = 1
    hint: str | None = None  # reductions: "inner" (rows contiguous), "outer" (rows strided)
    heavy_math: bool = False  # the kernel calls trigonometric functions (see uses_heavy_math)
    split: int = 1  # an outer reduction's row chunks a column block (codegen/outer_split.py)

    def __post_init__(self):
        if self.hint == "":  # codegen writes hint="" for kernels without one
            object.__setattr__(self, "hint", None)
        if self.kind not in KINDS:
            raise ValueError(f"unknown kernel kind {self.kind!r}; expected one of {KINDS}")
        if self.hint not in HINTS:
            raise ValueError(f"unknown reduction hint {self.hint!r}; expected one of {HINTS}")

    @property
    def is_2d(self) -> bool:
        return self.kind == "pointwise" and self.ynumel > 1

    @property
    def persistent_rblock(self) -> int:
        return triton.next_power_of_2(self.rnumel)

    @property
    def chunk(self) -> int:
        """Rows a program of a split outer reduction reduces (all of them unsplit)."""
        return triton.cdiv(self.rnumel, self.split)


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    blocks: dict = dataclasses.field(hash=False)  # {"XBLOCK": .., "YBLOCK": .., "RBLOCK": ..}
    num_warps: int
    grid: tuple
    num_stages: int = 1

    def __str__(self) -> str:
        blocks = " ".join(f"{k}={v}" for k, v in sorted(self.blocks.items()))
        return f"{blocks} num_warps={self.num_warps} num_stages={self.num_stages}"

    def to_json(self) -> dict:
        return {"blocks": dict(self.blocks), "num_warps": self.num_warps, "num_stages": self.num_stages}


def programs(shape: KernelShape, blocks: dict) -> int:
    x = triton.cdiv(shape.xnumel, blocks["XBLOCK"])
    return x * triton.cdiv(shape.ynumel, blocks["YBLOCK"]) if shape.is_2d else x * shape.split


def make_config(shape: KernelShape, blocks: dict, num_warps: int, num_stages: int = 1) -> LaunchConfig:
    return LaunchConfig(dict(blocks), num_warps, (programs(shape, blocks),), num_stages)


def config_from_json(shape: KernelShape, data: dict) -> LaunchConfig:
    return make_config(shape, {k: int(v) for k, v in data["blocks"].items()}, int(data["num_warps"]),
                       int(data.get("num_stages", 1)))


def block_limits(shape: KernelShape) -> dict:
    """The largest value each block parameter may take for this kernel."""
    p2 = triton.next_power_of_2
    if shape.kind == "pointwise":
        if shape.is_2d:
            return {"YBLOCK": min(MAX_BLOCK_2D, p2(shape.ynumel)), "XBLOCK": min(MAX_BLOCK_2D, p2(shape.xnumel))}
        return {"XBLOCK": min(MAX_BLOCK_1D, p2(shape.xnumel))}
    limits = {"XBLOCK": min(MAX_XBLOCK_REDUCTION, p2(shape.xnumel))}
    if shape.kind in LOOPED:
        limits["RBLOCK"] = min(MAX_RBLOCK_LOOPED, p2(shape.chunk))
    return limits


def elements_per_program(shape: KernelShape, blocks: dict) -> int:
    count = 1
    for value in blocks.values():
        count *= value
    if shape.kind in ("persistent_reduction", "scan"):
        count *= shape.persistent_rblock
    return count


def is_valid(shape: KernelShape, config: LaunchConfig) -> bool:
    """Within the codegen bounds and the grid limit, powers of two, a sane thread count."""
    if shape.kind == ADAPTIVE:
        body = adaptive_body(shape)
        inner = body_config(body, config)
        return inner is not None and is_valid(body, inner)
    limits = block_limits(shape)
    if set(config.blocks) != set(limits):
        return False
    for name, value in config.blocks.items():
        if value < 1 or value & (value - 1) or value > limits[name]:
            return False
    warps = config.num_warps
    if warps < 1 or warps & (warps - 1) or warps > MAX_WARPS or config.num_stages < 1:
        return False
    return programs(shape, config.blocks) <= MAX_GRID


def clamp(shape: KernelShape, blocks: dict) -> dict:
    """Blocks cut to the kernel's limits (powers of two stay powers of two)."""
    limits = block_limits(shape)
    out = {name: max(1, min(value, limits[name])) for name, value in blocks.items()}
    # Enough elements a program that the grid stays within the hardware limit.
    while programs(shape, out) > MAX_GRID:
        growable = [n for n in ("XBLOCK", "YBLOCK") if n in out and out[n] < limits[n]]
        if not growable:
            break  # is_valid rejects it
        out[growable[0]] *= 2
    return out


# ----------------------------------------------------------------------------- adaptive reductions


def adaptive_body(shape: KernelShape) -> KernelShape:
    """The kind an adaptive reduction runs as at this shape (a size bucket's): persistent when
    its rows fit in registers, else looped."""
    limit = MAX_OUTER_PERSISTENT_RBLOCK if shape.hint == "outer" else MAX_PERSISTENT_RBLOCK
    kind = "persistent_reduction" if shape.persistent_rblock <= limit else "reduction"
    return dataclasses.replace(shape, kind=kind)


def adaptive_config(body: KernelShape, config: LaunchConfig) -> LaunchConfig:
    """A config of the body's kind as the adaptive kernel's: which body, and the persistent
    body's RBLOCK (baked into a static persistent kernel, a launch constant here)."""
    blocks = dict(config.blocks, PERSISTENT=int(body.kind == "persistent_reduction"))
    if body.kind == "persistent_reduction":
        blocks["RBLOCK"] = body.persistent_rblock
    return dataclasses.replace(config, blocks=blocks)


def body_config(body: KernelShape, config: LaunchConfig) -> LaunchConfig | None:
    """The inverse of adaptive_config; None when the config is not one for this body."""
    blocks = dict(config.blocks)
    persistent = body.kind == "persistent_reduction"
    if blocks.pop("PERSISTENT", None) != int(persistent):
        return None
    if persistent and blocks.pop("RBLOCK", None) != body.persistent_rblock:
        return None
    return dataclasses.replace(config, blocks=blocks)


def _adaptive(shape: KernelShape, configs_of_body) -> list[LaunchConfig]:
    """configs_of_body(body shape) -> its configs, as the adaptive kernel's."""
    body = adaptive_body(shape)
    return [adaptive_config(body, c) for c in configs_of_body(body)]


# ----------------------------------------------------------------------------- first picks
# The measured defaults (docs/benchmarks.md): what runs without autotuning, and the first
# candidate of every list. Changing one of them needs a new measurement (tests/test_heuristics.py).


def grid_source(config: LaunchConfig, numel_exprs: dict, split: int = 1) -> tuple:
    """The grid of a pointwise or reduction config for sizes known only at launch (symbolic
    sizes), as source over a kernel's parameters: the generated launchers (GPU) and
    GeneratedKernel.grid_for (the interpreter, Triton's own launch path) both compute it.
    split: a split outer reduction's row chunks (KernelShape.split)."""
    blocks = config.blocks
    x_block = blocks["XBLOCK"]
    programs = f"(({numel_exprs['xnumel']}) + {x_block - 1}) // {x_block}"
    if "YBLOCK" in blocks:
        y_block = blocks["YBLOCK"]
        programs += f" * ((({numel_exprs.get('ynumel', '1')}) + {y_block - 1}) // {y_block})"
    if split > 1:
        programs += f" * {split}"
    return (programs,)


def even_source(config: LaunchConfig, numel_exprs: dict, split: int = 1) -> str:
    """When a reduction kernel of symbolic sizes may launch with EVEN (codegen/reduction_kernel.py),
    as source over its parameters: every tile of the config is full along each symbolic numel.
    Along x, XBLOCK divides xnumel; along r, RBLOCK equals the row (the persistent body) or
    divides it (looped), each of `split` chunks included; and the kernel's own conditions
    (`even_when`: a split reduction's rows divide into its chunks)."""
    blocks, parts = config.blocks, []
    xnumel, rnumel = numel_exprs.get("xnumel", "1"), numel_exprs.get("rnumel", "1")
    if not xnumel.strip().isdigit():
        parts.append(f"({xnumel}) % {blocks['XBLOCK']} == 0")
    if not rnumel.strip().isdigit():
        r_block = blocks["RBLOCK"]
        parts.append(f"({rnumel}) == {r_block}" if blocks.get("PERSISTENT") else f"({rnumel}) % {split * r_block} == 0")
    if "even_when" in numel_exprs:  # a split reduction's chunks all complete (codegen/kernel.py)
        parts.append(numel_exprs["even_when"])
    return " and ".join(parts) or "True"


def pick_config(kind: str, xnumel: int, ynumel: int, rnumel: int, on_gpu: bool,
                hint: str | None = None, device: DeviceInfo | None = None) -> LaunchConfig:
    """The heuristic's first pick (what runs without autotuning). hint: for reductions, "outer"
    when inputs are contiguous along rows (x), "inner" along r; "" or None: no hint."""
    return candidates(KernelShape(kind, xnumel, ynumel, rnumel, hint), "default", on_gpu, device)[0]


def first_pick(shape: KernelShape, on_gpu: bool) -> LaunchConfig:
    outer = shape.hint == "outer"
    if shape.kind == "pointwise":
        config = pointwise_config(shape.xnumel, shape.ynumel, on_gpu, shape.heavy_math)
    elif shape.kind in ("persistent_reduction", "scan"):
        config = persistent_reduction_config(shape.xnumel, shape.rnumel, on_gpu, outer)
    elif shape.kind == "reduction":
        config = looped_reduction_config(shape.xnumel, shape.chunk, on_gpu, outer)
    else:
        config = looped_scan_config(shape.xnumel, shape.rnumel, on_gpu, outer)
    return make_config(shape, clamp(shape, config.blocks), config.num_warps)


HEAVY_MATH = re.compile(r"\b(?:tl|libdevice)\.(?:sin|cos|tan|sincos|sinpi|cospi|tanpi)\(")
HEAVY_MATH_XBLOCK = 512  # with 4 warps: 4 elements a thread


def uses_heavy_math(source: str) -> bool:
    """Whether a kernel's source calls sin, cos or tan. Their precise forms are long inline code
    (range reduction for large arguments), repeated for every element a thread holds: a rotary
    embedding kernel with 16 elements a thread (XBLOCK=2048, 4 warps) took 4.8 s to compile on
    the GPU host, ten times a plain kernel of its size."""
    return HEAVY_MATH.search(source) is not None


def pointwise_config(xnumel: int, ynumel: int, on_gpu: bool, heavy_math: bool = False) -> LaunchConfig:
    """Measured on an H100 (bench/pointwise_configs.py, docs/benchmarks.md): 1-D kernels peak at
    XBLOCK=2048 with 4 warps (16 elements a thread); transposing 2-D tiles at 128x128, 4 warps.
    Kernels with heavy math (uses_heavy_math) hold 4 elements a thread instead of 16 (2-D tiles
    of at most 512 elements: Llama's rotary kernel as a 128x64 tile took 6.3 s to compile on its
    own on the GPU host): the code is repeated per element, and these kernels are bound by
    compute and compile time, not by bandwidth. On the CPU (interpreter), bigger blocks mean
    fewer interpreted programs."""
    if ynumel > 1:
        xblock = min(128, triton.next_power_of_2(xnumel))
        ylimit = min(128, max(1, HEAVY_MATH_XBLOCK // xblock)) if heavy_math and on_gpu else 128
        yblock = min(ylimit, triton.next_power_of_2(ynumel))
        grid = (triton.cdiv(xnumel, xblock) * triton.cdiv(ynumel, yblock),)
        return LaunchConfig({"YBLOCK": yblock, "XBLOCK": xblock}, 4, grid)
    limit = (HEAVY_MATH_XBLOCK if heavy_math else 2048) if on_gpu else MAX_BLOCK_1D
    xblock = min(limit, triton.next_power_of_2(xnumel))
    num_warps = 4 if xblock >= 1024 or (heavy_math and xblock >= 512) else (2 if xblock >= 256 else 1)
    return LaunchConfig({"XBLOCK": xblock}, num_warps, (triton.cdiv(xnumel, xblock),))


def persistent_reduction_config(xnumel: int, rnumel: int, on_gpu: bool, outer: bool = False) -> LaunchConfig:
    """The whole row in registers: about 4096 elements a program on the GPU (8 warps once rows
    pass 2048), several rows a program when rows are short. Outer reductions need at least
    32 rows a program so that loads along the rows coalesce. (16 warps for a plain sum over
    rows of 4096 measured 91.5% of copy bandwidth in one H100 sweep and 71.6% in a later run,
    against a steady 88-89% with 8: not taken.)"""
    rblock = triton.next_power_of_2(rnumel)
    budget = (4096 if rblock >= 2048 else 2048) if on_gpu else 1 << 16
    xblock = max(1, min(MAX_XBLOCK_REDUCTION, budget // rblock, triton.next_power_of_2(xnumel)))
    if outer:
        xblock = min(MAX_XBLOCK_REDUCTION, max(xblock, MIN_OUTER_XBLOCK), triton.next_power_of_2(xnumel))
    num_warps = 8 if rblock * xblock >= 4096 and rblock >= 2048 else 4
    if rblock * xblock <= 256:
        num_warps = 2
    return LaunchConfig({"XBLOCK": xblock}, num_warps, (triton.cdiv(xnumel, xblock),))


def looped_reduction_config(xnumel: int, rnumel: int, on_gpu: bool, outer: bool = False) -> LaunchConfig:
    """Long rows: one row a program walking RBLOCK elements at a time. Outer reductions (rows
    contiguous) take 64 rows by 256 reduced elements, so every load is a coalesced row segment
    (sum_first: 78.0% of copy bandwidth, 76.5% with 128).
    Measured on an H100 (bench/reduction_configs.py, docs/benchmarks.md)."""
    if not on_gpu:
        rblock = min(MAX_RBLOCK_LOOPED, triton.next_power_of_2(rnumel))
        xblock = max(1, min(MAX_XBLOCK_REDUCTION, (1 << 16) // rblock, triton.next_power_of_2(xnumel)))
        return LaunchConfig({"XBLOCK": xblock, "RBLOCK": rblock}, 4, (triton.cdiv(xnumel, xblock),))
    if outer:
        rblock, xblock, warps = 256, 64, 8
    else:
        rblock, xblock, warps = 4096, 1, 4
    rblock = min(rblock, triton.next_power_of_2(rnumel))
    xblock = min(xblock, triton.next_power_of_2(xnumel))
    return LaunchConfig({"XBLOCK": xblock, "RBLOCK": rblock}, warps, (triton.cdiv(xnumel, xblock),))


def looped_scan_config(xnumel: int, rnumel: int, on_gpu: bool, outer: bool = False) -> LaunchConfig:
    """Rows longer than MAX_PERSISTENT_SCAN_RBLOCK, a chunk at a time. On the GPU one row a
    program in chunks of 1024 (4 warps), or for scans along a strided dim 64 rows by 32
    positions so loads coalesce along the rows. Not yet tuned on hardware (max-autotune searches).
    On the CPU the interpreter's cost is per operation, not per element (a 2**20-long cumsum took
    30 s in chunks of 1024): wide chunks, up to CPU_MAX_SCAN_RBLOCK, but at least
    CPU_MIN_SCAN_CHUNKS of them, so the carry between chunks runs as it does on the GPU."""
    if not on_gpu:
        rblock = min(CPU_MAX_SCAN_RBLOCK, max(1024, triton.next_power_of_2(rnumel) // CPU_MIN_SCAN_CHUNKS))
        xblock = max(1, min(MAX_XBLOCK_REDUCTION, (1 << 16) // rblock, triton.next_power_of_2(xnumel)))
        return LaunchConfig({"XBLOCK": xblock, "RBLOCK": rblock}, 4, (triton.cdiv(xnumel, xblock),))
    rblock, xblock = (32, 64) if outer else (1024, 1)
    rblock = min(rblock, triton.next_power_of_2(rnumel))
    xblock = min(xblock, triton.next_power_of_2(xnumel))
    return LaunchConfig({"XBLOCK": xblock, "RBLOCK": rblock}, 4, (triton.cdiv(xnumel, xblock),))


# ----------------------------------------------------------------------------- candidate lists


def candidates(shape: KernelShape, mode: str, on_gpu: bool, device: DeviceInfo | None = None) -> list[LaunchConfig]:
    """Configs to try, the measured first pick first; duplicates and invalid ones removed.
    Default mode on the GPU adds at most two timed alternatives for reductions and scans that
    reduce in registers; max-autotune a wide set (refined by coordinate descent in autotune.py).
    On the CPU: the first pick only."""
    if shape.kind == ADAPTIVE:
        return _adaptive(shape, lambda body: candidates(body, mode, on_gpu, device))
    device = device or DeviceInfo()
    pick = first_pick(shape, on_gpu)
    found = [pick]
    if on_gpu and shape.kind == "reduction":
        found += _looped_alternatives(shape, device)
    if on_gpu and shape.kind in ("persistent_reduction", "scan"):
        found += _persistent_alternatives(shape, pick, device)
    if on_gpu and is_max_autotune(mode):
        found += _wide_set(shape)
    unique: list[LaunchConfig] = []
    for config in found:
        if is_valid(shape, config) and config not in unique and (not unique or keeps_threads_busy(shape, config)):
            unique.append(config)
    return unique


def keeps_threads_busy(shape: KernelShape, config: LaunchConfig) -> bool:
    """At least one element a thread (more warps than that only adds idle threads)."""
    return config.num_warps == 1 or elements_per_program(shape, config.blocks) >= 32 * config.num_warps


def is_max_autotune(mode: str) -> bool:
    return mode in ("max-autotune", "max-autotune-no-cudagraphs")


def _persistent_alternatives(shape: KernelShape, pick: LaunchConfig, device: DeviceInfo) -> list[LaunchConfig]:
    """Default mode for whole-row kernels: the pick with twice the warps when rows are long
    (register pressure), and fewer rows a program when several rows share one (halved until
    the grid covers every SM, or halved once)."""
    out = []
    xblock = pick.blocks["XBLOCK"]
    if shape.persistent_rblock * xblock >= 2048 and pick.num_warps < 16:
        out.append(make_config(shape, pick.blocks, pick.num_warps * 2))
    least = MIN_OUTER_XBLOCK if shape.hint == "outer" else 1
    if xblock > least:
        fewer = xblock // 2
        while fewer > least and triton.cdiv(shape.xnumel, fewer) < device.sm_count:
            fewer //= 2
        out.append(make_config(shape, {"XBLOCK": fewer}, pick.num_warps))
    return out


def _looped_alternatives(shape: KernelShape, device: DeviceInfo) -> list[LaunchConfig]:
    """Default mode for looped reductions: a measured neighbor of the first pick (bench/
    reduction_configs.py: inner 1 x 2048 with 8 warps; outer 64 x 128 with 8 warps, 76.5% of copy
    bandwidth against 78.0% for the pick), the outer shape for rows without a hint, and for short
    rows several whole rows a program. An outer reduction with too few columns to give every SM
    a program of 64 (a layer norm's weight gradient: 768 columns of 1048 rows, 12 programs)
    also tries narrower programs (_narrow_outer)."""
    def config(x, r, warps):
        return make_config(shape, clamp(shape, {"XBLOCK": x, "RBLOCK": r}), warps)

    rows = triton.next_power_of_2(shape.rnumel)
    tiny = [config(max(1, 512 // rows), rows, 4)] if shape.rnumel < 256 else []
    if shape.split > 1:  # a chunk of rows a program: half the chunk a step, or half the columns
        chunk = min(triton.next_power_of_2(shape.chunk), MAX_SPLIT_ALTERNATIVE_RBLOCK)
        return [config(64, max(16, chunk // 2), 8), config(32, chunk, 4)]
    if shape.hint == "outer":
        return [config(64, 128, 8)] + _narrow_outer(shape, device, config)
    if shape.hint == "inner":
        return tiny or [config(1, 2048, 8)]
    return ([config(64, 256, 8)] if shape.xnumel >= 64 else []) + tiny


def _narrow_outer(shape: KernelShape, device: DeviceInfo, config) -> list[LaunchConfig]:
    """For an outer reduction of few columns: programs of fewer columns (down to MIN_NARROW_XBLOCK,
    a 16-byte row segment of bf16) until the grid covers every SM, 256 rows a step."""
    if triton.cdiv(shape.xnumel, 64) >= device.sm_count:
        return []
    xblock = 32
    while xblock > MIN_NARROW_XBLOCK and triton.cdiv(shape.xnumel, xblock) < device.sm_count:
        xblock //= 2
    return [config(xblock, 256, 4)]


def _wide_set(shape: KernelShape) -> list[LaunchConfig]:
    """max-autotune: a spread of shapes; coordinate descent refines the best of them."""
    out = []

    def add(blocks, warps, stages=1):
        out.append(make_config(shape, clamp(shape, blocks), warps, stages))

    if shape.is_2d:
        for y, x in [(32, 32), (64, 64), (64, 128), (128, 64), (128, 128), (32, 128), (128, 32),
                     (16, 256), (256, 16)]:
            for warps in (4, 8):
                add({"YBLOCK": y, "XBLOCK": x}, warps)
    elif shape.kind == "pointwise":
        for xblock in (512, 1024, 2048, 4096):
            for warps in (2, 4, 8):
                if 4 <= xblock // (32 * warps) <= 32:
                    add({"XBLOCK": xblock}, warps)
    elif shape.kind in LOOPED:
        for x, r in [(1, 512), (1, 1024), (1, 2048), (1, 4096), (2, 1024), (4, 512), (8, 256),
                     (16, 128), (32, 64), (64, 16), (64, 64), (128, 8)]:
            for warps in (4, 8, 16):
                add({"XBLOCK": x, "RBLOCK": r}, warps)
    else:
        rblock = shape.persistent_rblock
        for x in (1, 2, 4, 8, 16, 32, 64, 128):
            elements = x * rblock
            if elements > 16384:
                continue
            for warps in (2, 4, 8, 16):
                if 2 <= elements // (32 * warps) <= 64:
                    add({"XBLOCK": x}, warps)
    return out


def neighbors(shape: KernelShape, config: LaunchConfig) -> list[LaunchConfig]:
    """Coordinate-descent steps: each block size, num_warps and num_stages doubled or halved."""
    if shape.kind == ADAPTIVE:
        return _adaptive(shape, lambda body: neighbors(body, body_config(body, config)))
    steps = []
    for name, value in config.blocks.items():
        for new in (value * 2, value // 2):
            if new >= 1:
                steps.append(make_config(shape, {**config.blocks, name: new}, config.num_warps,
                                         config.num_stages))
    for warps in (config.num_warps * 2, config.num_warps // 2):
        steps.append(make_config(shape, config.blocks, warps, config.num_stages))
    if shape.kind in LOOPED:  # only looped kernels have a loop to pipeline
        for stages in (config.num_stages + 1, config.num_stages - 1):
            steps.append(make_config(shape, config.blocks, config.num_warps, stages))
    unique = []
    for step in steps:
        if step != config and is_valid(shape, step) and keeps_threads_busy(shape, step) and step not in unique:
            unique.append(step)
    return unique


def halved_rblock(shape: KernelShape, config: LaunchConfig, n_regs: int, device: DeviceInfo) -> LaunchConfig | None:
    """For a looped reduction whose registers limit occupancy so that its grid needs more than
    one wave of programs: the same config with half the RBLOCK (None when that cannot help).

    Occupancy: programs resident an SM = registers an SM / registers a program (n_regs per
    thread x 32 x num_warps), also bounded by threads an SM. Registers limit occupancy when a
    thread uses more than registers / threads of an SM (the count that allows full occupancy)."""
    if shape.kind == ADAPTIVE:
        body = adaptive_body(shape)
        halved = halved_rblock(body, body_config(body, config), n_regs, device)
        return None if halved is None else adaptive_config(body, halved)
    if shape.kind != "reduction" or config.blocks["RBLOCK"] <= 64 or n_regs <= 0:
        return None
    full_occupancy_regs = device.regs_per_sm // device.max_threads_per_sm
    if n_regs <= full_occupancy_regs:
        return None
    threads = device.warp_size * config.num_warps
    resident = max(1, min(device.regs_per_sm // (n_regs * threads), device.max_threads_per_sm // threads))
    if config.grid[0] <= resident * device.sm_count:
        return None
    blocks = {**config.blocks, "RBLOCK": config.blocks["RBLOCK"] // 2}
    return make_config(shape, blocks, config.num_warps, config.num_stages)
