"""trec_eval's measures, one registered definition per family (9.0.8 and 10.0).

A :class:`Family` says what a measure is, not how it is computed (that is
``evaluation/trec_eval.py``): its trec_eval name, the kind of parameters it takes and their
defaults, how per-query values are summarised, how they are printed, which trec_eval versions
have it and which input format it needs. :func:`parse_request` reads trec_eval's ``-m``
syntax (``P.5,7,3``, ``ndcg.1=3,2=9``, ``iprec_at_recall..10,.20``, nicknames such as
``all_trec``) and the ir_measures names that have a trec_eval counterpart (``P@5``,
``nDCG@10``, ``SetF``, ``NumNonRelJudgedRet``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cmrkit.errors import CmrkitError

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


_IR = re.compile(r"([A-Za-z_]+)(?:@(\S+))?")
# ir_measures names (and cmrkit's aliases) of trec_eval families: name -> (family, family@k)
IR_NAMES = {
    "ap": ("map", "map_cut"),
    "map": ("map", "map_cut"),
    "p": (None, "P"),
    "prec": (None, "P"),
    "r": (None, "recall"),
    "recall": (None, "recall"),
    "ndcg": ("ndcg", "ndcg_cut"),
    "rr": ("recip_rank", None),
    "mrr": ("recip_rank", None),
    "rprec": ("Rprec", None),
    "bpref": ("bpref", None),
    "infap": ("infAP", None),
    "success": (None, "success"),
    "setp": ("set_P", None),
    "setr": ("set_recall", None),
    "setf": ("set_F", None),
    "setap": ("set_map", None),
    "numq": ("num_q", None),
    "numret": ("num_ret", None),
    "numrel": ("num_rel", None),
    "numrelret": ("num_rel_ret", None),
    "numnonreljudgedret": ("num_nonrel_judged_ret", None),
    "iprec": (None, "iprec_at_recall"),
    "rbp": ("rbp", None),
}


def _check_version(name: str, version: str) -> None:
    family = BY_NAME[name]
    if version not in family.versions:
        have = " and ".join(VERSION_NAMES[v] for v in family.versions)
        raise CmrkitError(
            f"measure {name} is in trec_eval {have} only, not in "
            f"{VERSION_NAMES[version]}; pass --trec-eval {family.versions[0]}"
        )


def _ir_request(text: str, req: Request, version: str) -> bool:
    """An ir_measures name of a trec_eval measure: mark it; False if it is none."""
    m = _IR.fullmatch(text.strip())
    if not m:
        return False
    names = IR_NAMES.get(m.group(1).lower())
    if names is None:
        return False
    plain, cut = names
    if m.group(2) is None:
        if plain is None:
            raise CmrkitError(f"measure {text!r} needs a cutoff, e.g. {m.group(1)}@10")
        _check_version(plain, version)
        req.mark(plain)
        return True
    if cut is None:
        if plain == "recip_rank":
            return False  # RR@k: cmrkit's own measure, not trec_eval's
        raise CmrkitError(f"measure {m.group(1)} takes no cutoff; write {m.group(1)!r}")
    family = BY_NAME[cut]
    value: float | int
    try:
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
    _check_version(cut, version)
    req.mark(cut)
    values = req.cutoffs.setdefault(cut, [])
    if value not in values:
        values.append(value)
    return True


def parse_request(texts: list[str] | tuple[str, ...], version: str = DEFAULT_VERSION) -> Request:
    """trec_eval's ``-m`` arguments (and ir_measures names of its measures) -> a Request.

    Raises CmrkitError (one line) for a name that is neither, naming the version that has it.
    """
    if version not in VERSIONS:
        raise CmrkitError(f"--trec-eval {version!r}: choose 9 (9.0.8) or 10 (10.0)")
    req = Request()
    for text in texts:
        for part in _split(text):
            _mark(part, req, version)
    return req


def _split(text: str) -> list[str]:
    """``-m`` text -> measure requests: trec_eval's ``NAME.PARAMS`` whole, ir_measures names
    separated by commas (``AP,P@10``)."""
    name = text.split(".", 1)[0]
    if "." in text and (name in BY_NAME or any(name in n for n in NICKNAMES.values())):
        return [text]
    return [p for p in text.split(",") if p.strip()]


def _mark(text: str, req: Request, version: str) -> None:
    name, dot, params = text.partition(".")
    nick = NICKNAMES[version].get(name)
    if nick is not None or name in BY_NAME:
        if dot and not params:
            raise CmrkitError(f"measure {text!r}: nothing after the '.'; e.g. P.5,10")
        if dot and name not in req.params:
            req.params[name] = params
        if nick is not None:
            for n in nick:
                req.mark(n)
            return
        _check_version(name, version)
        req.mark(name)
        return
    if not dot and _ir_request(text, req, version):
        return
    raise CmrkitError(
        f"unknown trec_eval measure {text!r}; trec_eval {VERSION_NAMES[version]} has "
        f"{', '.join(f.name for f in families(version))} and the sets "
        f"{', '.join(NICKNAMES[version])}"
    )


def is_trec_request(text: str, version: str = DEFAULT_VERSION) -> bool:
    """Whether every measure in ``text`` is a trec_eval measure (by either name)."""
    try:
        parse_request([text], version)
    except CmrkitError:
        return False
    return True
