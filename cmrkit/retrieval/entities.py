"""Named entities and sentences with spaCy, for the `entities` index field and the queries.

Entities come from the model's NER component alone (no tagger or attribute ruler): about twice as
fast as the full pipeline, with entities that differ from it in a few percent of texts; index
and queries use the same pipeline, so the two sides agree.

Scale: texts already seen come from the entity cache (:mod:`cmrkit.nercache`); the
others go through spaCy in blocks, over ``processes`` worker processes when there are enough of
them to repay starting the workers (each loads the model once), else in this process. The
entities are the same either way, in the same order.

Signals: the workers leave Ctrl-C to the command (a terminal sends it to every process of the
group): they start with SIGINT blocked and ignore it, so none dies with a traceback of its own.
When the command stops on a signal (or any error) while workers recognise, :meth:`Recogniser.close`
terminates them instead of waiting for their tasks: waiting could outlast the interrupt
deadline, and a process ended by the watchdog never releases the pool's semaphores (Python's
resource tracker then warns of "leaked semaphore objects").
"""

from __future__ import annotations

import contextlib
import itertools
import signal
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

_NER_ONLY = ["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "senter"]
BLOCK = 8192  # texts looked up, recognised and stored together
POOL_MIN_CHARS = 200_000  # less uncached text in a block (~5 s of NER): no worker processes
TASK = 128  # texts per worker task
BATCH = 256  # spaCy's nlp.pipe batch size

Span = tuple[int, int, str]


@lru_cache(maxsize=4)
def load(model: str, *, sentences: bool = False) -> Any:
    """A spaCy pipeline that finds named entities (and sentence boundaries if ``sentences``)."""
    import spacy

    try:
        if sentences:
            nlp = spacy.load(model, exclude=["tagger", "parser", "attribute_ruler", "lemmatizer"])
            nlp.enable_pipe("senter")
        else:
            nlp = spacy.load(model, exclude=_NER_ONLY)
    except OSError as e:
        raise CmrkitError(
            f"cannot load the spaCy model {model!r}; install it (pip install {model}) or name an "
            "installed one with --spacy-model"
        ) from e
    if "ner" not in nlp.pipe_names:
        raise CmrkitError(
            f"the spaCy model {model!r} has no named-entity recognizer; "
            "choose another with --spacy-model"
        )
    nlp.max_length = max(nlp.max_length, 5_000_000)
    return nlp


def _spans(doc: Any) -> list[Span]:
    return [(e.start_char, e.end_char, e.label_) for e in doc.ents]


def _recognise_here(
    texts: Sequence[str], model: str, progress: Callable[[int], None] | None = None
) -> list[list[Span]]:
    """Entities of each text; ``progress`` is told each spaCy batch of texts done (nlp.pipe
    hands its documents back a batch at a time)."""
    found = []
    for doc in load(model).pipe(texts, batch_size=BATCH):
        found.append(_spans(doc))
        if progress and len(found) % BATCH == 0:
            progress(BATCH)
    if progress and len(found) % BATCH:
        progress(len(found) % BATCH)
    return found


def _worker_recognise(task: tuple[str, list[str]]) -> list[list[Span]]:
    model, texts = task
    return _recognise_here(texts, model)


def _worker_start() -> None:
    """A worker ignores Ctrl-C: the command decides (and terminates the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT held back in this thread while it starts workers: they inherit the blocked signal
    until :func:`_worker_start` ignores it (a Ctrl-C meanwhile reaches this process afterwards)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class Recogniser:
    """spaCy NER over texts, in this process or over worker processes, with the entity cache.

    ``processes`` worker processes (started on first need, with the ``spawn`` method: the
    parent may run a JVM) recognise blocks with many uncached texts; ``cache`` False turns the
    cache off for this recogniser.
    """

    def __init__(self, model: str = DEFAULT_SPACY_MODEL, *, processes: int = 1, cache: bool = True):
        from cmrkit.nercache import EntityCache

        self.model = model
        self.processes = max(1, int(processes))
        self.labels = ner_labels(model)  # spaCy itself loads only if a text is not cached
        identity = {**spacy_version(model), "pipeline": "ner"}
        self.cache = EntityCache.for_model(identity, self.labels) if cache else None
        self._pool: Any = None
        self.recognised = 0  # texts that went through spaCy
        self.cached = 0  # texts answered by the cache

    def block(
        self, texts: list[str], progress: Callable[[int], None] | None = None
    ) -> list[list[Span]]:
        """(start, end, label) of every entity of each text, in order.

        ``progress`` is told how many of the block's texts are done as they are: those the
        cache answers at once, then each batch spaCy finishes (a worker task over processes),
        and last the repeats of texts recognised once; the counts add up to ``len(texts)``.
        """
        found = self.cache.get_many(texts) if self.cache else [None] * len(texts)
        missing = [i for i, f in enumerate(found) if f is None]
        distinct = list(dict.fromkeys(texts[i] for i in missing))
        if progress and len(texts) > len(missing):
            progress(len(texts) - len(missing))
        if distinct:
            fresh = dict(zip(distinct, self._recognise(distinct, progress), strict=True))
            for i in missing:
                found[i] = fresh[texts[i]]
            if self.cache:
                self.cache.put_many(distinct, [fresh[t] for t in distinct])
        if progress and len(missing) > len(distinct):
            progress(len(missing) - len(distinct))
        self.recognised += len(distinct)
        self.cached += len(texts) - len(missing)
        return found  # type: ignore[return-value]

    def _recognise(
        self, texts: list[str], progress: Callable[[int], None] | None = None
    ) -> list[list[Span]]:
        if self.processes == 1 or sum(map(len, texts)) < POOL_MIN_CHARS:
            return _recognise_here(texts, self.model, progress)
        pool = self._workers()
        tasks = [(self.model, texts[i : i + TASK]) for i in range(0, len(texts), TASK)]
        found: list[list[Span]] = []
        with _sigint_blocked():  # the workers start as the tasks are submitted
            parts = pool.map(_worker_recognise, tasks)
        for part in parts:  # in order, each as it is done
            found.extend(part)
            if progress:
                progress(len(part))
        return found

    def _workers(self) -> Any:
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(
                self.processes,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_start,
            )
        return self._pool

    def close(self, *, abort: bool = False) -> None:
        """Stop the workers and close the cache (again: nothing). ``abort`` (the work is not
        wanted any more: a signal, an error) terminates the workers at once, their tasks
        dropped; else they finish what they hold."""
        pool, self._pool = self._pool, None
        if pool is not None:
            if abort:
                # the executor has no public way to stop its workers' current tasks
                for process in list((getattr(pool, "_processes", None) or {}).values()):
                    process.terminate()
            pool.shutdown(cancel_futures=True)
        if self.cache is not None:
            self.cache.close()
            self.cache = None

    def __enter__(self) -> Recogniser:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        self.close(abort=kind is not None)


def iter_entities(
    texts: Iterable[str],
    model: str = DEFAULT_SPACY_MODEL,
    *,
    processes: int = 1,
    cache: bool = True,
    progress: Callable[[int], None] | None = None,
) -> Iterator[list[tuple[str, int, int]]]:
    """(text, start, end) of every named entity of each text, in order; ``progress`` is told
    how many texts are done, batch by batch (see :meth:`Recogniser.block`)."""
    with Recogniser(model, processes=processes, cache=cache) as rec:
        it = iter(texts)
        while block := list(itertools.islice(it, BLOCK)):
            for text, spans in zip(block, rec.block(block, progress), strict=True):
                yield [(text[s:e], s, e) for s, e, _ in spans]


def analyse(
    texts: Iterable[str], model: str = DEFAULT_SPACY_MODEL, batch_size: int = 64
) -> Iterator[tuple[list[tuple[str, int, int]], list[tuple[int, int]]]]:
    """Entities (text, start, end) and sentence spans (start, end) of each text."""
    nlp = load(model, sentences=True)
    for doc in nlp.pipe(texts, batch_size=batch_size):
        ents = [(e.text, e.start_char, e.end_char) for e in doc.ents]
        sents = [(s.start_char, s.end_char) for s in doc.sents]
        yield ents, sents


def _model_meta(model: str) -> dict[str, Any]:
    """The installed model package's meta.json, read without loading spaCy (else from the
    loaded pipeline)."""
    import importlib.util
    import json
    from pathlib import Path

    try:
        spec = importlib.util.find_spec(model)
    except (ImportError, ValueError):
        spec = None
    for base in (spec.submodule_search_locations or []) if spec else []:
        path = Path(base) / "meta.json"
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and meta.get("name") and meta.get("version"):
            return meta
    return dict(load(model).meta)


@lru_cache(maxsize=8)
def _identity(model: str) -> tuple[tuple[str, str], ...]:
    from importlib.metadata import version

    return (
        ("spacy", version("spacy")),
        ("model", model),
        ("model_version", str(_model_meta(model).get("version", "unknown"))),
    )


def ner_labels(model: str) -> list[str]:
    """The labels of the model's entity recognizer (from its meta.json when it lists them)."""
    labels = _model_meta(model).get("labels", {}).get("ner")
    return list(labels) if labels else list(load(model).get_pipe("ner").labels)


def spacy_version(model: str) -> dict[str, str]:
    """Versions of spaCy and of the model, for provenance records (spaCy is not loaded)."""
    return dict(_identity(model))
