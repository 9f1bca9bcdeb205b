"""Hand-written Triton kernels for `x.sum(0)` over a [rows, cols] matrix (issue 4, sum_first).

Used by bench/sum_first_variants.py (timing on CUDA) and tests/test_sum_first_variants.py
(checked against eager on the CPU through Triton's interpreter). Four ways to compute it:

  split2      the compiler's form today, re-implemented: kernel 1 reduces `chunk` rows of every
              column into fp32 partials [splits, cols] (1-D grid over splits*cols, column-major
              inside a split, tile [XBLOCK columns, RBLOCK rows]); kernel 2 sums the partials of
              each column and writes the output dtype.
  semaphore   one kernel: program (column block, split) reduces its rows into an fp32 partial in
              a workspace [splits, cols], then counts itself in on counter[column block]
              (atomic add, acq_rel, gpu scope); the program that arrives last sums the block's
              partials (loads through L2, `.cg`), writes the output and puts the counter back to 0.
  atomic      one kernel: each program atomically adds its fp32 partial into acc[cols]; the last
              program of a column block (same counter) writes acc as the output dtype and puts
              acc and the counter back to 0.
  rows        one kernel, a persistent grid: `programs` programs (a multiple of the SM count),
              each streaming a contiguous band of rows (bands differ by at most one row),
              COL_BLOCK columns at a time (whole rows when COL_BLOCK == cols), adding each column
              block's partial into acc with atomics; one counter over all programs, the last one
              writes the output.

Every single-kernel form leaves its counters (and acc) at zero when it ends, so one zeroed buffer
can be kept across calls ("persistent"), or a fresh zeroed one made per call ("per-call", one
memset). The kernels never wait on another program (no spinning), so any grid is safe.

`plan` lists the launches a Config makes (checking that it fits the shape), `run` makes them;
`Workspace` holds the buffers a form needs. On the CPU use `interpreted_copy()`, whose kernels
run in Triton's interpreter.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

try:  # Hopper's programmatic dependent launch (triton >= 3.4)
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover - older triton: the pdl configs fail as rows
    gdc_launch_dependents = gdc_wait = None

# ----------------------------------------------------------------------------- kernels


@triton.jit
def _load_tile(pointers, inside, MASK_ROWS: tl.constexpr, EVICT: tl.constexpr):
    """A tile as fp32; rows outside `inside` read as 0 when MASK_ROWS, streamed with evict_first
    when EVICT."""
    if MASK_ROWS:
        if EVICT:
            value = tl.load(pointers, mask=inside, other=0.0, eviction_policy="evict_first")
        else:
            value = tl.load(pointers, mask=inside, other=0.0)
    else:
        if EVICT:
            value = tl.load(pointers, eviction_policy="evict_first")
        else:
            value = tl.load(pointers)
    return value.to(tl.float32)


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _column_sum(tile, axis: tl.constexpr):
    """tl.sum, written here: tl.sum is a @triton.jit library function, which the interpreter
    cannot call when triton.language was imported outside it (as in interpreted_copy)."""
    return tl.reduce(tile, axis, _add)


@triton.jit
def split_partials_kernel(x_ptr, part_ptr, N_COLS: tl.constexpr, CHUNK: tl.constexpr,
                          XBLOCK: tl.constexpr, RBLOCK: tl.constexpr, EVICT: tl.constexpr,
                          PDL_TRIGGER: tl.constexpr = False):
    """Kernel 1 of split2 (as generated today): partial[s, c] = sum of rows s*CHUNK.. of column c.
    PDL_TRIGGER: let the dependent kernel 2 (launched with programmatic dependent launch) start
    now; it waits for this grid's results itself (gdc_wait)."""
    if PDL_TRIGGER:
        gdc_launch_dependents()
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    col = xindex % N_COLS
    split = xindex // N_COLS
    acc = tl.full([XBLOCK, RBLOCK], 0.0, tl.float32)
    for roffset in range(0, CHUNK, RBLOCK):
        row = roffset + tl.arange(0, RBLOCK)[None, :]
        pointers = x_ptr + (col + N_COLS * row + (CHUNK * N_COLS) * split)
        if EVICT:
            value = tl.load(pointers, eviction_policy="evict_first")
        else:
            value = tl.load(pointers)
        acc = acc + value.to(tl.float32)
    tl.store(part_ptr + (col + N_COLS * split), _column_sum(acc, 1)[:, None])


