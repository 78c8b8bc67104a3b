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
count above 0, counting it down; and wait while a file ``stall-NAME`` exists (after writing
``reached-NAME``). The tests kill and interrupt real workers with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cmrkit.interrupts as interrupts
from cmrkit.errors import CmrkitError
from cmrkit.retrieval.distributed.signals import kept_signal_handlers

ENGINES = ("local", "ray")
RETRIES = 2  # reruns of a task whose worker died
OBJECT_STORE = 256 * 1024 * 1024  # a local cluster's shared memory (results are small)
INSTALL = "pip install 'cmrkit[ray]'"
CANCEL_WAIT = 60  # seconds to wait for cancelled tasks' workers to be gone
REACH_WAIT = 10.0  # seconds --address may take to accept a connection
CONNECT_WAIT = 90.0  # seconds Ray's own connection may take before cmrkit gives up
CONNECT_WAIT_ENV = "CMRKIT_RAY_CONNECT_WAIT"  # another bound, in seconds (a slow cluster)
NOTHING_WRITTEN = "nothing was written"

_connected: tuple[str | None, int | None] | None = None  # the cluster this process started


@dataclass(frozen=True)
class EngineOptions:
    """Where the work runs: in this process (``local``) or on a Ray cluster (``ray``).

    ``address`` None starts a Ray cluster on this machine; ``workers`` is how many tasks run at
    once (a local cluster's worker processes; default: one per CPU of the cluster); ``gpus``
    (``--gpus-per-worker``, the neural commands) the GPUs each task of a neural model holds.
    """

    name: str = "local"
    address: str | None = None
    workers: int | None = None
    gpus: float | None = None

    def __post_init__(self) -> None:
        if self.name not in ENGINES:
            raise CmrkitError(f"unknown --engine {self.name!r}; choose local or ray")
        if self.name == "local" and (self.address is not None or self.workers is not None):
            raise CmrkitError("--address and --workers apply to --engine ray only")
        if self.workers is not None and self.workers < 1:
            raise CmrkitError(f"--workers must be at least 1, got {self.workers}")
        if self.gpus is not None and self.name == "local":
            raise CmrkitError("--gpus-per-worker applies to --engine ray only")
        if self.gpus is not None and not (0 < self.gpus <= 64):
            raise CmrkitError(f"--gpus-per-worker must be above 0 and at most 64, got {self.gpus}")
        if self.name == "ray":
            ray_module()  # without Ray, say so before any work

    @property
    def distributed(self) -> bool:
        return self.name == "ray"

    def record(self, workers: int, **more: Any) -> dict[str, Any]:
        """What a run or an encoding made on this engine records of it."""
        found: dict[str, Any] = {"name": "ray", "address": self.address or "local"}
        found["workers"] = workers
        if self.gpus:
            found["gpus_per_worker"] = self.gpus
        return {**found, **more}


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
            _reachable(engine.address)
        where = (
            f"reach the Ray cluster at {engine.address}"
            if engine.address
            else "start a Ray cluster on this machine"
        )
        wait = _connect_wait()
        try:
            # Ray retries an unanswering cluster for ever, inside native code: bounded here
            with (
                kept_signal_handlers(),
                _quiet_stderr(engine.address is not None and not verbose),
                _deadline(
                    wait,
                    f"cannot {where}: no answer within {wait:g} s; check --address, or start "
                    f"one with `ray start --head` (${CONNECT_WAIT_ENV} sets how long to wait)",
                ),
            ):
                ray.init(**options)
                if engine.address is None:
                    _cluster.started = True
        except Exception as e:  # ConnectionError, ValueError, RuntimeError from Ray's start-up
            raise CmrkitError(
                f"cannot {where} ({first_line(e)}); check --address, or start one with "
                "`ray start --head`"
            ) from None
        _connected = wanted
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return engine.workers or max(1, cpus)


