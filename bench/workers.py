"""Worker processes for the model suite (bench/models.py): one measurement, one process.

A worker is the suite's own script run with worker options (`models.py --worker ...`). It can be
started two ways, with one protocol for both:

  fork (default on Linux)  the suite process is a fork server: it has imported torch and the model
                           packages once, never initialized CUDA and never compiled anything, and
                           os.fork()s a child per worker. The child calls the script's entry
                           function with the worker options, so it skips Python start-up and those
                           imports, and leaves with os._exit (no atexit handler runs in it: not the
                           server's, and not the ones the worker registered, such as Inductor's
                           compile-pool shutdown; none of them writes a cache the next worker reads).
  subprocess (--no-fork)   a fresh `python models.py --worker ...` (the only way off Linux).

Either way the worker
  - leads a new session, so a timeout kills it together with the compile workers it started
    (os.killpg); after it has been reaped, whatever is left of its group is killed too;
  - writes stdout and stderr to one file: the per-worker log under --log-dir, else a temporary
    file; its last line explains a crash;
  - sends its results as JSON lines through a pipe (--result-fd), never through stdout, so
    library output cannot be mistaken for a result and a result sent before a crash survives.

The parent waits with a deadline (the per-worker --timeout) and notes, on the monotonic clock it
shares with the worker, when it started the worker and when it reaped it: the phases the worker
reports (its last one "done", just before it sends them) become seconds since launch, and from
"done" to the reaping is the cost of process exit.

Kept from a fresh process: a forked child is as fresh as a subprocess for what is measured. The
server imports only what the workers import before they measure anything (torch, the packages
model_zoo builds the selected models from: whatever those import themselves), so each worker still
imports the compilers (Dynamo, Inductor, Triton, tritonize) and compiles as a new process would.
The child first takes its own copy of the pages holding the server's Python objects (see
own_python_objects), so that copy-on-write faults, which a fresh process never takes, stay out of
the measured calls. What remains different: CPU thread pools (OpenMP) do not survive a fork and
start again at their first use (a few ms at most, in the eager first call on the CPU).

Test-only hook: BENCH_WORKER_FAULT=hang (start a grandchild, then sleep) or =exit (leave with code
3 and no result), read by inject_test_fault() in the worker.

Not here: what a worker measures (bench/models.py).
"""
import contextlib
import dataclasses
import gc
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback

RESULT_FD_OPTION = "--result-fd"
NVML_CHECK_VARIABLE = "PYTORCH_NVML_BASED_CUDA_CHECK"
FAULT_VARIABLE = "BENCH_WORKER_FAULT"
POLL_S = 0.02  # how often the parent looks whether the worker has exited
LOG_TAIL_BYTES = 16384  # how much of a worker's output is searched for its last line


# ============================================================================ the fork server


def fork_supported():
    """Whether workers may be forked: Linux only (fork without exec is unsafe on macOS)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


@contextlib.contextmanager
def cuda_check_without_init():
    """Within it, torch.cuda.is_available() asks NVML instead of initializing the CUDA driver
    (cudaGetDeviceCount would), which would break CUDA in every forked child. For the fork
    server's own checks and imports only: the workers see the environment as the user set it."""
    previous = os.environ.get(NVML_CHECK_VARIABLE)
    os.environ[NVML_CHECK_VARIABLE] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(NVML_CHECK_VARIABLE, None)
        else:
            os.environ[NVML_CHECK_VARIABLE] = previous


def cuda_available_without_init():
    """torch.cuda.is_available(), leaving the process fit to fork workers that use CUDA."""
    import torch

    with cuda_check_without_init():
        return torch.cuda.is_available()


def fork_hazard():
    """Why forking now would break the children (a line), or None. Catches torch's own CUDA
    initialization; a driver initialized behind torch's back shows only in a child (the suite's
    probe worker)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA is already initialized in the suite process"
    return None


def thread_note():
    """'threads at fork time: N (Python: M)', for the log: only the forking thread lives on in a
    child, so a lock another thread holds at fork time stays locked there. Native pools with fork
    handlers (OpenBLAS, started by numpy) are harmless; another Python thread is a risk."""
    import threading

    try:
        native = len(os.listdir("/proc/self/task"))
    except OSError:
        native = "?"
    return f"threads at fork time: {native} (Python: {threading.active_count()})"


class ForkedProcess:
    """A forked worker with the part of subprocess.Popen's interface the parent uses."""

    def __init__(self, pid):
        self.pid = pid
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self):
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode


