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
    class Handle:
        def __init__(self, value):
            self.value, self.polls = value, 0

        def done(self):
            self.polls += 1
            return self.polls > 2

        def result(self):
            if isinstance(self.value, Exception):
                raise self.value
            return self.value

    error = ValueError("does not compile")
    assert wait_all([Handle(1), Handle(error), Handle(3)], "compiling", poll_s=0) == [1, error, 3]
