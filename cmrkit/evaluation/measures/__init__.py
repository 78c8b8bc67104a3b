"""Measures as definitions, apart from their computation (issue 22).

Two registries: ``measures/trec.py`` holds trec_eval's families (9.0.8 and 10.0: names,
parameters and their defaults, summaries, versions), computed by ``evaluation/trec_eval.py``;
this module holds the families named as users write them (ir_measures syntax: ``AP@10``,
``RR@10``), each registered with :func:`register` and computed by ``evaluation/ranking.py``.

Each measure maps to the trec_eval measure it equals (``AP@10`` is ``map_cut_10``), or,
for the two trec_eval lacks, to a definition computed on trec_eval's ranking: ``RR@k`` is
``recip_rank`` on the top k, ``Judged@k`` the fraction of the top k (or of the whole ranking
when shorter) that appears in the qrels with any grade, as in ir_measures. ``xinfAP`` and
``infNDCG`` are TREC's sample_eval.pl estimators from stratified samples (``sampled.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures.trec import MAX_CUTOFF


@dataclass(frozen=True)
class Kind:
    """One measure family of the ir_measures-named path: its name, how a cutoff applies, and
    the trec_eval family it equals (``measures/trec.py``), if any."""

    name: str
    help: str
    trec: str | None = None  # trec_eval name without cutoff; None when cmrkit computes it
    trec_cut: str | None = None  # trec_eval name with a cutoff (``map_cut``)
    cutoff: str = "none"  # "none", "optional" or "required"
    summed: bool = False  # trec_eval's "all" line sums it over queries instead of averaging
    integer: bool = False  # trec_eval prints it as an integer


_KINDS: list[Kind] = []


def register(*kinds: Kind) -> None:
    """Add measure families (ir_measures names); their computation lives in ``ranking.py``
    (numpy, trec_eval's arithmetic), ``sampled.py`` or the trec_eval port."""
    for kind in kinds:
        if any(k.name.lower() == kind.name.lower() for k in _KINDS):
            raise ValueError(f"measure {kind.name} registered twice")
        _KINDS.append(kind)


register(
    Kind("AP", "average precision (AP@k: map_cut_k, divides by all relevant)",
         trec="map", trec_cut="map_cut", cutoff="optional"),
    Kind("infAP", "inferred AP (Yilmaz & Aslam 2006): negative grades are pooled but unjudged",
         trec="infAP"),
    Kind("RR", "reciprocal rank of the first relevant document (RR@k: 0 below rank k)",
         trec="recip_rank", cutoff="optional"),
    Kind("R", "recall at k (recall_k)", trec_cut="recall", cutoff="required"),
    Kind("P", "precision at k (P_k)", trec_cut="P", cutoff="required"),
    Kind("nDCG", "normalized DCG with the grades as gains (nDCG@k: ndcg_cut_k)",
         trec="ndcg", trec_cut="ndcg_cut", cutoff="optional"),
    Kind("Bpref", "binary preference (bpref)", trec="bpref"),
    Kind("Rprec", "precision at rank R (Rprec)", trec="Rprec"),
    Kind("Success", "1 if a relevant document is in the top k (success_k)",
         trec_cut="success", cutoff="required"),
    Kind("Judged", "fraction of the top k present in the qrels, any grade (ir_measures Judged@k)",
         cutoff="required"),
    Kind("xinfAP", "extended inferred AP from stratified samples (sample_eval.pl's infAP; "
         "Yilmaz et al. 2008)"),
    Kind("infNDCG", "inferred nDCG from stratified samples (sample_eval.pl's infNDCG)"),
    Kind("NumRel", "number of relevant documents", trec="num_rel", summed=True, integer=True),
    Kind("NumRet", "number of retrieved documents", trec="num_ret", summed=True, integer=True),
    Kind("NumRelRet", "number of relevant documents retrieved", trec="num_rel_ret", summed=True,
         integer=True),
    Kind("NumQ", "number of queries evaluated", trec="num_q", summed=True, integer=True),
)  # fmt: skip
_BY_NAME = {k.name.lower(): k for k in _KINDS}
_ALIASES = {"map": "AP", "mrr": "RR", "recall": "R", "ndcg": "nDCG", "prec": "P"}
# trec_eval's own names, accepted as a convenience: `P_10`, `map_cut_10`, `recip_rank`.
_TREC_NAMES = {k.trec.lower(): k for k in _KINDS if k.trec}
_TREC_CUT_NAMES = {k.trec_cut.lower(): k for k in _KINDS if k.trec_cut}

_SYNTAX = re.compile(r"([A-Za-z_]+?)(?:@(\S+))?")
_TREC_SYNTAX = re.compile(r"([A-Za-z_]+?)[_.]([0-9]+)")

# Estimated from stratified samples (evaluation/sampled.py): the qrels' strata matter.
SAMPLED_KINDS = frozenset({"xinfAP", "infNDCG"})

DEFAULT_MEASURES = (
    "infAP",
    "AP",
    "AP@10",
    "AP@50",
    "RR@10",
    "R@10",
    "R@50",
    "R@100",
    "R@500",
    "P@10",
    "nDCG@10",
    "Judged@10",
)


@dataclass(frozen=True)
class Measure:
    """One measure, e.g. ``Measure("AP", 10)`` for ``AP@10``."""

    kind: str
    cutoff: int | None = None

    @property
    def _kind(self) -> Kind:
        return _BY_NAME[self.kind.lower()]

    @property
    def name(self) -> str:
        """The ir_measures name, e.g. ``AP@10``."""
        return self.kind if self.cutoff is None else f"{self.kind}@{self.cutoff}"

    @property
    def trec_name(self) -> str:
        """The trec_eval name (``map_cut_10``); the ir_measures name when trec_eval has none."""
        k = self._kind
        if self.cutoff is None and k.trec:
            return k.trec
        if self.cutoff is not None and k.trec_cut:
            return f"{k.trec_cut}_{self.cutoff}"
        return self.name

    @property
    def pytrec_request(self) -> str | None:
        """The measure request pytrec_eval understands, or None when cmrkit computes it."""
        k = self._kind
        if self.cutoff is None and k.trec:
            return k.trec
        if self.cutoff is not None and k.trec_cut:
            return f"{k.trec_cut}.{self.cutoff}"
        return None

    @property
    def summed(self) -> bool:
        """trec_eval's aggregate is the sum over queries (counts), not the mean."""
        return self._kind.summed

    @property
    def integer(self) -> bool:
        return self._kind.integer

    def format(self, value: float) -> str:
        """The value as trec_eval prints it (``%6.4f`` or an integer)."""
        return str(round(value)) if self.integer else f"{value:.4f}"

    def __str__(self) -> str:
        return self.name


def _valid_list() -> str:
    names = []
    for k in _KINDS:
        if k.cutoff == "none":
            names.append(k.name)
        elif k.cutoff == "optional":
            names.append(f"{k.name}[@k]")
        else:
            names.append(f"{k.name}@k")
    return ", ".join(names)


def _make(kind: Kind, cutoff_text: str | None, text: str) -> Measure:
    if cutoff_text is None:
        if kind.cutoff == "required":
            raise CmrkitError(f"measure {text!r} needs a cutoff, e.g. {kind.name}@10")
        return Measure(kind.name)
    if kind.cutoff == "none":
        raise CmrkitError(f"measure {kind.name} takes no cutoff; write {kind.name!r}")
    if not cutoff_text.isdigit() or not 1 <= int(cutoff_text) <= MAX_CUTOFF:
        raise CmrkitError(
            f"measure {text!r}: the cutoff must be an integer from 1 to {MAX_CUTOFF:,}, "
            f"e.g. {kind.name}@10"
        )
    return Measure(kind.name, int(cutoff_text))


def parse_measure(text: str) -> Measure:
    """``"AP@10"`` -> Measure; also accepts trec_eval names (``map_cut_10``, ``P.10``)."""
    spec = text.strip()
    if "(" in spec:
        raise CmrkitError(
            f"measure {text!r}: parameters such as (rel=2) are not supported; "
            f"valid measures: {_valid_list()}"
        )
    m = _SYNTAX.fullmatch(spec)
    if m:
        base = m.group(1).lower()
        base = _ALIASES.get(base, base).lower()
        if base in _BY_NAME:
            return _make(_BY_NAME[base], m.group(2), text)
        if base in _TREC_NAMES and m.group(2) is None:
            return _make(_TREC_NAMES[base], None, text)
    t = _TREC_SYNTAX.fullmatch(spec)
    if t and t.group(1).lower() in _TREC_CUT_NAMES:
        return _make(_TREC_CUT_NAMES[t.group(1).lower()], t.group(2), text)
    raise CmrkitError(f"unknown measure {text!r}; valid measures: {_valid_list()}")


def parse_measures(texts: list[str] | tuple[str, ...] | None) -> list[Measure]:
    """Measures in the order given, duplicates dropped; the default set when none given.

    Each text may hold several comma-separated names (``-m AP,P@10``).
    """
    if not texts:
        texts = DEFAULT_MEASURES
    out: list[Measure] = []
    for text in texts:
        for part in text.split(","):
            if not part.strip():
                continue
            measure = parse_measure(part)
            if measure not in out:
                out.append(measure)
    if not out:
        raise CmrkitError(f"no measure given; valid measures: {_valid_list()}")
    return out
