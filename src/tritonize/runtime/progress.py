"""Progress of long compiles and autotuning: a bar on a terminal, log lines otherwise.

Nothing is shown for work that finishes within `delay_s` (1 s). After that:
* stderr is a terminal: one self-overwriting line, `tritonize: compiling kernels [#####.....] 12/40`;
* otherwise: INFO records on the "tritonize.progress" logger at most every 5 s, which are
  invisible unless the application configures logging, so non-interactive runs stay quiet.
TRITONIZE_PROGRESS=0 turns both off; =1 forces the bar even without a terminal.
"""
from __future__ import annotations

import concurrent.futures
import logging
import os
import sys
import time

log = logging.getLogger("tritonize.progress")
BAR_WIDTH = 24
LOG_EVERY_S = 5.0


def _style(stream) -> str:
    setting = os.environ.get("TRITONIZE_PROGRESS", "").strip().lower()
    if setting in ("0", "off", "false", "no"):
        return "off"
    if setting in ("1", "on", "true", "yes", "bar"):
        return "bar"
    isatty = getattr(stream, "isatty", None)
    return "bar" if isatty is not None and isatty() else "log"


class Progress:
    def __init__(self, label: str, total: int, stream=None, delay_s: float = 1.0, clock=time.monotonic):
        self.label, self.total = label, total
        self.stream = stream if stream is not None else sys.stderr
        self.style = _style(self.stream)
        self.delay_s, self.clock = delay_s, clock
        self.start = clock()
        self.last_log = None
        self.shown = False

    def update(self, done: int, total: int | None = None) -> None:
        if total is not None:
            self.total = total
        if self.style == "off" or self.clock() - self.start < self.delay_s:
            return
        if self.style == "bar":
            filled = BAR_WIDTH * done // max(self.total, 1)
            bar = "#" * filled + "." * (BAR_WIDTH - filled)
            self.stream.write(f"\rtritonize: {self.label} [{bar}] {done}/{self.total}")
            self.stream.flush()
            self.shown = True
        elif self.last_log is None or self.clock() - self.last_log >= LOG_EVERY_S:
            log.info("tritonize: %s %d/%d (%.0f s)", self.label, done, self.total, self.clock() - self.start)
            self.last_log = self.clock()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False


def wait_all(handles: list, label: str, counts=None, poll_s: float = 0.25) -> list:
    """Results (or exceptions) of compile handles, in order, showing progress while waiting.

    Returns as soon as the last handle is done (progress is redrawn every `poll_s`).
    counts(): (finished, submitted) across the pool, for the bar; defaults to these handles."""
    futures = [f for f in (_future_of(h) for h in handles) if f is not None]
    progress = Progress(label, len(handles))
    try:
        while futures:
            done, pending = concurrent.futures.wait(futures, timeout=poll_s)
            futures = list(pending)
            finished, total = counts() if counts else (len(handles) - len(futures), len(handles))
            progress.update(finished, total)
    finally:
        progress.close()
    results = []
    for handle in handles:
        try:
            results.append(handle.result())
        except Exception as err:  # the caller decides what a failed compile means
            results.append(err)
    return results


def _future_of(handle):
    """The concurrent.futures.Future a handle waits on, if any (a deferred handle may have one)."""
    if isinstance(handle, concurrent.futures.Future):
        return handle
    return getattr(handle, "background", None)
