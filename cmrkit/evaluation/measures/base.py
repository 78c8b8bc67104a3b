"""Measure families as records, each registered with its kernel beside its definition.

Two records, the way ir_measures registers a measure's definition:

- :class:`Kind`: a family as users name it (ir_measures syntax: ``AP``, ``AP@10``, ``RR@10``),
  with the typed description of its parameters (:class:`Param`: a cutoff, required or not);
- :class:`Family`: a family as trec_eval names it (``map``, ``map_cut``), with trec_eval's
  parameter kind, summary, print format and versions, and its ir_measures name (``ir_name``,
  the one place the two vocabularies meet).

A *kernel* is the one computation of a family's values: a function ``kernel(layout, params)``
returning a list of numpy arrays (one per printed value, a value per query of the layout), for
every query at once. It is registered on each record it computes (the AP kernel on ``map``,
``map_cut`` and, through them, ``AP`` and ``AP@k``); a family whose parameters are cutoffs (or
none) is handed its cutoffs as a list (``[None]``: the whole ranking). A Kind without a kernel
is computed by its trec_eval families' kernels; one with a kernel is cmrkit's own (``RR@k``,
``Judged@k``, AUC).

A definition module (``measures/ranked.py``, ``dcg.py``, ``rows.py``, ``prefs.py``,
``own.py``, ``sampled.py``) holds definitions and their kernels and calls :func:`define`;
``measures/trec.py`` puts trec_eval's families in trec_eval's order and ``measures/__init__``
reads what users write. Adding a measure is a :func:`define` beside its kernel in one of them.

What a kernel is handed, its *layout* (``Family.layout``, ``Kind.layout``):

- :data:`RANKED`: any ranking layout: trec_eval's padded matrices (``trec_bulk.Block``), the
  ranking engine's flat arrays (``ranking.Flat``) and rescoring's judged hits
  (``rescore.Hits``). Each offers, as numpy arrays with a value per query: ``nq``; ``n``
  (documents ranked), ``R`` (relevant judgments), ``found`` (documents ranked relevant at the
  relevance level) and ``nrr`` (judged relevant ranked, trec_eval's num_rel_ret); and
  ``count(cls, k)`` (documents of class ``cls`` in each query's top ``k``, None: all),
  ``first(cls)`` (the 0-based rank of the first, -1: none), ``hits(cls)`` (those documents in
  rank order: ``.rank`` from 0, ``.ordinal`` from 1 among them, ``.grade``, and
  ``.before(other)``, the documents of class ``other`` ranked above each), ``total(hits,
  terms, cutoffs)`` (each query's terms of its hits added one by one in rank order, over the
  top k of each cutoff: the C loops' order, so the doubles are trec_eval's) and
  ``ideal_gains()`` (the ideal ranking's positive gains, highest first, one query after
  another, and how many each). The classes: ``rel`` (grade at or above the relevance level,
  trec_eval's ``-l``), ``judged_rel`` (judged and so), ``nonrel`` (judged below it),
  ``unjudged`` (judged with a negative grade: pooled, not judged), ``nonpool`` (not in the
  qrels), ``judged`` (in the qrels), ``unj`` (``unjudged`` or ``nonpool``), ``gain`` (grade
  above 0). A layout need not offer a class its kernels do not ask for.
- :data:`ROWS`: trec_eval's matrices only (``trec_bulk.Block``: rows of grades, relevance
  levels, gain tables); the ranking engine hands such a family a matrix of its rankings.
- :data:`SCORED`: the ranking engine's flat arrays with the run's scores (AUC).
- :data:`SAMPLED`: sample_eval.pl's ranking and strata (``measures/sampled.py``).
- :data:`PREFS`: trec_eval's preference counts (``trec_prefs.form_prefs_counts``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_CUTOFF = 1_000_000_000  # trec_eval reads cutoffs as C longs; no ranking is this deep
VERSIONS = ("9", "10")

# Parameter kinds, as trec_eval's init procedures read them (meas_init.c)
NONE = "none"  # no parameters
CUT_LONG = "cut_long"  # sorted distinct positive integer cutoffs, one value each (P_5)
CUT_DOUBLE = "cut_double"  # sorted distinct real cutoffs, one value each (iprec_at_recall_0.10)
P_DOUBLE = "p_double"  # a list of reals, one value (utility, set_F, 11pt_avg, relstring)
P_PAIR = "p_pair"  # name=value pairs, one value (ndcg gains, rbp p)

# How the "all" line is formed from the per-query values (meas_avg.c)
MEAN = "mean"  # sum / queries (every qrels query with -c)
SUM = "sum"  # the sum (counts)
GEOMETRIC = "gm"  # exp of the mean of the logs
NUM_Q = "num_q"
NUM_REL = "num_rel"  # the sum; with -c, relevant (rel > 0) judgments of every qrels query
NO_SUMMARY = "none"

# trec_eval's marks of ranked documents without a grade (RELVALUE_NONPOOL, RELVALUE_UNJUDGED)
NONPOOL = -1  # retrieved, not in the qrels
UNJUDGED = -2  # in the qrels with a negative grade
SPARSE = 4  # a padded matrix may hold at most this many cells per ranked document (+ 1M)

# What a kernel is handed (see the module's docstring)
RANKED = "ranked"
ROWS = "rows"
SCORED = "scored"
SAMPLED = "sampled"
PREFS = "prefs"

Kernel = Callable[..., list]


@dataclass(frozen=True)
class Param:
    """One parameter of a measure as users write it, typed (ir_measures' ParamInfo): its
    name, type, whether it must be given, what it means, and its bounds."""

    name: str
    dtype: type = int
    required: bool = False
    desc: str = ""
    low: int = 1
    high: int = MAX_CUTOFF


# a cutoff k: the top k documents of each ranking (``AP@10``)
CUTOFF = Param("cutoff", int, False, "the top k documents of each ranking")
CUTOFF_REQUIRED = Param("cutoff", int, True, "the top k documents of each ranking")

_LEGACY_CUTOFFS = {"none": (), "optional": (CUTOFF,), "required": (CUTOFF_REQUIRED,)}


@dataclass(frozen=True)
class Family:
    """One trec_eval measure family and its kernel."""

    name: str
    params: str = NONE
    default: tuple = ()
    summary: str = MEAN
    integer: bool = False  # printed as a long (counts)
    per_query: bool = True  # printed on -q lines
    versions: tuple[str, ...] = VERSIONS
    rel_format: str = "qrels"  # "qrels", "prefs" (prefs and qrels_prefs) or "qrels_jg"
    ir_name: str | None = None  # the ir_measures name (cutoff written @k)
    help: str = ""
    kernel: Kernel | None = field(default=None, compare=False, repr=False)
    layout: str = ROWS
    averages: str | None = None  # qrels_jg: the qrels family averaged over judgment groups
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def cutoffs(self) -> bool:
        """Its kernel takes a list of cutoffs (None: the whole ranking)."""
        return self.params in (NONE, CUT_LONG)

    def compute(self, layout, params) -> list:
        """The kernel's values for ``params`` as set up (``measures/trec.py``'s Column)."""
        assert self.kernel is not None, self.name
        if self.params == NONE:
            params = [None]
        return self.kernel(layout, params)


@dataclass(frozen=True)
class Kind:
    """One measure family of the ir_measures names: its name, what it is, its parameters
    (typed), and, for cmrkit's own measures, its kernel (the others are computed by the
    trec_eval families they equal: ``measures/trec.py``'s ``ir_name``)."""

    name: str
    help: str
    params: tuple[Param, ...] = ()
    kernel: Kernel | None = field(default=None, compare=False, repr=False)
    layout: str = RANKED
    pooled: bool = False  # one value for the whole run (AUC_micro): no mean over some queries

    def __post_init__(self) -> None:
        if isinstance(self.params, str):  # the cutoff strings of earlier releases
            warnings.warn(
                f"Kind({self.name!r}, ..., {self.params!r}): give params=(CUTOFF,) or "
                "(CUTOFF_REQUIRED,) (measures.base); the cutoff strings go in the next release",
                DeprecationWarning,
                stacklevel=3,
            )
            object.__setattr__(self, "params", _LEGACY_CUTOFFS[self.params])

    @property
    def cutoff(self) -> Param | None:
        """Its cutoff parameter, if it takes one."""
        return next((p for p in self.params if p.name == "cutoff"), None)

    @property
    def trec(self) -> str | None:
        """The trec_eval family it equals without a cutoff (``map``); None: cmrkit's own."""
        return ir_names().get(self.name.lower(), (None, None))[0]

    @property
    def trec_cut(self) -> str | None:
        """The trec_eval family it equals with a cutoff (``map_cut``)."""
        return ir_names().get(self.name.lower(), (None, None))[1]

    @property
    def family(self) -> Family | None:
        name = self.trec or self.trec_cut
        return FAMILIES[name] if name else None


