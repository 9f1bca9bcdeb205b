"""TRITONIZE_DEBUG_DIR: each stage's output, per graph, with names that sort in pipeline order."""
from __future__ import annotations

import pathlib


class DebugDump:
    def __init__(self, root: str | None, graph_id: int):
        self.directory = pathlib.Path(root) / f"graph_{graph_id:03d}" if root else None
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)

    def write(self, filename: str, text: str) -> None:
        if self.directory is not None:
            (self.directory / filename).write_text(text)
