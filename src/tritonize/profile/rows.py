"""A profile's rows: each generated kernel's and library call's bytes, operations and (on a GPU)
time, and what they say against the device's roofs (issue 24).

Bytes and operations come from the IR at each graph's example sizes (codegen/traffic.py), summed
by name over the steps that launch a kernel. Times come from torch.profiler (timing.py), per run
of the profiled function. Against the device's roofs (roofs.py: copy bandwidth, matmul
throughput), a row is compute-bound when its operations take the roof longer than its bytes do,
else memory-bound; its bound is that longer time, its share the bound over its time, and a row
under FLAG_BELOW_SHARE of its roof is flagged (`Profile.flagged`, "!" in the table).
"""
from __future__ import annotations

import dataclasses

# A row achieving less than this share of its roof is flagged as far below its bound.
FLAG_BELOW_SHARE = 0.5


@dataclasses.dataclass
class Roofs:
    """What the device can do, measured (roofs.py): copy bandwidth and matmul throughput."""
    device: str
    bytes_per_s: float
    flops_per_s: float

    @property
    def ridge(self) -> float:
        """Operations a byte above which a kernel is compute-bound."""
        return self.flops_per_s / self.bytes_per_s


@dataclasses.dataclass
class KernelRow:
    name: str  # a generated kernel's name, a library call's op, or a GPU kernel no row claims
    kind: str  # "kernel", "extern", "collective", "fallback", "user" or "other" (timed, not counted)
    launches: int
    bytes_read: int
    bytes_written: int
    flops: int
    aten: list = dataclasses.field(default_factory=list)  # the aten nodes a kernel computes
    time_s: float | None = None  # per run of the profiled function, all launches (GPU only)

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Floating-point operations a byte moved (0 when nothing moves)."""
        return self.flops / self.bytes if self.bytes else 0.0

    def bound(self, roofs: Roofs) -> tuple[str, float]:
        """("memory" or "compute", the seconds the roof allows for this row's work)."""
        memory_s, compute_s = self.bytes / roofs.bytes_per_s, self.flops / roofs.flops_per_s
        return ("compute", compute_s) if compute_s > memory_s else ("memory", memory_s)

    def share(self, roofs: Roofs) -> float | None:
        """The share of its roof this row achieved (bound time / time), when timed."""
        if not self.time_s or not self.bytes:
            return None
        return self.bound(roofs)[1] / self.time_s

    def figures(self, roofs: Roofs | None) -> tuple | None:
        """(us, GB/s, TFLOP/s, "memory"/"compute" or "-", share or None) of a timed row, else None:
        what the table and the page show."""
        if not self.time_s:
            return None
        bound, share = (self.bound(roofs)[0], self.share(roofs)) if roofs else ("-", None)
        return (self.time_s * 1e6, self.bytes / self.time_s / 1e9, self.flops / self.time_s / 1e12, bound, share)


def is_flagged(share: float | None) -> bool:
    return share is not None and share < FLAG_BELOW_SHARE


@dataclasses.dataclass
class Profile:
    rows: list[KernelRow]
    graphs: int  # aten graphs compiled
    runs: int = 0  # timed runs (0: not timed, on the CPU)
    step_s: float | None = None  # wall time of one run
    launches: int | None = None  # GPU kernels launched in one run
    roofs: Roofs | None = None
    sources: dict = dataclasses.field(default_factory=dict)  # generated kernel name -> source
    wrappers: list = dataclasses.field(default_factory=list)  # each graph's wrapper source
    graphs_not_run: int = 0  # compiled graphs the timed runs did not run (a backward not called)

    def row(self, name: str) -> KernelRow:
        return next(r for r in self.rows if r.name == name)

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.rows)

    @property
    def flops(self) -> int:
        return sum(r.flops for r in self.rows)

    @property
    def kernel_s(self) -> float | None:
        """GPU time of one run, all rows."""
        return sum(r.time_s or 0.0 for r in self.rows) if self.runs else None

    @property
    def outside_kernels_s(self) -> float | None:
        """A run's wall time the GPU spent on no kernel: host overhead and gaps."""
        return None if self.step_s is None else max(0.0, self.step_s - self.kernel_s)

    @property
    def flagged(self) -> list[KernelRow]:
        """Timed rows below FLAG_BELOW_SHARE of their roof."""
        if self.roofs is None:
            return []
        return [r for r in self.rows if is_flagged(r.share(self.roofs))]

    def __str__(self) -> str:
        timed = self.runs > 0
        header = f"{'kernel':<48} {'kind':<8} {'launches':>8} {'MB read':>9} {'MB written':>10} {'MFLOP':>10} {'FLOP/B':>7}"
        if timed:
            header += f" {'us':>9} {'GB/s':>8} {'TFLOP/s':>8} {'bound':>7} {'of roof':>7}"
        lines = [header]
        for r in self.rows:
            line = (f"{r.name[:48]:<48} {r.kind:<8} {r.launches:>8} {r.bytes_read / 1e6:>9.3f} "
                    f"{r.bytes_written / 1e6:>10.3f} {r.flops / 1e6:>10.3f} {r.intensity:>7.2f}")
            lines.append(line + (self._timed_columns(r) if timed else ""))
            if r.aten:
                lines.append(f"    {', '.join(r.aten)[:120]}")
        lines.append(f"{len(self.rows)} kernels and calls in {self.graphs} graph(s): {self.bytes / 1e6:.3f} MB, "
                     f"{self.flops / 1e6:.3f} MFLOP" + self.not_run_note())
        if timed:
            legend = f"; ! = under {FLAG_BELOW_SHARE:.0%} of its roof" if self.roofs else ""
            lines.append(self.summary() + legend)
        return "\n".join(lines)

    def save_html(self, path: str, title: str = "tritonize profile") -> None:
        """One self-contained page: the chart, the sortable table, the sources (html.py)."""
        from .html import save_html
        save_html(self, path, title)

    def _timed_columns(self, r: KernelRow) -> str:
        figures = r.figures(self.roofs)
        if figures is None:
            return f" {'-':>9} {'-':>8} {'-':>8} {'-':>7} {'-':>7}"
        us, gbs, tflops, bound, share = figures
        share_text = f"{share:.0%}" if share is not None else "-"
        return (f" {us:>9.1f} {gbs:>8.1f} {tflops:>8.2f} {bound:>7} {share_text:>7}"
                f"{' !' if is_flagged(share) else ''}")

    def not_run_note(self) -> str:
        if not self.graphs_not_run:
            return ""
        return (f"; {self.graphs_not_run} graph(s) compiled and not run by the timed runs (a backward "
                "not called?), not counted")

    def summary(self) -> str:
        """A timed run in a line: kernel time, wall time and time outside kernels (a function's
        profile; a script's has no wall time), launches, the roofs."""
        text = f"a run: {self.kernel_s * 1e3:.3f} ms in kernels"
        if self.step_s is not None:
            text += f", {self.step_s * 1e3:.3f} ms wall, {self.outside_kernels_s * 1e3:.3f} ms outside kernels"
        if self.launches is not None:
            text += f", {self.launches} launches"
        if self.roofs is not None:
            text += (f"; roofs ({self.roofs.device}, measured): {self.roofs.bytes_per_s / 1e9:.0f} GB/s copy, "
                     f"{self.roofs.flops_per_s / 1e12:.0f} TFLOP/s matmul")
        return text


