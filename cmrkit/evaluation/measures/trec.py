"""trec_eval's vocabulary (9.0.8 and 10.0): its families in its order, its sets, and its
parameters as it reads them.

Each :class:`~cmrkit.evaluation.measures.base.Family` (what a measure is: its trec_eval name,
the kind of parameters it takes and their defaults, how per-query values are summarised, how
they are printed, which versions have it, which input format it needs, its ir_measures name)
is defined beside its kernel in a definition module (``ranked.py``, ``dcg.py``, ``rows.py``,
``prefs.py``); this module puts them in trec_eval's order (:data:`FAMILIES`). :func:`column`
sets up a family's parameters as trec_eval's te_init_meas_* do (``P.5,7,3``, ``ndcg.1=3,2=9``,
``iprec_at_recall..10,.20``) and names the values it prints; reading ``-m`` texts is
``measures.resolve``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# the definition modules, each registering its families beside their kernels
import cmrkit.evaluation.measures.dcg  # noqa: F401
import cmrkit.evaluation.measures.own  # noqa: F401
import cmrkit.evaluation.measures.prefs  # noqa: F401
import cmrkit.evaluation.measures.ranked  # noqa: F401
import cmrkit.evaluation.measures.rows  # noqa: F401
import cmrkit.evaluation.measures.sampled  # noqa: F401
from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures.base import (  # noqa: F401  (trec_eval's vocabulary, here too)
    CUT_DOUBLE,
    CUT_LONG,
    GEOMETRIC,
    IR_ALIASES,
    MAX_CUTOFF,
    MEAN,
    NO_SUMMARY,
    NONE,
    NUM_Q,
    NUM_REL,
    P_DOUBLE,
    P_PAIR,
    SUM,
    VERSIONS,
    Family,
    ir_names,
)
from cmrkit.evaluation.measures.base import FAMILIES as _REGISTERED
from cmrkit.trec import c_atol, c_strtod

DEFAULT_VERSION = "10"
VERSION_NAMES = {"9": "9.0.8", "10": "10.0"}

# trec_eval's order (measures.c): measures are computed and printed in this order.
ORDER = (
    "runid num_q num_ret num_rel num_rel_ret map gm_map Rprec bpref recip_rank iprec_at_recall P "
    "relstring recall infAP gm_bpref Rprec_mult utility 11pt_avg binG G dcg ideal_dcg ndcg "
    "ndcg_rel Rndcg ndcg_cut map_cut relative_P success set_P set_relative_P set_recall set_map "
    "set_F num_nonrel_judged_ret prefs_num_prefs_poss prefs_num_prefs_ful "
    "prefs_num_prefs_ful_ret prefs_simp prefs_pair prefs_avgjg prefs_avgjg_Rnonrel "
    "prefs_simp_ret prefs_pair_ret prefs_avgjg_ret prefs_avgjg_Rnonrel_ret prefs_simp_imp "
    "prefs_pair_imp prefs_avgjg_imp map_avgjg P_avgjg Rprec_mult_avgjg yaap rbp rbp_resid unj"
).split()
if set(ORDER) != set(_REGISTERED) or len(ORDER) != len(_REGISTERED):
    raise ImportError(f"trec_eval's order lists {sorted(set(ORDER) ^ set(_REGISTERED))} wrongly")
FAMILIES: tuple[Family, ...] = tuple(_REGISTERED[name] for name in ORDER)
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

# ir_measures names (and cmrkit's aliases) of trec_eval families: name -> (family, family@k)
IR_NAMES = ir_names()


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
