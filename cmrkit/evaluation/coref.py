"""Coreference measures with the CoNLL-2012 reference scorer's numbers (v8.01: MUC, B3, CEAF-m,
CEAF-e, BLANC, mention identification), LEA as coval computes it, the CoNLL F1, and ARI/NMI.

The reference scorer's handling of predicted mentions is followed exactly (``docs/coreference.md``):
a response mention repeating one already seen is dropped (the first kept, in the scorer's chain
order) and more than 10 repeats refuse the response; a repeated mention that is not in the key is
kept, as the scorer keeps it; response mentions missing from the key count as the scorer counts
them; each document is scored on its own and the counts are summed. LEA reads the chains as
written (coval applies no de-duplication). Everything is computed from the definitions on numpy
arrays for all documents at once; CEAF's optimal alignment is solved per connected component
of the key/response overlap graph with scipy's ``linear_sum_assignment``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from cmrkit.collection.clusters import ID, Clustering, Document
from cmrkit.errors import CmrkitError
from cmrkit.evaluation.partitions import agreement_by_group

MEASURES = ("mentions", "muc", "bcub", "ceafm", "ceafe", "blanc", "lea", "conll", "ari", "nmi")
DEFAULT_MEASURES = MEASURES
LABELS = {
    "mentions": "mentions",
    "muc": "MUC",
    "bcub": "B3",
    "ceafm": "CEAF-m",
    "ceafe": "CEAF-e",
    "blanc": "BLANC",
    "lea": "LEA",
    "conll": "CoNLL",
    "ari": "ARI",
    "nmi": "NMI",
}
_ALIASES = {
    "b3": "bcub",
    "bcubed": "bcub",
    "b-cubed": "bcub",
    "ceaf-m": "ceafm",
    "ceaf-e": "ceafe",
    "ceaf": "ceafe",
    "mention": "mentions",
    "identification": "mentions",
    "conll-f1": "conll",
    "conll_f1": "conll",
    "avg": "conll",
}
SCOPES = ("document", "corpus")
SINGLETONS = ("keep", "remove")
MAX_REPEATS = 10  # the reference scorer refuses a response repeating more mentions


@dataclass(frozen=True)
class Counts:
    """Recall and precision as numerator / denominator, as the reference scorer returns them."""

    recall_num: float
    recall_den: float
    precision_num: float
    precision_den: float

    @property
    def recall(self) -> float:
        return self.recall_num / self.recall_den if self.recall_den else 0.0

    @property
    def precision(self) -> float:
        return self.precision_num / self.precision_den if self.precision_den else 0.0

    @property
    def f1(self) -> float:
        r, p = self.recall, self.precision
        return 2 * p * r / (p + r) if p + r else 0.0

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.recall_num + other.recall_num,
            self.recall_den + other.recall_den,
            self.precision_num + other.precision_num,
            self.precision_den + other.precision_den,
        )


@dataclass(frozen=True)
class Blanc:
    """BLANC from its coreference-link and non-coreference-link counts (the scorer's TOTALS)."""

    coref: Counts
    noncoref: Counts

    def _rpf(self) -> tuple[float, float, float]:
        c, n = self.coref, self.noncoref
        ra = c.recall_num / c.recall_den if c.recall_den else -1.0
        rr = n.recall_num / n.recall_den if n.recall_den else -1.0
        pa = c.precision_num / c.precision_den if c.precision_den else 0.0
        pr = n.precision_num / n.precision_den if n.precision_den else 0.0
        fa = 2 * pa * ra / (pa + ra) if pa + ra else 0.0
        fr = 2 * pr * rr / (pr + rr) if pr + rr else 0.0
        if ra == -1 and rr == -1:
            return 0.0, 0.0, 0.0
        if ra == -1:
            return rr, pr, fr
        if rr == -1:
            return ra, pa, fa
        return (ra + rr) / 2, (pa + pr) / 2, (fa + fr) / 2

    @property
    def recall(self) -> float:
        return self._rpf()[0]

    @property
    def precision(self) -> float:
        return self._rpf()[1]

    @property
    def f1(self) -> float:
        return self._rpf()[2]

    def __add__(self, other: Blanc) -> Blanc:
        return Blanc(self.coref + other.coref, self.noncoref + other.noncoref)


Score = Counts | Blanc | float


@dataclass
class CorefResult:
    """Scores per measure, over all documents (counts summed) and per document."""

    measures: list[str]
    total: dict[str, Score]
    per_document: dict[str, dict[str, Score]]
    scope: str
    singletons: str
    notes: list[str] = field(default_factory=list)

    @property
    def documents(self) -> int:
        return len(self.per_document)


def parse_coref_measures(texts: Sequence[str] | None) -> list[str]:
    """Measure names in the order given (comma lists allowed), duplicates dropped."""
    if not texts:
        return list(DEFAULT_MEASURES)
    out: list[str] = []
    for text in texts:
        for part in text.split(","):
            name = part.strip().lower()
            if not name:
                continue
            name = _ALIASES.get(name, name)
            if name not in MEASURES:
                raise CmrkitError(
                    f"unknown coreference measure {part.strip()!r}; valid: {', '.join(MEASURES)} "
                    "(b3 = bcub)"
                )
            if name not in out:
                out.append(name)
    if not out:
        raise CmrkitError(f"no measure given; valid: {', '.join(MEASURES)}")
    return out


def perl_percent(value: float) -> str:
    """A fraction as the reference scorer prints it: a percentage truncated to 2 decimals."""
    return f"{math.trunc(value * 10000) / 100:.2f}"


# ---------------------------------------------------------------------------------------------
# documents to score: scope and singletons


def _merged(clustering: Clustering, names: list[str]) -> Document:
    """The listed documents as one (cross-document scoring): spans keep their document."""
    merged = Document("")
    for name in names:
        doc = clustering.documents[name]
        for ident, chain, line in zip(doc.ids, doc.chains, doc.lines, strict=True):
            label = doc.names[chain]
            if not clustering.global_chains:
                label = f"{name}\0{label}"
            if clustering.identity != ID:
                ident = (name, ident)
            merged.add(ident, merged.chain(label), line)
    return merged


def _without_singletons(doc: Document) -> tuple[Document, int]:
    sizes = Counter(doc.chains)
    kept = Document(doc.name)
    for ident, chain, line in zip(doc.ids, doc.chains, doc.lines, strict=True):
        if sizes[chain] > 1:
            kept.add(ident, kept.chain(doc.names[chain]), line)
    return kept, sum(1 for s in sizes.values() if s == 1)


def _documents(
    key: Clustering, response: Clustering, scope: str, singletons: str, notes: list[str]
) -> list[tuple[str, Document, Document | None]]:
    if key.identity != response.identity:
        raise CmrkitError(
            f"the key identifies mentions by {key.identity} ({key.path}) but the response by "
            f"{response.identity} ({response.path}); write both with mention ids or both with "
            "token spans"
        )
    extra = [name for name in response.documents if name not in key.documents]
    if extra:
        notes.append(
            f"{len(extra)} response document(s) not in the key, ignored as the reference "
            f"scorer does (first: {extra[0]!r})"
        )
    missing = [name for name in key.documents if name not in response.documents]
    if missing:
        notes.append(
            f"{len(missing)} key document(s) missing from the response, scored as empty "
            f"(first: {missing[0]!r})"
        )
    if scope == "corpus" and len(key.documents) > 1:
        names = list(key.documents)
        pairs: list[tuple[str, Document, Document | None]] = [
            (
                "(corpus)",
                _merged(key, names),
                _merged(response, [n for n in names if n in response.documents]),
            )
        ]
    else:
        pairs = [(n, d, response.documents.get(n)) for n, d in key.documents.items()]
    if singletons == "remove":
        dropped_key = dropped_response = 0
        kept: list[tuple[str, Document, Document | None]] = []
        for name, kdoc, rdoc in pairs:
            kdoc, k = _without_singletons(kdoc)
            dropped_key += k
            if rdoc is not None:
                rdoc, r = _without_singletons(rdoc)
                dropped_response += r
            kept.append((name, kdoc, rdoc))
        pairs = kept
        notes.append(
            f"singletons removed: {dropped_key} from the key, {dropped_response} from the response"
        )
    return pairs


# ---------------------------------------------------------------------------------------------
# the arrays every measure reads


@dataclass
class _Arrays:
    """Key and response of all documents as flat arrays; chains are numbered globally, each
    belonging to one document (``*_doc``), in the reference scorer's order."""

    docs: int
    k_doc: np.ndarray  # per key mention
    k_chain: np.ndarray
    kc_doc: np.ndarray  # per key chain
    kc_size: np.ndarray
    # the response as written (LEA): positions in reading order
    p_doc: np.ndarray
    p_chain: np.ndarray
    p_key: np.ndarray  # the key mention it is, or -1
    p_twin: np.ndarray  # for a mention not in the key: its identity number, else -1
    pc_doc: np.ndarray
    pc_size: np.ndarray
    pc_first: np.ndarray  # position of the chain's first mention (coval's chain order)
    # the response as the reference scorer scores it: repeats dropped, empty chains removed
    r_doc: np.ndarray
    r_chain: np.ndarray
    r_key: np.ndarray
    r_twin: np.ndarray
    rc_doc: np.ndarray
    rc_size: np.ndarray
    repeats: int


def _arrays(
    key: Clustering, response: Clustering, pairs: list[tuple[str, Document, Document | None]]
) -> _Arrays:
    f = _flatten(key, pairs)
    i64 = np.int64
    ka = np.asarray(f.k_chain, dtype=i64)
    pa = np.asarray(f.p_chain, dtype=i64)
    pk = np.asarray(f.p_key, dtype=i64)
    kc_size = np.bincount(ka, minlength=len(f.kc_doc))
    pc_size = np.bincount(pa, minlength=len(f.pc_doc))
    positions = np.arange(len(pa))
    pc_first = np.full(len(f.pc_doc), len(pa), dtype=i64)
    np.minimum.at(pc_first, pa, positions)
    keep, order, repeats = _first_of_each(pa, pk)
    if repeats > MAX_REPEATS:
        _refuse_repeats(response, pairs, f, order, pk, repeats)
    pd = np.asarray(f.p_doc, dtype=i64)
    ptw = np.asarray(f.p_twin, dtype=i64)
    r_chain_old = pa[keep]
    live, r_chain = np.unique(r_chain_old, return_inverse=True)
    pcd = np.asarray(f.pc_doc, dtype=i64)
    return _Arrays(
        docs=len(pairs),
        k_doc=np.asarray(f.k_doc, dtype=i64),
        k_chain=ka,
        kc_doc=np.asarray(f.kc_doc, dtype=i64),
        kc_size=kc_size,
        p_doc=pd,
        p_chain=pa,
        p_key=pk,
        p_twin=ptw,
        pc_doc=pcd,
        pc_size=pc_size,
        pc_first=pc_first,
        r_doc=pd[keep],
        r_chain=r_chain.astype(i64),
        r_key=pk[keep],
        r_twin=ptw[keep],
        rc_doc=pcd[live],
        rc_size=np.bincount(r_chain, minlength=len(live)),
        repeats=repeats,
    )


@dataclass
class _Flat:
    """Key and response of all documents as flat lists (see :class:`_Arrays`), and the first
    response position of each document."""

    k_doc: list[int] = field(default_factory=list)
    k_chain: list[int] = field(default_factory=list)
    kc_doc: list[int] = field(default_factory=list)
    p_doc: list[int] = field(default_factory=list)
    p_chain: list[int] = field(default_factory=list)
    p_key: list[int] = field(default_factory=list)
    p_twin: list[int] = field(default_factory=list)
    pc_doc: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)


