"""Run files and their JSON sidecars: the one protocol every system (Lucene, dense, fused,
reranked) follows, through :func:`produce_run`.

A run is written to ``RUNS/<collection>/<name>.<split>.trec`` beside ``<name>.<split>.json``
(the sidecar: the exact command, every parameter, the index and topic hashes, versions and
timings), both staged and moved into place together. The sidecar's ``identity`` (system, split,
the parameters asked for, the index id and the topics' sha256) says what the run is: a run whose
identity equals the one asked for is up to date and kept (not recomputed, not refused); another
run at the same paths is refused unless ``force``.

A system describes its run as a :class:`RunSpec` (what it is and where it goes) and hands
:func:`produce_run` a function that computes it; ``produce_run`` claims the two files, keeps an
up-to-date run, refuses another, computes, and writes the run with its sidecar (the fields every
sidecar has, plus the system's own)::

    spec = RunSpec.for_collection(runs_dir, coll, system="rerank", name=name, split=split,
                                  parameters=params, index_id=index_id,
                                  command=rerun_command(opts.argv, opts.split, split))
    result = produce_run(spec, lambda: Computed(run, tag, {"model": ...}), force=opts.force,
                         started=started)
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cmrkit.collection.layout import Topic, collection_dir, iter_corpus, qrels_file, topics_path
from cmrkit.errors import CmrkitError
from cmrkit.fileio import StagedOutputs, parse_json, read_text, safe_name, sha256_file
from cmrkit.trec import write_run

RankedRun = dict[str, list[tuple[str, float]]]


@dataclass
class RunResult:
    """What a system wrote (or found up to date): the ranked lists, its files, the sidecar."""

    run_path: Path
    sidecar_path: Path
    run: RankedRun
    sidecar: dict[str, Any] = field(default_factory=dict)
    up_to_date: bool = False


def check_name(name: str) -> str:
    """A run name safe as a file name and a TREC run tag."""
    return safe_name(name, "run name")


def run_paths(runs_dir: Path, collection: Path, name: str, split: str) -> tuple[Path, Path]:
    """(run file, sidecar) of a run of ``collection``."""
    out_dir = Path(runs_dir) / Path(collection).resolve().name
    run_path = out_dir / f"{check_name(name)}.{safe_name(split, 'split name')}.trec"
    return run_path, sidecar_of(run_path)


def sidecar_of(run_path: str | Path) -> Path:
    """Where a run's sidecar is: ``NAME.json`` beside ``NAME.trec``."""
    return Path(run_path).with_suffix(".json")


# a JSON object beside a run holding one of these is its sidecar: cmrkit writes them all, and a
# run made elsewhere may be given a sidecar by hand naming its collection and split
SIDECAR_FIELDS = ("identity", "collection", "split", "system")


def _load_sidecar(path: Path) -> dict[str, Any] | None:
    """The sidecar at ``path``; None when the JSON there is not one (an object holding none of
    :data:`SIDECAR_FIELDS`); one that cannot be read is refused in one line naming it."""
    value = parse_json(
        read_text(path),
        path=path,
        what="the run's cmrkit sidecar (fix it, or move it away to use the run without it)",
    )
    if isinstance(value, dict) and any(key in value for key in SIDECAR_FIELDS):
        return value
    return None


def read_sidecar(run_path: str | Path) -> dict[str, Any] | None:
    """The cmrkit sidecar beside a run: None when there is none, or when the JSON file there is
    not a sidecar (ignored, with a note saying so); a sidecar that cannot be read (malformed,
    undecodable) is refused in one line naming it, never silently ignored."""
    path = sidecar_of(run_path)
    if not path.is_file():
        return None
    found = _load_sidecar(path)
    if found is None:
        logging.getLogger("cmrkit").warning(
            f"{path}: not a cmrkit sidecar (none of {', '.join(SIDECAR_FIELDS)}); the run is "
            "read without one"
        )
    return found


def recorded(sidecar: Mapping[str, Any] | None, key: str) -> str | None:
    """A text field of a sidecar (``collection``, ``split``, ``system``, ``name``), None when
    the sidecar has no such text."""
    value = (sidecar or {}).get(key)
    return value if isinstance(value, str) else None


