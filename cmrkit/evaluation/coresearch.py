"""CoreSearch's own evaluation conventions (github AlonEirew/CoreSearch, src/utils/measurments.py),
so that cmrkit's numbers can sit next to the CoreSearch paper's table.

How they differ from trec_eval's:

- the query's own passage (the document whose docno is the query id) is dropped from its
  ranking before the cut-off: CoreSearch queries are passages of the collection;
- ``R@k`` is micro-averaged: relevant documents found in the top k of every query, divided by
  the relevant documents of every query (trec_eval's ``recall_k`` is the mean of per-query
  recalls);
- ``MRR@k`` and ``mAP@k`` are averaged over the queries of the run (trec_eval: the queries in
  both the run and the qrels); ``mAP@k`` divides by all relevant documents, as trec_eval's
  ``map_cut_k`` does; a ranking shorter than k is taken whole.

Rankings are trec_eval's (score descending, ties by docno descending); relevant means a grade
of 1 or more.
"""

from __future__ import annotations

from collections.abc import Mapping

from cmrkit.errors import CmrkitError

COLUMNS = ("MRR@10", "mAP@10", "mAP@50", "R@10", "R@50", "R@100", "R@500")


def _rankings(run: Mapping[str, Mapping[str, float]]) -> dict[str, list[str]]:
    out = {}
    for qid, docs in run.items():
        order = sorted(docs.items(), key=lambda d: (d[1], d[0]), reverse=True)
        out[qid] = [d for d, _ in order if d != qid]  # the query's own passage dropped
    return out


def evaluate(
    run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, object]:
    """The paper's columns: {"measures": {name: value}, "queries": n, ...}."""
    rankings = _rankings(run)
    golds = {q: {d for d, g in docs.items() if g >= 1 and d != q} for q, docs in qrels.items()}
    queries = [q for q in rankings if q in golds and golds[q]]
    if not queries:
        raise CmrkitError(
            "no run query has relevant documents in the qrels; check that the files belong together"
        )
    values: dict[str, float] = {}
    for name in COLUMNS:
        kind, k = name.split("@")
        k = int(k)
        if kind == "MRR":
            total = 0.0
            for q in queries:
                for i, d in enumerate(rankings[q][:k]):
                    if d in golds[q]:
                        total += 1 / (i + 1)
                        break
            values[name] = total / len(queries)
        elif kind == "mAP":
            total = 0.0
            for q in queries:
                found, s = 0, 0.0
                for i, d in enumerate(rankings[q][:k]):
                    if d in golds[q]:
                        found += 1
                        s += found / (i + 1)
                total += s / len(golds[q])
            values[name] = total / len(queries)
        else:
            hits = sum(sum(1 for d in rankings[q][:k] if d in golds[q]) for q in queries)
            values[name] = hits / sum(len(golds[q]) for q in queries)
    skipped = sorted(set(rankings) - set(queries))
    return {
        "convention": "coresearch",
        "measures": values,
        "queries": len(queries),
        "skipped_queries": skipped,
        "relevant": sum(len(golds[q]) for q in queries),
    }
