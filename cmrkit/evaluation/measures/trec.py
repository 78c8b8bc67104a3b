"""trec_eval's measures, one registered definition per family (9.0.8 and 10.0).

A :class:`Family` says what a measure is, not how it is computed (that is
``evaluation/trec_eval.py``): its trec_eval name, the kind of parameters it takes and their
defaults, how per-query values are summarised, how they are printed, which trec_eval versions
have it and which input format it needs, and its ir_measures name (``ir_name``: the one place
the two vocabularies meet). :func:`column` sets up a family's parameters as trec_eval's
te_init_meas_* do (``P.5,7,3``, ``ndcg.1=3,2=9``, ``iprec_at_recall..10,.20``) and names the
values it prints; reading ``-m`` texts is ``measures.resolve``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cmrkit.errors import CmrkitError
from cmrkit.trec import c_atol, c_strtod

VERSIONS = ("9", "10")
MAX_CUTOFF = 1_000_000_000  # trec_eval reads cutoffs as C longs; no ranking is this deep
DEFAULT_VERSION = "10"
VERSION_NAMES = {"9": "9.0.8", "10": "10.0"}

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


@dataclass(frozen=True)
class Family:
    """One trec_eval measure family."""

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
    extra: dict = field(default_factory=dict, compare=False, hash=False)


_LONG9 = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_RECALL11 = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_RPREC = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)

# In trec_eval's order (measures.c): measures are computed and printed in this order.
FAMILIES: tuple[Family, ...] = (
    Family("runid", summary=NO_SUMMARY, per_query=False, help="the run's tag"),
    Family("num_q", summary=NUM_Q, integer=True, per_query=False, ir_name="NumQ",
           help="number of queries evaluated"),
    Family("num_ret", summary=SUM, integer=True, ir_name="NumRet",
           help="documents retrieved"),
    Family("num_rel", summary=NUM_REL, integer=True, ir_name="NumRel",
           help="relevant documents (rel >= -l)"),
    Family("num_rel_ret", summary=SUM, integer=True, ir_name="NumRelRet",
           help="relevant documents retrieved"),
    Family("map", ir_name="AP", help="mean average precision"),
    Family("gm_map", summary=GEOMETRIC, per_query=False,
           help="geometric mean of AP (each AP at least 0.00001)"),
    Family("Rprec", ir_name="Rprec", help="precision after R documents"),
    Family("bpref", ir_name="Bpref", help="binary preference"),
    Family("recip_rank", ir_name="RR", help="reciprocal rank of the first relevant document"),
    Family("iprec_at_recall", CUT_DOUBLE, _RECALL11, ir_name="IPrec",
           help="interpolated precision at recall levels (10.0 rounds the cutoff, 9.0.8 adds "
           "0.9 and truncates)"),
    Family("P", CUT_LONG, _LONG9, ir_name="P", help="precision at k"),
    Family("relstring", P_DOUBLE, (10.0,), summary=NO_SUMMARY,
           help="relevance of the top N documents as a string"),
    Family("recall", CUT_LONG, _LONG9, ir_name="R", help="recall at k"),
    Family("infAP", ir_name="infAP", help="inferred AP (Yilmaz & Aslam 2006)"),
    Family("gm_bpref", summary=GEOMETRIC, per_query=False, help="geometric mean of bpref"),
    Family("Rprec_mult", CUT_DOUBLE, _RPREC, help="precision at x*R documents"),
    Family("utility", P_DOUBLE, (1.0, -1.0, 0.0, 0.0),
           help="a*rel_ret + b*nonrel_ret + c*rel_nonret + d*nonrel_nonret"),
    Family("11pt_avg", P_DOUBLE, _RECALL11,
           help="mean interpolated precision at the recall points"),
    Family("binG", help="binary G (Dupret)"),
    Family("G", P_PAIR, help="normalized cumulative gain with a cost (Dupret)"),
    Family("dcg", P_PAIR, versions=("10",), help="discounted cumulative gain"),
    Family("ideal_dcg", P_PAIR, versions=("10",), help="ideal discounted cumulative gain"),
    Family("ndcg", P_PAIR, ir_name="nDCG", help="normalized DCG, gains = rel levels"),
    Family("ndcg_rel", P_PAIR, help="nDCG averaged over relevant documents"),
    Family("Rndcg", P_PAIR, help="nDCG averaged at the rank of each gain change"),
    Family("ndcg_cut", CUT_LONG, _LONG9, ir_name="nDCG", help="nDCG at k"),
    Family("map_cut", CUT_LONG, _LONG9, ir_name="AP", help="AP over the top k"),
    Family("relative_P", CUT_LONG, _LONG9, help="P@k divided by the best possible P@k"),
    Family("success", CUT_LONG, (1, 5, 10), ir_name="Success",
           help="1 if a relevant document is in the top k"),
    Family("set_P", ir_name="SetP", help="precision of the retrieved set"),
    Family("set_relative_P", help="set_P divided by the best possible"),
    Family("set_recall", ir_name="SetR", help="recall of the retrieved set"),
    Family("set_map", ir_name="SetAP", help="set_P * set_recall"),
    Family("set_F", P_DOUBLE, (1.0,), ir_name="SetF", help="F measure of the retrieved set"),
    Family("num_nonrel_judged_ret", summary=SUM, integer=True, ir_name="NumNonRelJudgedRet",
           help="judged non-relevant documents retrieved"),
    Family("prefs_num_prefs_poss", summary=SUM, integer=True, rel_format="prefs",
           help="preferences possible"),
    Family("prefs_num_prefs_ful", summary=SUM, integer=True, rel_format="prefs",
           help="preferences fulfilled"),
    Family("prefs_num_prefs_ful_ret", summary=SUM, integer=True, rel_format="prefs",
           help="preferences fulfilled among retrieved documents"),
    Family("prefs_simp", rel_format="prefs", help="fraction of preferences fulfilled"),
    Family("prefs_pair", rel_format="prefs", help="mean over judged documents of prefs_simp"),
    Family("prefs_avgjg", rel_format="prefs", help="prefs_simp averaged over judgment groups"),
    Family("prefs_avgjg_Rnonrel", rel_format="prefs",
           help="prefs_avgjg, non-relevant documents limited to R"),
    Family("prefs_simp_ret", rel_format="prefs", help="prefs_simp over retrieved documents"),
    Family("prefs_pair_ret", rel_format="prefs", help="prefs_pair over retrieved documents"),
    Family("prefs_avgjg_ret", rel_format="prefs", help="prefs_avgjg over retrieved documents"),
    Family("prefs_avgjg_Rnonrel_ret", rel_format="prefs",
           help="prefs_avgjg_Rnonrel over retrieved documents"),
    Family("prefs_simp_imp", rel_format="prefs", help="prefs_simp, implied preferences"),
    Family("prefs_pair_imp", rel_format="prefs", help="prefs_pair, implied preferences"),
    Family("prefs_avgjg_imp", rel_format="prefs", help="prefs_avgjg, implied preferences"),
    Family("map_avgjg", rel_format="qrels_jg", help="map averaged over judgment groups"),
    Family("P_avgjg", CUT_LONG, _LONG9, rel_format="qrels_jg",
           help="P@k averaged over judgment groups"),
    Family("Rprec_mult_avgjg", CUT_DOUBLE, _RPREC, rel_format="qrels_jg",
           help="Rprec_mult averaged over judgment groups"),
    Family("yaap", help="yet another AP (Robertson)"),
    Family("rbp", P_PAIR, versions=("10",), ir_name="RBP",
           help="rank-biased precision (p=0.9 unless rbp.p=X)"),
    Family("rbp_resid", P_PAIR, versions=("10",), help="RBP residual of unjudged documents"),
    Family("unj", CUT_LONG, (5, 10, 20), versions=("10",),
           help="fraction of the top k not judged"),
)  # fmt: skip
BY_NAME = {f.name: f for f in FAMILIES}

_TREC_9 = (
    "runid num_q num_ret num_rel num_rel_ret map gm_map Rprec bpref recip_rank "
    "iprec_at_recall P relstring recall infAP gm_bpref utility 11pt_avg ndcg relative_P "
    "Rprec_mult success map_cut ndcg_cut ndcg_rel Rndcg binG G set_P set_recall "
    "set_relative_P set_map set_F num_nonrel_judged_ret"
).split()
_TREC_10 = _TREC_9[:14] + ["unj", "rbp", "rbp_resid"] + _TREC_9[14:]
_PREFS_ALL = (
    "runid num_q prefs_num_prefs_poss prefs_num_prefs_ful prefs_num_prefs_ful_ret prefs_simp "
    "prefs_pair prefs_avgjg prefs_avgjg_Rnonrel prefs_simp_ret prefs_pair_ret prefs_avgjg_ret "
    "prefs_avgjg_Rnonrel_ret prefs_simp_imp prefs_pair_imp prefs_avgjg_imp"
).split()
_NICK_COMMON = {
    "official": "runid num_q num_ret num_rel num_rel_ret map gm_map Rprec bpref recip_rank "
    "iprec_at_recall P".split(),
    "set": "runid num_q num_ret num_rel num_rel_ret utility set_P set_recall set_relative_P "
    "set_map set_F".split(),
    "all_prefs": _PREFS_ALL,
    "prefs": "runid num_q prefs_num_prefs_poss prefs_num_prefs_ful prefs_num_prefs_ful_ret "
    "prefs_simp prefs_pair prefs_avgjg".split(),
    "qrels_jg": "runid num_q map_avgjg P_avgjg Rprec_mult_avgjg".split(),
}
NICKNAMES = {
    "9": {**_NICK_COMMON, "all_trec": _TREC_9},
    "10": {**_NICK_COMMON, "all_trec": _TREC_10},
}


def families(version: str) -> list[Family]:
    """The measure families of one version, in its order."""
    return [f for f in FAMILIES if version in f.versions]


@dataclass
class Request:
    """Measures asked for: families marked, and the first parameter string given for each
    (trec_eval keeps the first ``-m NAME.PARAMS`` of a family)."""

    marked: list[str] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    cutoffs: dict[str, list] = field(default_factory=dict)  # from ir_measures names (P@5)

    def mark(self, name: str) -> None:
        if name not in self.marked:
            self.marked.append(name)


IR = re.compile(r"([A-Za-z_]+)(?:@(\S+))?")
# other names users write for measures with an ir_measures name (lower case -> that name)
IR_ALIASES = {"map": "AP", "mrr": "RR", "recall": "R", "ndcg": "nDCG", "prec": "P"}


def _ir_names() -> dict[str, tuple[str | None, str | None]]:
    """ir_measures names (lower case, and their aliases) -> (the family without a cutoff, the
    family with one), from each family's ``ir_name``: the one place the mapping is written."""
    out: dict[str, list[str | None]] = {}
    for f in FAMILIES:
        if f.ir_name is not None:
            pair = out.setdefault(f.ir_name.lower(), [None, None])
            pair[1 if f.params in (CUT_LONG, CUT_DOUBLE) else 0] = f.name
    names = {k: (v[0], v[1]) for k, v in out.items()}
    names.update({alias: names[name.lower()] for alias, name in IR_ALIASES.items()})
    return names


