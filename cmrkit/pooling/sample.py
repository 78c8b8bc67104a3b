"""Sample qrels from a judged pool: the judged pairs with their strata and inclusion
probabilities, for xinfAP and infNDCG (TREC's sample_eval.pl)."""

from __future__ import annotations

from cmrkit.errors import CmrkitError
from cmrkit.pooling.pool import Pool, PoolPair
from cmrkit.trec import Qrels, Strata

KNOWN_STRATUM = "known"


def sample_qrels(pool: Pool, qrels: Qrels) -> tuple[Qrels, Strata]:
    """sample_eval's qrels (every pooled document with its stratum) from a stratified pool and
    the qrels of its judgments: a pair not sampled, or sampled and not judged, is -1; judged
    pairs outside the pool (the annotations left out of it) form the stratum ``known``."""
    rec = pool.header.get("strategy") or {}
    name = rec.get("name", "depth")
    complete = name == "depth" and rec.get("budget") is None and not pool.header.get("sample")
    if name != "strata" and not complete:
        how = "--sample" if pool.header.get("sample") else f"strategy {name!r}"
        raise CmrkitError(
            f"xinfAP needs a stratified random sample with known inclusion probabilities; this "
            f"pool was made with {how}: pool with --strategy strata (or judge the whole pool)"
        )
    end = max((p.best_rank for p in pool.pairs), default=0)
    by_query: dict[str, list[PoolPair]] = {}
    for p in pool.pairs:
        by_query.setdefault(p.qid, []).append(p)
    out: Qrels = {}
    strata: Strata = {}
    for qid, judged in qrels.items():
        docs: dict[str, int] = {}
        where: dict[str, str] = {}
        for p in by_query.get(qid, []):
            rel = judged.get(p.docno, -1) if p.sampled else -1
            docs[p.docno] = rel
            if name == "strata" and p.stratum is None:
                raise CmrkitError(
                    f"pair {qid} {p.docno} of a strata pool has no stratum; make the pool "
                    "again with `cmrkit pool create --strategy strata`"
                )
            where[p.docno] = p.stratum if name == "strata" else f"1-{end}"
        for docno, rel in judged.items():
            if docno not in docs:
                docs[docno] = rel
                where[docno] = KNOWN_STRATUM
        if docs:
            out[qid] = docs
            strata[qid] = where
    if not set(out) & set(pool.queries):
        if not qrels:
            raise CmrkitError(
                "the qrels hold no judgment (nothing judged yet, or the aggregation kept no "
                "query): sample_eval's qrels need the pool's judgments"
            )
        if name != "strata":
            raise CmrkitError(
                f"this is a {name} pool, not a strata pool, and the qrels judge none of its "
                "queries: sample_eval's qrels come from the judgments of a strata pool "
                "(`cmrkit pool create --strategy strata`)"
            )
        raise CmrkitError("the qrels judge none of the pool's queries; are they from another pool?")
    return out, strata
