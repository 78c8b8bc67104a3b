"""The error boundary every command goes through (cmrkit.console.run), in a process of its own:
``run`` ends the process with ``os._exit``."""

from __future__ import annotations

import os
import subprocess
import sys

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