# ir_measures names (and cmrkit's aliases) of trec_eval families: name -> (family, family@k)
IR_NAMES = _ir_names()


def check_version(name: str, version: str) -> None:
    """Refuse a family that ``version`` lacks, naming the version that has it."""
    family = BY_NAME[name]
    if version not in family.versions:
        have = " and ".join(VERSION_NAMES[v] for v in family.versions)
        raise CmrkitError(
            f"measure {name} is in trec_eval {have} only, not in "
            f"{VERSION_NAMES[version]}; pass --trec-eval {family.versions[0]}"
        )


def ir_mark(text: str, version: str) -> tuple[str, None, object] | None:
    """An ir_measures name of a trec_eval family as trec_eval's request: (family, None, its
    cutoff or None); None when ``text`` is no such name (``RR@10`` is cmrkit's own)."""
    m = IR.fullmatch(text.strip())
    if not m:
        return None
    names = IR_NAMES.get(m.group(1).lower())
    if names is None:
        return None
    plain, cut = names
    if m.group(2) is None:
        if plain is None:
            raise CmrkitError(f"measure {text!r} needs a cutoff, e.g. {m.group(1)}@10")
        check_version(plain, version)
        return (plain, None, None)
    if cut is None:
        if plain == "recip_rank":
            return None  # RR@k: cmrkit's own measure, not trec_eval's
        raise CmrkitError(f"measure {m.group(1)} takes no cutoff; write {m.group(1)!r}")
    family = BY_NAME[cut]
    value: float | int
    try:
        if not m.group(2).isascii():
            raise ValueError(m.group(2))
        value = float(m.group(2)) if family.params == CUT_DOUBLE else int(m.group(2))
    except ValueError:
        raise CmrkitError(
            f"measure {text!r}: the cutoff {m.group(2)!r} is not a "
            f"{'number' if family.params == CUT_DOUBLE else 'whole number'}"
        ) from None
    if family.params == CUT_LONG and not 1 <= value <= MAX_CUTOFF:
        raise CmrkitError(
            f"measure {text!r}: the cutoff must be an integer from 1 to {MAX_CUTOFF:,}"
        )
    check_version(cut, version)
    return (cut, None, value)


