"""`cmrkit index`: a Lucene index of a collection's corpus, built with Anserini's IndexCollection.

Fields (all analysed by Anserini's default English analyzer: Porter stemming, stopwords removed):

- ``contents``: the unit text (positions, the text and the raw record are stored; query
  expansion reads the feedback documents' terms by analysing the stored text again, which gives
  what stored term vectors would, see BatchSearcher.java; ``docvectors=True`` stores the term
  vectors too, for tools that read them, such as Pyserini's own RM3, at twice Lucene's indexing
  time);
- ``title``: the document title, or the document id where the title is unknown;
- ``entities``: the named entities spaCy finds in the unit (empty with ``entities=False``);
- ``document``: the text of the unit's passage (sentence units: the sentences that share a
  ``passage``) or of its document (units that share a ``doc_id``), in corpus order; a unit alone
  in its passage and document gets its own text. When every unit is alone the field is not
  indexed (it would repeat ``contents``) and searches on ``document`` use ``contents``.

The index lives in ``COLLECTION/index/`` with ``cmrkit-index.json`` recording the sha256 of the
corpus it was built from; :func:`open_index` refuses an index whose corpus has changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cmrkit.retrieval.entities as ner
import cmrkit.retrieval.signal_points as signal_points
import cmrkit.retrieval.stored as stored
from cmrkit._version import __version__
from cmrkit.collection.layout import (
    collection_dir,
    corpus_path,
    index_path,
    iter_corpus,
    read_manifest,
)
from cmrkit.errors import CmrkitError
from cmrkit.fileio import StagedOutputs, reading, sha256_file
from cmrkit.retrieval.options import MAX_THREADS
from cmrkit.retrieval.stored import StoredIndex, corpus_sha256
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

MANIFEST = "cmrkit-index.json"
FIELDS = ("contents", "title", "entities", "document")
# per-unit features a corpus may carry (TAC collections: within-document coreference chain words,
# mention acronyms, character trigrams); indexed as fields when the corpus has them
FEATURE_FIELDS = ("chain", "acronyms", "trigrams")
FORMAT = "cmrkit-index/1"


class IndexInfo(StoredIndex):
    """A Lucene index that matches its collection's corpus."""


def group_key(record: dict[str, Any]) -> str | None:
    """The passage or document a unit belongs to (units that share it share ``document``)."""
    if isinstance(record.get("passage"), str):
        return "p\t" + record["passage"]
    if isinstance(record.get("doc_id"), str) and record["doc_id"]:
        return "d\t" + record["doc_id"]
    return None


def unit_line(record: dict[str, Any], entities: Iterable[str]) -> dict[str, str]:
    """The JSON record Anserini indexes for one corpus unit, given its entities' texts."""
    line = {
        "id": record["id"],
        "contents": record["contents"],
        "title": record.get("title") or record.get("doc_id") or "",
        "entities": " ".join(entities),
    }
    for name in FEATURE_FIELDS:
        if isinstance(record.get(name), str):
            line[name] = record[name]
    return line


def check_unit_id(seen: dict[str, int], docno: str, n: int, path: Path) -> None:
    """Refuse an id used before (``seen``: id -> line) or unfit for run files; record it."""
    if docno in seen:
        raise CmrkitError(
            f"unit id {docno!r} already used on line {seen[docno]}; "
            "ids must be unique (rebuild the collection)",
            path=path,
            where=f"line {n}",
        )
    if not docno or any(c.isspace() for c in docno):
        raise CmrkitError(
            f"unit id {docno!r} is empty or holds whitespace, which TREC run files cannot carry",
            path=path,
            where=f"line {n}",
        )
    seen[docno] = n


def corpus_size(collection: Path) -> int:
    """The number of units in the corpus: from the collection manifest, else counted."""
    try:
        counts = read_manifest(collection)["counts"]
        return int(counts["corpus_units"])
    except (OSError, ValueError, KeyError, TypeError):
        from cmrkit.fileio import open_text

        with open_text(corpus_path(collection)) as f:
            return sum(1 for line in f if line.strip())


