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


@dataclasses.dataclass
class Report:
    kernels: list[KernelInfo]
    fallbacks: collections.Counter
    fallback_reasons: dict
    externs: collections.Counter
    wrapper: str
    graphs: int
    clones: list = dataclasses.field(default_factory=list)  # (user kernel, argument, why it is copied)

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
        return cls(kernels, fallbacks, reasons, externs, "\n\n".join(wrappers), graphs, clones)

    def __str__(self) -> str:
        lines = [f"tritonize report: {self.graphs} graph(s), {len(self.kernels)} kernel(s), "
                 f"{sum(self.externs.values())} extern call(s), {sum(self.fallbacks.values())} fallback(s)"]
        for k in self.kernels:
            lines.append(f"  kernel {k.name} [{k.kind}]: {', '.join(k.fused_nodes)}")
        for op, n in self.externs.most_common():
            lines.append(f"  extern {op} x{n}")
        for op, n in self.fallbacks.most_common():
            lines.append(f"  fallback {op} x{n}: {self.fallback_reasons[op]}")
        for kernel, arg, reason in self.clones:
            lines.append(f"  clone of {kernel}({arg}): {reason}")
        return "\n".join(lines)

    @property
    def user_kernels(self) -> list[KernelInfo]:
        return [k for k in self.kernels if k.kind == "user"]


def user_kernel_info(call) -> KernelInfo:
    """A user kernel in the report: kind "user", its own source, the graph node that called it."""
    import inspect

    from .user_kernels.binding import base_function

    try:
        source = inspect.getsource(base_function(call.kernel).fn)
    except (OSError, TypeError):
        source = ""
    return KernelInfo(call.kernel_name, "user", source, [call.origin])