# ----------------------------------------------------------------------------- parameters


@dataclass
class Column:
    """One family as set up for an evaluation (te_init_meas_*): its parameters and the names
    its values print under."""

    family: Family
    params: object
    names: list[str]


_CUTOFF = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]", re.ASCII)
_C_SPACE = " \t\n\v\f\r"


def _atof(text: str, measure: str) -> float:
    """A parameter as trec_eval's atof reads it; refused where it reads no number at all."""
    value, used = c_strtod(text.lstrip(_C_SPACE))
    if not used:
        raise CmrkitError(f"measure {measure}: parameter {text!r} is not a number")
    return value


def column(name: str, req: Request) -> Column:
    """te_init_meas_*: the family's parameters from the first ``-m NAME.PARAMS`` (else the
    ir_measures cutoffs, else the defaults) and its printed names."""
    fam = BY_NAME[name]
    text = req.params.get(name)
    kind = fam.params
    if kind == NONE:
        return Column(fam, None, [] if name == "runid" else [name])
    if kind == CUT_LONG:
        return _cut_long(fam, text, req)
    if kind == CUT_DOUBLE:
        if text is not None:
            dcut = sorted(_atof(t, f"{name}.{text}") for t in text.split(","))
        else:
            dcut = sorted(float(c) for c in req.cutoffs.get(name, fam.default))
        if len(set(dcut)) != len(dcut):
            raise CmrkitError(f"measure {name}: a cutoff is given twice")
        width = len(name) + 9  # append_double's buffer
        return Column(fam, dcut, [f"{name}_{c:3.2f}"[:width] for c in dcut])
    if kind == P_DOUBLE:
        values = (
            [_atof(t, f"{name}.{text}") for t in text.split(",")]
            if text is not None
            else list(fam.default)
        )
        return Column(fam, values, [f"{name}_{text}" if text is not None else name])
    return Column(fam, _pairs(name, text), [f"{name}_{text}" if text is not None else name])