def _write_shards(
    collection: Path,
    shard_paths: list[Path],
    *,
    entities: bool,
    spacy_model: str,
    processes: int,
    progress: bool,
) -> tuple[int, Counter[str], list[str | None], set[str], dict[str, int]]:
    """One pass over the corpus: check ids, find entities, write the JSONL shards for Anserini.

    Returns the number of units, the size of each passage/document group, each unit's group key,
    the feature fields present and NER counts (texts recognised, texts from the cache). The
    ``document`` field is added afterwards (it needs every unit of a group) by
    :func:`_add_documents`.
    """
    import itertools

    from cmrkit.console import progress_bar

    path = corpus_path(collection)
    seen: dict[str, int] = {}
    groups: Counter[str] = Counter()
    keys: list[str | None] = []
    features: set[str] = set()
    total = corpus_size(collection)
    shards = [open(p, "w", encoding="utf-8") for p in shard_paths]
    n_shards = len(shards)
    i = 0
    recogniser = ner.Recogniser(spacy_model, processes=processes) if entities else None
    try:
        bar = progress_bar(
            progress, "preparing units" + (" (spaCy NER)" if entities else ""), spinner=True
        )
        with bar:
            task = bar.add_task("units", total=total)
            records = iter_corpus(collection)
            while block := list(itertools.islice(records, ner.BLOCK)):
                if recogniser is not None:
                    done = i  # the bar moves as each spaCy batch of the block is done

                    def advance(n: int) -> None:
                        nonlocal done
                        done += n
                        bar.update(task, completed=done, total=max(total, done))
                        signal_points.reached("ner")

                    found = recogniser.block([r["contents"] for _, r in block], advance)
                else:
                    found = [[] for _ in block]
                for (n, record), spans in zip(block, found, strict=True):
                    check_unit_id(seen, record["id"], n, path)
                    key = group_key(record)
                    keys.append(key)
                    if key is not None:
                        groups[key] += 1
                    text = record["contents"]
                    line = unit_line(record, (text[s:e] for s, e, _ in spans))
                    features.update(name for name in FEATURE_FIELDS if name in line)
                    shards[i % n_shards].write(json.dumps(line, ensure_ascii=False) + "\n")
                    i += 1
                bar.update(task, completed=i, total=max(total, i))
            bar.update(task, completed=i, total=i)
    except BaseException:
        if recogniser is not None:  # a signal or an error: the workers' tasks are not wanted
            recogniser.close(abort=True)
        raise
    finally:
        for f in shards:
            f.close()
        if recogniser is not None:
            recogniser.close()
    if i == 0:
        raise CmrkitError("the corpus holds no units", path=path)
    counts = (
        {"recognised": recogniser.recognised, "cached": recogniser.cached} if recogniser else {}
    )
    return i, groups, keys, features, counts


def _add_documents(
    collection: Path,
    shard_paths: list[Path],
    groups: Counter[str],
    keys: list[str | None],
    *,
    always: bool = False,
) -> bool:
    """Add the ``document`` field to the shards; False (nothing written) when no unit shares
    its passage or document with another, unless ``always`` (a shard of a corpus whose other
    shards have such units)."""
    texts: dict[str, list[str]] = {k: [] for k, c in groups.items() if c > 1}
    if not texts and not always:
        return False
    for _, record in iter_corpus(collection):
        key = group_key(record)
        if key in texts:
            texts[key].append(record["contents"])
    # each distinct text once: units of one mention each (`--unit mention`) repeat their passage
    documents = {k: " ".join(dict.fromkeys(v)) for k, v in texts.items()}
    n_shards = len(shard_paths)
    for s, shard in enumerate(shard_paths):
        rewritten = shard.with_suffix(".tmp")
        with open(shard, encoding="utf-8") as src, open(rewritten, "w", encoding="utf-8") as dst:
            for j, raw in enumerate(src):
                line = json.loads(raw)
                key = keys[s + j * n_shards]
                line["document"] = documents.get(key, line["contents"]) if key else line["contents"]
                dst.write(json.dumps(line, ensure_ascii=False) + "\n")
        rewritten.replace(shard)
    return True


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    from cmrkit.retrieval.helper import anserini_jar
    from cmrkit.retrieval.java import jclass

    return {
        "cmrkit": __version__,
        "pyserini": version("pyserini"),
        "anserini": anserini_jar().name.removeprefix("anserini-").removesuffix("-fatjar.jar"),
        "lucene": str(jclass("org.apache.lucene.util.Version").LATEST.toString()),
        "java": str(jclass("java.lang.System").getProperty("java.version")),
    }


