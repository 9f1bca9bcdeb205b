"""The explain() report: what was generated, fused, called as a library kernel or left to aten."""
from __future__ import annotations

import collections
import dataclasses


@dataclasses.dataclass
class KernelInfo:
    name: str
    kind: str
    source: str
    fused_nodes: list[str]


@dataclasses.dataclass
class GraphArtifacts:
    """What compiling one graph produced (kept by the backend for the report)."""

    kernels: list[KernelInfo]
    fallbacks: list[tuple[str, str]]  # (aten op, reason)
    externs: list[str]
    wrapper: str
    eager_reason: str | None = None
    clones: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)  # (user kernel, arg, why)
    role: str = "inference"  # which AOTAutograd graph: "inference", "forward" or "backward"
    guards: list[str] = dataclasses.field(default_factory=list)  # on symbolic sizes, added by compiling
    # symbolic sizes: heuristic choices baked in at the example's sizes, [heuristic, [sizes],
    # [extra], value] (no guards: a graph-cache hit where one comes out otherwise compiles afresh)
    choices: list = dataclasses.field(default_factory=list)
    # run-time decisions said in the report (CUDA graphs: recorded, or why not), appended as they happen
    notes: list[str] = dataclasses.field(default_factory=list)
    # the memory plan's peak (codegen/memory_plan.py): bytes the compiled code allocates at its
    # planned peak, at the example's sizes, inputs and parameters not counted; and the largest
    # buffers live there, [name, bytes]
    peak_memory: int = 0
    peak_buffers: list = dataclasses.field(default_factory=list)
    # [inside the graph, at its edges]: kernels that only convert a buffer's layout (lower/conv_layout.py)
    layout_copies: list = dataclasses.field(default_factory=lambda: [0, 0])
    # each step's [name, kind, bytes read, bytes written, flops] at the example's sizes, from the
    # IR (codegen/traffic.py): what tritonize.profile reports
    costs: list = dataclasses.field(default_factory=list)
    # torch.distributed's functional collectives the graph starts, [op, bytes sent] at the
    # example's sizes (their waits are not listed), in schedule order
    collectives: list = dataclasses.field(default_factory=list)

    def lines(self) -> list[str]:
        lines = [f"  kernel {k.name} [{k.kind}]: {', '.join(k.fused_nodes)}" for k in self.kernels]
        if self.wrapper:
            largest = ", ".join(f"{name} {_mib(nbytes)}" for name, nbytes in self.peak_buffers)
            lines.append(f"  planned peak {_mib(self.peak_memory)}" + (f": {largest}" if largest else ""))
        for op, n in collections.Counter(self.externs).most_common():
            lines.append(f"  extern {op} x{n}")
        sent = collections.Counter()
        for op, nbytes in self.collectives:
            sent[op] += nbytes
        for op, n in collections.Counter(op for op, _ in self.collectives).most_common():
            lines.append(f"  collective {op} x{n}: {_mib(sent[op])}")
        reasons: dict = {}
        for op, reason in self.fallbacks:
            reasons.setdefault(op, reason)
        for op, n in collections.Counter(op for op, _ in self.fallbacks).most_common():
            lines.append(f"  fallback {op} x{n}: {reasons[op]}")
        for kernel, arg, reason in self.clones:
            lines.append(f"  clone of {kernel}({arg}): {reason}")
        if any(self.layout_copies):
            lines.append(f"  layout copies: {self.layout_copies[0]} inside the graph, {self.layout_copies[1]} at its edges")
        lines += [f"  guard on sizes: {guard}" for guard in self.guards]
        lines += [f"  {note}" for note in self.notes]
        return lines


@dataclasses.dataclass
class Report:
    kernels: list[KernelInfo]
    fallbacks: collections.Counter
    fallback_reasons: dict
    externs: collections.Counter
    wrapper: str
    graphs: int
    clones: list = dataclasses.field(default_factory=list)  # (user kernel, argument, why it is copied)
    sections: list[GraphArtifacts] = dataclasses.field(default_factory=list)  # one per aten graph

    @classmethod
    def from_artifacts(cls, artifacts: list[GraphArtifacts], graphs: int) -> "Report":
        fallbacks, reasons, externs = collections.Counter(), {}, collections.Counter()
        kernels, wrappers, clones = [], [], []
        for art in artifacts:
            kernels += art.kernels
            clones += art.clones
            externs.update(art.externs)
            for op, reason in art.fallbacks:
                fallbacks[op] += 1
                reasons.setdefault(op, reason)
            wrappers.append(art.wrapper)
        return cls(kernels, fallbacks, reasons, externs, "\n\n".join(wrappers), graphs, clones,
                   list(artifacts))

    @property
    def peak_memory(self) -> int:
        """The largest planned peak of the compiled graphs, in bytes (each graph's: sections)."""
        return max((art.peak_memory for art in self.sections), default=0)

    @property
    def layout_copies(self) -> list[int]:
        """[inside the graphs, at their edges]: kernels that only convert a buffer's layout."""
        return [sum(art.layout_copies[k] for art in self.sections) for k in (0, 1)]

    @property
    def collectives(self) -> list:
        """[op, bytes sent] of every collective the graphs start, graph by graph in schedule order."""
        return [item for art in self.sections for item in art.collectives]

    @property
    def guards(self) -> list[str]:
        """The guards on symbolic sizes the graphs' compiles added (dynamic shapes)."""
        return [guard for art in self.sections for guard in art.guards]

    def fallbacks_in(self, role: str) -> collections.Counter:
        """The fallbacks of the aten graphs of one role ("inference", "forward", "backward")."""
        return collections.Counter(op for art in self.sections if art.role == role for op, _ in art.fallbacks)

    def __str__(self) -> str:
        collectives = sum(len(art.collectives) for art in self.sections)
        lines = [f"tritonize report: {self.graphs} Dynamo graph(s) as {len(self.sections)} aten graph(s), "
                 f"{len(self.kernels)} kernel(s), {sum(self.externs.values())} extern call(s), "
                 + (f"{collectives} collective(s), " if collectives else "")
                 + f"{sum(self.fallbacks.values())} fallback(s)"]
        for index, art in enumerate(self.sections):
            lines.append(f"{art.role} graph {index}:")
            lines += art.lines()
        return "\n".join(lines)

    @property
    def user_kernels(self) -> list[KernelInfo]:
        return [k for k in self.kernels if k.kind == "user"]


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f} MiB" if nbytes >= 2**16 else f"{nbytes} B"


def user_kernel_info(call) -> KernelInfo:
    """A user kernel in the report: kind "user", its own source, the graph node that called it."""
    import inspect

    from .user_kernels.binding import base_function

    try:
        source = inspect.getsource(base_function(call.kernel).fn)
    except (OSError, TypeError):
        source = ""
    return KernelInfo(call.kernel_name, "user", source, [call.origin])
