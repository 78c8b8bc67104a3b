"""Scoring runs against qrels with trec_eval's numbers, per query, per group, and compared.

Ranking follows trec_eval 9.0.x: score descending (scores compared as single-precision floats,
as trec_eval stores them), ties broken by docno descending; the rank column is ignored. A
qrels grade >= 1 is relevant, 0 non-relevant, < 0 pooled but unjudged (used by infAP, never
relevant). AP, infAP, RR, P, R, Success, nDCG@k and the counts are computed here with numpy,
following trec_eval's C code operation for operation (same doubles, sums added in trec_eval's
order), so the values are bit-identical; the other measures (Bpref, Rprec, nDCG) go to
trec_eval's own code (pytrec_eval). RR@k and Judged@k, which trec_eval lacks, are computed on
the same ranking.

By default a query counts when it is in both the run and the qrels (trec_eval's default);
``all_queries`` is trec_eval ``-c``: a qrels query missing from the run is scored as an empty
ranking (0 for every measure but NumRel and NumQ).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_lines
from cmrkit.measures import Measure, parse_measures
from cmrkit.trec import (  # read_run: re-exported for callers of cmrkit.evaluation
    Qrels,
    Run,
    RunColumns,
    read_qrels,
    read_run,  # noqa: F401
    read_run_columns,
    run_columns,
)

NO_GROUP = "(none)"
NO_TOPIC = "(no topic)"


@dataclass
class Result:
    """Per-query and aggregate values of one run; values keyed by measure name (``AP@10``)."""

    measures: list[Measure]
    per_query: dict[str, dict[str, float]]
    aggregate: dict[str, float]
    missing_from_run: list[str]
    missing_from_qrels: list[str]
    all_queries: bool = False
    depth: int | None = None

    @property
    def queries(self) -> int:
        """Number of queries averaged."""
        return len(self.per_query)

    @property
    def scored(self) -> list[str]:
        """Queries with a ranking in the run (trec_eval -q prints these), sorted."""
        missing = set(self.missing_from_run)
        return [q for q in self.per_query if q not in missing]

    def values(self, measure: Measure | str, queries: Iterable[str]) -> list[float]:
        name = str(measure)
        return [self.per_query[q][name] for q in queries]


def _measures(measures: Sequence[Measure | str] | None) -> list[Measure]:
    if measures and all(isinstance(m, Measure) for m in measures):
        return list(measures)  # type: ignore[arg-type]
    return parse_measures([str(m) for m in measures] if measures else None)


def aggregate(measure: Measure, values: Sequence[float]) -> float:
    """trec_eval's summary of per-query values: the sum for counts, else the mean (0 if none)."""
    if measure.summed:
        return float(sum(values))
    return math.fsum(values) / len(values) if values else 0.0


_NATIVE = frozenset(
    {"AP", "infAP", "RR", "R", "P", "Success", "Judged", "NumRel", "NumRet", "NumRelRet", "NumQ"}
)
_MISSING = -(1 << 40)  # relevance of a retrieved document the qrels lack (not in the pool)
_INFAP_EPSILON = 0.00001  # trec_eval's INFAP_EPSILON


def _native(measure: Measure) -> bool:
    """Computed here with trec_eval's arithmetic; the others go to trec_eval's code."""
    return measure.kind in _NATIVE or (measure.kind == "nDCG" and measure.cutoff is not None)


def _prefix_sums(values, counts, picks):
    """For each query q (``counts[q]`` consecutive ``values``), the sum of its first
    ``pick[q]`` values for each pick, added one by one left to right as trec_eval's loops do
    (so the doubles are bit-identical; numpy's sum would add pairwise)."""
    import numpy as np

    nq = len(counts)
    width = int(counts.max()) if nq else 0
    offsets = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    if nq * (width + 1) <= 4 * len(values) + (1 << 20):
        table = np.zeros((nq, width + 1))
        rows = np.repeat(np.arange(nq), counts)
        table[rows, np.arange(len(values)) - offsets[:-1][rows] + 1] = values
        np.cumsum(table, axis=1, out=table)  # accumulate: strictly sequential per row
        return [table[np.arange(nq), pick] for pick in picks]
    out = [np.zeros(nq) for _ in picks]
    for q in range(nq):
        sums = np.concatenate(([0.0], np.cumsum(values[offsets[q] : offsets[q + 1]])))
        for o, pick in zip(out, picks, strict=True):
            o[q] = sums[pick[q]]
    return out


