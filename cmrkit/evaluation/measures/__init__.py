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


# a trec_eval measure that has no ir_measures name (``set_F``, ``utility``, ``binG``), asked for
# where measures are grouped or compared (see :func:`parse_measure`'s ``trec_eval``)
TREC_EVAL_KIND = Kind("trec_eval", "a trec_eval measure with one value per query")


@dataclass(frozen=True)
class Measure:
    """One measure, e.g. ``Measure("AP", 10)`` for ``AP@10``; kind ``trec_eval``: a trec_eval
    measure without an ir_measures name, ``spec`` as written (``set_F.0.5``) and ``label`` as
    trec_eval prints its name (``set_F_0.5``)."""

    kind: str
    cutoff: int | None = None
    spec: str | None = None
    label: str | None = None

    @property
    def _kind(self) -> Kind:
        if self.kind == TREC_EVAL_KIND.name:
            return TREC_EVAL_KIND
        return _BY_NAME[self.kind.lower()]

    @property
    def family(self) -> str | None:
        """Kind ``trec_eval``: the trec_eval family computing it."""
        return self.spec.partition(".")[0] if self.spec is not None else None

    @property
    def name(self) -> str:
        """The ir_measures name, e.g. ``AP@10`` (a trec_eval measure's printed name)."""
        if self.label is not None:
            return self.label
        return self.kind if self.cutoff is None else f"{self.kind}@{self.cutoff}"

    @property
    def trec_name(self) -> str:
        """The trec_eval name (``map_cut_10``); the ir_measures name when trec_eval has none."""
        if self.label is not None:
            return self.label
        k = self._kind
        if self.cutoff is None and k.trec:
            return k.trec
        if self.cutoff is not None and k.trec_cut:
            return f"{k.trec_cut}_{self.cutoff}"
        return self.name

    @property
    def pytrec_request(self) -> str | None:
        """The measure request pytrec_eval understands, or None when cmrkit computes it."""
        if self.spec is not None:
            return None
        k = self._kind
        if self.cutoff is None and k.trec:
            return k.trec
        if self.cutoff is not None and k.trec_cut:
            return f"{k.trec_cut}.{self.cutoff}"
        return None

    @property
    def summed(self) -> bool:
        """trec_eval's aggregate is the sum over queries (counts), not the mean."""
        if self.spec is not None:
            from cmrkit.evaluation.measures.trec import BY_NAME, SUM

            return BY_NAME[self.family].summary == SUM
        return self._kind.summed

    @property
    def integer(self) -> bool:
        if self.spec is not None:
            from cmrkit.evaluation.measures.trec import BY_NAME

            return BY_NAME[self.family].integer
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


def _trec_eval_measure(text: str) -> Measure | None:
    """A trec_eval measure without an ir_measures name, as one value per query (None when
    ``text`` names no such trec_eval family)."""
    from cmrkit.evaluation.measures import trec as defs

    name, dot, params = text.partition(".")
    fam = defs.BY_NAME.get(name)
    if fam is None:
        return None
    if (
        fam.rel_format != "qrels"
        or not fam.per_query
        or fam.summary in (defs.GEOMETRIC, defs.NO_SUMMARY, defs.NUM_Q)
    ):
        raise CmrkitError(
            f"measure {text!r} has no value per query to group or compare; "
            f"valid measures: {_valid_list()}, or trec_eval's per-query ones (set_F, utility, ...)"
        )
    label = f"{name}_{params}" if dot else name
    if fam.params in (defs.CUT_LONG, defs.CUT_DOUBLE):
        cuts = params.split(",") if dot else []
        if len(cuts) != 1 or not cuts[0].strip():
            raise CmrkitError(
                f"measure {text!r} gives a value per cutoff; name one, e.g. {name}.10"
                if fam.params == defs.CUT_LONG
                else f"measure {text!r} gives a value per cutoff; name one, e.g. {name}..5"
            )
        try:
            cut = float(cuts[0])
        except ValueError:
            raise CmrkitError(f"measure {text!r}: the cutoff is not a number") from None
        if fam.params == defs.CUT_LONG:
            label = f"{name}_{int(cut)}" if cut == int(cut) else label
        else:
            label = f"{name}_{cut:3.2f}"[: len(name) + 9]
    return Measure(TREC_EVAL_KIND.name, spec=text, label=label)


def parse_measure(text: str, *, trec_eval: bool = False) -> Measure:
    """``"AP@10"`` -> Measure; also accepts trec_eval names (``map_cut_10``, ``P.10``), and
    with ``trec_eval`` the trec_eval measures without an ir_measures name that give one value
    per query (``set_F``, ``utility.1,-1,0,0``, ``binG``, ``relative_P.5``)."""
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
    if trec_eval:
        measure = _trec_eval_measure(spec)
        if measure is not None:
            return measure
    raise CmrkitError(f"unknown measure {text!r}; valid measures: {_valid_list()}")


def _cutoff_lists(parts: list[str]) -> list[str]:
    """trec_eval's cutoff lists as one measure per cutoff: ``P.5,10,AP`` is P.5, P.10 and AP
    (a number after a dotted measure is another cutoff of it)."""
    out: list[str] = []
    family = None
    for part in parts:
        item = part.strip()
        try:
            float(item)
            numeric = True
        except ValueError:
            numeric = False
        if numeric and family is not None:
            out.append(f"{family}.{item}")
            continue
        out.append(part)
        name, dot, _ = item.partition(".")
        family = name if dot else None
    return out


def parse_measures(
    texts: list[str] | tuple[str, ...] | None, *, trec_eval: bool = False
) -> list[Measure]:
    """Measures in the order given, duplicates dropped; the default set when none given.

    Each text may hold several comma-separated names (``-m AP,P@10``); ``trec_eval``: see
    :func:`parse_measure` (a trec_eval measure's own commas, ``utility.1,-1,0,0``, stay
    with it when the whole text is one).
    """
    if not texts:
        texts = DEFAULT_MEASURES
    out: list[Measure] = []
    for text in texts:
        parts = text.split(",")
        if trec_eval and "." in text:
            try:
                parts = [text] if _trec_eval_measure(text.strip()) is not None else parts
            except CmrkitError:
                parts = _cutoff_lists(parts)
        for part in parts:
            if not part.strip():
                continue
            measure = parse_measure(part, trec_eval=trec_eval)
            if measure not in out:
                out.append(measure)
    if not out:
        raise CmrkitError(f"no measure given; valid measures: {_valid_list()}")
    return out
