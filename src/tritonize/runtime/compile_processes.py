"""Compile worker processes, seen from the process that launches the kernels.

Triton's front end (Python AST to Triton IR) holds the GIL, so compile threads in one process
contend with each other and with Dynamo and AOTAutograd tracing the next graph. A worker process
(runtime/compile_worker.py, run as a script: Triton only, no torch) compiles the same job into
Triton's disk cache in parallel; the pool thread that sent it then compiles the job itself, which
is a cache hit of a few milliseconds. A worker that fails or dies only costs that speed-up: the
in-process compile does the work and raises any real error. A job that finds no idle worker
ready (one still importing Triton, as in a warm process whose kernels are all cache hits and are
asked for right after the pool starts) is compiled in the thread directly.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys

from . import compile_worker

WORKER_SCRIPT = compile_worker.__file__


def job_message(job) -> dict:
    """A CompileJob (runtime/triton_compile.py) as the worker's JSON job."""
    return {"module_path": job.module_path, "kernel_name": job.kernel_name,
            "args": [list(a) for a in job.spec.args], "blocks": [list(b) for b in job.blocks],
            "num_warps": job.num_warps, "num_stages": job.num_stages, "target": list(job.target),
            "debug": job.debug}


class WorkerProcess:
    """One worker; used by one pool thread at a time."""

    def __init__(self):
        self.process: subprocess.Popen | None = None
        self.is_ready = False  # the process said READY (it has imported Triton)

    def start(self) -> None:
        """Start the process if it is not running (returns at once; it imports Triton meanwhile)."""
        if self.process is not None and self.process.poll() is None:
            return
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        env.pop("TRITON_INTERPRET", None)  # set only while this process loads a CPU kernel
        self.is_ready = False
        self.process = subprocess.Popen([sys.executable, WORKER_SCRIPT], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                        text=True, bufsize=1)

    def ready(self) -> bool:
        """Whether the process has imported Triton, without waiting for it (a process that
        has exited is started again, and is not ready yet)."""
        if self.process is None or self.process.poll() is not None:
            self.start()
            return False
        if not self.is_ready:
            poller = select.poll()  # not select.select: it refuses descriptors >= 1024
            poller.register(self.process.stdout, select.POLLIN | select.POLLHUP)
            if poller.poll(0):
                try:
                    self._read_ready()
                except OSError:
                    self.stop()
        return self.is_ready

    def _read_ready(self) -> None:
        line = self.process.stdout.readline()
        if line.strip() != compile_worker.READY:
            raise OSError(f"unexpected first line {line[:80]!r}")
        self.is_ready = True

    def request(self, message: dict) -> str | None:
        """Send one message and wait for its reply: None on success, else why not."""
        try:
            self.start()
            if not self.is_ready:
                self._read_ready()
            self.process.stdin.write(json.dumps(message) + "\n")
            self.process.stdin.flush()
            for line in self.process.stdout:
                if line.startswith(compile_worker.REPLY):
                    return json.loads(line[len(compile_worker.REPLY):])["error"]
        except (OSError, ValueError) as err:
            self.stop()
            return f"compile worker failed: {err}"
        self.stop()
        return "compile worker exited"

    def compile(self, job) -> str | None:
        return self.request(job_message(job))

    def ping(self) -> str | None:
        """Wait until the worker is ready (Triton imported)."""
        return self.request({"ping": True})

    def stop(self) -> None:
        process, self.process, self.is_ready = self.process, None, False
        if process is None:
            return
        try:
            process.stdin.close()
            process.wait(timeout=5)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            process.kill()
