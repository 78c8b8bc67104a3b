"""The command line's choices (StrEnums in commands/choices.py) are the library's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cmrkit.commands import choices


def _library() -> dict[str, tuple[str, ...]]:
    from cmrkit.assess.server.auth import ROLES
    from cmrkit.collection.build import FILTERS, QUERY_MODES, UNITS
    from cmrkit.collection.sentences import METHODS as SENTENCE_METHODS
    from cmrkit.commands.loaders import SOURCES
    from cmrkit.coref.options import LEMMAS, WITHIN
    from cmrkit.coref.options import METHODS as COREF_METHODS
    from cmrkit.coref.options import SINGLETONS as GOLD_SINGLETONS
    from cmrkit.evaluation.clusters import METHODS as CLUSTER_METHODS
    from cmrkit.evaluation.coref import SCOPES, SINGLETONS
    from cmrkit.evaluation.coref_table import PROTOCOLS
    from cmrkit.judgments.auto.options import ON_UNPARSED
    from cmrkit.pooling.strategies import STRATEGIES
    from cmrkit.retrieval.dense.objectives import NEGATIVES, OBJECTIVES, POSITIVES
    from cmrkit.retrieval.dense.options import DEVICES
    from cmrkit.retrieval.distributed.engine import ENGINES
    from cmrkit.retrieval.fusion import METHODS, NORMS
    from cmrkit.retrieval.quantized import PRECISIONS
    from cmrkit.retrieval.queries import FORMULATIONS
    from cmrkit.retrieval.reader.model import SELECTS
    from cmrkit.retrieval.systems import PRESETS
    from cmrkit.sources.distractors import FORMATS as DISTRACTOR_FORMATS
    from cmrkit.sources.hub import DATASETS

    return {
        "Device": DEVICES,
        "Precision": PRECISIONS,
        "Select": SELECTS,
        "Objective": OBJECTIVES,
        "Positives": POSITIVES,
        "Negatives": NEGATIVES,
        "FuseMethod": METHODS,
        "Norm": NORMS,
        "Engine": ENGINES,
        "Formulation": FORMULATIONS,
        "Preset": tuple(PRESETS),
        "Strategy": STRATEGIES,
        "Role": ROLES,
        "Source": (*SOURCES, "tac"),  # tac is built by its own path (commands/tac.py)
        "Unit": UNITS,
        "QueryMode": QUERY_MODES,
        "DistractorFormat": DISTRACTOR_FORMATS,
        "DistractorFilter": FILTERS,
        "SentenceMethod": SENTENCE_METHODS,
        "HubDataset": tuple(DATASETS),
        "OnUnparsed": ON_UNPARSED,
        "coref.Scope": SCOPES,
        "coref.Singletons": SINGLETONS,
        "coref.Method": (*CLUSTER_METHODS, *COREF_METHODS),
        "coref.Within": WITHIN,
        "coref.Lemmas": LEMMAS,
        "coref.GoldSingletons": GOLD_SINGLETONS,
        "coref.Protocol": PROTOCOLS,
    }


@pytest.mark.parametrize("name", sorted(_library()))
def test_each_choice_is_the_librarys(name):
    from cmrkit.commands import coref

    module, _, attr = name.rpartition(".")
    enum = getattr(coref if module else choices, attr)
    assert tuple(m.value for m in enum) == tuple(_library()[name])


def test_a_member_is_its_string_everywhere():
    device = choices.Device("cpu")
    assert device == "cpu" and f"{device}" == "cpu" and str(device) == "cpu"
    assert hash(device) == hash("cpu") and {"cpu": 1}[device] == 1
    assert json.dumps({"device": device}) == '{"device": "cpu"}'
    assert type(choices.plain(device)) is str and choices.plain(None) is None
    assert choices.Formulation("mention+entities") == "mention+entities"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["run", "fuse", "a.trec", "b.trec", "--method", "best"],
            "error: Invalid value for '--method': 'best' is not one of 'rrf', 'combsum', "
            "'combmnz'; see `cmrkit run fuse --help`",
        ),
        (
            ["pool", "create", "a.trec", "-o", "p.jsonl", "--strategy", "best"],
            "error: Invalid value for '--strategy': 'best' is not one of 'depth', 'rbp', 'rrf', "
            "'mtf', 'maxmean', 'strata'; see `cmrkit pool create --help`",
        ),
    ],
)
def test_a_value_outside_the_choices_is_one_line_before_any_work(tmp_path, args, said):
    r = subprocess.run(
        [sys.executable, "-m", "cmrkit", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and r.stdout == "" and r.stderr == said + "\n"
    assert list(tmp_path.iterdir()) == []