def _ranking(cols: RunColumns, blocks: list[int], qrels: Qrels, depth: int | None):
    """Per-query sizes and, in trec_eval's order (cut at ``depth``), the rows and grades."""
    import itertools

    import numpy as np

    bounds = cols.starts.tolist()
    if len(blocks) == len(cols.qids):
        docnos, scores = cols.docnos, cols.scores
        lens = np.diff(cols.starts)
    else:
        docnos = list(
            itertools.chain.from_iterable(cols.docnos[bounds[i] : bounds[i + 1]] for i in blocks)
        )
        lens = np.asarray([bounds[i + 1] - bounds[i] for i in blocks], dtype=np.int64)
        rows = np.concatenate(
            [np.arange(bounds[i], bounds[i + 1]) for i in blocks] + [np.zeros(0, np.int64)]
        )
        scores = cols.scores[rows]
    nq = len(blocks)
    starts = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(lens, out=starts[1:])
    single = scores.astype(np.float32)  # trec_eval keeps scores as C floats
    gid = np.repeat(np.arange(nq), lens)
    descending = (single[1:] <= single[:-1]) | (gid[1:] != gid[:-1])
    order = np.arange(len(single)) if descending.all() else np.lexsort((-single, gid))
    ordered = single[order]
    tied = np.flatnonzero((ordered[1:] == ordered[:-1]) & (gid[1:] == gid[:-1]))
    if len(tied):
        # ties: docno descending (strcmp order; str and ASCII bytes sort alike)
        breaks = np.flatnonzero(np.diff(tied) != 1)
        firsts = tied[np.concatenate(([0], breaks + 1))].tolist()
        lasts = (tied[np.concatenate((breaks, [len(tied) - 1]))] + 2).tolist()
        for a, b in zip(firsts, lasts, strict=True):
            order[a:b] = sorted(order[a:b].tolist(), key=docnos.__getitem__, reverse=True)
    as_bytes = bool(docnos) and isinstance(docnos[0], bytes)
    grades = []
    for k, i in enumerate(blocks):
        judged = qrels[cols.qids[i]]
        if as_bytes:
            judged = dict(zip(map(str.encode, judged), judged.values(), strict=True))
        a, b = int(starts[k]), int(starts[k + 1])
        grades.append(map(judged.get, docnos[a:b], itertools.repeat(_MISSING)))
    grade = np.fromiter(itertools.chain.from_iterable(grades), dtype=np.int64, count=len(docnos))
    if depth is not None and int(lens.max(initial=0)) > depth:
        keep = (np.arange(len(order)) - np.repeat(starts[:-1], lens)) < depth
        order = order[keep]
        lens = np.minimum(lens, depth)
        np.cumsum(lens, out=starts[1:])
    return lens, starts, order, grade[order], docnos, scores