def profile_from_artifacts(artifacts: list, calls: list[int] | None = None) -> Profile:
    """The rows of the compiled graphs' step costs (GraphArtifacts.costs), summed by name, with
    each kernel's aten nodes and source and each graph's wrapper. `calls`: how often each graph
    ran in a run (timing.graph_calls; 1 each when not given); a graph that did not run adds no
    row and is counted in `graphs_not_run`."""
    calls = [1] * len(artifacts) if calls is None else calls
    rows: dict[str, KernelRow] = {}
    sources, aten = {}, {}
    for art, times in zip(artifacts, calls):
        for kernel in art.kernels:
            sources[kernel.name] = kernel.source
            aten[kernel.name] = list(kernel.fused_nodes)
        for name, kind, read, written, flops in art.costs if times else ():
            row = rows.setdefault(name, KernelRow(name, kind, 0, 0, 0, 0, aten.get(name, [])))
            row.launches += times
            row.bytes_read += read * times
            row.bytes_written += written * times
            row.flops += flops * times
    ordered = sorted(rows.values(), key=lambda r: (-r.bytes, r.name))
    return Profile(ordered, graphs=len(artifacts), sources=sources, graphs_not_run=calls.count(0),
                   wrappers=[art.wrapper for art in artifacts if art.wrapper])


def merge_profiles(profiles: dict) -> Profile:
    """One profile of several ({label: Profile}, e.g. a suite's cases): rows, sources and wrappers
    named `label/name`; times, wall time and launches added (each profile's per run); the first
    timed profile's roofs."""
    rows, sources, wrappers = [], {}, []
    for label, prof in profiles.items():
        rows += [dataclasses.replace(r, name=f"{label}/{r.name}") for r in prof.rows]
        sources.update({f"{label}/{name}": source for name, source in prof.sources.items()})
        wrappers += prof.wrappers
    timed = [p for p in profiles.values() if p.runs]
    merged = Profile(sorted(rows, key=lambda r: (-(r.time_s or 0.0), -r.bytes, r.name)),
                     graphs=sum(p.graphs for p in profiles.values()), sources=sources, wrappers=wrappers,
                     graphs_not_run=sum(p.graphs_not_run for p in profiles.values()))
    if timed:
        merged.runs = 1
        merged.step_s = sum(p.step_s or 0.0 for p in timed)
        merged.launches = sum(p.launches or 0 for p in timed)
        merged.roofs = next((p.roofs for p in timed if p.roofs), None)
    return merged
