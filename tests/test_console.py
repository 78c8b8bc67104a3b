"""The error boundary every command goes through (cmrkit.console.run), in a process of its own:
``run`` ends the process with ``os._exit``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from fault_tools import ROOT

_FAILING = """
from cmrkit.console import run

def command():
    raise ValueError("an invariant broke")

run(command)
"""


@pytest.mark.parametrize("traceback", [False, True])
def test_an_internal_error_exits_3_with_its_line_and_the_traceback_when_asked(traceback):
    """CMRKIT_TRACEBACK=1 (which the internal-error line suggests) adds the traceback; it used
    to re-raise into the ``finally`` that ended the process with exit 0 and nothing printed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CMRKIT_TRACEBACK", None)
    if traceback:
        env["CMRKIT_TRACEBACK"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", _FAILING], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[-1].startswith("error: internal error (ValueError: an invariant broke)")
    assert ("CMRKIT_TRACEBACK=1 shows" in lines[-1]) is not traceback
    assert ("Traceback (most recent call last):" in proc.stderr) is traceback
    if traceback:
        assert ", in command\n" in proc.stderr  # the frame that raised
        assert "\nValueError: an invariant broke\n" in proc.stderr
    else:
        assert len(lines) == 1


PLAIN = re.compile(r"^count things: (\d+)/20 \((\d+)%\), 0:00:0\d elapsed(, 0:00:0\d left)?$")


def _count(bars, n: int, pause: float) -> None:
    task = bars.add_task("things", total=20)
    for _ in range(n):
        time.sleep(pause)
        bars.advance(task, 1)


def test_progress_where_stderr_is_no_terminal_is_a_plain_line_now_and_then_and_at_the_end(
    capsys, monkeypatch
):
    """stderr a file or a pipe (pytest's capture here, as a log, nohup or a script): no bar
    drawn once at the end, but a line per 10% at most every PLAIN_MIN_SECONDS, and a last."""
    import cmrkit.console as console_module
    from cmrkit.console import progress_bar

    monkeypatch.setattr(console_module, "PLAIN_MIN_SECONDS", 0.2)
    with progress_bar(True, "count {task.description}") as bars:
        _count(bars, 20, 0.05)
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1].startswith("count things: 20/20 done in 0:00:0"), lines
    steps = [PLAIN.match(x) for x in lines[:-1]]
    assert all(steps) and 2 <= len(steps) <= 6, lines  # about one per 0.2 s of the 1 s
    done = [int(m[1]) for m in steps]
    assert done == sorted(done) and min(b - a for a, b in zip(done, done[1:], strict=False)) >= 2

    # quick work: the last line only; a failure or a transient bar: not even that
    with progress_bar(True, "count {task.description}") as bars:
        _count(bars, 20, 0)
    assert capsys.readouterr().err.splitlines() == ["count things: 20/20 done in 0:00:00"]
    with pytest.raises(KeyError), progress_bar(True, "count {task.description}") as bars:
        _count(bars, 5, 0)
        raise KeyError("stop")
    with progress_bar(True, "count {task.description}", transient=True) as bars:
        _count(bars, 20, 0)
    with progress_bar(False) as bars:
        _count(bars, 20, 0)
    assert capsys.readouterr().err == ""
