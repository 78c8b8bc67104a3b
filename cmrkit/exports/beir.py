"""A collection in the BEIR layout, as BEIR's ``GenericDataLoader`` reads it.

``OUT/corpus.jsonl``: ``{"_id", "title", "text", "metadata"}`` per unit (``metadata``: the
unit's other fields, among them ``mentions``, the annotated mention spans in ``text``);
``OUT/queries.jsonl``: ``{"_id", "text", "metadata"}`` per query of every exported split
(``text``: the mention, as in ``topics.SPLIT.tsv``; ``metadata``: the topic record, among
them ``context``, the query's own unit text, and ``span``, the mention in it);
``OUT/qrels/SPLIT.tsv``: the header ``query-id<TAB>corpus-id<TAB>score``, then one line per
judgment of the split's qrels, grades as they are (0 and -1 included).

BEIR's loader keeps only ``_id``, ``title`` and ``text``; the metadata is there for readers of
the files. The query's own unit is in the corpus: drop ``metadata.unit`` from each query's
results before scoring, as ``cmrkit run`` does (its id differs from the query id, so BEIR's
``ignore_identical_ids`` does not remove it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cmrkit.collection.layout import (
    collection_dir,
    corpus_path,
    qrels_file,
    qrels_path,
    split_order,
    topic_records,
)
from cmrkit.errors import CmrkitError
from cmrkit.fileio import RepeatableOutputs, iter_jsonl
from cmrkit.trec import read_qrels

QUERIES = "queries.jsonl"  # its file every BEIR export holds (fileio.KINDS recognises one by it)
QRELS_HEADER = "query-id\tcorpus-id\tscore"


@dataclass
class BeirExport:
    """What was written: the folder and the number of lines of each file."""

    out_dir: Path
    corpus: int
    queries: int
    qrels: dict[str, int] = field(default_factory=dict)
    up_to_date: bool = False  # the folder already held exactly this export


def _line(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False) + "\n"


def _check_id(value: str, what: str, path: object, where: str) -> None:
    if not value or any(c.isspace() for c in value):
        raise CmrkitError(
            f"{what} {value!r} is empty or holds whitespace, which the BEIR qrels cannot carry",
            path=path,
            where=where,
        )


def export_beir(
    collection: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    splits: Sequence[str] | None = None,
    qrels_dir: str | os.PathLike | None = None,
    force: bool = False,
) -> BeirExport:
    """Write ``out_dir`` in the BEIR layout from a collection and its qrels; all or nothing.
    A folder already holding exactly this export is up to date; another is kept unless
    ``force``."""
    coll = collection_dir(collection)
    topics = topic_records(coll)
    present = split_order({t["split"] for t in topics})
    chosen = list(splits) if splits else present
    for s in chosen:
        if s not in present:
            raise CmrkitError(
                f"no split {s!r} in the collection (splits: {', '.join(present)})", path=coll
            )
    qrels_paths = {}
    for s in chosen:
        path = qrels_file(coll, s, qrels_dir)
        if path is None:
            raise CmrkitError(
                f"no qrels for split {s!r}: expected {qrels_path(coll, s, qrels_dir)}; "
                "give the folder with --qrels-dir",
                path=coll,
            )
        qrels_paths[s] = path
    out = Path(out_dir)
    report = BeirExport(out, 0, 0)
    with RepeatableOutputs([out], force=force, kinds={out: "beir"}) as staged:
        root = staged.path(out)
        (root / "qrels").mkdir(parents=True)
        corpus = corpus_path(coll)
        with open(root / "corpus.jsonl", "w", encoding="utf-8", newline="\n") as f:
            for n, rec in iter_jsonl(corpus, what="one unit object per line"):
                docno, text = rec.get("id"), rec.get("contents")
                if not isinstance(docno, str) or not isinstance(text, str):
                    raise CmrkitError(
                        "fields 'id' and 'contents' must be strings",
                        path=corpus,
                        where=f"line {n}",
                    )
                _check_id(docno, "unit id", corpus, f"line {n}")
                meta = {k: v for k, v in rec.items() if k not in ("id", "contents", "title")}
                title = rec.get("title")
                f.write(
                    _line(
                        {
                            "_id": docno,
                            "title": title if isinstance(title, str) else "",
                            "text": text,
                            "metadata": meta,
                        }
                    )
                )
                report.corpus += 1
        if not report.corpus:
            raise CmrkitError(
                "the corpus holds no units: a BEIR export of it would be queries without "
                "documents; rebuild the collection",
                path=corpus,
            )
        wanted = set(chosen)
        with open(root / QUERIES, "w", encoding="utf-8", newline="\n") as f:
            for t in topics:
                if t["split"] not in wanted:
                    continue
                meta = {k: v for k, v in t.items() if k not in ("qid", "mention")}
                f.write(_line({"_id": t["qid"], "text": t.get("mention", ""), "metadata": meta}))
                report.queries += 1
        for s in chosen:
            lines = [QRELS_HEADER]
            for qid, docs in read_qrels(qrels_paths[s]).items():
                for docno, rel in docs.items():
                    lines.append(f"{qid}\t{docno}\t{rel}")
            (root / "qrels" / f"{s}.tsv").write_text(
                "\n".join(lines) + "\n", encoding="utf-8", newline="\n"
            )
            report.qrels[s] = len(lines) - 1
    report.up_to_date = staged.up_to_date
    return report
