"""Progress display: silent for short work, a bar on a terminal, log records otherwise."""
import io
import logging

from tritonize.runtime.progress import Progress, wait_all


class Terminal(io.StringIO):
    def isatty(self):
        return True


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_bar_on_a_terminal_after_the_delay(monkeypatch):
    monkeypatch.delenv("TRITONIZE_PROGRESS", raising=False)
    stream, clock = Terminal(), Clock()
    progress = Progress("compiling kernels", 10, stream=stream, clock=clock)
    progress.update(3)
    assert stream.getvalue() == ""  # under a second: nothing
    clock.now = 2.0
    progress.update(5, total=20)
    progress.close()
    assert stream.getvalue() == "\rtritonize: compiling kernels [######..................] 5/20\n"


def test_log_records_when_not_a_terminal(monkeypatch, caplog):
    monkeypatch.delenv("TRITONIZE_PROGRESS", raising=False)
    stream, clock = io.StringIO(), Clock()
    progress = Progress("autotuning", 4, stream=stream, clock=clock)
    clock.now = 1.5
    with caplog.at_level(logging.INFO, logger="tritonize.progress"):
        progress.update(1)
        progress.update(2)  # within 5 s of the last record: not repeated
        clock.now = 7.0
        progress.update(3)
    progress.close()
    assert stream.getvalue() == ""
    assert [r.getMessage() for r in caplog.records] == ["tritonize: autotuning 1/4 (2 s)", "tritonize: autotuning 3/4 (7 s)"]


def test_quiet_when_turned_off(monkeypatch, caplog):
    monkeypatch.setenv("TRITONIZE_PROGRESS", "0")
    stream, clock = Terminal(), Clock()
    progress = Progress("x", 2, stream=stream, clock=clock)
    clock.now = 10.0
    with caplog.at_level(logging.INFO, logger="tritonize.progress"):
        progress.update(1)
    assert stream.getvalue() == "" and not caplog.records


def test_wait_all_returns_results_and_errors_in_order():
    import concurrent.futures
    import threading

    release = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        slow = pool.submit(lambda: release.wait(5) and "slow")
        failing = pool.submit(lambda: 1 / 0)

        class Deferred:  # computes in result(), after a background future
            background = slow

            def result(self):
                return "deferred"

        threading.Timer(0.05, release.set).start()
        results = wait_all([slow, failing, Deferred()], "compiling", poll_s=0.01)
    assert results[0] == "slow" and isinstance(results[1], ZeroDivisionError) and results[2] == "deferred"