def _cut_long(fam: Family, text: str | None, req: Request) -> Column:
    name = fam.name
    if text is not None:
        items = text.split(",")
        if any(not _CUTOFF.match(t) for t in items):
            raise CmrkitError(f"measure {name}.{text}: cutoffs are whole numbers, e.g. {name}.5,10")
        cut = sorted(c_atol(t) for t in items)
    else:
        cut = sorted(int(c) for c in req.cutoffs.get(name, fam.default))
    if cut[0] <= 0 or cut[-1] > MAX_CUTOFF:
        raise CmrkitError(f"measure {name}: the cutoff must be an integer from 1 to {MAX_CUTOFF:,}")
    if len(set(cut)) != len(cut):
        raise CmrkitError(f"measure {name}: a cutoff is given twice")
    return Column(fam, cut, [f"{name}_{c}" for c in cut])


def _pairs(name: str, text: str | None) -> list[tuple[str, float]] | None:
    """P_PAIR parameters: name=value,name=value (None: the defaults)."""
    if text is None:
        return None
    pairs = []
    for item in text.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key or "=" in value:
            raise CmrkitError(
                f"measure {name}.{text}: parameters are name=value pairs, e.g. "
                f"{name}.1=3,2=9 or rbp.p=0.8"
            )
        pairs.append((key, _atof(value, f"{name}.{text}")))
    return pairs


def columns(req: Request, version: str) -> list[Column]:
    """The families a request marks, in trec_eval's order for ``version``, set up."""
    return [column(f.name, req) for f in families(version) if f.name in req.marked]