def check_run_of(
    run_path: str | Path,
    sidecar: Mapping[str, Any] | None,
    *,
    collection: str | Path | None = None,
    split: str | None = None,
    what: str = "",
) -> None:
    """Refuse a run whose sidecar records another collection than ``collection`` (the folders
    compared) or another split than ``split``; what the sidecar does not record, or what is not
    given, is not checked. ``what`` says what the run is for (e.g. "--negatives")."""
    about = f" ({what})" if what else ""
    made_on = recorded(sidecar, "collection")
    if collection is not None and made_on is not None:
        if Path(made_on).resolve() != Path(collection).resolve():
            raise CmrkitError(
                f"the run was made on collection {made_on} (its sidecar says so), not on "
                f"{collection}{about}; give a run of that collection",
                path=run_path,
            )
    of_split = recorded(sidecar, "split")
    if split is not None and of_split is not None and of_split != split:
        raise CmrkitError(
            f"the run is of split {of_split!r} (its sidecar says so), not {split!r}{about}; "
            f"give a run of split {split!r}",
            path=run_path,
        )


def collection_of(
    run_path: str | Path, sidecar: Mapping[str, Any] | None, collection: str | Path | None
) -> Path:
    """The collection folder of a run: ``collection`` when given (a run whose sidecar names
    another is refused), else the one its sidecar names (none: refused, saying to pass
    --collection)."""
    if collection is not None:
        coll = collection_dir(collection)
        check_run_of(run_path, sidecar, collection=coll)
        return coll
    made_on = recorded(sidecar, "collection")
    if made_on is None:
        raise CmrkitError(
            "the run has no sidecar naming its collection; pass --collection", path=run_path
        )
    return collection_dir(made_on)


def check_qrels_of(
    run_path: str | Path,
    qrels_path: str | Path,
    run: Any,
    qrels: Mapping[str, Any],
    *,
    allow_unjudged: bool = False,
) -> None:
    """Refuse to score a run none of whose documents retrieved for the queries it shares with
    the qrels is judged anywhere in them (issue 32, trip 4, and issue 42 item 5a: AP 0.0000,
    exit 0, and ``compare`` calling the difference significant): a run of another collection,
    with a sidecar or not. ``run`` and ``qrels`` are what the scoring read (RunColumns or
    {qid: {docno: score}}; {qid: judged docnos} in any format ``eval`` reads), so no file is
    read twice. When the run's sidecar names a collection whose qrels these are not by name
    (``NAME.*``), the line says so and names that collection's own qrels. ``allow_unjudged``
    (``--allow-unjudged``): scored as it is."""
    if allow_unjudged:
        return
    from cmrkit.evaluation.judged import unjudged

    found = unjudged(run, qrels)
    if found is None:
        return
    made_on = None
    if str(run_path) != "-" and Path(run_path).is_file():
        with contextlib.suppress(CmrkitError):  # a broken sidecar only leaves it unnamed
            made_on = recorded(read_sidecar(run_path), "collection")
    docs, queries = f"{found.documents:,}", f"{found.queries:,}"
    flag = "or add --allow-unjudged to score it as it is (0)"
    if made_on is not None and not Path(qrels_path).name.startswith(f"{Path(made_on).name}."):
        split = recorded(read_sidecar(run_path), "split")
        own = qrels_file(made_on, split) if split and Path(made_on).is_dir() else None
        instead = "score it against its collection's" + (f" ({own})" if own else "")
        raise CmrkitError(
            f"the run was made on collection {made_on} (its sidecar says so), and none of the "
            f"{docs} documents it retrieved for the {queries} queries it shares with "
            f"{qrels_path} is judged there: those qrels are another collection's; {instead}, "
            f"{flag}",
            path=run_path,
        )
    raise CmrkitError(
        f"none of the {docs} documents the run retrieved for the {queries} queries it shares "
        f"with {qrels_path} is judged anywhere in them: the run is another collection's (or "
        f"writes its docnos otherwise); score it against its own collection's qrels, {flag}",
        path=run_path,
    )


def check_replaceable_run(run_path: Path, side_path: Path) -> None:
    """Refuse, ``--force`` or not, to write a run over files that are not a run cmrkit wrote:
    only a run (a file with a sidecar beside it) replaces a run, never a qrels file, a topics
    file or another tool's JSON."""
    if not (run_path.exists() or side_path.exists()):
        return
    try:
        found = _load_sidecar(side_path) if side_path.is_file() else None
    except CmrkitError:
        found = None
    if found is not None:
        return
    if side_path.exists():
        raise CmrkitError(
            f"is not the sidecar of a cmrkit run, so {run_path.name} cannot be written beside "
            "it, --force or not: move it away yourself or write the run elsewhere",
            path=side_path,
        )
    raise CmrkitError(
        f"is not a run cmrkit wrote (no sidecar {side_path.name} beside it); --force replaces "
        "only a run: move it away yourself or write the run elsewhere",
        path=run_path,
    )