def worker_gpus(engine: EngineOptions, device: str) -> float:
    """The GPUs each task of a neural model holds (call after :func:`connect`): the
    ``--gpus-per-worker`` asked, refused in one line when the cluster has fewer GPUs; without
    it, one where the cluster has GPUs and ``device`` is not ``cpu`` (torch in a task sees only
    the GPUs Ray gave it), else none."""
    ray = ray_module()
    have = float(ray.cluster_resources().get("GPU", 0))
    if engine.gpus is not None:
        if have < engine.gpus:
            where = f"at {engine.address}" if engine.address else "started on this machine"
            found = "no GPU" if not have else f"{have:g} GPUs"
            raise CmrkitError(
                f"--gpus-per-worker {engine.gpus:g}: the Ray cluster {where} has {found}; "
                "drop --gpus-per-worker to run the workers on CPUs"
            )
        return float(engine.gpus)
    return 1.0 if have >= 1 and device != "cpu" else 0.0


@dataclass
class NeuralWork:
    """A neural command's work on Ray workers (``encode``, ``run dense``, ``run rerank`` with
    ``--engine ray``): the engine, the ``device`` each worker loads its model on (as the user
    gave it: a worker resolves ``auto`` itself) and the precision; once connected, how many
    tasks run at once, the GPUs each holds, and the devices the workers reported."""

    engine: EngineOptions
    device: str = "auto"
    precision: str = "fp32"
    workers: int = 0
    gpus: float = 0.0
    devices: set[str] = field(default_factory=set)

    def connect(self, verbose: bool = False) -> Any:
        self.workers = connect(self.engine, verbose=verbose)
        # int8 runs on CPUs: its tasks hold no GPU unless asked
        self.gpus = worker_gpus(self.engine, self.device if self.precision == "fp32" else "cpu")
        return self

    def run(
        self,
        fn: Callable[..., Any],
        tasks: Sequence[tuple[Any, ...]],
        *,
        what: Callable[[int], str],
        done: Callable[[int, Any], None] | None = None,
        lost: str = NOTHING_WRITTEN,
    ) -> list[Any]:
        """:func:`run_tasks` with these workers and GPUs; a task returns ``(result, device)``
        (the device its model ran on, kept for :meth:`record`; None: no model), the results
        come back in task order."""

        def arrived(i: int, found: Any) -> None:
            if found[1] is not None:
                self.devices.add(found[1])
            if done is not None:
                done(i, found[0])

        found = run_tasks(
            fn, tasks, workers=self.workers, what=what, done=arrived, gpus=self.gpus, lost=lost
        )
        return [result for result, _ in found]

    def device_made_on(self, here: str) -> str:
        """The device the work was done on: the workers' (``here`` before any task ran)."""
        return ",".join(sorted(self.devices)) if self.devices else here

    def record(self) -> dict[str, Any]:
        """What a run or an encoding made on Ray records of the engine."""
        return self.engine.record(self.workers, devices=sorted(self.devices))


