"""The pandas API (`import cmrkit`): same numbers as the CLI, byte for byte; pandas loaded late."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import wec_record, write_json
from test_compare import _variant
from trec_eval_fixtures import write_collection
from typer.testing import CliRunner

import cmrkit
from cmrkit.cli import app
from cmrkit.errors import CmrkitError

MEASURES = ["AP", "infAP", "RR@10", "nDCG@10", "P@5", "R@50", "Bpref", "Judged@10", "NumRel"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("api")
    qrels, run, types = write_collection(folder, seed=3, name="base")
    other = _variant(run, qrels, folder / "other.trec", seed=4, boost=3.0)
    topics = folder / "types.tsv"
    topics.write_text("".join(f"{q}\t{t}\n" for q, t in types.items()))
    return qrels, run, other, topics


def _cli_csv(*args: str) -> list[list[str]]:
    result = CliRunner().invoke(app, [*args, "-f", "csv"])
    assert result.exit_code == 0, result.stderr
    return list(csv.reader(io.StringIO(result.stdout)))


def _as_text(df: pd.DataFrame) -> list[list[str]]:
    """The frame as the CLI's CSV writes it: floats by repr, NaN and None empty."""

    def cell(v):
        if v is None or v is pd.NA or (isinstance(v, float) and v != v):
            return ""
        if isinstance(v, bool | np.bool_):
            return str(v).lower()
        return repr(v) if isinstance(v, float) else str(v)

    return [list(df.columns)] + [[cell(v) for v in row] for row in df.itertuples(index=False)]


