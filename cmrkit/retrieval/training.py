"""What ``train dense`` and ``train reader`` share: the model folder, the optimizer, the schedule
and the loop around each trainer's own loss.

- :class:`ModelFolder` claims the output folder at the start (a second training writing the same
  folder fails at once, naming this one), finds a folder trained from the same data, options and
  seed up to date (kept, exit 0), refuses one trained otherwise unless ``force``, and puts the
  new folder in place at the end, all at once (nothing half-written on error or interrupt);
- :func:`seed_all` seeds Python, numpy and torch; :func:`adamw` builds AdamW with weight decay
  on every parameter but biases and LayerNorm weights, one learning rate per part;
  :func:`linear_schedule` warms up linearly then decays linearly to 0;
- :func:`train_epochs` runs the epochs: the step, gradient norm clipped at 1, the loss log, the
  dev measures after each epoch (and before the first), the progress bar and the epoch lines,
  and how many examples and queries the steps used (``used``: a run of ``--max-steps`` may
  touch a few of the training queries);
- :meth:`ModelFolder.finish` draws the loss plot titled with what was trained (the model's
  kind, collection and split, steps, queries used of how many);
- :func:`write_json` writes the metadata and the training log as every cmrkit JSON file.

torch is imported inside the functions that need it.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cmrkit.collection.layout import corpus_path, qrels_path
from cmrkit.errors import CmrkitError
from cmrkit.fileio import StagedOutputs, check_replaceable, sha256_file, usual_modes
from cmrkit.retrieval.runfile import topics_sha256

TRAIN_LOG = "cmrkit-train.json"
PLOT = "loss.png"
KINDS_SHOWN = {
    "dense-model": "dense encoder (train dense)",
    "reader": "reader (train reader)",
    "coref-model": "coreference encoder (train coref)",
}


@dataclass
class TrainedModel:
    """A trained model folder and what training recorded (or found there: ``up_to_date``)."""

    path: Path
    metadata: dict[str, Any]
    log: dict[str, Any] = field(default_factory=dict)
    up_to_date: bool = False  # the folder held this model already (same data, options, seed)


def check_steps(max_steps: int | None, warmup: float) -> None:
    """Refuse a ``--max-steps`` below 1 and a ``--warmup`` share outside [0, 1)."""
    if max_steps is not None and max_steps < 1:
        raise CmrkitError(f"--max-steps must be at least 1, got {max_steps}")
    if not 0 <= warmup < 1:
        raise CmrkitError(f"--warmup must lie in [0, 1), got {warmup}")


def train_qrels(coll: Path, split: str, qrels_dir: Path | None) -> tuple[Path, Any]:
    """The train split's qrels file and its judgments (refused when there is none)."""
    from cmrkit.trec import read_qrels

    path = qrels_path(coll, split, qrels_dir)
    if not path.exists():
        raise CmrkitError(
            f"no qrels for the train split {split!r}; build the collection with that split or "
            "name another with --train-split",
            path=path,
        )
    return path, read_qrels(path)


def data_hashes(coll: Path, qrels: Path, run_key: str, run: Path) -> dict[str, str]:
    """The sha256 of what a model is trained from: corpus, topics, qrels and the first-stage
    run that gave the negatives (``run_key``: its name in the metadata)."""
    return {
        "corpus_sha256": sha256_file(corpus_path(coll)),
        "topics_sha256": topics_sha256(coll),
        "qrels_sha256": sha256_file(qrels),
        f"{run_key}_sha256": sha256_file(run),
    }


def dev_scores(run: Any, qrels: Any, measures: Sequence[str]) -> dict[str, float]:
    """``measures`` of a dev run over every judged query, rounded to 6 digits."""
    from cmrkit.evaluation.ranking import evaluate

    result = evaluate(run, qrels, list(measures), all_queries=True)
    return {m: round(float(result.aggregate[m]), 6) for m in measures}


def training_log(
    argv: list[str] | None,
    run: tuple[str, str],
    log: dict[str, Any],
    timings: dict[str, float],
    started: float,
) -> dict[str, Any]:
    """What ``cmrkit-train.json`` holds: the command, the first-stage run (key, path), the loss
    and epoch log and the timings."""
    return {
        "command": argv,
        run[0]: run[1],
        **log,
        "seconds": {**timings, "total": round(time.perf_counter() - started, 3)},
    }