@dataclass
class Built:
    """What indexing a corpus (a whole collection, or one shard of it) produced."""

    n_units: int
    documents: bool  # the `document` field is indexed
    features: set[str]  # the feature fields the corpus carries
    ner: dict[str, int]  # texts recognised by spaCy, texts answered by the cache
    seconds: dict[str, float]
    docvectors: bool = False  # term vectors stored


def index_corpus(
    coll: Path,
    index_dir: Path,
    work: Path,
    *,
    target: Path,
    threads: int,
    entities: bool,
    spacy_model: str,
    verbose: bool,
    progress: bool,
    documents: bool | None = None,
    docvectors: bool = False,
) -> Built:
    """Index the corpus of ``coll`` into the new Lucene index ``index_dir`` (``work``: a scratch
    folder; ``target``: the index named in errors). ``documents`` None indexes ``document``
    when units share passages or documents; True always (see :func:`_add_documents`).
    ``docvectors`` stores term vectors as well."""
    from cmrkit.console import console
    from cmrkit.retrieval.java import java_errors, jclass, quiet

    started = time.perf_counter()
    timings: dict[str, float] = {}
    shard_dir = work / "jsonl"
    shard_dir.mkdir()
    shard_paths = [shard_dir / f"part-{i:03d}.jsonl" for i in range(threads)]
    n_units, groups, keys, features, ner_counts = _write_shards(
        coll,
        shard_paths,
        entities=entities,
        spacy_model=spacy_model,
        processes=threads,
        progress=progress,
    )
    with_documents = _add_documents(coll, shard_paths, groups, keys, always=bool(documents))
    del keys
    timings["prepare"] = round(time.perf_counter() - started, 3)
    signal_points.reached("shards")
    args = [
        "-collection",
        "JsonCollection",
        "-input",
        str(shard_dir.resolve()),
        "-index",
        str(index_dir.resolve()),
        "-generator",
        "DefaultLuceneDocumentGenerator",
        "-threads",
        str(threads),
        "-storePositions",
        "-storeContents",
        "-storeRaw",
        *(["-storeDocvectors"] if docvectors else []),
        "-fields",
        *(f for f in FIELDS[1:] if f != "document" or with_documents),
        *(f for f in FEATURE_FIELDS if f in features),
    ]
    if not verbose:
        args.append("-quiet")
    t0 = time.perf_counter()
    if progress:
        console.print(f"indexing {n_units:,} units with Lucene ({threads} threads)")
    log = work / "lucene.log"
    with (
        java_errors("Lucene indexing failed", "rerun with --verbose to see Lucene's log", target),
        quiet(log, verbose=verbose),
        signal_points.once_exists("lucene", index_dir / "write.lock"),
    ):
        jclass("io.anserini.index.IndexCollection").main(args)
        searcher = jclass("io.anserini.search.SimpleSearcher")(str(index_dir.resolve()))
        n_indexed = int(searcher.get_total_num_docs())
        searcher.close()
    if n_indexed != n_units:
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise CmrkitError(
            f"Lucene indexed {n_indexed} of {n_units} units; see its log "
            f"(rerun with --verbose): {tail.strip()[-300:]}",
            path=target,
        )
    timings["lucene"] = round(time.perf_counter() - t0, 3)
    shutil.rmtree(shard_dir, ignore_errors=True)
    return Built(n_units, with_documents, features, ner_counts, timings, docvectors)


