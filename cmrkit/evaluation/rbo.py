"""Rank-biased overlap (Webber, Moffat & Zobel, TOIS 2010) in the two versions cmrkit reports,
and the one place each is computed.

- :func:`rbo_extrapolated`: two full rankings of the same items (the systems ranked by their
  scores under two qrels: ``agree``, ``pool plan``, ``judgments check``), extrapolated (their
  eq. 32, exact here: both rankings hold every item), persistence :data:`EXTRAPOLATED_P` (0.9);
  tied items are ranked in the order given (the ``rbo`` package's numbers).
- :func:`rbo_normalised`: two rankings of documents cut at a depth (a run and its reproduction,
  ``repro``), as repro_eval computes it after Clarke et al. (TOIS 2021): the weighted overlaps
  of the prefixes summed to the depth and divided by the weights' sum, persistence
  :data:`NORMALISED_P` (0.95), repro_eval's numbers to the last bit; prefixes longer than a
  ranking hold the whole ranking, so two equal rankings shorter than the depth score below 1.

:class:`RankingPairs` numbers the documents of many pairs of rankings at once; repro's KTU
reads the same numbering.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

EXTRAPOLATED_P = 0.9  # agree's --rbo-p
NORMALISED_P = 0.95  # repro_eval's RBO_P, repro's --rbo-p
NORMALISED_DEPTH = 1000  # repro_eval's RBO_DEPTH (its run length)


# ----------------------------------------------------------------------------- extrapolated


def positions(scores):
    """Each item's 0-based position when sorted by score, highest first, ties in the order
    given (``scores``: rows x items)."""
    import numpy as np

    order = np.argsort(-scores, axis=1, kind="stable")
    out = np.empty_like(order)
    np.put_along_axis(out, order, np.arange(scores.shape[1])[None, :], axis=1)
    return out


def rbo_extrapolated(ref, oth, p: float = EXTRAPOLATED_P):
    """Extrapolated RBO of two full rankings of the same items, per row: ``ref`` and ``oth``
    are rows x items score matrices (higher ranks first)."""
    import numpy as np

    rows, n = ref.shape
    both = np.maximum(positions(ref), positions(oth))  # depth - 1 from which both hold it
    depth = np.arange(n)
    overlap = (both[:, :, None] <= depth[None, None, :]).sum(axis=1)  # X_d for d = 1..n
    agreement = overlap / (depth + 1.0)
    weights = (1 - p) * p**depth
    return (agreement * weights).sum(axis=1) + p**n


# ----------------------------------------------------------------------------- normalised


def starts_of(lens):
    """Where each of rankings of lengths ``lens``, laid one after another, starts (and the
    end)."""
    import numpy as np

    starts = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=starts[1:])
    return starts


def rows_of(lens):
    """Each element's ranking and its rank (from 0) in rankings of lengths ``lens``, laid one
    after another."""
    import numpy as np

    rows = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    return rows, np.arange(len(rows), dtype=np.int64) - np.repeat(starts_of(lens)[:-1], lens)


@dataclass(frozen=True)
class RankingPairs:
    """Pairs of rankings with their documents numbered in docno order over all of them: side
    ``a`` (the originals) and ``b``, each one int64 array of numbers, ranking after ranking,
    with each ranking's length (``alens``, ``blens``) and its rows' ranking (``arows``,
    ``brows``) and rank (``apos``, ``bpos``, from 0); ``size`` numbers in all."""

    a: object
    alens: object
    arows: object
    apos: object
    b: object
    blens: object
    brows: object
    bpos: object
    size: int

    @classmethod
    def of(cls, originals: Sequence[Sequence[str]], reproduceds: Sequence[Sequence[str]]):
        import itertools

        import numpy as np

        both = list(itertools.chain(originals, reproduceds))
        vocabulary = sorted(set(itertools.chain.from_iterable(both)))
        number = {docno: i for i, docno in enumerate(vocabulary)}
        lens = np.asarray([len(r) for r in both], dtype=np.int64)
        ids = np.fromiter(
            map(number.__getitem__, itertools.chain.from_iterable(both)),
            dtype=np.int64,
            count=int(lens.sum()),
        )
        q = len(originals)
        split = int(lens[:q].sum())
        alens, blens = lens[:q], lens[q:]
        return cls(
            ids[:split], alens, *rows_of(alens), ids[split:], blens, *rows_of(blens),
            max(len(vocabulary), 1),
        )  # fmt: skip


def normalised_weights(p: float = NORMALISED_P, depth: int = NORMALISED_DEPTH):
    """The normalised RBO's weights p^i for ranks 1..depth (as repro_eval multiplies them out)
    and their sum."""
    import numpy as np

    weights = np.cumprod(np.concatenate(([1.0], np.full(depth - 1, p))))
    return weights, float(np.cumsum(weights)[-1])


def rbo_normalised_pairs(
    pairs: RankingPairs, p: float = NORMALISED_P, depth: int = NORMALISED_DEPTH, chunk: int = 2000
) -> list[float]:
    """:func:`rbo_normalised` of every pair of rankings at once: a document both rankings hold
    (in their first ``depth``) joins the overlap at the later of its two ranks; each pair's
    terms summed rank by rank, as repro_eval's loop adds them."""
    import numpy as np

    weights, normaliser = normalised_weights(p, depth)
    _, ia, ib = np.intersect1d(
        pairs.arows * pairs.size + pairs.a, pairs.brows * pairs.size + pairs.b,
        return_indices=True,
    )  # fmt: skip
    joins = np.maximum(pairs.apos[ia], pairs.bpos[ib])
    rows = pairs.arows[ia][joins < depth]
    joins = joins[joins < depth]
    ranks = np.arange(1, depth + 1)
    q = len(pairs.alens)
    out = []
    for first in range(0, q, chunk):
        size = min(chunk, q - first)
        mine = (rows >= first) & (rows < first + size)
        flat = (rows[mine] - first) * depth + joins[mine]
        counts = np.bincount(flat, minlength=size * depth).reshape(size, depth)
        terms = weights * np.cumsum(counts, axis=1).astype(np.float64) / ranks
        out.extend((np.cumsum(terms, axis=1)[:, -1] / normaliser).tolist())
    return out


def rbo_normalised(
    original: Sequence[str],
    reproduced: Sequence[str],
    p: float = NORMALISED_P,
    depth: int = NORMALISED_DEPTH,
) -> float:
    """Rank-biased overlap of two rankings (docnos, best first) to ``depth``, normalised by the
    weights' sum, as repro_eval computes it: the sum over ranks i of p^(i-1) times the overlap
    of the two prefixes of length i over i, divided by the sum of p^(i-1)."""
    return rbo_normalised_pairs(RankingPairs.of([original], [reproduced]), p, depth)[0]
