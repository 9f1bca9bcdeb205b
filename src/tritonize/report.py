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


@dataclasses.dataclass
class Report:
    kernels: list[KernelInfo]
    fallbacks: collections.Counter
    fallback_reasons: dict
    externs: collections.Counter
    wrapper: str
    graphs: int

    @classmethod
    def from_artifacts(cls, artifacts: list[GraphArtifacts], graphs: int) -> "Report":
        fallbacks, reasons, externs = collections.Counter(), {}, collections.Counter()
        kernels, wrappers = [], []
        for art in artifacts:
            kernels += art.kernels
            externs.update(art.externs)
            for op, reason in art.fallbacks:
                fallbacks[op] += 1
                reasons.setdefault(op, reason)
            wrappers.append(art.wrapper)
        return cls(kernels, fallbacks, reasons, externs, "\n\n".join(wrappers), graphs)

    def __str__(self) -> str:
        lines = [f"tritonize report: {self.graphs} graph(s), {len(self.kernels)} kernel(s), "
                 f"{sum(self.externs.values())} extern call(s), {sum(self.fallbacks.values())} fallback(s)"]
        for k in self.kernels:
            lines.append(f"  kernel {k.name} [{k.kind}]: {', '.join(k.fused_nodes)}")
        for op, n in self.externs.most_common():
            lines.append(f"  extern {op} x{n}")
        for op, n in self.fallbacks.most_common():
            lines.append(f"  fallback {op} x{n}: {self.fallback_reasons[op]}")
        return "\n".join(lines)