def claim(run_path: Path, sidecar_path: Path, *more: Path) -> StagedOutputs:
    """Hold a run's files (the run, its sidecar, and ``more`` a system writes beside them) for
    writing (locked: a second command writing the same run fails at once, naming this one) from
    the check of what exists to the final rename; use it as a context manager and pass it to
    :func:`write_run_files`."""
    return StagedOutputs([run_path, sidecar_path, *more], force=True)


def topics_sha256(collection: Path) -> str:
    return sha256_file(topics_path(collection))


def identity(
    system: str, split: str, parameters: Mapping[str, Any], index_id: str, topics: str
) -> dict[str, Any]:
    """What a run is (not when or how fast it was made): equal identities, the same run file."""
    return {
        "system": system,
        "split": split,
        "parameters": dict(parameters),
        "index_id": index_id,
        "topics_sha256": topics,
    }


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def existing(
    run_path: Path, sidecar_path: Path, wanted: Mapping[str, Any], *, force: bool
) -> RunResult | None:
    """The run already on disk when it is what ``wanted`` (an identity) describes, else None.

    A different run (or files cmrkit cannot read) at these paths is refused unless ``force``.
    """
    if force or not (run_path.exists() or sidecar_path.exists()):
        return None
    try:
        sidecar = json.loads(sidecar_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        sidecar = None
    if (
        isinstance(sidecar, dict)
        and run_path.is_file()
        and _canonical(sidecar.get("identity")) == _canonical(dict(wanted))
    ):
        from cmrkit.trec import ranked, read_run

        run = {q: ranked(docs) for q, docs in read_run(run_path).items()}
        return RunResult(run_path, sidecar_path, run, sidecar, up_to_date=True)
    raise CmrkitError(
        "a different run with this name already exists (other parameters, index or topics); "
        "pass --force to replace it or --name to keep both",
        path=run_path if run_path.exists() else sidecar_path,
    )


def write_run_files(
    run_path: Path,
    sidecar_path: Path,
    run: RankedRun,
    tag: str,
    sidecar: Mapping[str, Any],
    staged: StagedOutputs | None = None,
) -> None:
    """Write the run and its sidecar together (staged, then moved into place): into
    ``staged`` (from :func:`claim`, put in place when its block ends), else on their own."""
    with contextlib.nullcontext(staged) if staged else claim(run_path, sidecar_path) as out:
        with open(out.path(run_path), "w", encoding="utf-8", newline="\n") as f:
            write_run(f, run, tag)
        with open(out.path(sidecar_path), "w", encoding="utf-8") as f:
            f.write(json.dumps(sidecar, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def refuse_other_run(run_path: Path, sidecar_path: Path, wanted: Mapping[str, Any]) -> None:
    """Refuse now (before costly work) a run at these paths whose identity differs from
    ``wanted`` in anything but the index id (which may not be known yet)."""
    if not sidecar_path.is_file():
        return
    try:
        found = json.loads(sidecar_path.read_text(encoding="utf-8")).get("identity") or {}
    except (OSError, ValueError, AttributeError):
        found = {}
    if any(found.get(key) != value for key, value in wanted.items() if key != "index_id"):
        existing(run_path, sidecar_path, wanted, force=False)  # raises the usual error


def rerun_command(
    argv: Sequence[str] | None, split_asked: str | None, split: str
) -> list[str] | None:
    """The command that makes the run again: ``argv``, naming the split it ran when the user
    left the split to the default."""
    if argv is None:
        return None
    return [*argv, "--split", split] if split_asked is None else list(argv)


@dataclass
class RunSpec:
    """What a run is (system, name, split, parameters, index and topics) and where it goes."""

    system: str
    name: str
    split: str | None  # None: a fused run whose inputs name no split
    parameters: dict[str, Any]
    run_path: Path
    sidecar_path: Path
    index_id: str = ""
    topics_sha256: str = ""
    collection: str | None = None
    command: list[str] | None = None
    # files the system writes beside the run (e.g. the reader's spans): claimed and put in place
    # with it; a kept run needs them all
    also: tuple[Path, ...] = ()

    @classmethod
    def for_collection(
        cls,
        runs_dir: str | Path,
        collection: Path,
        *,
        system: str,
        name: str,
        split: str,
        parameters: Mapping[str, Any],
        index_id: str,
        command: list[str] | None = None,
        also: tuple[Path, ...] = (),
    ) -> RunSpec:
        """A run of ``collection`` at ``RUNS/<collection>/<name>.<split>.trec``."""
        run_path, sidecar_path = run_paths(Path(runs_dir), collection, name, split)
        return cls(
            system,
            name,
            split,
            dict(parameters),
            run_path,
            sidecar_path,
            index_id,
            topics_sha256(collection),
            str(collection),
            command,
            also,
        )

    @property
    def identity(self) -> dict[str, Any]:
        return identity(
            self.system, self.split or "", self.parameters, self.index_id, self.topics_sha256
        )


@dataclass
class Computed:
    """A system's run, its tag, and the sidecar fields that are the system's own (they may
    override the shared ones, e.g. ``n_queries``); ``seconds`` are its step timings."""

    run: RankedRun
    tag: str
    sidecar: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    files: dict[Path, str] = field(default_factory=dict)  # the text of each of the spec's ``also``


def produce_run(
    spec: RunSpec,
    compute: Callable[[], Computed],
    *,
    force: bool = False,
    started: float | None = None,
) -> RunResult:
    """The run-file protocol: claim the run's files (a second writer fails at once), keep the
    run already there when its identity is ``spec``'s (and the files ``spec.also`` are there),
    refuse another unless ``force``, else ``compute`` it and write the run, its sidecar and
    ``also`` together.

    ``started`` (a ``time.perf_counter()`` reading) adds the ``open`` and ``total`` seconds."""
    wanted = spec.identity
    # held from the check of what exists to the rename: a second writer fails at once
    with claim(spec.run_path, spec.sidecar_path, *spec.also) as staged:
        check_replaceable_run(spec.run_path, spec.sidecar_path)
        found = existing(spec.run_path, spec.sidecar_path, wanted, force=force)
        if found is not None and all(p.is_file() for p in spec.also):
            return found  # (a run missing a file written beside it is made again)
        seconds: dict[str, float] = {}
        if started is not None:
            seconds["open"] = round(time.perf_counter() - started, 3)
        out = compute()
        seconds.update(out.seconds)
        if started is not None:
            seconds["total"] = round(time.perf_counter() - started, 3)
        sidecar = {
            "command": spec.command,
            "argv": list(sys.argv),
            "identity": wanted,
            "system": spec.system,
            "name": spec.name,
            "tag": out.tag,
            "collection": spec.collection,
            "split": spec.split,
            "run": str(spec.run_path),
            "parameters": spec.parameters,
            "n_queries": len(out.run),
            "n_queries_with_results": sum(1 for docs in out.run.values() if docs),
            "warnings": [],
            **out.sidecar,
            "seconds": seconds,
        }
        write_run_files(spec.run_path, spec.sidecar_path, out.run, out.tag, sidecar, staged)
        for path in spec.also:
            with open(staged.path(path), "w", encoding="utf-8", newline="\n") as f:
                f.write(out.files[path])
    return RunResult(spec.run_path, spec.sidecar_path, out.run, sidecar)


def own_document_units(collection: Path, topics: Sequence[Topic]) -> dict[str, frozenset[str]]:
    """For topics with ``exclude_doc``: the units of that document, never results."""
    wanted = {t.exclude_doc for t in topics if t.exclude_doc}
    if not wanted:
        return {}
    units: dict[str, set[str]] = {d: set() for d in wanted}
    for _, record in iter_corpus(collection):
        if record.get("doc_id") in units:
            units[record["doc_id"]].add(record["id"])
    return {t.qid: frozenset(units[t.exclude_doc]) for t in topics if t.exclude_doc}


def written_scores(scores: np.ndarray) -> np.ndarray:
    """Each float32 score as it reads back from the run file: ``float(f"{s:.6f}")``, exactly
    (the decimal rounding is done in integers, half to even as Python's formatting does)."""
    values = np.asarray(scores, dtype=np.float32).astype(np.float64)
    mant, exp = np.frexp(np.abs(values))
    m = (mant * (1 << 24)).astype(np.int64)  # |value| = m * 2**(exp - 24), exactly
    shift = 24 - exp.astype(np.int64)
    micros = np.zeros(values.shape, dtype=np.int64)
    big = shift <= 0  # |value| >= 2**23: an integer
    micros[big] = (m[big] << -shift[big]) * 1_000_000
    small = (shift > 0) & (shift < 62)  # beyond: |value| * 1e6 < 2**44 / 2**61, rounds to 0
    p = m[small] * 1_000_000
    s = shift[small]
    q = p >> s
    rest = p - (q << s)
    half = np.left_shift(np.int64(1), s - 1)
    q += (rest > half) | ((rest == half) & (q & 1 == 1))
    micros[small] = q
    return np.copysign(micros / 1e6, values)