@triton.jit
def split_finish_kernel(part_ptr, out_ptr, N_COLS: tl.constexpr, SPLITS: tl.constexpr,
                        XBLOCK: tl.constexpr, PDL_WAIT: tl.constexpr = False):
    """Kernel 2 of split2: out[c] = sum over s of partial[s, c], cast to the output dtype.
    PDL_WAIT: launched early (programmatic dependent launch), so wait for kernel 1 first."""
    if PDL_WAIT:
        gdc_wait()
    col = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    split = tl.arange(0, SPLITS)[None, :]
    parts = tl.load(part_ptr + (col + N_COLS * split), eviction_policy="evict_first")
    total = _column_sum(parts, 1)[:, None]
    tl.store(out_ptr + col, total.to(out_ptr.dtype.element_ty))


@triton.jit
def _column_block_partial(x_ptr, split, cols, N_ROWS: tl.constexpr, N_COLS: tl.constexpr,
                          CHUNK: tl.constexpr, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr,
                          EVICT: tl.constexpr, MASK_ROWS: tl.constexpr):
    """fp32 sums over rows split*CHUNK .. split*CHUNK+CHUNK-1 (and < N_ROWS) of columns `cols`."""
    row0 = split * CHUNK
    acc = tl.full([RBLOCK, XBLOCK], 0.0, tl.float32)
    for roffset in range(0, CHUNK, RBLOCK):
        rows = row0 + roffset + tl.arange(0, RBLOCK)
        pointers = x_ptr + rows[:, None] * N_COLS + cols[None, :]
        inside = ((rows < row0 + CHUNK) & (rows < N_ROWS))[:, None]
        acc += _load_tile(pointers, inside, MASK_ROWS, EVICT)
    return _column_sum(acc, 0)


@triton.jit
def _block_and_split(N_COL_BLOCKS: tl.constexpr, SPLITS: tl.constexpr, SPLIT_FASTEST: tl.constexpr):
    """(column block, split) of this program: consecutive programs take consecutive column
    blocks of one split (the default), or consecutive splits of one column block."""
    pid = tl.program_id(0)
    if SPLIT_FASTEST:
        block = pid // SPLITS
        split = pid % SPLITS
    else:
        block = pid % N_COL_BLOCKS
        split = pid // N_COL_BLOCKS
    return block, split


@triton.jit
def semaphore_kernel(x_ptr, ws_ptr, counter_ptr, out_ptr, N_ROWS: tl.constexpr,
                     N_COLS: tl.constexpr, CHUNK: tl.constexpr, SPLITS: tl.constexpr,
                     N_COL_BLOCKS: tl.constexpr, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr,
                     FIN_ROWS: tl.constexpr, EVICT: tl.constexpr, MASK_ROWS: tl.constexpr,
                     SPLIT_FASTEST: tl.constexpr):
    """Partials to ws[split, cols]; the last program of a column block sums them."""
    block, split = _block_and_split(N_COL_BLOCKS, SPLITS, SPLIT_FASTEST)
    cols = block * XBLOCK + tl.arange(0, XBLOCK)
    partial = _column_block_partial(x_ptr, split, cols, N_ROWS, N_COLS, CHUNK, XBLOCK, RBLOCK,
                                    EVICT, MASK_ROWS)
    tl.store(ws_ptr + split * N_COLS + cols, partial)
    tl.debug_barrier()  # every thread's partial is stored before the counter says so
    arrived = tl.atomic_add(counter_ptr + block, 1, sem="acq_rel", scope="gpu")
    if arrived == SPLITS - 1:
        total = tl.full([XBLOCK], 0.0, tl.float32)
        for s0 in range(0, SPLITS, FIN_ROWS):
            splits = s0 + tl.arange(0, FIN_ROWS)
            parts = tl.load(ws_ptr + splits[:, None] * N_COLS + cols[None, :],
                            mask=(splits < SPLITS)[:, None], other=0.0, cache_modifier=".cg")
            total += _column_sum(parts, 0)
        tl.store(out_ptr + cols, total.to(out_ptr.dtype.element_ty))
        tl.store(counter_ptr + block, 0)


