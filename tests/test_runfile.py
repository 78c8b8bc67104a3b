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


# --- reading sidecars and checking what a run belongs to ------------------------------------


def test_read_sidecar_refuses_a_broken_one_and_notes_a_foreign_json(tmp_path, coll, caplog):
    from cmrkit.retrieval.runfile import read_sidecar

    s = spec(tmp_path, coll)
    produce_run(s, lambda: Computed(RUN, "toy"))
    sidecar = read_sidecar(s.run_path)
    assert sidecar["collection"] == str(coll) and sidecar["split"] == "test"
    assert read_sidecar(tmp_path / "elsewhere.trec") is None  # none beside it
    s.sidecar_path.write_text('{"collection": ', encoding="utf-8")
    with pytest.raises(CmrkitError, match=r"toy\.test\.json: malformed JSON .* sidecar"):
        read_sidecar(s.run_path)
    s.sidecar_path.write_bytes(b'{"identity": "\xff"}')
    with pytest.raises(CmrkitError, match=r"toy\.test\.json"):
        read_sidecar(s.run_path)
    s.sidecar_path.write_text('{"notes": "mine"}', encoding="utf-8")
    with caplog.at_level("WARNING", logger="cmrkit"):
        assert read_sidecar(s.run_path) is None
    assert "toy.test.json: not a cmrkit sidecar (none of identity" in caplog.text


def test_a_run_of_another_collection_or_split_is_refused_by_its_users(tmp_path, coll):
    """The check every user of a first-stage run makes (rerank, train reader's candidates):
    the sidecar's collection and split against those asked for; what it does not record
    passes."""
    from cmrkit.retrieval.options import RunOptions
    from cmrkit.retrieval.reader.train import candidates_run
    from cmrkit.retrieval.runfile import check_run_of, read_sidecar

    s = spec(tmp_path, coll)
    produce_run(s, lambda: Computed(RUN, "toy"))
    other = write_collection(tmp_path / "other", ["q1"], ["d1"])
    side = read_sidecar(s.run_path)
    check_run_of(s.run_path, side, collection=coll, split="test")
    check_run_of(s.run_path, {}, collection=other, split="dev")  # nothing recorded
    with pytest.raises(CmrkitError, match=r"made on collection .* not on .*other.*; give a run"):
        check_run_of(s.run_path, side, collection=other)
    with pytest.raises(CmrkitError, match=r"split 'test' \(its sidecar says so\), not 'dev'"):
        check_run_of(s.run_path, side, split="dev")
    with pytest.raises(CmrkitError, match=r"not 'dev' \(--candidates\)"):
        candidates_run(coll, "dev", s.run_path, RunOptions(), "--candidates")
    with pytest.raises(CmrkitError, match=r"made on collection"):
        candidates_run(other, "test", s.run_path, RunOptions(), "--candidates")
    assert candidates_run(coll, "test", s.run_path, RunOptions(), "--candidates") == s.run_path
    s.sidecar_path.write_text("{", encoding="utf-8")  # broken: refused, not taken as "none"
    with pytest.raises(CmrkitError, match="malformed JSON"):
        candidates_run(coll, "dev", s.run_path, RunOptions(), "--candidates")


def test_only_a_run_replaces_a_run(tmp_path, coll):
    """--force or not, a run is never written over a file that is not a cmrkit run (no sidecar
    beside it) nor beside a JSON file that is not a run's sidecar."""
    s = spec(tmp_path, coll)
    s.run_path.parent.mkdir(parents=True)
    s.run_path.write_text("q1 0 d1 1\n")  # a qrels file where the run goes
    for force in (False, True):
        with pytest.raises(CmrkitError, match="is not a run cmrkit wrote"):
            produce_run(s, lambda: Computed(RUN, "toy"), force=force)
    assert s.run_path.read_text() == "q1 0 d1 1\n" and not s.sidecar_path.exists()
    s.run_path.unlink()
    s.sidecar_path.write_text('{"mine": 1}')
    with pytest.raises(CmrkitError, match="is not the sidecar of a cmrkit run"):
        produce_run(s, lambda: Computed(RUN, "toy"), force=True)
    s.sidecar_path.unlink()
    produce_run(s, lambda: Computed(RUN, "toy"))
    again = produce_run(s, lambda: Computed({"q1": [("d1", 1.0)]}, "toy"), force=True)
    assert not again.up_to_date and read_run(s.run_path) == {"q1": {"d1": 1.0}}


def test_a_run_scored_against_another_collection_s_qrels_is_refused(tmp_path, coll, cli):
    """Issue 32, trip 4: `eval runs/sample/bm25.test.trec qrels/ecb-sent.test.txt` (query ids
    shared, documents not) printed AP 0.0000 with exit 0 and `compare` called the difference
    significant. A run whose sidecar names its collection, none of whose documents is judged
    in the qrels, is refused in one line naming both (exit 2)."""
    from pool_fixtures import write_qrels

    s = spec(tmp_path, coll)
    produce_run(s, lambda: Computed({"q1": [("d2", 2.5), ("d1", 1.0)], "q2": [("d1", 1.0)]}, "t"))
    (tmp_path / "qrels").mkdir()
    other = write_qrels(
        tmp_path / "qrels" / "other.test.txt", {"q1": {"x1": 1, "x2": 0}, "q2": {"x3": 1}}
    )
    own = write_qrels(tmp_path / "qrels" / "tiny.test.txt", {"q1": {"d1": 1}, "q2": {"d9": 1}})
    mine = write_qrels(tmp_path / "judged.txt", {"q1": {"d1": 1}, "q2": {"d9": 1}})
    run = s.run_path
    for args in (("eval", run, other), ("compare", other, run, run.with_name("b.trec"))):
        if args[0] == "compare":
            (run.with_name("b.trec")).write_text("q1 Q0 d1 1 1.0 b\n")
        r = cli(*args)
        assert r.exit_code == 2, r.output
        assert r.output.count("\n") == 1 and r.output.startswith(f"error: {run}: "), r.output
        assert f"made on collection {coll}" in r.output
        assert (
            f"none of the 3 documents it retrieved for the 2 queries it shares with {other} "
            "is judged there" in r.output
        )
        tail = "those qrels are another collection's; score it against its collection's"
        assert f"{tail} (qrels/tiny.test.txt), or add --allow-unjudged" in r.output, r.output
    # its own qrels, by name or not (a document judged): scored
    for qrels in (own, mine):
        r = cli("eval", run, qrels, "-m", "AP")
        assert r.exit_code == 0, r.output
    # issue 42 item 5a: a run without a sidecar (a copy, another tool's run), or with a broken
    # one, is refused all the same, without naming a collection; --allow-unjudged scores it
    s.sidecar_path.rename(tmp_path / "aside.json")
    for _ in range(2):
        for args in (("eval", run, other), ("compare", other, run, run.with_name("b.trec"))):
            r = cli(*args, "-m", "AP")
            assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
            assert r.output.startswith(
                f"error: {run}: none of the 3 documents the run retrieved for the 2 queries it "
                f"shares with {other} is judged anywhere in them"
            ), r.output
            assert "made on collection" not in r.output and "--allow-unjudged" in r.output
        s.sidecar_path.write_text("{", encoding="utf-8")  # broken: scoring does not need it
    r = cli("eval", run, other, "-m", "AP", "--allow-unjudged")
    assert r.exit_code == 0 and "0.0000" in r.output, r.output