def finish_index(
    index_dir: Path,
    coll: Path,
    corpus_sha: str,
    built: Built,
    *,
    entities: bool,
    spacy_model: str,
    verbose: bool,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """Write the manifest and the doc-number table of a freshly built index; its manifest.

    The index id depends on the corpus and the settings alone (not on how the index was built),
    so equal indexes carry equal ids. ``extra`` adds build details (threads, engine, timings).
    """
    settings = {
        "fields": [
            *(f for f in FIELDS if f != "document" or built.documents),
            *(f for f in FEATURE_FIELDS if f in built.features),
        ],
        # every unit alone in its passage and document: `document` would repeat `contents`
        "document_is_contents": not built.documents,
        "analyzer": "DefaultEnglishAnalyzer (Porter stemmer, Lucene English stopwords)",
        "stored": ["positions", "contents", "raw", *(["docvectors"] if built.docvectors else [])],
        "entities": ner.spacy_version(spacy_model) if entities else None,
    }
    versions = _versions()
    index_id = hashlib.sha256(
        json.dumps(
            {
                "corpus_sha256": corpus_sha,
                "settings": settings,
                "anserini": versions["anserini"],
            },
            sort_keys=True,
        ).encode()
    ).hexdigest()
    manifest = {
        "format": FORMAT,
        "index_id": index_id,
        "corpus": str(corpus_path(coll).name),
        "corpus_sha256": corpus_sha,
        "n_units": built.n_units,
        "settings": settings,
        "ner": built.ner,
        "versions": versions,
        **extra,
    }
    (index_dir / MANIFEST).write_text(
        json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    _write_docnos(index_dir, index_id, verbose=verbose)
    return manifest


def build_index(
    collection: str | Path,
    *,
    threads: int = 2,
    entities: bool = True,
    spacy_model: str = DEFAULT_SPACY_MODEL,
    force: bool = False,
    verbose: bool = False,
    progress: bool = True,
    docvectors: bool = False,
) -> IndexInfo:
    """Index a collection's corpus into ``COLLECTION/index/`` and return the index
    (``docvectors``: store term vectors too, see the module's header)."""
    coll, target, kept = existing_index(
        collection, force=force, entities=entities, spacy_model=spacy_model, docvectors=docvectors
    )
    if kept is not None:
        return kept
    if not 1 <= threads <= MAX_THREADS:
        raise CmrkitError(f"--threads must lie in 1..{MAX_THREADS}, got {threads}")
    started = time.perf_counter()
    corpus_sha = sha256_file(corpus_path(coll))
    with StagedOutputs([target], force=True, anchor=coll, kinds={target: "index"}) as staged:
        staged_index = staged.path(target)
        built = index_corpus(
            coll,
            staged_index,
            staged.tmp,
            target=target,
            threads=threads,
            entities=entities,
            spacy_model=spacy_model,
            verbose=verbose,
            progress=progress,
            docvectors=docvectors,
        )
        built.seconds["total"] = round(time.perf_counter() - started, 3)
        manifest = finish_index(
            staged_index,
            coll,
            corpus_sha,
            built,
            entities=entities,
            spacy_model=spacy_model,
            verbose=verbose,
            extra={"threads": threads, "seconds": built.seconds},
        )
        signal_points.reached("manifest")
    return IndexInfo(coll, target, manifest)


def _write_docnos(index_dir: Path, index_id: str, *, verbose: bool) -> None:
    """Store the doc-number table beside a freshly built index (see docnos.py)."""
    from cmrkit.retrieval.docnos import write_table
    from cmrkit.retrieval.helper import CLASS
    from cmrkit.retrieval.java import jclass, quiet

    with quiet(index_dir.parent / "lucene.log", verbose=verbose):
        helper = jclass(CLASS)(
            str(index_dir.resolve()),
            jclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance(),
            0.9,
            0.4,
            1,
        )
        try:
            write_table(index_dir, index_id, helper)
        finally:
            helper.close()


@contextlib.contextmanager
def opening(info: IndexInfo) -> Iterator[None]:
    """A block that opens the files of the index ``info`` describes: no rebuild swaps the index
    meanwhile, and an index rebuilt since ``info`` was read is refused (never a mix of two)."""
    with reading(info.path):
        manifest = _read_manifest(info.path)
        if manifest is None or manifest.get("index_id") != info.index_id:
            raise CmrkitError(
                "the index was rebuilt while this command ran; run the command again",
                path=info.path,
            )
        yield


def _read_manifest(target: Path) -> dict[str, Any] | None:
    return stored.read_manifest(target / MANIFEST, FORMAT)


def existing_index(
    collection: str | Path, *, force: bool, entities: bool, spacy_model: str, docvectors: bool
) -> tuple[Path, Path, IndexInfo | None]:
    """(collection folder, index folder, the index there when it is current and has the
    settings asked for); None without ``force`` when there is none, and always with it. An index
    there with other settings is an error (see :func:`kept_index`)."""
    coll = collection_dir(collection)
    target = index_path(coll)
    if force or not target.exists():
        return coll, target, None
    kept = kept_index(
        coll, target, entities=entities, spacy_model=spacy_model, docvectors=docvectors
    )
    return coll, target, kept


def kept_index(
    coll: Path, target: Path, *, entities: bool, spacy_model: str, docvectors: bool = False
) -> IndexInfo | None:
    """The existing index when it is current and has the settings asked for; an error when it
    conflicts (other corpus, other settings, not cmrkit's). An index that stores term vectors
    serves a request without them (earlier cmrkit versions always stored them)."""
    manifest = _read_manifest(target)
    name = coll.as_posix()
    if manifest is None:
        raise CmrkitError(
            f"exists but is not an index built by cmrkit (no readable {MANIFEST}); move it "
            f"away, or pass --force to replace it",
            path=target,
        )
    if manifest.get("corpus_sha256") != corpus_sha256(coll):
        raise CmrkitError(
            f"an index built from another corpus exists; rebuild it with "
            f"`cmrkit index {name} --force`",
            path=target,
        )
    built = manifest.get("settings", {}).get("entities")
    if bool(built) != entities or (entities and built.get("model") != spacy_model):
        had = f"entities from {built.get('model')}" if built else "no entities"
        raise CmrkitError(
            f"an index with other settings exists ({had}); pass --force to rebuild it",
            path=target,
        )
    if docvectors and "docvectors" not in manifest.get("settings", {}).get("stored", []):
        raise CmrkitError(
            "an index without term vectors exists; pass --force to rebuild it with them",
            path=target,
        )
    return IndexInfo(coll, target, manifest, up_to_date=True)


def index_state(collection: str | Path) -> str:
    """``missing``, ``foreign`` (not built by cmrkit), ``stale`` (another corpus) or ``current``."""
    coll = collection_dir(collection)
    return stored.state(coll, index_path(coll), MANIFEST, FORMAT)


def ensure_index(
    collection: str | Path,
    *,
    auto: bool = True,
    threads: int = 2,
    spacy_model: str = DEFAULT_SPACY_MODEL,
    verbose: bool = False,
    progress: bool = True,
    build: Callable[..., IndexInfo] | None = None,
) -> IndexInfo:
    """The collection's current index; with ``auto``, a missing or stale one is built first
    with the index defaults (saying so in one line on stderr), by :func:`build_index` or by
    ``build`` (another engine's, called with the keywords other than ``threads``)."""
    state = index_state(collection)
    if state in ("current", "foreign") or not auto:
        return open_index(collection)
    from cmrkit.console import console

    coll = collection_dir(collection)
    why = "has no index" if state == "missing" else "has a stale index (the corpus changed)"
    console.print(
        f"{coll.as_posix()} {why}: building it first with the index defaults "
        f"(`cmrkit index {coll.as_posix()}`)",
        soft_wrap=True,
        markup=False,
    )
    common = {"spacy_model": spacy_model, "force": state == "stale", "verbose": verbose}
    if build is not None:
        return build(coll, progress=progress, **common)
    return build_index(coll, threads=threads, progress=progress, **common)


def open_index(collection: str | Path) -> IndexInfo:
    """The collection's index, after checking that it was built from the current corpus.

    Read while no ``cmrkit index --force`` swaps it (see :func:`cmrkit.fileio.reading`)."""
    coll = collection_dir(collection)
    with reading(index_path(coll)):
        return _open_index(coll)


def _open_index(coll: Path) -> IndexInfo:
    target = index_path(coll)
    name = coll.as_posix()
    if not target.exists():
        raise CmrkitError(
            f"the collection has no index; build it with `cmrkit index {name}`", path=target
        )
    manifest = _read_manifest(target)
    if manifest is None:
        raise CmrkitError(
            f"not an index built by cmrkit (no readable {MANIFEST}); rebuild it "
            f"with `cmrkit index {name} --force`",
            path=target,
        )
    actual = corpus_sha256(coll)
    if manifest.get("corpus_sha256") != actual:
        raise CmrkitError(
            f"stale index: built from a corpus with sha256 "
            f"{str(manifest.get('corpus_sha256'))[:12]}..., but {corpus_path(coll).name} "
            f"now has sha256 {actual[:12]}...; rebuild it with "
            f"`cmrkit index {name} --force`",
            path=target,
        )
    return IndexInfo(coll, target, manifest)