# ----------------------------------------------------------------------------- the registry

FAMILIES: dict[str, Family] = {}  # trec_eval's families by name (trec.py orders them)
KINDS: dict[str, Kind] = {}  # the ir_measures families by lower-case name
# other names users write for measures with an ir_measures name (lower case -> that name)
IR_ALIASES = {"map": "AP", "mrr": "RR", "recall": "R", "ndcg": "nDCG", "prec": "P"}
_IR: dict[str, list[str | None]] = {}  # ir_name (lower) -> [family, family with cutoffs]


def define(*records: Family | Kind) -> None:
    """Register measure families (beside their kernels)."""
    for record in records:
        if isinstance(record, Family):
            if record.name in FAMILIES:
                raise ValueError(f"trec_eval family {record.name} defined twice")
            FAMILIES[record.name] = record
            if record.ir_name is not None:
                pair = _IR.setdefault(record.ir_name.lower(), [None, None])
                pair[1 if record.params in (CUT_LONG, CUT_DOUBLE) else 0] = record.name
        else:
            if record.name.lower() in KINDS:
                raise ValueError(f"measure {record.name} registered twice")
            KINDS[record.name.lower()] = record


def ir_names() -> dict[str, tuple[str | None, str | None]]:
    """ir_measures names (lower case, and their aliases) -> (the family without a cutoff, the
    family with one), from each family's ``ir_name``: the one place the mapping is written."""
    names = {k: (v[0], v[1]) for k, v in _IR.items()}
    names.update({a: names[n.lower()] for a, n in IR_ALIASES.items() if n.lower() in names})
    return names


def whole(kernel: Kernel) -> Kernel:
    """A kernel of cutoffs, applied to the whole ranking only."""
    return lambda layout, params: kernel(layout, [None])


# ----------------------------------------------------------------------------- sums


def sequential_sums(values, counts, picks) -> list:
    """For each query q (``counts[q]`` consecutive ``values``), the sum of its first
    ``pick[q]`` values for each pick, added one by one left to right as trec_eval's loops do
    (so the doubles are bit-identical; numpy's sum would add pairwise). numpy arrays."""
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


def within(counts):
    """Each element's position (from 0) within its query, ``counts[q]`` elements per query
    laid one query after another (numpy)."""
    import numpy as np

    return np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