def _native_values(
    ms: list[Measure], lens, starts, rel, num_rel: list[int], qrels_rows: list[dict[str, int]]
) -> dict[str, list[float]]:
    """Per-query values of the native measures, trec_eval's formulas and order of operations
    (m_map.c, m_map_cut.c, m_infap.c, m_P.c, m_recall.c, m_recip_rank.c, m_success.c,
    m_ndcg_cut.c) on the ranked grades ``rel`` (``_MISSING`` when not in the qrels)."""
    import numpy as np

    nq = len(lens)
    total = len(rel)
    gid = np.repeat(np.arange(nq), lens)
    pos = np.arange(total) - np.repeat(starts[:-1], lens)
    nrel = np.asarray(num_rel, dtype=np.float64)
    relevant = rel >= 1
    cum = np.zeros(total + 1, dtype=np.int64)

    def first_k(flags, k: int | None):
        np.cumsum(flags, out=cum[1:])
        head = lens if k is None else np.minimum(lens, k)
        return cum[starts[:-1] + head] - cum[starts[:-1]]

    hits = np.flatnonzero(relevant)
    found = first_k(relevant, None)
    hit_rank = np.arange(len(hits)) - np.repeat(np.concatenate(([0], np.cumsum(found)[:-1])), found)
    hit_rank += 1  # rel_so_far at each relevant document
    hit_pos = pos[hits].astype(np.float64)
    counts = {k: first_k(relevant, k) for k in {m.cutoff for m in ms}}
    out: dict[str, list[float]] = {}
    safe = np.where(nrel > 0, nrel, 1.0)

    ap_cuts = [m for m in ms if m.kind == "AP"]
    if ap_cuts:
        terms = hit_rank / (hit_pos + 1.0)
        sums = _prefix_sums(terms, found, [counts[m.cutoff] for m in ap_cuts])
        for m, s in zip(ap_cuts, sums, strict=True):
            out[m.name] = np.where(nrel > 0, s / safe, 0.0).tolist()
    if any(m.kind == "infAP" for m in ms):
        hit_q = gid[hits]
        np.cumsum(rel == 0, out=cum[1:])
        nonrel = cum[hits] - cum[starts[:-1]][hit_q]
        np.cumsum((rel < 0) & (rel != _MISSING), out=cum[1:])
        unjudged = cum[hits] - cum[starts[:-1]][hit_q]
        fj = np.where(hit_pos == 0, 1.0, hit_pos)
        before = hit_rank - 1
        x = (before + nonrel + unjudged) / fj
        y = (before + _INFAP_EPSILON) / ((before + nonrel) + 2 * _INFAP_EPSILON)
        terms = 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * x * y
        terms[hit_pos == 0] = 1.0
        (s,) = _prefix_sums(terms, found, [found])
        out["infAP"] = np.where(nrel > 0, s / safe, s).tolist()
    first = np.full(nq, -1.0)
    first[found > 0] = hit_pos[np.concatenate(([0], np.cumsum(found)[:-1]))[found > 0]]
    for m in ms:
        k = m.cutoff
        if m.kind == "RR":
            ok = (first >= 0) & ((first < k) if k is not None else True)
            out[m.name] = np.where(ok, 1.0 / (np.maximum(first, 0.0) + 1.0), 0.0).tolist()
        elif m.kind == "P":
            out[m.name] = (counts[k] / float(k)).tolist()
        elif m.kind == "R":
            out[m.name] = np.where(nrel > 0, counts[k] / safe, 0.0).tolist()
        elif m.kind == "Success":
            out[m.name] = (counts[k] > 0).astype(np.float64).tolist()
        elif m.kind == "Judged":
            head = np.minimum(lens, k)
            judged = first_k(rel != _MISSING, k)
            out[m.name] = np.where(head > 0, judged / np.maximum(head, 1), 0.0).tolist()
        elif m.kind == "NumRel":
            out[m.name] = nrel.tolist()
        elif m.kind == "NumRet":
            out[m.name] = lens.astype(np.float64).tolist()
        elif m.kind == "NumRelRet":
            out[m.name] = found.astype(np.float64).tolist()
        elif m.kind == "NumQ":
            out[m.name] = [1.0] * nq
        elif m.kind == "nDCG":
            log2 = np.asarray([math.log2(i + 2) for i in range(k)])  # rank i + 1
            gain = (rel > 0) & (pos < k)
            at = np.flatnonzero(gain)
            terms = rel[at].astype(np.float64) / log2[pos[at]]
            positive = first_k(gain, None)
            (dcg,) = _prefix_sums(terms, positive, [positive])
            ideal = np.asarray([_ideal_dcg(row, k) for row in qrels_rows])
            out[m.name] = np.where(ideal > 0, dcg / np.where(ideal > 0, ideal, 1.0), dcg).tolist()
    return out


def _ideal_dcg(judged: Mapping[str, int], k: int) -> float:
    ideal = 0.0
    for i, gain in enumerate(sorted((g for g in judged.values() if g > 0), reverse=True)[:k]):
        ideal += gain / math.log2(i + 2)
    return ideal


