"""Measures as users name them, and the one front door to them.

Every measure family is defined beside its kernel (its one computation, for every query at
once) in a definition module of this package, and registered there (``base.define``):
``ranked.py`` (the counts, AP, infAP, RR, P, R, Success, Judged), ``dcg.py`` (nDCG and
trec_eval's gain measures), ``rows.py`` (trec_eval's other qrels measures: Rprec, bpref, ...),
``prefs.py`` (its preference measures), ``own.py`` (cmrkit's own: AUC, AUC_micro,
MentionRecall) and ``sampled.py`` (xinfAP and infNDCG as TREC's sample_eval.pl). Two
vocabularies name them: ``measures/trec.py`` puts trec_eval's families (9.0.8 and 10.0) in its
order, with their parameters as it reads them and each family's ir_measures name (the one
place that mapping is written); this module holds the ir_measures families (``AP@10``,
``RR@10``: ``base.Kind``, their parameters typed) in the order they are listed.

:func:`resolve` reads what a user asked for (``-m`` texts: ir_measures names, trec_eval's own,
comma-separated) once, and says which engine computes it: ``ranking`` (``evaluation/ranking.py``:
one value per query and measure, for groups, comparisons and cmrkit's own measures) or
``trec_eval`` (``evaluation/trec_eval.py``: every trec_eval measure, option and output byte).
Both engines are data layouts that feed the same kernels; :attr:`Measure.computation` says
which kernel computes a measure and what it is handed.

Each ir_measures name maps to the trec_eval measure it equals (``AP@10`` is ``map_cut_10``), or,
for the two trec_eval lacks, to a definition computed on trec_eval's ranking: ``RR@k`` is
``recip_rank`` on the top k, ``Judged@k`` the fraction of the top k (or of the whole ranking
when shorter) that appears in the qrels with any grade, as in ir_measures. ``xinfAP`` and
``infNDCG`` are TREC's sample_eval.pl estimators from stratified samples (``sampled.py``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures import trec as defs
from cmrkit.evaluation.measures.base import (  # noqa: F401  (Kind, Param: the records)
    CUTOFF,
    CUTOFF_REQUIRED,
    KINDS,
    SAMPLED,
    Family,
    Kernel,
    Kind,
    Param,
    define,
)
from cmrkit.evaluation.measures.trec import MAX_CUTOFF  # noqa: F401

RANKING = "ranking"  # evaluation/ranking.py
TREC_EVAL = "trec_eval"  # evaluation/trec_eval.py

# the ir_measures families in the order they are listed (`eval --help`, errors); a family
# registered without a place here is listed after them
LISTED = (
    "AP", "infAP", "RR", "R", "P", "nDCG", "Bpref", "Rprec", "Success", "Judged", "xinfAP",
    "infNDCG", "NumRel", "NumRet", "NumRelRet", "NumQ", "AUC", "AUC_micro", "MentionRecall",
)  # fmt: skip


def register(*kinds: Kind) -> None:
    """Add measure families (``base.define``, which takes trec_eval's families too)."""
    define(*kinds)
    _refresh()


def _listed() -> list[Kind]:
    place = {name.lower(): i for i, name in enumerate(LISTED)}
    return sorted(KINDS.values(), key=lambda k: place.get(k.name.lower(), len(place)))


_KINDS: list[Kind] = _listed()
_BY_NAME: dict[str, Kind] = {}
# trec_eval's own names, accepted as a convenience: `P_10`, `map_cut_10`, `recip_rank`.
_TREC_NAMES: dict[str, Kind] = {}
_TREC_CUT_NAMES: dict[str, Kind] = {}


def _refresh() -> None:
    _KINDS[:] = _listed()
    _BY_NAME.clear()
    _BY_NAME.update({k.name.lower(): k for k in _KINDS})
    _TREC_NAMES.clear()
    _TREC_NAMES.update({k.trec.lower(): k for k in _KINDS if k.trec})
    _TREC_CUT_NAMES.clear()
    _TREC_CUT_NAMES.update({k.trec_cut.lower(): k for k in _KINDS if k.trec_cut})


_refresh()

_SYNTAX = re.compile(r"([A-Za-z_]+?)(?:@(\S+))?")
_TREC_SYNTAX = re.compile(r"([A-Za-z_]+?)[_.]([0-9]+)", re.ASCII)
_NAME = re.compile(r"([A-Za-z0-9_]+)(?=[.@(]|$)")

# Estimated from stratified samples (measures/sampled.py): the qrels' strata matter.
SAMPLED_KINDS = frozenset(k.name for k in _KINDS if k.layout == SAMPLED)

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
DEFAULT_TREC = ("official",)  # trec_eval's own default set

# a trec_eval measure that has no ir_measures name (``set_F``, ``utility``, ``binG``), asked for
# where measures are grouped or compared: one value per query
TREC_EVAL_KIND = Kind("trec_eval", "a trec_eval measure with one value per query")


@dataclass(frozen=True)
class Computation:
    """How a measure is computed: the kernel, what it is handed (``layout``: ``base.RANKED``,
    ``ROWS``, ``SCORED``, ``SAMPLED``), its parameters (``cutoffs``: a list of cutoffs, one of
    them, for a kernel of cutoffs, None the whole ranking; else ``params`` as trec_eval sets
    them up), and the trec_eval family that computes it (None: cmrkit's own)."""

    kernel: Kernel
    layout: str
    family: Family | None
    cutoff: int | None = None
    params: object = None

    @property
    def cutoffs(self) -> bool:
        """Its kernel takes a list of cutoffs (measures of one kernel are computed at once)."""
        return self.family is None or self.family.cutoffs


@dataclass(frozen=True)
class Measure:
    """One measure, e.g. ``Measure("AP", 10)`` for ``AP@10``; kind ``trec_eval``: a trec_eval
    measure without an ir_measures name, ``spec`` as written (``set_F.0.5``), ``label`` as
    trec_eval prints its name (``set_F_0.5``) and ``params`` its parameters as set up."""

    kind: str
    cutoff: int | None = None
    spec: str | None = None
    label: str | None = None
    params: object = field(default=None, compare=False, hash=False, repr=False)

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
    def own(self) -> bool:
        """cmrkit's own measure, which trec_eval lacks (RR@k, Judged@k, xinfAP, AUC, ...)."""
        return self.spec is None and self.pytrec_request is None

    @property
    def trec_column(self) -> str:
        """What a table's trec_eval column says of it: its trec_eval name, or that it is
        cmrkit's own."""
        return "(cmrkit's own)" if self.own else self.trec_name

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
    def _family(self) -> defs.Family | None:
        if self.spec is not None:
            return defs.BY_NAME[self.family]
        return self._kind.family

    @property
    def summed(self) -> bool:
        """trec_eval's aggregate is the sum over queries (counts), not the mean."""
        fam = self._family
        return fam is not None and fam.summary in (defs.SUM, defs.NUM_REL, defs.NUM_Q)

    @property
    def integer(self) -> bool:
        fam = self._family
        return fam is not None and fam.integer

    @property
    def pooled(self) -> bool:
        """One value for the whole run (AUC_micro): no mean over a subset of queries."""
        return self._kind.pooled

    @property
    def computation(self) -> Computation:
        """The kernel that computes it and what it is handed: its trec_eval family's (``map``
        for AP, ``map_cut`` for AP@k, the family a trec_eval name names), else its own
        (cmrkit's measures: RR@k, Judged@k, AUC, xinfAP)."""
        fam = self._family if self.spec is not None else self._trec_family
        if fam is not None:
            assert fam.kernel is not None, fam.name
            if not fam.cutoffs:
                return Computation(fam.kernel, fam.layout, fam, params=self.params)
            cut = self.cutoff if self.spec is None else self._spec_cutoff(fam)
            return Computation(fam.kernel, fam.layout, fam, cut)
        k = self._kind
        assert k.kernel is not None, k.name
        return Computation(k.kernel, k.layout, None, self.cutoff)

    @property
    def _trec_family(self) -> Family | None:
        k = self._kind
        name = k.trec if self.cutoff is None else k.trec_cut
        return defs.BY_NAME[name] if name else None

    def _spec_cutoff(self, fam: Family) -> int | None:
        if fam.params == defs.NONE:
            return None
        (cut,) = self.params  # a trec_eval measure of one cutoff (relative_P.5)
        return int(cut)

    def format(self, value: float) -> str:
        """The value as trec_eval prints it (``%6.4f`` or an integer), never a negative zero
        (an interval's bound a rounding below 0)."""
        if self.integer:
            return str(round(value))
        text = f"{value:.4f}"
        return text[1:] if text == "-0.0000" else text

    def __str__(self) -> str:
        return self.name


# ----------------------------------------------------------------------------- the front door


@dataclass(frozen=True)
class Plan:
    """What :func:`resolve` found: the engine and what it computes. ``ranking``: ``measures``
    (one value per query each); ``trec_eval``: ``columns`` (trec_eval's families in its order,
    with their parameters and printed names)."""

    engine: str
    version: str
    measures: tuple[Measure, ...] = ()
    columns: tuple[defs.Column, ...] = ()


class _Unknown(CmrkitError):
    """A name neither vocabulary has (as opposed to a known name written wrongly)."""


def _unknown(what: str, text: str, version: str, valid: str) -> _Unknown:
    """The one line for an unknown measure name: ``what`` 'measure' or 'trec_eval measure',
    then a name a typo or two away in either vocabulary (did you mean), then ``valid``."""
    import difflib

    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(.*)", text, re.S)
    near = ""
    if m is not None:
        names = [k.name for k in _KINDS] + [f.ir_name for f in defs.FAMILIES if f.ir_name]
        names += [f.name for f in defs.families(version)] + list(defs.NICKNAMES[version])
        by_lower = {n.lower(): n for n in reversed(names)}  # the first spelling of a name
        close = difflib.get_close_matches(m.group(1).lower(), list(by_lower), n=1, cutoff=0.75)
        if close:
            near = f" (did you mean {by_lower[close[0]] + m.group(2)!r}?)"
    return _Unknown(f"unknown {what} {text!r}{near}; {valid}")


@dataclass(frozen=True)
class _Item:
    """One measure as asked for, and how each engine reads it (an error where it cannot)."""

    text: str
    measures: tuple[Measure, ...] | CmrkitError
    native: bool  # an ir_measures name: the ranking engine's own vocabulary
    marks: tuple[tuple[str, str | None, object], ...] | CmrkitError  # (family, params, cutoff)
    values: tuple[str, ...] = ()  # the trec_eval reading's printed names


def resolve(
    texts: str | Sequence[str] | None,
    version: str = defs.DEFAULT_VERSION,
    *,
    engine: str | None = None,
    trec_output: bool = False,
) -> Plan:
    """Read the measures asked for once, and choose the engine that computes them.

    ``texts``: ``-m`` values (each may hold several comma-separated measures: ``AP,P@10``;
    a part that names no measure continues the parameters of the trec_eval measure before it,
    so ``map,P.5,10`` is map and P at 5 and 10, as a trec_eval user means it); None or empty:
    the default set (the ranking engine's, or trec_eval's ``official``). ``engine``: the engine
    the caller needs (``ranking`` for groups, comparisons and per-query scorers, ``trec_eval``
    for trec_eval's options); None: ``ranking`` where every name is an ir_measures name, else
    ``trec_eval`` where trec_eval has every one, else ``ranking`` where each has one value per
    query; ``trec_output`` (``-f trec``) tries ``trec_eval`` first.
    Raises CmrkitError (one line) naming the measure no engine reads, and why.
    """
    if version not in defs.VERSIONS:
        raise CmrkitError(f"--trec-eval {version!r}: choose 9 (9.0.8) or 10 (10.0)")
    if isinstance(texts, str):
        texts = [texts]
    if not texts:
        use = engine or (TREC_EVAL if trec_output else RANKING)
        defaults = DEFAULT_TREC if use == TREC_EVAL else DEFAULT_MEASURES
        return _plan(use, [_item(t, version) for t in defaults], version)
    items = [_item(t, version) for t in _split(texts)]
    if not items:
        raise CmrkitError(
            f"-m {', '.join(map(repr, texts))} names no measure; e.g. -m AP or -m map,P.5,10"
        )
    if engine is not None:
        return _plan(engine, items, version)
    readers = {
        "native": all(i.native for i in items),
        TREC_EVAL: all(not isinstance(i.marks, CmrkitError) for i in items),
        RANKING: all(not isinstance(i.measures, CmrkitError) for i in items),
    }
    order = [TREC_EVAL, "native", RANKING] if trec_output else ["native", TREC_EVAL, RANKING]
    for choice in order:
        if readers[choice]:
            return _plan(TREC_EVAL if choice == TREC_EVAL else RANKING, items, version)
    raise _neither(items, trec_output)


def _plan(engine: str, items: list[_Item], version: str) -> Plan:
    if engine == RANKING:
        out: list[Measure] = []
        for item in items:
            if isinstance(item.measures, CmrkitError):
                raise _ranking_error(item)
            out.extend(m for m in item.measures if m not in out)
        return Plan(RANKING, version, tuple(out))
    if engine != TREC_EVAL:
        raise ValueError(f"no engine {engine!r}")
    req = defs.Request()
    for item in items:
        if isinstance(item.marks, CmrkitError):
            raise _trec_error(item)
        for name, params, cutoff in item.marks:
            req.mark(name)
            if params is not None and name not in req.params:
                req.params[name] = params
            if cutoff is not None:
                values = req.cutoffs.setdefault(name, [])
                if cutoff not in values:
                    values.append(cutoff)
    return Plan(TREC_EVAL, version, columns=tuple(defs.columns(req, version)))


def _ranking_error(item: _Item) -> CmrkitError:
    """Why the ranking engine cannot compute an item (one value per query and measure)."""
    error = item.measures
    assert isinstance(error, CmrkitError)
    if len(item.values) <= 1:
        return error
    shown = ", ".join(item.values[:4]) + (", ..." if len(item.values) > 4 else "")
    count = len(item.values)
    if isinstance(error, _Unknown):
        return CmrkitError(
            f"measure {item.text!r} gives {count} values ({shown}); name one, e.g. P.10 or P@10"
        )
    return CmrkitError(f"{error} (trec_eval's {item.text} gives {count} values: {shown})")


def _trec_error(item: _Item) -> CmrkitError:
    """Why trec_eval's engine cannot compute an item."""
    assert isinstance(item.marks, CmrkitError)
    if isinstance(item.marks, _Unknown) and item.native:
        return CmrkitError(
            f"measure {item.text!r} is cmrkit's own, not trec_eval's: it goes with neither "
            "trec_eval's options (-l, -N, -n, -J, -R, -Z) nor a run or qrels read from stdin"
        )
    return item.marks


def _neither(items: list[_Item], trec_output: bool) -> CmrkitError:
    """No engine reads every item: the first item no engine reads, else the two that part."""
    for item in items:
        rank, trec = item.measures, item.marks
        if isinstance(rank, CmrkitError) and isinstance(trec, CmrkitError):
            known = [e for e in ((trec, rank) if trec_output else (rank, trec))
                     if not isinstance(e, _Unknown)]  # fmt: skip
            if known:
                return known[0]
            return CmrkitError(
                f"{rank}; or trec_eval's names (map_cut.10, P.5,10, all_trec; see "
                "docs/evaluation.md)"
            )
    only_rank = next(i for i in items if isinstance(i.marks, CmrkitError))
    only_trec = next(i for i in items if isinstance(i.measures, CmrkitError))
    return CmrkitError(
        f"measure {only_rank.text!r} is cmrkit's own and {only_trec.text!r} only trec_eval's "
        "(not one value per query): ask for them in two calls"
    )


def _split(texts: Sequence[str]) -> list[str]:
    """The measures in ``-m`` texts: separated by commas, a part that names no measure
    continuing the parameters of the dotted trec_eval measure before it (``P.5,10``,
    ``utility.1,-1,0,0``, ``ndcg.1=3,2=9``, ``iprec_at_recall..10,.20``)."""
    items: list[str] = []
    for text in texts:
        open_item = None
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if open_item is not None and not _names_a_measure(part):
                items[open_item] += "," + part
                continue
            items.append(part)
            name = part.partition(".")[0]
            dotted = "." in part and (
                name in defs.BY_NAME
                or name.lower() in _TREC_CUT_NAMES
                or any(name in n for n in defs.NICKNAMES.values())
            )
            open_item = len(items) - 1 if dotted else None
    return items


def _names_a_measure(part: str) -> bool:
    m = _NAME.match(part)
    if m is None:
        return False
    name = m.group(1)
    low = name.lower()
    if low in _BY_NAME or low in defs.IR_NAMES or name in defs.BY_NAME:
        return True
    if any(name in n for n in defs.NICKNAMES.values()):
        return True
    t = _TREC_SYNTAX.fullmatch(name)
    return bool(t and t.group(1).lower() in _TREC_CUT_NAMES)


def _item(text: str, version: str) -> _Item:
    values: tuple[str, ...] = ()
    try:
        marks: tuple | CmrkitError = _trec_marks(text, version)
        req = defs.Request()
        for name, params, cutoff in marks:
            req.mark(name)
            if params is not None:
                req.params.setdefault(name, params)
            if cutoff is not None:
                req.cutoffs.setdefault(name, []).append(cutoff)
        cols = defs.columns(req, version)
        values = tuple(n for c in cols if c.family.name not in ("runid", "num_q") for n in c.names)
    except CmrkitError as e:
        marks = e
    try:
        measures, native = _ranking_measures(text, version)
    except CmrkitError as e:
        measures, native = e, False
    return _Item(text, measures, native, marks, values)


# ----------------------------------------------------------------------------- ranking reading


def _valid_list() -> str:
    names = []
    for k in _KINDS:
        cut = k.cutoff
        names.append(k.name if cut is None else f"{k.name}@k" if cut.required else f"{k.name}[@k]")
    return ", ".join(names)


def _make(kind: Kind, cutoff_text: str | None, text: str) -> Measure:
    cut = kind.cutoff
    if cutoff_text is None:
        if cut is not None and cut.required:
            raise CmrkitError(f"measure {text!r} needs a cutoff, e.g. {kind.name}@10")
        return Measure(kind.name)
    if cut is None:
        raise CmrkitError(f"measure {kind.name} takes no cutoff; write {kind.name!r}")
    whole = cutoff_text.isascii() and cutoff_text.isdigit()
    if not whole or not cut.low <= int(cutoff_text) <= cut.high:
        raise CmrkitError(
            f"measure {text!r}: the cutoff must be an integer from {cut.low} to {cut.high:,}, "
            f"e.g. {kind.name}@10"
        )
    return Measure(kind.name, int(cutoff_text))


def _ranking_measures(text: str, version: str) -> tuple[tuple[Measure, ...], bool]:
    """The ranking engine's reading: (measures, whether ``text`` is an ir_measures name)."""
    if "(" in text:
        raise CmrkitError(
            f"measure {text!r}: parameters such as (rel=2) are not supported; "
            f"valid measures: {_valid_list()}"
        )
    m = _SYNTAX.fullmatch(text)
    if m:
        base = m.group(1).lower()
        base = defs.IR_ALIASES.get(base, base).lower()
        if base in _BY_NAME:
            return (_make(_BY_NAME[base], m.group(2), text),), True
        if base in _TREC_NAMES and m.group(2) is None:
            return (_make(_TREC_NAMES[base], None, text),), True
    t = _TREC_SYNTAX.fullmatch(text)
    if t and t.group(1).lower() in _TREC_CUT_NAMES:
        return (_make(_TREC_CUT_NAMES[t.group(1).lower()], t.group(2), text),), True
    return _trec_family_measures(text, version), False


def _trec_family_measures(text: str, version: str) -> tuple[Measure, ...]:
    """A trec_eval family as measures with one value per query: one per cutoff of a family
    with cutoffs (``P.5,10`` is P@5 and P@10), else one (``set_F.0.5``, ``SetF``)."""
    spec = _ir_spec(text) or text
    name, dot, params = spec.partition(".")
    fam = defs.BY_NAME.get(name)
    if fam is None:
        raise _unknown("measure", text, version, f"valid measures: {_valid_list()}")
    defs.check_version(name, version)
    if (
        fam.rel_format != "qrels"
        or not fam.per_query
        or fam.summary in (defs.GEOMETRIC, defs.NO_SUMMARY, defs.NUM_Q)
    ):
        raise CmrkitError(
            f"measure {text!r} has no value per query to group or compare; "
            f"valid measures: {_valid_list()}, or trec_eval's per-query ones (set_F, utility, ...)"
        )
    req = defs.Request()
    req.mark(name)
    if dot:
        if not params:
            raise CmrkitError(f"measure {text!r}: nothing after the '.'; e.g. P.5,10")
        req.params[name] = params
    elif fam.params in (defs.CUT_LONG, defs.CUT_DOUBLE):
        example = f"{name}.10" if fam.params == defs.CUT_LONG else f"{name}..5"
        raise CmrkitError(f"measure {text!r} gives a value per cutoff; name one, e.g. {example}")
    col = defs.column(name, req)
    if fam.params not in (defs.CUT_LONG, defs.CUT_DOUBLE):
        return (Measure(TREC_EVAL_KIND.name, spec=spec, label=col.names[0], params=col.params),)
    kind = _TREC_CUT_NAMES.get(name.lower())
    return tuple(
        Measure(kind.name, int(c))
        if kind is not None
        else Measure(TREC_EVAL_KIND.name, spec=f"{name}.{c}", label=label, params=[c])
        for c, label in zip(col.params, col.names, strict=True)
    )


def _ir_spec(text: str) -> str | None:
    """An ir_measures name of a trec_eval family cmrkit registers no kind for (``SetF``,
    ``IPrec@0.2``) as trec_eval's ``NAME.PARAMS``; None for any other text."""
    m = defs.IR.fullmatch(text)
    if not m or m.group(1).lower() not in defs.IR_NAMES:
        return None
    plain, cut = defs.IR_NAMES[m.group(1).lower()]
    if m.group(2) is None:
        if plain is None:
            raise CmrkitError(f"measure {text!r} needs a cutoff, e.g. {m.group(1)}@10")
        return plain
    if cut is None:
        raise CmrkitError(f"measure {m.group(1)} takes no cutoff; write {m.group(1)!r}")
    return f"{cut}.{m.group(2)}"


# ----------------------------------------------------------------------------- trec_eval reading


def _trec_marks(text: str, version: str) -> tuple[tuple[str, str | None, object], ...]:
    """trec_eval's reading of one measure: the families it marks, with the parameters
    written (``P.5,10``) or the cutoff of an ir_measures name (``P@5``)."""
    name, dot, params = text.partition(".")
    nick = defs.NICKNAMES[version].get(name)
    if nick is not None or name in defs.BY_NAME:
        if dot and not params:
            raise CmrkitError(f"measure {text!r}: nothing after the '.'; e.g. P.5,10")
        if nick is not None:
            return tuple((n, None, None) for n in nick)
        defs.check_version(name, version)
        return ((name, params if dot else None, None),)
    if not dot or "@" in text:
        mark = defs.ir_mark(text, version)
        if mark is not None:
            return (mark,)
    raise _unknown(
        "trec_eval measure",
        text,
        version,
        f"trec_eval {defs.VERSION_NAMES[version]} has "
        f"{', '.join(f.name for f in defs.families(version))} and the sets "
        f"{', '.join(defs.NICKNAMES[version])}",
    )


# ----------------------------------------------------------------------------- for other commands


def parse_measures(
    texts: str | Sequence[str | Measure] | None, version: str = defs.DEFAULT_VERSION
) -> list[Measure]:
    """The measures the ranking engine computes for ``texts`` (see :func:`resolve`), in the
    order given, duplicates dropped; the default set when none given. Measures already read
    are kept as they are."""
    if texts and not isinstance(texts, str) and all(isinstance(m, Measure) for m in texts):
        return list(texts)  # type: ignore[arg-type]
    if texts and not isinstance(texts, str):
        texts = [m.spec or m.name if isinstance(m, Measure) else m for m in texts]
    return list(resolve(texts, version, engine=RANKING).measures)


def parse_measure(text: str, version: str = defs.DEFAULT_VERSION) -> Measure:
    """One measure with one value per query (``AP@10``, ``map_cut_10``, ``P.10``, ``set_F``);
    raises CmrkitError for several (``AP,P@10``, ``P.5,10``) or none."""
    measures = parse_measures([text], version)
    if len(measures) != 1:
        names = ", ".join(m.name for m in measures)
        raise CmrkitError(f"measure {text!r} gives {len(measures)} values ({names}); name one")
    return measures[0]
