"""The run-file protocol every system follows (cmrkit.retrieval.runfile.produce_run): claim,
keep an up-to-date run, refuse another, compute, write the run and its sidecar together."""

from __future__ import annotations

import json

import pytest
from pool_fixtures import write_collection

from cmrkit.errors import CmrkitError
from cmrkit.retrieval.runfile import (
    Computed,
    RunSpec,
    produce_run,
    refuse_other_run,
    rerun_command,
)
from cmrkit.trec import read_run

RUN = {"q1": [("d2", 2.5), ("d1", 1.0)], "q2": []}


@pytest.fixture
def coll(tmp_path):
    return write_collection(tmp_path / "collections", ["q1", "q2"], ["d1", "d2"])


def spec(tmp_path, coll, **parameters):
    return RunSpec.for_collection(
        tmp_path / "runs",
        coll,
        system="toy",
        name="toy",
        split="test",
        parameters={"k": 10, **parameters},
        index_id="idx",
        command=rerun_command(["cmrkit", "run", "toy"], None, "test"),
    )


def test_a_run_is_written_once_then_kept_and_another_refused(tmp_path, coll):
    calls = []

    def compute():
        calls.append(1)
        return Computed(RUN, "toy:k=10", {"n_queries": 2, "mine": True}, {"search": 0.5})

    first = produce_run(spec(tmp_path, coll), compute, started=0.0)
    assert first.run_path == tmp_path / "runs" / "tiny" / "toy.test.trec"
    assert read_run(first.run_path)["q1"] == {"d2": 2.5, "d1": 1.0}
    side = json.loads(first.sidecar_path.read_text())
    assert side["command"] == ["cmrkit", "run", "toy", "--split", "test"]
    assert side["identity"]["parameters"] == {"k": 10} and side["identity"]["index_id"] == "idx"
    assert side["tag"] == "toy:k=10" and side["mine"] is True and side["n_queries"] == 2
    assert side["n_queries_with_results"] == 1 and side["warnings"] == []
    assert set(side["seconds"]) == {"open", "search", "total"}
    again = produce_run(spec(tmp_path, coll), compute)
    assert again.up_to_date and len(calls) == 1
    before = first.run_path.read_bytes()
    with pytest.raises(CmrkitError, match="a different run with this name already exists"):
        produce_run(spec(tmp_path, coll, k1=1.2), compute)
    with pytest.raises(CmrkitError, match="a different run with this name already exists"):
        refuse_other_run(first.run_path, first.sidecar_path, spec(tmp_path, coll, b=1).identity)
    other_index = spec(tmp_path, coll)
    other_index.index_id = "not known yet"
    refuse_other_run(first.run_path, first.sidecar_path, other_index.identity)  # no error
    assert first.run_path.read_bytes() == before and len(calls) == 1
    produce_run(spec(tmp_path, coll, k1=1.2), compute, force=True)
    assert len(calls) == 2


def test_files_beside_the_run_are_written_with_it_and_needed_to_keep_it(tmp_path, coll):
    base = spec(tmp_path, coll)
    spans = base.run_path.with_name("toy.test.spans.jsonl")
    base.also = (spans,)
    calls = []

    def compute():
        calls.append(1)
        return Computed(RUN, "toy", {"spans": str(spans)}, files={spans: '{"qid": "q1"}\n'})

    produce_run(base, compute)
    assert spans.read_text() == '{"qid": "q1"}\n'
    assert produce_run(base, compute).up_to_date and len(calls) == 1
    spans.unlink()  # a run without its spans file is made again
    assert not produce_run(base, compute).up_to_date and spans.is_file() and len(calls) == 2