def evaluate(
    run: Run | RunColumns,
    qrels: Qrels,
    measures: Sequence[Measure | str] | None = None,
    *,
    all_queries: bool = False,
    depth: int | None = None,
) -> Result:
    """Score a run: per-query values and their trec_eval aggregate for each measure.

    ``run`` is {qid: {docno: score}} or :class:`~cmrkit.trec.RunColumns`. ``depth`` keeps
    only the top ``depth`` documents of each ranking (trec_eval ``-M``).
    """
    ms = _measures(measures)
    if depth is not None and depth < 1:
        raise CmrkitError(f"depth {depth} must be a positive number of documents")
    cols = run if isinstance(run, RunColumns) else run_columns(run)
    in_run = set(cols.qids)
    common = sorted(in_run & set(qrels))
    missing_from_run = sorted(set(qrels) - in_run)
    missing_from_qrels = sorted(in_run - set(qrels))
    if not common:
        raise CmrkitError(
            "no query in common between the run and the qrels (run queries such as "
            f"{missing_from_qrels[0]!r}, qrels queries such as {missing_from_run[0]!r}); "
            "check that the files belong together"
        )
    scored = sorted(common + missing_from_run) if all_queries else common
    blocks = [i for i, q in enumerate(cols.qids) if q in qrels]
    lens, starts, order, rel, docnos, scores = _ranking(cols, blocks, qrels, depth)
    qids = [cols.qids[i] for i in blocks]
    rows = [qrels[q] for q in qids]
    num_rel = [sum(g >= 1 for g in judged.values()) for judged in rows]
    native = [m for m in ms if _native(m)]
    values = _native_values(native, lens, starts, rel, num_rel, rows) if native else {}
    per_query: dict[str, dict[str, float]] = {qid: {} for qid in scored}
    where = {q: k for k, q in enumerate(qids)}
    others = [m for m in ms if not _native(m)]
    computed: dict[str, dict[str, float]] = {}
    if others:
        import pytrec_eval

        evaluated: Run = {}
        for k, qid in enumerate(qids):
            at = order[int(starts[k]) : int(starts[k + 1])].tolist()
            names = [docnos[i] for i in at]
            if names and isinstance(names[0], bytes):
                names = [d.decode() for d in names]
            evaluated[qid] = dict(zip(names, scores[at].tolist(), strict=True))
        if all_queries:
            for qid in missing_from_run:
                evaluated[qid] = {}
        requests = {m.pytrec_request for m in others}
        evaluator = pytrec_eval.RelevanceEvaluator({q: qrels[q] for q in scored}, requests)
        computed = evaluator.evaluate(evaluated)
    for qid in scored:
        row = per_query[qid]
        k = where.get(qid)
        for m in ms:
            if not _native(m):
                row[m.name] = computed[qid][m.trec_name] if qid in computed else 0.0
            elif k is not None:
                row[m.name] = values[m.name][k]
            elif m.kind == "NumRel":
                row[m.name] = float(sum(g >= 1 for g in qrels[qid].values()))
            else:
                row[m.name] = 1.0 if m.kind == "NumQ" else 0.0
    agg = {m.name: aggregate(m, [per_query[q][m.name] for q in scored]) for m in ms}
    return Result(ms, per_query, agg, missing_from_run, missing_from_qrels, all_queries, depth)


def evaluate_files(
    run_path: str | os.PathLike,
    qrels_path: str | os.PathLike,
    measures: Sequence[Measure | str] | None = None,
    *,
    all_queries: bool = False,
    depth: int | None = None,
    dedupe: bool = False,
) -> Result:
    """:func:`evaluate` on a run file and a qrels file."""
    ms = _measures(measures)
    qrels = read_qrels(qrels_path)
    run = read_run_columns(run_path, dedupe=dedupe)
    return evaluate(run, qrels, ms, all_queries=all_queries, depth=depth)


# --- groups ------------------------------------------------------------------------------