@triton.jit
def atomic_kernel(x_ptr, acc_ptr, counter_ptr, out_ptr, N_ROWS: tl.constexpr,
                  N_COLS: tl.constexpr, CHUNK: tl.constexpr, SPLITS: tl.constexpr,
                  N_COL_BLOCKS: tl.constexpr, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr,
                  EVICT: tl.constexpr, MASK_ROWS: tl.constexpr, SPLIT_FASTEST: tl.constexpr):
    """Partials added into acc[cols] (fp32 atomics); the last program of a block writes out."""
    block, split = _block_and_split(N_COL_BLOCKS, SPLITS, SPLIT_FASTEST)
    cols = block * XBLOCK + tl.arange(0, XBLOCK)
    partial = _column_block_partial(x_ptr, split, cols, N_ROWS, N_COLS, CHUNK, XBLOCK, RBLOCK,
                                    EVICT, MASK_ROWS)
    tl.atomic_add(acc_ptr + cols, partial, sem="relaxed", scope="gpu")
    tl.debug_barrier()
    arrived = tl.atomic_add(counter_ptr + block, 1, sem="acq_rel", scope="gpu")
    if arrived == SPLITS - 1:
        total = tl.load(acc_ptr + cols, cache_modifier=".cg")
        tl.store(out_ptr + cols, total.to(out_ptr.dtype.element_ty))
        tl.store(acc_ptr + cols, tl.full([XBLOCK], 0.0, tl.float32))
        tl.store(counter_ptr + block, 0)


@triton.jit
def rows_kernel(x_ptr, acc_ptr, counter_ptr, out_ptr, N_ROWS: tl.constexpr, N_COLS: tl.constexpr,
                BAND: tl.constexpr, PROGRAMS: tl.constexpr, COL_BLOCK: tl.constexpr,
                N_COL_BLOCKS: tl.constexpr, RB: tl.constexpr, EVICT: tl.constexpr,
                MASK_ROWS: tl.constexpr):
    """Program p streams rows p*N_ROWS//PROGRAMS up to (p+1)*N_ROWS//PROGRAMS (at most BAND),
    a column block at a time (starting at block p, so that programs add into different parts
    of acc at once); the last program to finish writes the output."""
    pid = tl.program_id(0)
    row0 = pid * N_ROWS // PROGRAMS
    row_end = (pid + 1) * N_ROWS // PROGRAMS
    for step in range(0, N_COL_BLOCKS, 1):
        block = (pid + step) % N_COL_BLOCKS
        cols = block * COL_BLOCK + tl.arange(0, COL_BLOCK)
        acc = tl.full([RB, COL_BLOCK], 0.0, tl.float32)
        for roffset in range(0, BAND, RB):
            rows = row0 + roffset + tl.arange(0, RB)
            pointers = x_ptr + rows[:, None] * N_COLS + cols[None, :]
            acc += _load_tile(pointers, (rows < row_end)[:, None], MASK_ROWS, EVICT)
        tl.atomic_add(acc_ptr + cols, _column_sum(acc, 0), sem="relaxed", scope="gpu")
    tl.debug_barrier()
    arrived = tl.atomic_add(counter_ptr, 1, sem="acq_rel", scope="gpu")
    if arrived == PROGRAMS - 1:
        for c0 in range(0, N_COLS, COL_BLOCK):
            cols = c0 + tl.arange(0, COL_BLOCK)
            total = tl.load(acc_ptr + cols, cache_modifier=".cg")
            tl.store(out_ptr + cols, total.to(out_ptr.dtype.element_ty))
            tl.store(acc_ptr + cols, tl.full([COL_BLOCK], 0.0, tl.float32))
        tl.store(counter_ptr, 0)


# ----------------------------------------------------------------------------- configs


@dataclass(frozen=True)
class Config:
    """One launch of one form. For split2/semaphore/atomic: `splits` row chunks, XBLOCK columns
    by RBLOCK rows a tile. For rows: `programs` bands, COL_BLOCK (`xblock`) columns by RB
    (`rblock`) rows a tile."""
    form: str  # "split2", "semaphore", "atomic", "rows"
    splits: int = 16  # rows: the number of programs
    xblock: int = 64
    rblock: int = 256
    num_warps: int = 8
    num_stages: int = 1
    evict: bool = True
    split_fastest: bool = False
    fin_xblock: int = 128  # split2 kernel 2: columns a program (4 warps)
    pdl: str = ""  # split2: "" (plain launches), "wait" (kernel 2 launched with programmatic
    # dependent launch, waits for kernel 1) or "trigger" (kernel 1 also lets it start at once)

    def label(self) -> str:
        extras = ("" if self.evict else " no-evict") + (" split-fastest" if self.split_fastest else "") \
            + (f" pdl-{self.pdl}" if self.pdl else "")
        unit = "P" if self.form == "rows" else "S"
        return (f"{unit}{self.splits} X{self.xblock} R{self.rblock} w{self.num_warps} "
                f"s{self.num_stages}{extras}")