def _flatten(key: Clustering, pairs: list[tuple[str, Document, Document | None]]) -> _Flat:
    """Number the chains globally and match each response mention to its key mention (or to
    an identity number shared by its repeats); a mention twice in the key is refused."""
    f = _Flat()
    kbase = twins = 0
    for d, (_, kdoc, rdoc) in enumerate(pairs):
        index: dict[Hashable, int] = {}
        for i, ident in enumerate(kdoc.ids):
            if ident in index:
                j = index[ident] - kbase
                raise CmrkitError(
                    f"the key holds this mention twice (also {key.where(kdoc.lines[j])}); "
                    "a key mention belongs to one chain",
                    path=key.path,
                    where=key.where(kdoc.lines[i]),
                )
            index[ident] = kbase + i
        nk = len(kdoc.ids)
        f.k_doc.extend([d] * nk)
        f.k_chain.extend(c + len(f.kc_doc) for c in kdoc.chains)
        f.kc_doc.extend([d] * len(kdoc.names))
        kbase += nk
        f.starts.append(len(f.p_key))
        if rdoc is None:
            continue
        twin_ids: dict[Hashable, int] = {}
        for ident in rdoc.ids:
            k = index.get(ident, -1)
            f.p_key.append(k)
            if k < 0:
                t = twin_ids.get(ident)
                if t is None:
                    t = twin_ids[ident] = twins
                    twins += 1
                f.p_twin.append(t)
            else:
                f.p_twin.append(-1)
        f.p_doc.extend([d] * len(rdoc.ids))
        f.p_chain.extend(c + len(f.pc_doc) for c in rdoc.chains)
        f.pc_doc.extend([d] * len(rdoc.names))
    return f