def load_groups(path: str | os.PathLike, field: str = "type") -> dict[str, str]:
    """qid -> group label, from a topics JSONL (``field`` of each object) or a text table.

    A text table has the qid in column 1 and is tab- or whitespace-separated, like the
    published CMR queries file ``query_id<TAB>type<TAB>...``: ``field`` is then ``type``
    (column 2) or a 1-based column number. A null or empty value becomes ``(none)``.
    """
    groups: dict[str, str] = {}
    jsonl: bool | None = None
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        if jsonl is None:
            jsonl = line.lstrip().startswith("{")
        if jsonl:
            qid, value = _group_from_json(line, field, path, n)
        else:
            qid, value = _group_from_columns(line, field, path, n)
        if qid in groups and groups[qid] != value:
            raise CmrkitError(
                f"query {qid} appears again with {field} {value!r} (was {groups[qid]!r})",
                path=path,
                where=f"line {n}",
            )
        groups[qid] = value
    if not groups:
        raise CmrkitError("no topics in the file", path=path)
    return groups


def _label(value: object) -> str:
    if value is None or value == "":
        return NO_GROUP
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _group_from_json(line: str, field: str, path: object, n: int) -> tuple[str, str]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise CmrkitError(f"not valid JSON ({e.msg})", path=path, where=f"line {n}") from None
    if not isinstance(obj, dict) or "qid" not in obj:
        raise CmrkitError("expected a JSON object with a 'qid' field", path=path, where=f"line {n}")
    if field not in obj:
        keys = ", ".join(sorted(obj))
        raise CmrkitError(
            f"no field {field!r} to group by (fields: {keys}); choose --by from these",
            path=path,
            where=f"line {n}",
        )
    return str(obj["qid"]), _label(obj[field])


def _group_from_columns(line: str, field: str, path: object, n: int) -> tuple[str, str]:
    columns = line.rstrip().split("\t") if "\t" in line else line.split()
    if field.isdigit():
        col = int(field)
    elif field == "type":
        col = 2
    else:
        raise CmrkitError(
            f"--by {field!r}: a text topics file ('qid type ...') groups by 'type' or a column "
            "number",
            path=path,
            where=f"line {n}",
        )
    if col < 2 or col > len(columns):
        raise CmrkitError(
            f"no column {col} to group by (the line has {len(columns)})",
            path=path,
            where=f"line {n}",
        )
    return columns[0].strip(), _label(columns[col - 1].strip())


@dataclass
class GroupResult:
    """Aggregate values of one group of queries."""

    group: str
    queries: list[str]
    aggregate: dict[str, float]


def by_group(result: Result, groups: Mapping[str, str]) -> list[GroupResult]:
    """Each group's aggregate over the result's queries, groups sorted by label.

    Queries the mapping lacks fall in the group ``(no topic)``.
    """
    members: dict[str, list[str]] = {}
    for qid in result.per_query:
        members.setdefault(groups.get(qid, NO_TOPIC), []).append(qid)
    out = []
    for label in sorted(members):
        qids = members[label]
        agg = {m.name: aggregate(m, result.values(m, qids)) for m in result.measures}
        out.append(GroupResult(label, qids, agg))
    return out


# --- comparison and significance ---------------------------------------------------------

TESTS = ("t", "permutation")
CORRECTIONS = ("holm", "bonferroni", "none")


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Student's paired t-test (scipy); 1.0 when a equals b everywhere."""
    if len(a) != len(b):
        raise ValueError("paired samples differ in length")
    if len(a) < 2:
        return math.nan
    if all(x == y for x, y in zip(a, b, strict=True)):
        return 1.0
    from scipy import stats

    return float(stats.ttest_rel(a, b).pvalue)