def no_decay(name: str) -> bool:
    """Parameters without weight decay: biases and LayerNorm weights."""
    return name.endswith(".bias") or "LayerNorm" in name or "layer_norm" in name


def seed_all(seed: int) -> None:
    """Seed Python's, numpy's and torch's global generators."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def total_steps(epochs: Sequence[Sequence[Any]], batch_size: int, max_steps: int | None) -> int:
    """Steps over every epoch's examples in batches, at most ``max_steps``."""
    steps = sum((len(e) + batch_size - 1) // batch_size for e in epochs)
    return steps if max_steps is None else min(steps, max_steps)


def adamw(parts: Sequence[tuple[Sequence[tuple[str, Any]], float]], weight_decay: float) -> Any:
    """AdamW over ``parts`` (named parameters, learning rate): per part, one group with
    ``weight_decay`` and one without (biases, LayerNorm weights)."""
    import torch

    groups = []
    for named, lr in parts:
        groups.append(
            {
                "params": [p for n, p in named if not no_decay(n)],
                "weight_decay": weight_decay,
                "lr": lr,
            }
        )
        groups.append(
            {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0, "lr": lr}
        )
    return torch.optim.AdamW(groups)


def linear_schedule(optimizer: Any, warmup_share: float, steps: int) -> Any:
    """Linear warm-up over ``warmup_share`` of the steps, then linear decay to 0."""
    import torch

    warmup = int(round(warmup_share * steps))

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        return max(0.0, (steps - step) / max(1, steps - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def train_epochs(
    epochs: Sequence[Sequence[Any]],
    *,
    batch_size: int,
    steps: int,
    batch_loss: Callable[[Sequence[Any]], Any],
    train_mode: Callable[[], None],
    parameters: Sequence[Any],
    optimizer: Any,
    scheduler: Any,
    eval_dev: Callable[[], dict[str, float]] | None,
    timings: dict[str, float],
    progress: bool,
    label: str,
    dev_before: bool = True,
    query_of: Callable[[Any], Any] | None = None,
) -> tuple[dict[str, Any], int]:
    """Train over ``epochs`` (each a list of examples) for ``steps`` steps; return the log
    (``loss`` per step, ``epochs`` with the mean loss and dev measures) and the steps taken.

    ``batch_loss`` gives the loss of one batch of examples; ``train_mode`` puts the modules in
    training mode at each epoch's start; ``eval_dev``, when given, scores the dev split after each
    epoch, and before the first when ``dev_before`` (the starting model's score: epoch 0).
    ``timings`` gets ``dev`` (all the dev scorings), ``train`` (the steps alone) and
    ``steps_per_second``. The log's ``used`` counts the examples the steps took and their
    distinct queries, of the queries in all epochs (``query_of`` gives an example's query;
    default its first item: both trainers' examples start with the topic's index)."""
    import torch

    from cmrkit.console import console, progress_bar

    log: dict[str, Any] = {"loss": [], "epochs": []}
    dev_seconds = 0.0
    query = query_of or _first_item
    used: set[Any] = set()
    n_used = 0

    def scored_dev() -> dict[str, float]:
        nonlocal dev_seconds
        t0 = time.perf_counter()
        measures = eval_dev()  # type: ignore[misc]
        dev_seconds += time.perf_counter() - t0
        return measures

    if eval_dev is not None and dev_before:
        log["epochs"].append({"epoch": 0, "dev": scored_dev()})
    step = 0
    dev_first = dev_seconds
    t_train = time.perf_counter()
    with progress_bar(progress, label) as bar:
        task = bar.add_task("steps", total=steps)
        for epoch, examples in enumerate(epochs, 1):
            if step >= steps:
                break
            train_mode()
            losses: list[float] = []
            for b in range(0, len(examples), batch_size):
                if step >= steps:
                    break
                batch = examples[b : b + batch_size]
                loss = batch_loss(batch)
                used.update(query(x) for x in batch)
                n_used += len(batch)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(parameters, 1.0)
                optimizer.step()
                scheduler.step()
                step += 1
                value = round(float(loss.detach()), 6)
                losses.append(value)
                log["loss"].append({"step": step, "epoch": epoch, "loss": value})
                bar.advance(task, 1)
            entry: dict[str, Any] = {
                "epoch": epoch,
                "steps": len(losses),
                "mean_loss": round(sum(losses) / max(1, len(losses)), 6),
            }
            if eval_dev is not None:
                entry["dev"] = scored_dev()
            log["epochs"].append(entry)
            if progress:
                shown = " ".join(f"{k} {v:.4f}" for k, v in entry.get("dev", {}).items())
                console.print(f"epoch {epoch}: mean loss {entry['mean_loss']:.4f} {shown}")
    if eval_dev is not None:
        timings["dev"] = round(dev_seconds, 3)
    # the steps alone: the dev scorings after each epoch are counted in ``dev``
    timings["train"] = round(time.perf_counter() - t_train - (dev_seconds - dev_first), 3)
    timings["steps_per_second"] = round(step / max(timings["train"], 1e-9), 4)
    every = {query(x) for e in epochs for x in e}
    known = None not in every  # examples of another shape: the queries are not counted
    log["used"] = {
        "examples": n_used,
        "queries": len(used) if known else None,
        "of_queries": len(every) if known else None,
    }
    return log, step


def _first_item(example: Any) -> Any:
    """An example's query: the first item (the topic's index) of the tuples both trainers
    make; None for an example of another shape."""
    try:
        first = example[0]
        hash(first)
    except (TypeError, IndexError, KeyError):
        return None
    return first


def options_record(options: Any) -> dict[str, Any]:
    """A training options dataclass as the metadata records it (paths as strings)."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(options).items()}


def write_json(path: Path, value: Any) -> None:
    """``value`` as indented JSON with sorted keys and a final newline."""
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, ensure_ascii=False))


def _first_difference(have: Any, want: Any, where: str = "") -> str:
    if isinstance(have, dict) and isinstance(want, dict):
        for k in sorted(set(have) | set(want)):
            if have.get(k) != want.get(k):
                return _first_difference(have.get(k), want.get(k), f"{where}.{k}" if where else k)
    return f"{where}: {json.dumps(have)} here, {json.dumps(want)} asked"


def _without(value: dict[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """``value`` without the dotted ``keys``."""
    out = _plain(value)
    for key in keys:
        *parents, last = key.split(".")
        node = out
        for p in parents:
            node = node.get(p) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return out


class ModelFolder:
    """A trained model's output folder, from the claim to the final rename.

    ``kind`` is the model's kind of output (a key of ``fileio.KINDS``: a folder of another kind
    is never replaced); ``metadata`` is the file (inside the folder) recording what the model was
    trained from and how; ``files`` are those (relative to the folder) a whole model holds
    besides it and the training log. Create it before training: a folder that is not a cmrkit
    model of this kind is refused at once unless ``force`` (one of another kind even then). Then
    :meth:`kept` with the metadata the new model will have: the same metadata in the folder (but
    the ``varying`` keys) means up to date."""

    def __init__(
        self, path: Path, *, kind: str, metadata: str, files: Sequence[str] = (), force: bool
    ):
        self.path = Path(path)
        self.kind = kind
        self.metadata = metadata
        self.files = tuple(files)
        self.force = force
        existing = None
        if not force and os.path.lexists(self.path):
            check_replaceable(self.path, kind)  # another kind of output: --force would not do
            existing = self._read()
            if existing is None:
                raise CmrkitError("already exists; pass --force to replace it", path=self.path)
        # a folder of ours is replaced only once :meth:`kept` found it trained otherwise and
        # ``force`` was given; a folder appearing meanwhile is still refused at the rename
        self.staged = StagedOutputs(
            [self.path], force=force or existing is not None, kinds={self.path: kind}
        )

    def _read(self) -> dict[str, Any] | None:
        if self.path.is_symlink() or not self.path.is_dir():
            return None
        try:
            found = json.loads((self.path / self.metadata).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    def check_options(
        self,
        options: dict[str, Any],
        derived: Iterable[str] = (),
        implicit: dict[str, Any] | None = None,
    ) -> None:
        """Refuse at once, before any data is read, a model in the folder trained with other
        ``options`` (the metadata's ``parameters``; ``derived`` ones are settled later).
        ``implicit``: options a record leaves out when they have these values (a folder
        without one was trained so); compared too, and named first when they differ."""
        if self.force or not os.path.lexists(self.path):
            return
        found = self._read()
        params = found.get("parameters") if found is not None else None
        if not isinstance(params, dict):
            return  # :meth:`kept` says what is wrong with it
        skip = set(derived)
        absent = dict(implicit or {})
        keys = [k for k in dict.fromkeys([*absent, *options]) if k not in skip]
        have = _plain({k: params.get(k, absent.get(k)) for k in keys})
        want = _plain({k: options.get(k, absent.get(k)) for k in keys})
        if have != want:
            mode = next((k for k in absent if k in have and have[k] != want[k]), None)
            where = (
                _first_difference(have[mode], want[mode], f"parameters.{mode}")
                if mode is not None
                else _first_difference(have, want, "parameters")
            )
            raise CmrkitError(
                f"already exists, trained otherwise ({where}); pass --force to replace it, or "
                "name another folder",
                path=self.path,
            )

    def kept(self, wanted: dict[str, Any], varying: Iterable[str] = ()) -> dict[str, Any] | None:
        """The training log of the model already in the folder when its metadata equals
        ``wanted`` (but the dotted ``varying`` keys, known only after training) and its files
        are all there: it is up to date. None when there is none to keep (or ``force``); an
        error when a model trained otherwise is there."""
        if self.force or not os.path.lexists(self.path):
            return None
        found = self._read()
        if found is None:
            raise CmrkitError("already exists; pass --force to replace it", path=self.path)
        varying = list(varying)
        have, want = _without(found, varying), _without(wanted, varying)
        if have != want:
            raise CmrkitError(
                f"already exists, trained otherwise ({_first_difference(have, want)}); pass "
                "--force to replace it, or name another folder",
                path=self.path,
            )
        missing = [f for f in (TRAIN_LOG, *self.files) if not (self.path / f).exists()]
        if missing:
            raise CmrkitError(
                f"already exists, but {missing[0]} is missing from it; pass --force to train "
                "it again",
                path=self.path,
            )
        try:
            log = json.loads((self.path / TRAIN_LOG).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            log = None
        if not isinstance(log, dict):
            raise CmrkitError(
                f"already exists, but its {TRAIN_LOG} is unreadable; pass --force to train it "
                "again",
                path=self.path,
            )
        return log

    def plot(self, log: dict[str, Any], draw: Callable[[dict[str, Any], Path], None]) -> None:
        """Draw the kept model's missing loss plot (asked for now, not when it was trained)."""
        if (self.path / PLOT).exists():
            return
        tmp = self.staged.tmp / PLOT
        draw(self._titled(log, self.path), tmp)
        os.replace(tmp, self.path / PLOT)

    def _titled(self, log: dict[str, Any], folder: Path) -> dict[str, Any]:
        """The log with the plot's ``title``: what was trained (the kind of model, from the
        folder's metadata the collection and split), the steps and the queries they used."""
        try:
            meta = json.loads((folder / self.metadata).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        data = meta.get("data") if isinstance(meta, dict) else None
        data = data if isinstance(data, dict) else {}
        what = KINDS_SHOWN.get(self.kind, self.kind)
        where = " ".join(
            str(x)
            for x in (Path(str(data["collection"])).name if data.get("collection") else None,
                      data.get("train_split"))
            if x
        )  # fmt: skip
        steps = len(log.get("loss", []))
        used = log.get("used") if isinstance(log.get("used"), dict) else {}
        queries = (
            f" on {used['queries']:,} of {used['of_queries']:,} queries"
            if isinstance(used.get("queries"), int) and isinstance(used.get("of_queries"), int)
            else ""
        )
        title = f"{what}" + (f" trained on {where}" if where else "")
        return {**log, "title": f"{title}: {steps:,} steps{queries}"}

    def target(self) -> Path:
        """The staging folder to write the new model into."""
        return self.staged.path(self.path)

    def finish(
        self, log: dict[str, Any], draw: Callable[[dict[str, Any], Path], None] | None
    ) -> None:
        """Write the training log (and ``draw`` its plot) beside the model written in
        :meth:`target`, give the files the usual modes and put the folder in place."""
        target = self.target()
        write_json(target / TRAIN_LOG, log)
        if draw is not None:
            draw(self._titled(log, target), target / PLOT)
        usual_modes(target)  # safetensors writes its weights 0600
        self.staged.commit()

    def __enter__(self) -> ModelFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.staged.abort()  # nothing once committed
