"""tritonize.profile: what each kernel of a compiled function moves and computes (issue 24).

    prof = tritonize.profile(fn, *args)
    print(prof)                      # one row per kernel or library call, most bytes first
    prof.rows[0].intensity           # flops a byte

`profile` compiles `fn` afresh (as `explain` does: Dynamo's caches reset, backward graphs compiled
with their forward), runs it once, and sums each generated kernel's and library call's bytes read
and written and floating-point operations over its launches in every graph. The counts come from
the IR at the graph's example sizes (codegen/traffic.py), on any device, so they are testable on
the CPU. Not built yet (docs/design.md, "Profile report"): times on the GPU, the device's roofs
and the bound each kernel is under, the HTML page and the command line.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class KernelRow:
    name: str  # a generated kernel's name, or a library call's op
    kind: str  # "kernel", "extern", "fallback" or "user"
    launches: int
    bytes_read: int
    bytes_written: int
    flops: int

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Floating-point operations a byte moved (0 when nothing moves)."""
        return self.flops / self.bytes if self.bytes else 0.0


@dataclasses.dataclass
class Profile:
    rows: list[KernelRow]
    graphs: int  # aten graphs compiled

    def row(self, name: str) -> KernelRow:
        return next(r for r in self.rows if r.name == name)

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.rows)

    @property
    def flops(self) -> int:
        return sum(r.flops for r in self.rows)

    def __str__(self) -> str:
        header = f"{'kernel':<56} {'kind':<8} {'launches':>8} {'MB read':>10} {'MB written':>10} {'MFLOP':>10} {'FLOP/B':>7}"
        lines = [header]
        for r in self.rows:
            lines.append(f"{r.name[:56]:<56} {r.kind:<8} {r.launches:>8} {r.bytes_read / 1e6:>10.3f} "
                         f"{r.bytes_written / 1e6:>10.3f} {r.flops / 1e6:>10.3f} {r.intensity:>7.2f}")
        lines.append(f"{len(self.rows)} kernels and calls in {self.graphs} graph(s): {self.bytes / 1e6:.3f} MB, "
                     f"{self.flops / 1e6:.3f} MFLOP")
        return "\n".join(lines)


def profile_from_artifacts(artifacts: list) -> Profile:
    """The rows of the compiled graphs' step costs (GraphArtifacts.costs), summed by name."""
    rows: dict[str, KernelRow] = {}
    for art in artifacts:
        for name, kind, read, written, flops in art.costs:
            row = rows.setdefault(name, KernelRow(name, kind, 0, 0, 0, 0))
            row.launches += 1
            row.bytes_read += read
            row.bytes_written += written
            row.flops += flops
    return Profile(sorted(rows.values(), key=lambda r: (-r.bytes, r.name)), graphs=len(artifacts))