def permutation_test(
    a: Sequence[float], b: Sequence[float], *, permutations: int = 10000, seed: int = 0
) -> float:
    """Two-sided p-value of the paired randomization test on the mean difference.

    Each permutation flips the sign of every per-query difference at random (seeded). When
    ``2**n <= permutations`` every sign pattern is enumerated and the p-value is exact. The
    p-value follows scipy.stats.permutation_test (``permutation_type="samples"``).
    """
    import numpy as np

    if len(a) != len(b):
        raise ValueError("paired samples differ in length")
    n = len(a)
    if n == 0:
        return math.nan
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    observed = d.mean()
    exact = n < 63 and 2**n <= permutations
    chunks = []
    if exact:
        patterns = np.arange(2**n, dtype=np.int64)
        bits = (patterns[:, None] >> np.arange(n, dtype=np.int64)) & 1
        chunks.append(((1 - 2 * bits) * d).mean(axis=1))
    else:
        rng = np.random.default_rng(seed)
        left = permutations
        while left:
            size = min(left, max(1, 2_000_000 // n))
            signs = rng.integers(0, 2, size=(size, n)) * 2 - 1
            chunks.append((signs * d).mean(axis=1))
            left -= size
    null = np.concatenate(chunks)
    # scipy's tolerance: null statistics within a relative 1e-14 of the observed one count
    gamma = abs(1e-14 * observed)
    adjustment = 0 if exact else 1
    less = (np.count_nonzero(null <= observed + gamma) + adjustment) / (len(null) + adjustment)
    greater = (np.count_nonzero(null >= observed - gamma) + adjustment) / (len(null) + adjustment)
    return float(min(1.0, 2 * min(less, greater)))


def correct_pvalues(pvalues: Sequence[float], method: str) -> list[float]:
    """Family-wise corrected p-values (holm, bonferroni or none); NaN stays NaN, not counted."""
    if method not in CORRECTIONS:
        raise CmrkitError(f"unknown correction {method!r}; use one of {', '.join(CORRECTIONS)}")
    valid = [i for i, p in enumerate(pvalues) if not math.isnan(p)]
    out = list(pvalues)
    m = len(valid)
    if method == "bonferroni":
        for i in valid:
            out[i] = min(1.0, pvalues[i] * m)
    elif method == "holm":
        running = 0.0
        for rank, i in enumerate(sorted(valid, key=lambda j: pvalues[j])):
            running = max(running, min(1.0, (m - rank) * pvalues[i]))
            out[i] = running
    return out


@dataclass
class MeasureComparison:
    """One system against the baseline on one measure, over the paired queries."""

    mean: float
    baseline_mean: float
    delta: float
    queries: int
    improved: int
    hurt: int
    p: float
    p_adjusted: float = math.nan
    significant: bool = False


@dataclass
class Comparison:
    """Systems x measures against a baseline, with significance tests."""

    baseline: str
    measures: list[Measure]
    results: dict[str, Result]
    test: str
    correction: str
    alpha: float
    stats: dict[str, dict[str, MeasureComparison]] = field(default_factory=dict)

    @property
    def systems(self) -> list[str]:
        return list(self.results)


def compare(
    runs: Mapping[str, Run],
    qrels: Qrels,
    measures: Sequence[Measure | str] | None = None,
    *,
    baseline: str | None = None,
    test: str = "t",
    correction: str = "holm",
    alpha: float = 0.05,
    all_queries: bool = False,
    depth: int | None = None,
    permutations: int = 10000,
    seed: int = 0,
) -> Comparison:
    """Evaluate every run and test each against the baseline (the first run by default).

    A system and the baseline are paired on the queries both were scored on (with
    ``all_queries``, every qrels query). p-values are corrected over the systems compared to
    the baseline, separately for each measure.
    """
    if len(runs) < 2:
        raise CmrkitError("compare needs at least two runs")
    if test not in TESTS:
        raise CmrkitError(f"unknown test {test!r}; use one of {', '.join(TESTS)}")
    if correction not in CORRECTIONS:
        raise CmrkitError(f"unknown correction {correction!r}; use one of {', '.join(CORRECTIONS)}")
    if not 0 < alpha < 1:
        raise CmrkitError(f"alpha {alpha} must lie between 0 and 1")
    names = list(runs)
    base = baseline if baseline is not None else names[0]
    if base not in runs:
        raise CmrkitError(f"baseline {base!r} is not one of the runs ({', '.join(names)})")
    ms = _measures(measures)
    results = {
        name: evaluate(runs[name], qrels, ms, all_queries=all_queries, depth=depth)
        for name in names
    }
    comp = Comparison(base, ms, results, test, correction, alpha)
    others = [n for n in names if n != base]
    b = results[base]
    for name in others:
        r = results[name]
        paired = [q for q in b.per_query if q in r.per_query]
        comp.stats[name] = {}
        for m in ms:
            xs, ys = r.values(m, paired), b.values(m, paired)
            if test == "t":
                p = paired_t_test(xs, ys)
            else:
                p = permutation_test(xs, ys, permutations=permutations, seed=seed)
            comp.stats[name][m.name] = MeasureComparison(
                mean=r.aggregate[m.name],
                baseline_mean=b.aggregate[m.name],
                delta=aggregate(m, xs) - aggregate(m, ys),
                queries=len(paired),
                improved=sum(x > y for x, y in zip(xs, ys, strict=True)),
                hurt=sum(x < y for x, y in zip(xs, ys, strict=True)),
                p=p,
            )
    for m in ms:
        cells = [comp.stats[n][m.name] for n in others]
        for cell, adjusted in zip(
            cells, correct_pvalues([c.p for c in cells], correction), strict=True
        ):
            cell.p_adjusted = adjusted
            cell.significant = not math.isnan(adjusted) and adjusted < alpha
    return comp


def run_names(paths: Sequence[str | os.PathLike]) -> list[str]:
    """Short unique names for run files: the file name without .gz/.trec/.txt/.run suffixes."""

    def short(p: str | os.PathLike) -> str:
        name = os.path.basename(os.fspath(p))
        for suffix in (".gz", ".trec", ".txt", ".run", ".tsv"):
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
        return name

    names = [short(p) for p in paths]
    if len(set(names)) < len(names):
        names = [os.fspath(p) for p in paths]
    if len(set(names)) < len(names):
        raise CmrkitError("the same run file is given twice; name each run once")
    return names


# --- output ------------------------------------------------------------------------------


def result_to_json(
    result: Result, groups: Sequence[GroupResult] | None = None, extra: Mapping | None = None
) -> str:
    """``{"measures": {...}, "per_query": {...}, "queries": n, ...}`` as indented JSON."""
    obj: dict = dict(extra or {})
    obj["measures"] = result.aggregate
    obj["trec_names"] = {m.name: m.trec_name for m in result.measures}
    obj["queries"] = result.queries
    obj["all_queries"] = result.all_queries
    obj["depth"] = result.depth
    obj["missing_from_run"] = result.missing_from_run
    obj["missing_from_qrels"] = result.missing_from_qrels
    if groups is not None:
        obj["groups"] = {
            g.group: {"queries": len(g.queries), "measures": g.aggregate} for g in groups
        }
    obj["per_query"] = result.per_query
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def result_to_csv(result: Result, groups: Sequence[GroupResult] | None = None) -> str:
    """One row per query and measure, then the aggregate rows (qid ``all``)."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    with_groups = groups is not None
    w.writerow((["group"] if with_groups else []) + ["qid", "measure", "value"])
    member = {q: g.group for g in groups or [] for q in g.queries}
    for qid, row in result.per_query.items():
        for m in result.measures:
            w.writerow(([member[qid]] if with_groups else []) + [qid, m.name, repr(row[m.name])])
    for g in groups or []:
        for m in result.measures:
            w.writerow([g.group, "all", m.name, repr(g.aggregate[m.name])])
    for m in result.measures:
        w.writerow(
            (["all"] if with_groups else []) + ["all", m.name, repr(result.aggregate[m.name])]
        )
    return buf.getvalue()


def result_to_trec(result: Result, groups: Sequence[GroupResult] | None = None) -> str:
    """trec_eval ``-q`` lines ``measure<TAB>qid<TAB>value``, the ``all`` lines last.

    Laid out as trec_eval prints them (name padded to 22 characters, 4 decimals), so the
    lines of measures trec_eval has diff cleanly against its output. As with ``trec_eval -q
    -c``, queries missing from the run are averaged but not listed. Group aggregates use the
    qid ``all:<group>``.
    """
    lines = []
    # trec_eval prints num_q on the "all" line only
    per_query = [m for m in result.measures if m.kind != "NumQ"]
    for qid in result.scored:
        row = result.per_query[qid]
        for m in per_query:
            lines.append(f"{m.trec_name:<22}\t{qid}\t{m.format(row[m.name])}")
    for g in groups or []:
        for m in result.measures:
            lines.append(f"{m.trec_name:<22}\tall:{g.group}\t{m.format(g.aggregate[m.name])}")
    for m in result.measures:
        lines.append(f"{m.trec_name:<22}\tall\t{m.format(result.aggregate[m.name])}")
    return "\n".join(lines) + "\n"


def format_p(p: float) -> str:
    if math.isnan(p):
        return "n/a"
    return f"{p:.4f}" if p >= 0.0001 else f"{p:.1e}"


def comparison_to_json(comp: Comparison, paths: Mapping[str, str] | None = None) -> str:
    obj: dict = {
        "baseline": comp.baseline,
        "test": comp.test,
        "correction": comp.correction,
        "alpha": comp.alpha,
        "measures": [m.name for m in comp.measures],
        "systems": {},
    }
    for name, result in comp.results.items():
        entry: dict = {}
        if paths:
            entry["run"] = paths[name]
        entry["queries"] = result.queries
        entry["measures"] = result.aggregate
        if name in comp.stats:
            entry["against_baseline"] = {
                m: {
                    "delta": c.delta,
                    "paired_queries": c.queries,
                    "improved": c.improved,
                    "hurt": c.hurt,
                    "p": None if math.isnan(c.p) else c.p,
                    "p_adjusted": None if math.isnan(c.p_adjusted) else c.p_adjusted,
                    "significant": c.significant,
                }
                for m, c in comp.stats[name].items()
            }
        obj["systems"][name] = entry
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def comparison_to_csv(comp: Comparison) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "system",
            "measure",
            "value",
            "delta",
            "paired_queries",
            "improved",
            "hurt",
            "p",
            "p_adjusted",
            "significant",
        ]
    )
    for name, result in comp.results.items():
        for m in comp.measures:
            c = comp.stats.get(name, {}).get(m.name)
            if c is None:
                w.writerow(
                    [name, m.name, repr(result.aggregate[m.name]), "", "", "", "", "", "", ""]
                )
                continue
            w.writerow(
                [
                    name,
                    m.name,
                    repr(c.mean),
                    repr(c.delta),
                    c.queries,
                    c.improved,
                    c.hurt,
                    "" if math.isnan(c.p) else repr(c.p),
                    "" if math.isnan(c.p_adjusted) else repr(c.p_adjusted),
                    str(c.significant).lower(),
                ]
            )
    return buf.getvalue()


def comparison_to_trec(comp: Comparison) -> str:
    """trec_eval-style lines ``measure<TAB>system<TAB>value``; ``<measure>_p`` holds the
    corrected p-value of each system against the baseline."""
    lines = []
    for name, result in comp.results.items():
        for m in comp.measures:
            lines.append(f"{m.trec_name:<22}\t{name}\t{m.format(result.aggregate[m.name])}")
            c = comp.stats.get(name, {}).get(m.name)
            if c is not None:
                p = "nan" if math.isnan(c.p_adjusted) else f"{c.p_adjusted:.4f}"
                lines.append(f"{m.trec_name + '_p':<22}\t{name}\t{p}")
    return "\n".join(lines) + "\n"


def plot_differences(comp: Comparison, measure: Measure, path: str | os.PathLike) -> None:
    """Per-query differences (system - baseline) of one measure, sorted, one panel per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = [n for n in comp.systems if n != comp.baseline]
    fig, axes = plt.subplots(len(others), 1, figsize=(8, 2.6 * len(others)), squeeze=False)
    base = comp.results[comp.baseline]
    for ax, name in zip(axes[:, 0], others, strict=True):
        r = comp.results[name]
        paired = [q for q in base.per_query if q in r.per_query]
        diffs = sorted(
            x - y
            for x, y in zip(r.values(measure, paired), base.values(measure, paired), strict=True)
        )
        colors = ["tab:green" if d > 0 else "tab:red" if d < 0 else "tab:gray" for d in diffs]
        ax.bar(range(len(diffs)), diffs, width=1.0, color=colors)
        ax.axhline(0, color="black", linewidth=0.8)
        c = comp.stats[name][measure.name]
        ax.set_title(
            f"{name} - {comp.baseline}: {measure.name} "
            f"(+{c.improved} / -{c.hurt}, p={format_p(c.p_adjusted)})",
            fontsize=10,
        )
        ax.set_ylabel(f"delta {measure.name}")
        ax.set_xlim(-0.5, max(len(diffs), 1) - 0.5)
        ax.set_xticks([])
    axes[-1, 0].set_xlabel("queries, sorted by difference")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