def test_import_is_light():
    code = (
        "import sys, cmrkit, cmrkit.cli; f = cmrkit.evaluate; "
        "assert 'pandas' not in sys.modules, 'pandas imported'; "
        "assert callable(f); print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    help_run = subprocess.run(
        [sys.executable, "-c", "import sys; from cmrkit.cli import app; sys.argv=['cmrkit', "
         "'--help']; import atexit; atexit.register(lambda: print('pandas' in sys.modules, "
         "file=sys.stderr)); app()"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert help_run.stderr.strip().endswith("False")


def test_evaluate_equals_the_cli_byte_for_byte(files):
    qrels, run, _, _ = files
    cli = _cli_csv("eval", str(run), str(qrels), "-m", ",".join(MEASURES))
    df = cmrkit.evaluate(str(run), qrels, MEASURES)
    assert _as_text(df) == cli
    assert list(df.columns) == ["qid", "measure", "value", "trec_eval"]
    assert df.iloc[-1]["qid"] == "all"


@pytest.mark.parametrize("form", ["frames", "dicts", "ir_measures_columns"])
def test_any_input_form_gives_the_same_numbers(files, form):
    qrels, run, _, _ = files
    expected = _as_text(cmrkit.evaluate(run, qrels, MEASURES, all_queries=True, depth=20))
    r, q = cmrkit.read_run(run), cmrkit.read_qrels(qrels)
    if form == "dicts":
        r = {k: dict(zip(g.docno, g.score, strict=True)) for k, g in r.groupby("qid", sort=False)}
        q = {k: dict(zip(g.docno, g.label, strict=True)) for k, g in q.groupby("qid", sort=False)}
    elif form == "ir_measures_columns":
        r = r.rename(columns={"qid": "query_id", "docno": "doc_id"})
        q = q.rename(columns={"qid": "query_id", "docno": "doc_id", "label": "relevance"})
    got = _as_text(cmrkit.evaluate(r, q, MEASURES, all_queries=True, depth=20))
    assert got == expected


def test_evaluate_by_group_equals_the_cli(files):
    qrels, run, _, topics = files
    cli = _cli_csv("eval", str(run), str(qrels), "-m", "AP,RR@10", "--topics", str(topics),
                   "--by", "type")  # fmt: skip
    df = cmrkit.evaluate(run, qrels, ["AP", "RR@10"], topics=topics, by="type")
    assert _as_text(df) == cli


def test_compare_equals_the_cli(files):
    qrels, run, other, _ = files
    args = ["-m", "AP", "-m", "RR@10", "--test", "permutation", "--permutations", "500"]
    cli = _cli_csv("compare", str(qrels), str(run), str(other), *args)
    df = cmrkit.compare([run, other], qrels, ["AP", "RR@10"], test="permutation", permutations=500)
    assert _as_text(df) == cli
    named = cmrkit.compare(
        {"base": cmrkit.read_run(run), "other": str(other)},
        cmrkit.read_qrels(qrels),
        ["AP", "RR@10"],
        test="permutation",
        permutations=500,
    )
    assert _as_text(named) == cli


def test_read_run_ranks_as_trec_eval(files):
    _, run, _, _ = files
    df = cmrkit.read_run(run)
    assert list(df.columns) == ["qid", "docno", "score", "rank"]
    for _, group in df.groupby("qid", sort=False):
        assert list(group["rank"]) == list(range(1, len(group) + 1))
        single = group["score"].astype("float32").tolist()
        keys = list(zip(single, group["docno"], strict=True))
        assert keys == sorted(keys, reverse=True)


def test_read_qrels_columns_and_grades(files):
    qrels, _, _, _ = files
    df = cmrkit.read_qrels(qrels)
    assert list(df.columns) == ["qid", "docno", "label"]
    assert set(df["label"]) <= {-1, 0, 1, 2, 3}
    first = qrels.read_text().splitlines()[0].split()
    assert tuple(df.iloc[0]) == (first[0], first[2], int(float(first[3])))


def test_collection_topics_and_qrels(cli, tmp_path):
    tokens = "The storm hit the coast on Monday .".split()
    other = "Weather experts tracked the hurricane for days .".split()
    third = "The hurricane left thousands homeless .".split()
    path = write_json(
        tmp_path / "Test_x.json",
        [
            wec_record("h1", 3, "d1", tokens, [1]),
            wec_record("h2", 3, "d2", other, [4]),
            wec_record("h3", 3, "d3", third, [1]),
        ],
    )
    assert cli("build-collection", "-i", path, "-n", "w").exit_code == 0
    col = cmrkit.load_collection(tmp_path / "collections" / "w")
    assert col.name == "w" and col.splits == ["test"]
    assert list(col.topics.columns[:3]) == ["qid", "query", "split"]
    assert list(col.topics["query"]) == ["storm", "hurricane", "hurricane"]
    assert col.topics.loc[0, "span"] == [4, 9]
    assert set(col.qrels.columns) == {"qid", "docno", "label", "split"}
    assert len(col.qrels) == 6
    corpus = col.corpus
    assert list(corpus["docno"]) == ["P:h1", "P:h2", "P:h3"]
    m = corpus.loc[0, "mentions"][0]
    assert corpus.loc[0, "text"][m["start"] : m["end"]] == "storm"
    tsv = cmrkit.read_topics(tmp_path / "collections" / "w" / "topics.test.tsv")
    assert list(tsv.columns) == ["qid", "query"] and len(tsv) == 3
    assert len(cmrkit.read_topics(tmp_path / "collections" / "w", split="test")) == 3
    with pytest.raises(CmrkitError, match="no topics in split 'dev'"):
        cmrkit.read_topics(tmp_path / "collections" / "w", split="dev")
    manifest = json.loads((tmp_path / "collections" / "w" / "manifest.json").read_text())
    assert col.manifest == manifest


def test_bad_inputs_say_what_to_give(files):
    qrels, run, _, _ = files
    with pytest.raises(CmrkitError, match="no column 'score'"):
        cmrkit.evaluate(pd.DataFrame({"qid": ["q"], "docno": ["d"]}), qrels)
    with pytest.raises(CmrkitError, match="retrieves d twice"):
        cmrkit.evaluate(pd.DataFrame({"qid": ["q", "q"], "docno": ["d", "d"], "score": [1, 2]}),
                        qrels)  # fmt: skip
    with pytest.raises(CmrkitError, match="not a whole number"):
        cmrkit.evaluate(run, pd.DataFrame({"qid": ["q"], "docno": ["d"], "label": [0.5]}))
    with pytest.raises(CmrkitError, match="a run is a path, a DataFrame or a dict"):
        cmrkit.evaluate(3, qrels)
    with pytest.raises(AttributeError):
        cmrkit.no_such_name  # noqa: B018
