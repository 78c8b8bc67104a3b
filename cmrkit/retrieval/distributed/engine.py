"""The Ray engine: its options, the connection to a cluster, and tasks run with retries.

``--engine ray`` runs the work on a Ray cluster: one started on this machine (the default, with
``--workers N`` worker processes, default one per CPU) or the one at ``--address`` (Ray's own
forms: ``auto``, ``HOST:PORT``, ``ray://HOST:10001``). The cluster is connected once per
process, on first need, and left when the process exits (a local one is then stopped), so the
commands of one process (a benchmark, the tests, the field-weight learner) share it; other
``--workers`` for a local cluster restart it.

Ray's start and stop leave this process's JVM signal handlers in place (see
:mod:`~cmrkit.retrieval.distributed.signals`).

Faults: a task whose worker process dies runs again on a fresh worker, up to ``RETRIES`` times;
when it still fails, or raises an error, the command stops with one line and the tasks still
running are cancelled (callers stage their outputs, so nothing half-made is left in place).

Testing aid: when ``$CMRKIT_FAULTS`` names a folder, :func:`fault_point` ``NAME`` makes the
worker exit on the spot (``os._exit``, as a crash would) while a file ``kill-NAME`` there holds a
count above 0, counting it down; and wait while a file ``stall-NAME`` exists. The tests kill and
interrupt real workers with it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.retrieval.distributed.signals import kept_signal_handlers

ENGINES = ("local", "ray")
RETRIES = 2  # reruns of a task whose worker died
OBJECT_STORE = 256 * 1024 * 1024  # a local cluster's shared memory (results are small)
INSTALL = "pip install 'cmrkit[ray]'"
CANCEL_WAIT = 60  # seconds to wait for cancelled tasks' workers to be gone

_connected: tuple[str | None, int | None] | None = None  # the cluster this process started


@dataclass(frozen=True)
class EngineOptions:
    """Where the work runs: in this process (``local``) or on a Ray cluster (``ray``).

    ``address`` None starts a Ray cluster on this machine; ``workers`` is how many tasks run at
    once (a local cluster's worker processes; default: one per CPU of the cluster).
    """

    name: str = "local"
    address: str | None = None
    workers: int | None = None

    def __post_init__(self) -> None:
        if self.name not in ENGINES:
            raise CmrkitError(f"unknown --engine {self.name!r}; choose local or ray")
        if self.name == "local" and (self.address is not None or self.workers is not None):
            raise CmrkitError("--address and --workers apply to --engine ray only")
        if self.workers is not None and self.workers < 1:
            raise CmrkitError(f"--workers must be at least 1, got {self.workers}")
        if self.name == "ray":
            ray_module()  # without Ray, say so before any work

    @property
    def distributed(self) -> bool:
        return self.name == "ray"


def ray_module() -> Any:
    """The ``ray`` package, or a one-line error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise CmrkitError(f"--engine ray needs Ray, an optional extra: {INSTALL}") from None
    return ray


def connect(engine: EngineOptions, *, verbose: bool = False) -> int:
    """Connect to (or start) the engine's Ray cluster; how many tasks to run at once."""
    from cmrkit.retrieval.java import first_line

    global _connected
    ray = ray_module()
    wanted = (engine.address, engine.workers)
    if ray.is_initialized() and _connected is not None and _connected != wanted:
        disconnect()
    if not ray.is_initialized():
        options: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": verbose,
            "logging_level": logging.INFO if verbose else logging.ERROR,
        }
        if engine.address is None:
            options.update(
                address="local",
                num_cpus=engine.workers or os.cpu_count() or 1,
                object_store_memory=OBJECT_STORE,
            )
        else:
            options["address"] = engine.address
        try:
            with kept_signal_handlers():  # the JVM of this process keeps its own
                ray.init(**options)
        except Exception as e:  # ConnectionError, ValueError, RuntimeError from Ray's start-up
            where = (
                f"reach the Ray cluster at {engine.address}"
                if engine.address
                else "start a Ray cluster on this machine"
            )
            raise CmrkitError(
                f"cannot {where} ({first_line(e)}); check --address, or start one with "
                "`ray start --head`"
            ) from None
        _connected = wanted
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return engine.workers or max(1, cpus)


def disconnect() -> None:
    """Leave the cluster this process connected to (stopping it when this process started it)."""
    global _connected
    if _connected is None:
        return
    ray = ray_module()
    if ray.is_initialized():
        with kept_signal_handlers():
            ray.shutdown()
    _connected = None


def failure(error: BaseException, what: str) -> CmrkitError:
    """The one-line error for a task (or actor call) ``what`` that Ray reports as failed."""
    from cmrkit.retrieval.java import first_line

    ray = ray_module()
    if isinstance(error, ray.exceptions.RayTaskError):
        cause = error.cause
        if isinstance(cause, CmrkitError):
            return CmrkitError(first_line(cause))
        return CmrkitError(f"{what} failed on its worker: {first_line(cause)}")
    return CmrkitError(
        f"{what} failed: its worker died {RETRIES + 1} times ({first_line(error)}); "
        "nothing was written"
    )


def run_tasks(
    fn: Callable[..., Any],
    tasks: Sequence[tuple[Any, ...]],
    *,
    workers: int,
    what: Callable[[int], str],
    done: Callable[[int, Any], None] | None = None,
) -> list[Any]:
    """``fn(*task)`` for every task on the cluster, at most ``workers`` at once; the results in
    task order (``done`` is told of each as it arrives)."""
    ray = ray_module()
    remote = ray.remote(max_retries=RETRIES, num_cpus=1)(fn)
    results: list[Any] = [None] * len(tasks)
    pending: dict[Any, int] = {}
    queued = iter(range(len(tasks)))
    try:
        for i in queued:
            pending[remote.remote(*tasks[i])] = i
            if len(pending) >= workers:
                break
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                i = pending.pop(ref)
                try:
                    results[i] = ray.get(ref)
                except ray.exceptions.RayError as e:
                    raise failure(e, what(i)) from None
                if done is not None:
                    done(i, results[i])
                nxt = next(queued, None)
                if nxt is not None:
                    pending[remote.remote(*tasks[nxt])] = nxt
    finally:
        cancel(list(pending))
    return results


def cancel(refs: list[Any]) -> None:
    """Stop these tasks (their workers killed) and wait until they have stopped: a worker must
    not write into a staging folder its caller is about to remove."""
    if not refs:
        return
    ray = ray_module()
    for ref in refs:
        ray.cancel(ref, force=True)
    ray.wait(refs, num_returns=len(refs), timeout=CANCEL_WAIT)


def fault_point(name: str) -> None:
    """Die or wait here when the tests ask for it (see the module's docstring)."""
    folder = os.environ.get("CMRKIT_FAULTS")
    if not folder:
        return
    kill = Path(folder) / f"kill-{name}"
    if kill.exists():
        count = int(kill.read_text() or 0)
        if count > 0:
            kill.write_text(str(count - 1))
            os._exit(1)
    stall = Path(folder) / f"stall-{name}"
    while stall.exists():
        time.sleep(0.1)