def start_forked(options, entry, output, result_fds):
    """Forks a worker that runs entry(options) with its output in `output`; the parent's handle.

    The child never returns from here: it runs inside the parent's call stack, whose `finally`
    blocks (removing the suite's cache directory, say) must not run in it.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return ForkedProcess(pid)
    code = 70  # EX_SOFTWARE, should anything below fail before entry() returns
    try:
        os.setsid()
        os.close(result_fds[0])
        stdin = os.open(os.devnull, os.O_RDONLY)  # as start_subprocess: never the terminal
        os.dup2(stdin, 0)
        os.close(stdin)
        os.dup2(output.fileno(), 1)
        os.dup2(output.fileno(), 2)
        own_python_objects()
        code = entry(options)
    except SystemExit as exc:  # as Python itself: None is success, a message is failure
        code = exc.code if isinstance(exc.code, int) or exc.code is None else 1
    except BaseException:  # noqa: B036 -- whatever happens, the child must end here
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code or 0)


def own_python_objects():
    """Makes this forked child copy now, before it measures anything, the memory pages holding the
    Python objects it shares copy-on-write with the fork server (gc.get_objects() writes each
    object's reference count). A fresh process owns them from the start; left shared, the child's
    first full garbage collection and first uses would pay the copies inside the measured calls:
    on the CPU, ~20k extra page faults and several % more in a warm first call."""
    gc.get_objects()  # dropped at once: only the reference-count writes matter


def start_subprocess(command, output, result_fds):
    """Starts `command` (a fresh Python) as a worker with its output in `output`."""
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output,
                            stderr=subprocess.STDOUT, pass_fds=(result_fds[1],),
                            start_new_session=True)


# ============================================================================ the parent's side


@dataclasses.dataclass
class Outcome:
    """What one worker left: its merged results, and how and when it ended (time.monotonic())."""
    results: dict
    returncode: int | None
    timed_out: bool
    launched: float
    reaped: float
    last_line: str = ""  # of its output, filled in once the output file is complete

    def failure(self, timeout):
        """The 'fails: ...' cell for a worker that ended without its results."""
        if self.timed_out:
            return f"fails: timeout after {timeout} s"
        return f"fails: worker {how_it_ended(self.returncode)}: {self.last_line[:120]}"


def how_it_ended(returncode):
    """'exit code N' or 'killed by SIGNAME' for a process's return code."""
    if returncode is None or returncode >= 0:
        return f"exit code {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:  # a real-time signal without a name
        return f"killed by signal {-returncode}"


def run(options, entry, script, timeout, log_path=None, fork=True):
    """Runs one worker (`script` with `options`, or entry(options) in a fork) under `timeout`
    seconds; returns its Outcome. A worker left running when this returns, by a timeout or an
    exception here (Ctrl-C), is killed with its process group."""
    read_fd, write_fd = os.pipe()
    command = [sys.executable, os.path.abspath(script)] + list(options)
    to_pipe = [RESULT_FD_OPTION, str(write_fd)]  # left out of the log: by hand, results go to stdout
    with open_output(log_path, command, fork) as (output, header_end):
        launched = time.monotonic()
        try:
            if fork:
                process = start_forked(list(options) + to_pipe, entry, output, (read_fd, write_fd))
            else:
                process = start_subprocess(command + to_pipe, output, (read_fd, write_fd))
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)  # else the pipe never reports end-of-file
        try:
            outcome = collect(process, read_fd, launched, timeout)
        finally:
            kill_group(process)
            process.wait()
            os.close(read_fd)
        outcome.last_line = last_line(output, header_end)
    return outcome


@contextlib.contextmanager
def open_output(log_path, command, fork):
    """(file, offset): the file a worker's stdout and stderr go to, the log (headed by how to rerun
    the worker by hand) or a temporary file, and where the worker's output starts in it."""
    if log_path is None:
        with tempfile.TemporaryFile() as output:
            yield output, 0
        return
    with open(log_path, "w+b") as output:
        how = "forked from the suite process; the same as" if fork else "command:"
        output.write(f"# {how}\n{' '.join(command)}\n\n".encode())
        output.flush()  # the worker writes at the same file offset after this
        yield output, output.tell()


def collect(process, read_fd, launched, timeout):
    """Reads the worker's results until it exits or `timeout` passes (then kills it)."""
    os.set_blocking(read_fd, False)
    received, reading, timed_out = bytearray(), True, False
    deadline = launched + timeout
    while process.poll() is None:
        if reading:
            ready = select.select([read_fd], [], [], POLL_S)[0]
            chunk = read_available(read_fd) if ready else b""
            if chunk is None:
                reading = False  # end of file: the worker closed its end (not yet reaped)
            elif chunk:
                received += chunk
        else:
            time.sleep(POLL_S)
        if time.monotonic() > deadline:
            kill_group(process)
            process.wait()
            timed_out = True
    reaped = time.monotonic()
    if reading:
        received += read_available(read_fd) or b""
    return Outcome(parse_results(received), process.returncode, timed_out, launched, reaped)


def read_available(fd):
    """What can be read from non-blocking `fd` now: bytes (maybe empty), None at end of file."""
    data = bytearray()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return bytes(data)
        if not chunk:
            return bytes(data) or None
        data += chunk


def parse_results(received):
    """The worker's JSON lines merged into one dict (later keys win); a torn last line (the
    worker killed while writing) is dropped."""
    results = {}
    for line in received.decode(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            results.update(json.loads(line))
    return results


def kill_group(process):
    """Kills the worker's session (it and the compile workers it started): it is the group's
    leader, so the group id is its pid, which is not reused while any member lives."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:  # no member left, or the child has not called setsid yet
        with contextlib.suppress(ProcessLookupError):
            if process.returncode is None:
                os.kill(process.pid, signal.SIGKILL)


def last_line(output, start):
    """The last non-empty line the worker wrote (stdout or stderr) after offset `start`."""
    size = output.seek(0, os.SEEK_END)
    output.seek(max(start, size - LOG_TAIL_BYTES))
    lines = [line.strip() for line in output.read().decode(errors="replace").splitlines()]
    lines = [line for line in lines if line]
    return lines[-1] if lines else "no output"


# ============================================================================ the worker's side


def send(result_fd, message):
    """Sends one result dict to the parent (one JSON line, one write)."""
    os.write(result_fd, (json.dumps(message) + "\n").encode())


def inject_test_fault():
    """Test hook (BENCH_WORKER_FAULT): 'hang' starts a grandchild and sleeps, so a test can see
    that a timeout kills both; 'exit' leaves at once with code 3 and no result."""
    fault = os.environ.get(FAULT_VARIABLE)
    if fault == "hang":
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        print(f"fault: worker pid {os.getpid()}, grandchild pid {grandchild.pid}", flush=True)
        time.sleep(600)
    elif fault == "exit":
        print("fault: leaving without a result", file=sys.stderr, flush=True)
        os._exit(3)