def chunk_rows(n_rows: int, splits: int, rblock: int, exact: bool) -> int:
    """Rows a split (or band) covers. exact: a multiple of rblock dividing n_rows is required
    (split2 as generated); otherwise ceil(n_rows / splits), masked at the ends."""
    chunk = -(-n_rows // splits)
    if exact and (chunk * splits != n_rows or chunk % rblock):
        raise ValueError(f"split2 needs {splits} splits of a multiple of {rblock} rows; {n_rows} rows")
    return chunk


def _check_columns(n_cols: int, block: int) -> None:
    if n_cols % block:
        raise ValueError(f"{n_cols} columns are not a multiple of the column block {block}")


@dataclass
class Workspace:
    """Buffers a form needs beyond input and output: fp32 partials or acc, int32 counters.
    `zeroed` is one fp32 buffer holding acc (if any) then the counters (as int32 bits), so one
    memset zeroes both."""
    partials: torch.Tensor | None
    zeroed: torch.Tensor | None
    acc_len: int

    @property
    def acc(self) -> torch.Tensor:
        return self.zeroed[:self.acc_len]

    @property
    def counters(self) -> torch.Tensor:
        return self.zeroed[self.acc_len:].view(torch.int32)


def counter_count(config: Config, n_cols: int) -> int:
    """rows: one counter over all programs; semaphore and atomic: one per column block."""
    return 1 if config.form == "rows" else n_cols // config.xblock


def make_workspace(config: Config, n_rows: int, n_cols: int, device) -> Workspace:
    """Zeroed buffers for one call (or for many calls, since the kernels leave them zeroed)."""
    if config.form == "split2":
        return Workspace(torch.empty(config.splits, n_cols, device=device, dtype=torch.float32), None, 0)
    acc_len = 0 if config.form == "semaphore" else n_cols
    partials = None
    if config.form == "semaphore":
        partials = torch.empty(config.splits, n_cols, device=device, dtype=torch.float32)
    zeroed = torch.zeros(acc_len + counter_count(config, n_cols), device=device, dtype=torch.float32)
    return Workspace(partials, zeroed, acc_len)


# ----------------------------------------------------------------------------- launches


@dataclass
class Launch:
    """One kernel launch: the kernel, its grid, and its keyword arguments (constexprs, warps,
    stages). `pointers` names the tensors it takes, in order (from the Workspace, x and out)."""
    kernel: object
    grid: tuple
    pointers: tuple
    constants: dict


def pdl_options(config: Config, kernel: int) -> dict:
    """split2's launch options for programmatic dependent launch (none without config.pdl)."""
    if not config.pdl:
        return {}
    if config.pdl not in ("wait", "trigger"):
        raise ValueError(f"pdl must be 'wait' or 'trigger', not {config.pdl!r}")
    if kernel == 1:
        return {"PDL_TRIGGER": True} if config.pdl == "trigger" else {}
    return {"PDL_WAIT": True, "launch_pdl": True}


def plan(config: Config, n_rows: int, n_cols: int) -> list[Launch]:
    """The launches computing x.sum(0) for an [n_rows, n_cols] x; a clear error for a config
    that does not fit the shape."""
    tuning = dict(num_warps=config.num_warps, num_stages=config.num_stages)
    if config.form == "split2":
        chunk = chunk_rows(n_rows, config.splits, config.rblock, exact=True)
        _check_columns(n_cols * config.splits, config.xblock)
        _check_columns(n_cols, config.fin_xblock)
        return [Launch(split_partials_kernel, (n_cols * config.splits // config.xblock,), ("x", "partials"),
                       dict(N_COLS=n_cols, CHUNK=chunk, XBLOCK=config.xblock, RBLOCK=config.rblock,
                            EVICT=config.evict, **tuning, **pdl_options(config, 1))),
                Launch(split_finish_kernel, (n_cols // config.fin_xblock,), ("partials", "out"),
                       dict(N_COLS=n_cols, SPLITS=config.splits, XBLOCK=config.fin_xblock,
                            num_warps=4, num_stages=1, **pdl_options(config, 2)))]
    _check_columns(n_cols, config.xblock)
    blocks = n_cols // config.xblock
    if config.form == "rows":
        if not 1 <= config.splits <= n_rows:
            raise ValueError(f"rows: {config.splits} programs for {n_rows} rows")
        band = -(-n_rows // config.splits)
        return [Launch(rows_kernel, (config.splits,), ("x", "acc", "counters", "out"),
                       dict(N_ROWS=n_rows, N_COLS=n_cols, BAND=band, PROGRAMS=config.splits,
                            COL_BLOCK=config.xblock, N_COL_BLOCKS=blocks, RB=config.rblock,
                            EVICT=config.evict,
                            MASK_ROWS=bool(n_rows % config.splits or band % config.rblock), **tuning))]
    chunk = chunk_rows(n_rows, config.splits, config.rblock, exact=False)
    splits = -(-n_rows // chunk)
    if splits != config.splits:
        raise ValueError(f"{config.splits} splits of {n_rows} rows: chunks of {chunk} rows give {splits}")
    masked = bool(chunk % config.rblock or n_rows % chunk)
    shared = dict(N_ROWS=n_rows, N_COLS=n_cols, CHUNK=chunk, SPLITS=splits, N_COL_BLOCKS=blocks,
                  XBLOCK=config.xblock, RBLOCK=config.rblock, EVICT=config.evict, MASK_ROWS=masked,
                  SPLIT_FASTEST=config.split_fastest, **tuning)
    if config.form == "semaphore":
        fin_rows = min(16, triton.next_power_of_2(splits))
        return [Launch(semaphore_kernel, (blocks * splits,), ("x", "partials", "counters", "out"),
                       dict(FIN_ROWS=fin_rows, **shared))]
    if config.form == "atomic":
        return [Launch(atomic_kernel, (blocks * splits,), ("x", "acc", "counters", "out"), shared)]
    raise ValueError(f"unknown form {config.form!r}; known: split2, semaphore, atomic, rows")


def run(config: Config, x: torch.Tensor, workspace: Workspace | None = None,
        out: torch.Tensor | None = None, compiled: list | None = None,
        launches: int | None = None) -> torch.Tensor:
    """x.sum(0) by the form `config` names, into `out` (a new tensor unless given); a fresh
    workspace (per-call zeroing) unless given. `compiled`: an empty list receives what the
    launches return (Triton's compiled kernels on a GPU: registers, spills). `launches`: run
    only the first so many kernels (a diagnostic: split2's kernel 1 alone leaves its result
    in workspace.partials)."""
    if x.dim() != 2 or not x.is_contiguous():
        raise ValueError(f"expected a contiguous 2-D tensor, got shape {tuple(x.shape)}")
    n_rows, n_cols = x.shape
    steps = plan(config, n_rows, n_cols)[:launches]
    if workspace is None:
        workspace = make_workspace(config, n_rows, n_cols, x.device)
    if out is None:
        out = torch.empty(n_cols, device=x.device, dtype=x.dtype)
    tensors = {"x": x, "out": out, "partials": workspace.partials}
    if workspace.zeroed is not None:
        tensors.update(acc=workspace.acc, counters=workspace.counters)
    handles = [step.kernel[step.grid](*(tensors[name] for name in step.pointers), **step.constants)
               for step in steps]
    if compiled is not None and not compiled:
        compiled.extend(handles)
    return out


# ----------------------------------------------------------------------------- CPU copies


def interpreted_copy():
    """A second copy of this module whose kernels run in Triton's interpreter (for CPU tensors).

    TRITON_INTERPRET is set only while the copy's kernels are defined (as tritonize's runtime
    loader does), and the interpreter work-arounds of tritonize.runtime.interpreter_fixes (bf16
    rounding) are applied when tritonize is importable. The copy's `_column_sum` is bound to a
    plain function the interpreter runs fast."""
    import importlib.util
    import os
    import sys

    name = "sum_first_kernels_interpreted"
    if name in sys.modules:
        return sys.modules[name]
    try:
        from tritonize.runtime import interpreter_fixes
        interpreter_fixes.apply()
    except ImportError:
        pass
    spec = importlib.util.spec_from_file_location(name, __file__)
    module = importlib.util.module_from_spec(spec)
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    sys.modules[name] = module  # dataclasses look their module up while it loads
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        if previous is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = previous
    sum_combine = getattr(tl.standard, "_sum_combine", None)
    if sum_combine is not None:
        # The interpreter sums with NumPy when it sees tl.sum's own combine function; with any
        # other it calls the combine function once per element pair (~10x slower here).
        module._column_sum = lambda tile, axis: tl.reduce(tile, axis, sum_combine)
    return module
