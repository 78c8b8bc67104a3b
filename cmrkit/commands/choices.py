"""Every option of fixed choices is a ``StrEnum``: `--help` lists the choices as ``[a|b|c]``,
and a value outside them is refused in one line before the command does anything. Those of the
run, train, build, pool and assess commands are here, and ``TrecVersion``, which five scoring
commands share; the scoring commands keep their own beside them (``output.Format``,
``coref.py``'s, ``evaluate.py``'s).

Each member's name is its value, so a member is equal to its string, hashes as it, prints as it
and is written to JSON as it; :func:`plain` turns one (or a command's parameters) back into
plain strings for the library. The library keeps its own tuple of choices (and its own check,
for callers of the Python API); ``tests/test_choices.py`` checks that the two agree. These are
spelled out rather than imported so that ``cmrkit --help`` imports none of the library.
"""

from __future__ import annotations

from enum import Enum, StrEnum
from typing import Any


def choices(name: str, values: tuple[str, ...]) -> type[StrEnum]:
    """A StrEnum whose members are ``values``, each named by itself."""
    return StrEnum(name, {v: v for v in values}, module=__name__)  # type: ignore[return-value]


def plain(value: Any) -> Any:
    """A member as its plain string; anything else as it is."""
    return value.value if isinstance(value, Enum) else value


class TrecVersion(StrEnum):
    """--trec-eval: the trec_eval version to equal (evaluation.measures.trec's versions)."""

    v9 = "9"
    v10 = "10"


Device = choices("Device", ("cpu", "cuda", "auto"))  # retrieval.dense.options.DEVICES
Precision = choices("Precision", ("fp32", "int8", "onnx-int8"))  # retrieval.quantized.PRECISIONS
Select = choices("Select", ("cls", "coref"))  # retrieval.reader.model.SELECTS
Objective = choices("Objective", ("coresearch", "eer"))  # retrieval.dense.objectives.OBJECTIVES
Positives = choices("Positives", ("random", "arborescence"))  # ...objectives.POSITIVES
Negatives = choices("Negatives", ("bm25", "knn"))  # retrieval.dense.objectives.NEGATIVES
FuseMethod = choices("FuseMethod", ("rrf", "combsum", "combmnz"))  # retrieval.fusion.METHODS
Norm = choices("Norm", ("minmax", "zscore"))  # retrieval.fusion.NORMS
Engine = choices("Engine", ("local", "ray"))  # retrieval.distributed.engine.ENGINES
Formulation = choices(  # retrieval.queries.FORMULATIONS
    "Formulation", ("mention", "mention+entities", "sentence", "context", "chain", "features")
)
Preset = choices("Preset", ("doc", "mention"))  # retrieval.systems.PRESETS
Expansion = choices("Expansion", ("rm3", "rocchio"))  # retrieval.systems.QE.method
ExpansionBase = choices("ExpansionBase", ("bm25", "fields"))  # retrieval.systems.run_qe's base
Strategy = choices(  # pooling.strategies.STRATEGIES
    "Strategy", ("depth", "rbp", "rrf", "mtf", "maxmean", "strata")
)
ExportFormat = choices("ExportFormat", ("mturk", "jsonl", "html"))  # assess.render's writers
Role = choices("Role", ("assessor", "organizer"))  # assess.server.auth.ROLES
Source = choices(  # loaders.SOURCES
    "Source", ("wec-eng", "coresearch", "jsonl", "hf", "ecbplus", "ucdcr", "tac")
)
Unit = choices("Unit", ("passage", "sentence", "mention"))  # collection.build.UNITS
QueryMode = choices("QueryMode", ("all", "longest"))  # collection.build.QUERY_MODES
DistractorFormat = choices(  # sources.distractors.FORMATS
    "DistractorFormat", ("auto", "wec", "jsonl", "text")
)
DistractorFilter = choices(  # collection.build.FILTERS
    "DistractorFilter", ("none", "titles", "mentions")
)
SentenceMethod = choices("SentenceMethod", ("parser", "rule"))  # collection.sentences.METHODS
OnUnparsed = choices("OnUnparsed", ("skip", "fail"))  # judging.auto.ON_UNPARSED
HubDataset = choices("HubDataset", ("wec-eng", "coresearch"))  # sources.hub.DATASETS