def _first_of_each(pa: np.ndarray, pk: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Which response positions the reference scorer keeps: it walks chains in order, mentions
    in order, keeping the first of a key mention; repeats of a mention missing from the key go
    unnoticed and stay. Also the matched positions in that walk's order, and the repeats."""
    keep = np.ones(len(pa), dtype=bool)
    matched = np.flatnonzero(pk >= 0)
    order = matched[np.lexsort((matched, pa[matched]))]
    ks = pk[order]
    by_key = order[np.argsort(ks, kind="stable")]
    sorted_keys = pk[by_key]
    again = np.zeros(len(by_key), dtype=bool)
    again[1:] = sorted_keys[1:] == sorted_keys[:-1]
    keep[by_key[again]] = False
    return keep, order, int(again.sum())


def _refuse_repeats(
    response: Clustering,
    pairs: list[tuple[str, Document, Document | None]],
    f: _Flat,
    order: np.ndarray,
    pk: np.ndarray,
    repeats: int,
) -> None:
    """Refuse a response with more repeated mentions than the reference scorer takes, naming
    the first repeat and the mention it repeats."""
    seen: dict[int, int] = {}
    for p in order.tolist():
        k = int(pk[p])
        if k in seen:
            d = f.p_doc[p]
            rdoc = pairs[d][2]
            assert rdoc is not None
            first, again_at = seen[k] - f.starts[d], p - f.starts[d]
            raise CmrkitError(
                f"the response repeats {repeats} mentions (e.g. "
                f"{response.where(rdoc.lines[again_at])} repeats "
                f"{response.where(rdoc.lines[first])}); the reference scorer refuses more "
                f"than {MAX_REPEATS}: write each mention once",
                path=response.path,
            )
        seen[k] = p


# ---------------------------------------------------------------------------------------------
# measures: each returns per-document arrays (recall num, recall den, precision num, precision den)


def _per_doc(a: _Arrays, doc: np.ndarray, weights=None) -> np.ndarray:
    return np.bincount(doc, weights=weights, minlength=a.docs).astype(np.float64)


def _c2(n):
    return n * (n - 1) / 2


@dataclass
class _Overlap:
    """Key chain x response chain cells with their number of shared mentions."""

    k: np.ndarray
    r: np.ndarray
    n: np.ndarray
    doc: np.ndarray
    # the connected components of the key/response chain graph, once CEAF needs them
    component: np.ndarray | None = None
    keys_in: np.ndarray | None = None
    responses_in: np.ndarray | None = None


def _overlap(a: _Arrays) -> _Overlap:
    hit = a.r_key >= 0
    kc = a.k_chain[a.r_key[hit]]
    rc = a.r_chain[hit]
    width = max(len(a.kc_size), 1)
    cells, n = np.unique(rc * width + kc, return_counts=True)
    k, r = cells % width, cells // width
    return _Overlap(k, r, n.astype(np.float64), a.kc_doc[k])


def _mentions(a: _Arrays) -> tuple[np.ndarray, ...]:
    hit = a.r_key >= 0
    exact = _per_doc(a, a.r_doc[hit])
    twin = a.r_twin >= 0
    twins = np.unique(a.r_twin[twin], return_index=True)[1]
    invented = _per_doc(a, a.r_doc[twin][twins])
    return exact, _per_doc(a, a.k_doc), exact, exact + invented


def _muc(a: _Arrays, o: _Overlap) -> tuple[np.ndarray, ...]:
    correct = _per_doc(a, o.doc, o.n - 1)
    key_links = _per_doc(a, a.kc_doc, a.kc_size - 1.0)
    response_links = _per_doc(a, a.rc_doc, a.rc_size - 1.0)
    return correct, key_links, correct, response_links


def _bcub(a: _Arrays, o: _Overlap) -> tuple[np.ndarray, ...]:
    square = o.n * o.n
    recall = _per_doc(a, o.doc, square / a.kc_size[o.k])
    precision = _per_doc(a, o.doc, square / a.rc_size[o.r])
    return recall, _per_doc(a, a.k_doc), precision, _per_doc(a, a.r_doc)


def _components(nodes: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Connected components of an undirected graph: each node's smallest fellow node."""
    label = np.arange(nodes)
    while True:
        low = np.minimum(label[u], label[v])
        new = label.copy()
        np.minimum.at(new, u, low)
        np.minimum.at(new, v, low)
        new = new[new]
        if np.array_equal(new, label):
            return label
        label = new


_ENUMERATE = 5040  # alignments of a component tried all at once up to this many (7 x 7)
_BATCH = 1 << 22  # cells of the (components x alignments x rows) array built at once
_PERMUTATIONS: dict[tuple[int, int], np.ndarray] = {}


def _permutations(cols: int, rows: int) -> np.ndarray:
    perms = _PERMUTATIONS.get((cols, rows))
    if perms is None:
        import itertools

        perms = np.asarray(list(itertools.permutations(range(cols), rows)), dtype=np.int64)
        _PERMUTATIONS[(cols, rows)] = perms.reshape(-1, rows)
    return _PERMUTATIONS[(cols, rows)]


def _best_alignments(matrices: np.ndarray) -> np.ndarray:
    """For each of a stack of equal-shaped non-negative matrices (rows <= columns), the
    largest total of a one-to-one row/column alignment."""
    count, rows, cols = matrices.shape
    if math.perm(cols, rows) <= _ENUMERATE:
        perms = _permutations(cols, rows)
        best = np.empty(count)
        step = max(1, _BATCH // (len(perms) * rows))
        for at in range(0, count, step):
            chunk = matrices[at : at + step]
            best[at : at + step] = chunk[:, np.arange(rows), perms].sum(axis=2).max(axis=1)
        return best
    from scipy.optimize import linear_sum_assignment

    best = np.empty(count)
    for i, matrix in enumerate(matrices):
        x, y = linear_sum_assignment(matrix, maximize=True)
        best[i] = matrix[x, y].sum()
    return best


def _best_alignment(matrix: np.ndarray) -> float:
    """The largest total of a one-to-one row/column alignment of a non-negative matrix."""
    if matrix.shape[0] > matrix.shape[1]:
        matrix = matrix.T
    return float(_best_alignments(matrix[None])[0])


def _rank_within(group: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value's rank among the distinct values of its group, and each group's count."""
    keys, inverse = np.unique(np.stack([group, value]), axis=1, return_inverse=True)
    firsts = np.flatnonzero(np.r_[True, keys[0, 1:] != keys[0, :-1]])
    first_of = np.repeat(firsts, np.diff(np.r_[firsts, keys.shape[1]]))
    sizes = np.diff(np.r_[firsts, keys.shape[1]])
    return inverse.ravel() - first_of[inverse.ravel()], sizes


def _alignment(a: _Arrays, o: _Overlap, weights: np.ndarray) -> np.ndarray:
    """Per document, the largest total weight of a one-to-one key/response chain alignment:
    the sum of the best alignments of the connected components of the chains' overlap graph."""
    if not len(o.k):
        return np.zeros(a.docs)
    if o.component is None:
        nk = len(a.kc_size)
        label = _components(nk + len(a.rc_size), o.k, nk + o.r)
        o.component = label[o.k]
        o.keys_in = np.bincount(label[:nk], minlength=len(label))
        o.responses_in = np.bincount(label[nk:], minlength=len(label))
    comp = o.component
    order = np.lexsort((-weights, comp))
    comp_sorted = comp[order]
    starts = np.flatnonzero(np.r_[True, comp_sorted[1:] != comp_sorted[:-1]])
    best = weights[order][starts]  # the largest cell: the answer when one side has one chain
    comps = comp_sorted[starts]
    hard = (o.keys_in[comps] > 1) & (o.responses_in[comps] > 1)
    if hard.any():
        # every component with several chains on both sides: a matrix each, solved by shape
        index = np.full(len(o.keys_in), -1, dtype=np.int64)
        index[comps[hard]] = np.arange(int(hard.sum()))
        cells = np.flatnonzero(index[comp] >= 0)
        which = index[comp[cells]]
        row, nrows = _rank_within(which, o.k[cells])
        col, ncols = _rank_within(which, o.r[cells])
        flip = nrows > ncols  # rows <= columns for every matrix
        row, col = np.where(flip[which], col, row), np.where(flip[which], row, col)
        nrows, ncols = np.minimum(nrows, ncols), np.maximum(nrows, ncols)
        solved = np.empty(len(nrows))
        shapes = nrows * (int(ncols.max()) + 1) + ncols
        for shape in np.unique(shapes).tolist():
            members = np.flatnonzero(shapes == shape)
            r, c = int(nrows[members[0]]), int(ncols[members[0]])
            slot = np.full(len(nrows), -1, dtype=np.int64)
            slot[members] = np.arange(len(members))
            mine = slot[which] >= 0
            stack = np.zeros((len(members), r, c))
            stack[slot[which[mine]], row[mine], col[mine]] = weights[cells[mine]]
            solved[members] = _best_alignments(stack)
        best[np.flatnonzero(hard)] = solved
    return _per_doc(a, o.doc[order][starts], best)


def _ceafm(a: _Arrays, o: _Overlap) -> tuple[np.ndarray, ...]:
    common = _alignment(a, o, o.n)
    return common, _per_doc(a, a.k_doc), common, _per_doc(a, a.r_doc)


def _ceafe(a: _Arrays, o: _Overlap) -> tuple[np.ndarray, ...]:
    phi4 = 2 * o.n / (a.kc_size[o.k] + a.rc_size[o.r])
    common = _alignment(a, o, phi4)
    return common, _per_doc(a, a.kc_doc), common, _per_doc(a, a.rc_doc)


def _repeated_links(chains: np.ndarray, idents: np.ndarray) -> tuple[int, int]:
    """The reference scorer's response coreference and non-coreference link counts for one
    document whose response repeats a mention (links are sets of mention pairs, so a mention
    met twice links to itself and its pairs are counted once)."""
    count = Counter(idents.tolist())
    single = np.asarray([count[i] == 1 for i in idents.tolist()], dtype=bool)
    per_chain = Counter(chains[single].tolist())
    total = int(single.sum())
    same = sum(_c2(u) for u in per_chain.values())
    coref, non = same, _c2(total) - same
    repeated: dict[int, Counter] = {}
    for c, i in zip(chains.tolist(), idents.tolist(), strict=True):
        if count[i] > 1:
            repeated.setdefault(i, Counter())[c] += 1
    groups = list(repeated.values())
    for n, g in enumerate(groups):
        coref += any(v > 1 for v in g.values())
        non += len(g) > 1
        coref += sum(per_chain.get(c, 0) for c in g)
        non += total if len(g) > 1 else total - per_chain.get(next(iter(g)), 0)
        for h in groups[n + 1 :]:
            coref += not g.keys().isdisjoint(h.keys())
            non += not (len(g) == len(h) == 1 and g.keys() == h.keys())
    return int(coref), int(non)


def _blanc(a: _Arrays, o: _Overlap) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    key_mentions = _per_doc(a, a.k_doc)
    key_coref = _per_doc(a, a.kc_doc, _c2(a.kc_size.astype(np.float64)))
    key_non = _c2(key_mentions) - key_coref
    response_mentions = _per_doc(a, a.r_doc)
    response_coref = _per_doc(a, a.rc_doc, _c2(a.rc_size.astype(np.float64)))
    response_non = _c2(response_mentions) - response_coref
    twin = a.r_twin >= 0
    tw, tw_count = np.unique(a.r_twin[twin], return_counts=True)
    if (tw_count > 1).any():
        repeated_docs = np.unique(a.r_doc[twin][np.isin(a.r_twin[twin], tw[tw_count > 1])])
        for d in repeated_docs.tolist():
            at = a.r_doc == d
            idents = np.where(a.r_key[at] >= 0, a.r_key[at], -2 - a.r_twin[at])
            response_coref[d], response_non[d] = _repeated_links(a.r_chain[at], idents)
    both_coref = _per_doc(a, o.doc, _c2(o.n))
    matched = _per_doc(a, o.doc, o.n)
    per_key = np.bincount(o.k, weights=o.n, minlength=len(a.kc_size))
    per_response = np.bincount(o.r, weights=o.n, minlength=len(a.rc_size))
    both_non = (
        _c2(matched)
        - _per_doc(a, a.kc_doc, _c2(per_key))
        - _per_doc(a, a.rc_doc, _c2(per_response))
        + both_coref
    )
    return (both_coref, key_coref, both_coref, response_coref), (
        both_non,
        key_non,
        both_non,
        response_non,
    )


def _lea_side(
    a: _Arrays,
    member_chain: np.ndarray,
    chain_doc: np.ndarray,
    sizes: np.ndarray,
    target: np.ndarray,
    target_sizes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """coval's ``lea(input_clusters, output_clusters, mention_to_gold)`` per document: each
    input chain counts its size times the share of its links (its self-link when alone) that
    the output holds; ``target`` is the output chain of each input member (-1 when none)."""
    size = sizes.astype(np.float64)
    mapped = target >= 0
    width = max(len(target_sizes), 1)
    cells, together = np.unique(member_chain[mapped] * width + target[mapped], return_counts=True)
    common = np.bincount(
        cells // width, weights=_c2(together.astype(np.float64)), minlength=len(sizes)
    )
    alone = sizes == 1
    if alone.any():
        solo = np.zeros(len(sizes))
        lone = np.flatnonzero(alone[member_chain] & mapped)
        solo[member_chain[lone]] = target_sizes[target[lone]] == 1
        common = np.where(alone, solo, common)
    links = np.where(alone, 1.0, _c2(size))
    num = _per_doc(a, chain_doc, size * common / links)
    return num, _per_doc(a, chain_doc, size)


def _lea(a: _Arrays) -> tuple[np.ndarray, ...]:
    # recall: a key mention maps to the last response chain (in coval's order) holding it
    target = np.full(len(a.k_chain), -1, dtype=np.int64)
    hit = np.flatnonzero(a.p_key >= 0)
    if len(hit):
        order = hit[np.lexsort((a.pc_first[a.p_chain[hit]], a.p_key[hit]))]
        keys = a.p_key[order]
        last = np.r_[keys[1:] != keys[:-1], True]
        target[keys[last]] = a.p_chain[order[last]]
    recall = _lea_side(a, a.k_chain, a.kc_doc, a.kc_size, target, a.pc_size)
    to_key = np.full(len(a.p_key), -1, dtype=np.int64)
    to_key[a.p_key >= 0] = a.k_chain[a.p_key[a.p_key >= 0]]
    precision = _lea_side(a, a.p_chain, a.pc_doc, a.pc_size, to_key, a.kc_size)
    return recall[0], recall[1], precision[0], precision[1]


def _agreement(a: _Arrays) -> tuple[dict[str, float], list[dict[str, float]]]:
    """ARI and NMI over the key mentions; a key mention the response misses is alone there."""
    response = np.full(len(a.k_chain), -1, dtype=np.int64)
    hit = a.r_key >= 0
    response[a.r_key[hit]] = a.r_chain[hit]
    alone = response < 0
    response[alone] = len(a.rc_size) + np.arange(int(alone.sum()))
    ari, nmi = agreement_by_group(np.zeros(len(a.k_chain), dtype=np.int64), a.k_chain, response, 1)
    docs_ari, docs_nmi = agreement_by_group(a.k_doc, a.k_chain, response, a.docs)
    per_doc = [{"ari": x, "nmi": y} for x, y in zip(docs_ari, docs_nmi, strict=True)]
    return {"ari": ari[0], "nmi": nmi[0]}, per_doc


def _counts(arrays: tuple[np.ndarray, ...]) -> tuple[Counts, list[Counts]]:
    """The summed counts and each document's."""
    total = Counts(*(math.fsum(x.tolist()) for x in arrays))
    return total, [Counts(*c) for c in zip(*(x.tolist() for x in arrays), strict=True)]


def score(
    key: Clustering,
    response: Clustering,
    measures: Sequence[str] | None = None,
    *,
    scope: str = "document",
    singletons: str = "keep",
) -> CorefResult:
    """Score a response clustering against a key, per document and summed over documents.

    ``scope="corpus"`` scores all documents as one (chains spanning documents: cross-document
    coreference); ``singletons="remove"`` drops one-mention chains from both sides first.
    """
    if scope not in SCOPES:
        raise CmrkitError(f"scope {scope!r} is not one of {', '.join(SCOPES)}")
    if singletons not in SINGLETONS:
        raise CmrkitError(f"singletons {singletons!r} is not one of {', '.join(SINGLETONS)}")
    names = parse_coref_measures(list(measures) if measures else None)
    notes: list[str] = []
    pairs = _documents(key, response, scope, singletons, notes)
    a = _arrays(key, response, pairs)
    if a.repeats:
        notes.append(
            f"{a.repeats} repeated response mention(s) dropped, the first kept, as the "
            "reference scorer does (LEA reads the response as written)"
        )
    twins = int(len(np.unique(a.r_twin[a.r_twin >= 0])))
    if twins:
        notes.append(f"{twins} response mention(s) not in the key (scored as invented mentions)")
    o = _overlap(a)
    wanted = set(names)
    if "conll" in wanted:
        wanted |= {"muc", "bcub", "ceafe"}
    found: dict[str, tuple[Score, list[Score]]] = {}
    for name, fn in (
        ("mentions", lambda: _mentions(a)),
        ("muc", lambda: _muc(a, o)),
        ("bcub", lambda: _bcub(a, o)),
        ("ceafm", lambda: _ceafm(a, o)),
        ("ceafe", lambda: _ceafe(a, o)),
        ("lea", lambda: _lea(a)),
    ):
        if name in wanted:
            found[name] = _counts(fn())
    if "blanc" in wanted:
        coref, noncoref = (_counts(x) for x in _blanc(a, o))
        found["blanc"] = (
            Blanc(coref[0], noncoref[0]),
            [Blanc(c, n) for c, n in zip(coref[1], noncoref[1], strict=True)],
        )
    if "conll" in wanted:
        parts = [found[m] for m in ("muc", "bcub", "ceafe")]
        found["conll"] = (
            sum(p[0].f1 for p in parts) / 3,  # type: ignore[union-attr]
            [sum(p.f1 for p in ps) / 3 for ps in zip(*(p[1] for p in parts), strict=True)],
        )
    if wanted & {"ari", "nmi"}:
        total, docs = _agreement(a)
        for name in ("ari", "nmi"):
            found[name] = (total[name], [d[name] for d in docs])
    per_document = {
        doc: {name: found[name][1][d] for name in names} for d, (doc, _, _) in enumerate(pairs)
    }
    total = {name: found[name][0] for name in names}
    return CorefResult(names, total, per_document, scope, singletons, notes)