def chunks(n: int, parts: int, multiple: int, most: int) -> list[range]:
    """``range(n)`` cut into about ``parts`` consecutive pieces, each a multiple of
    ``multiple`` long (but the last) and at most ``most`` (rounded up to that multiple): pieces
    of a length-sorted list cut at batch boundaries read the same batches as the whole list."""
    size = max(1, -(-n // max(1, parts)))
    size = min(size, max(most, 1))
    size = -(-size // multiple) * multiple
    return [range(i, min(n, i + size)) for i in range(0, n, size)]


def disconnect() -> None:
    """Leave the cluster this process connected to (stopping it when this process started it).

    A local cluster's processes are all gone afterwards: Ray's agents (DashboardAgent,
    RuntimeEnvAgent) outlive a raylet stopped in a hurry, so whatever of the cluster's process
    tree still runs after Ray's shutdown is killed."""
    global _connected
    if _connected is None:
        return
    ray = ray_module()
    started = _cluster.started
    tree = _descendants() if started else []
    try:
        if ray.is_initialized():
            with kept_signal_handlers():
                ray.shutdown()
    finally:
        _connected = None
        _cluster.started = False
        if started:
            _kill(tree + _descendants())


def _descendants() -> list[int]:
    """The process ids of every process below this one (a local cluster's processes)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[1].isdigit():
            children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [c for c in children.get(os.getpid(), []) if _is_ray(c)]
    found.extend(todo)
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _is_ray(pid: int) -> bool:
    """Whether a child process is one of Ray's (not, say, a subprocess of the caller's)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"ray" in f.read()
    except OSError:
        return False


def _is_worker(pid: int) -> bool:
    """Whether a process of the local cluster is a worker running (or ready to run) tasks."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return False
    name = cmdline.split(b"\0")[0]
    # Ray's agents (ray::DashboardAgent, ray::RuntimeEnvAgent) are no workers
    return (name.startswith(b"ray::") and not name.endswith(b"Agent")) or (
        b"default_worker.py" in cmdline
    )


def _runs(pid: int, task: str) -> bool:
    """Whether a process is a worker running ``task`` (Ray names it ``ray::TASK``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return False
    return cmdline.split(b"\0")[0] == f"ray::{task}".encode()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[-1].split()[:1]
    except OSError:
        return False
    return state != [b"Z"]  # a zombie writes nothing more


def _stop_workers(pids: list[int], wait: float = 2.0) -> None:
    """Kill the workers and wait (up to ``wait`` seconds) until none of them runs."""
    _kill(pids)
    deadline = time.monotonic() + wait
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)


def _kill(pids: list[int]) -> None:
    for pid in dict.fromkeys(pids):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


class _Cluster:
    """The local cluster as :mod:`cmrkit.interrupts` sees it: when a signal must end the
    process at once, its processes are killed with it (none is left behind)."""

    def __init__(self) -> None:
        self.started = False

    def reset(self) -> None:
        pass

    def summary(self) -> str:
        return ""

    def emergency(self) -> None:
        # the workers first, and gone before the staged outputs are dropped (this watcher runs
        # before the outputs'): a worker still indexing would write into a staging folder being
        # removed and leave part of it behind
        pids = _descendants() if self.started else []
        _stop_workers([p for p in pids if _is_worker(p)])
        # the rest just after this process is gone, not now: Ray's threads in this process end
        # it on the spot (exit 1, a C++ dump) when they see their cluster die under them first
        if pids:
            import subprocess

            subprocess.Popen(
                ["/bin/sh", "-c", f"sleep 0.5; kill -9 {' '.join(map(str, pids))} 2>/dev/null"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )


_cluster = _Cluster()


interrupts.watch(_cluster, first=True)


def _connect_wait() -> float:
    text = os.environ.get(CONNECT_WAIT_ENV)
    if not text:
        return CONNECT_WAIT
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 1 <= value <= 86_400:
        raise CmrkitError(f"${CONNECT_WAIT_ENV} must be seconds from 1 to 86400, got {text!r}")
    return value


def _reachable(address: str) -> None:
    """Refuse at once (after up to :data:`REACH_WAIT` seconds of retries) an ``--address``
    where nothing accepts a connection: Ray itself would retry for ever."""
    from cmrkit.errors import EnvironmentFault

    text = address.removeprefix("ray://")
    if text == "auto" or ":" not in text:
        return  # Ray finds the address itself (and says so when it cannot)
    host, _, port = text.rpartition(":")
    if not port.isdigit() or not host:
        raise CmrkitError(f"--address {address!r}: expected HOST:PORT, ray://HOST:PORT or auto")
    end = time.monotonic() + REACH_WAIT
    while True:
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=2.0):
                return
        except OSError as e:
            if time.monotonic() >= end:
                why = e.strerror or type(e).__name__
                raise EnvironmentFault(
                    f"cannot reach the Ray cluster at {address}: nothing answers there after "
                    f"{REACH_WAIT:.0f} s ({why}); check --address, or start one with "
                    "`ray start --head`"
                ) from None
            time.sleep(0.5)


@contextlib.contextmanager
def _quiet_stderr(quiet: bool) -> Iterator[None]:
    """Ray's native code logs each retry of a connection to stderr ("Failed to connect to GCS
    ..."): while connecting to a remote cluster, its lines are set aside, so a failure is the
    one line cmrkit prints (``--verbose`` shows them). The interrupt line and the give-up line
    go to the stderr saved when the command started."""
    if not quiet:
        yield
        return
    import tempfile

    saved = os.dup(2)
    with tempfile.TemporaryFile() as aside:
        os.dup2(aside.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


@contextlib.contextmanager
def _deadline(seconds: float, message: str) -> Iterator[None]:
    """End the process with ``message`` (exit 1) when the block has not ended in ``seconds``:
    the main thread may be stuck in native code that no signal reaches."""
    done = threading.Event()

    def watch() -> None:
        if not done.wait(seconds):
            interrupts.give_up(message, 1)

    threading.Thread(target=watch, name="cmrkit-connect-deadline", daemon=True).start()
    try:
        yield
    finally:
        done.set()


def failure(error: BaseException, what: str, lost: str = "") -> CmrkitError:
    """The one-line error for a task (or actor call) ``what`` that Ray reports as failed
    (``lost``: what became of the outputs, said when its worker kept dying)."""
    from cmrkit.retrieval.java import first_line

    ray = ray_module()
    if isinstance(error, ray.exceptions.RayTaskError):
        cause = error.cause
        if isinstance(cause, CmrkitError):
            return CmrkitError(first_line(cause))
        return CmrkitError(f"{what} failed on its worker: {first_line(cause)}")
    return CmrkitError(
        f"{what} failed: its worker died {RETRIES + 1} times ({first_line(error)}); "
        f"{lost or NOTHING_WRITTEN}"
    )


def run_tasks(
    fn: Callable[..., Any],
    tasks: Sequence[tuple[Any, ...]],
    *,
    workers: int,
    what: Callable[[int], str],
    done: Callable[[int, Any], None] | None = None,
    gpus: float = 0,
    lost: str = "",
) -> list[Any]:
    """``fn(*task)`` for every task on the cluster, at most ``workers`` at once, each holding
    one CPU and ``gpus`` GPUs; the results in task order (``done`` is told of each as it
    arrives)."""
    ray = ray_module()
    remote = ray.remote(max_retries=RETRIES, num_cpus=1, num_gpus=gpus)(fn)
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
                    raise failure(e, what(i), lost) from None
                if done is not None:
                    done(i, results[i])
                nxt = next(queued, None)
                if nxt is not None:
                    pending[remote.remote(*tasks[nxt])] = nxt
    finally:
        cancel(list(pending), task=fn.__name__)
    return results


def cancel(refs: list[Any], task: str = "") -> None:
    """Stop these tasks (their workers killed) and wait until they have stopped: a worker must
    not write into a staging folder its caller is about to remove. (Calls on actors cannot be
    forced: their callers kill the actors instead.)"""
    if not refs:
        return
    ray = ray_module()
    for ref in refs:
        ray.cancel(ref, force=True)
    ray.wait(refs, num_returns=len(refs), timeout=CANCEL_WAIT)
    # a cancelled task's result can come before its worker is gone: on a local cluster, wait
    # until no worker of ours still runs the task
    deadline = time.monotonic() + CANCEL_WAIT
    while (
        task
        and _cluster.started
        and time.monotonic() < deadline
        and any(_alive(p) and _runs(p, task) for p in _descendants())
    ):
        time.sleep(0.05)


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
    if stall.exists():
        (Path(folder) / f"reached-{name}").touch()
    while stall.exists():
        time.sleep(0.1)
