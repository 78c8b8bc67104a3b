"""`cmrkit export ir-metadata` (exports/ir_metadata.py): a run cmrkit made (real Lucene) with its
ir_metadata block, read by repro_eval's own reader, scored by trec_eval 10.0 built from its
sources, by `eval` and by `compare` as the run without the block."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from retrieval_collection import write_collection
from test_retrieval import QRELS, TOPICS, UNITS
from test_trec_eval import trec_eval  # noqa: F401 (the fixture: trec_eval built from its sources)
from typer.testing import CliRunner

from cmrkit.cli import app
from cmrkit.exports.ir_metadata import metadata
from cmrkit.retrieval.runfile import read_sidecar


def invoke(*args: str, code: int = 0):
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == code, res.output + (res.stderr or "")
    return res


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """collections/tiny indexed, a bm25 and an RM3 run, and the bm25 run with its block."""
    root = tmp_path_factory.mktemp("irmeta")
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    write_collection(root, "tiny", UNITS, TOPICS, QRELS)
    invoke("index", "collections/tiny", "--no-entities", "--quiet")
    invoke("run", "bm25", "collections/tiny", "--query", "mention", "--name", "bm25", "--quiet")
    invoke("run", "qe", "collections/tiny", "--query", "mention", "--fb-docs", "2",
           "--name", "qe-rm3", "--quiet")  # fmt: skip
    invoke("export", "ir-metadata", "runs/tiny/bm25.test.trec", "-o", "bm25.meta.trec")
    yield root
    mp.undo()


def _repro_eval_reader(monkeypatch):
    """repro_eval's MetadataHandler (the ir_metadata authors' reader and stripper). Its module
    imports pkg_resources, which only its template helpers use and new setuptools no longer
    ship: an empty module stands in for it then; the functions called here are repro_eval's."""
    try:
        import repro_eval  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but repro_eval is not installed: pip install -e '.[test]'")
        pytest.skip("repro_eval is not installed (pip install -e '.[test]')")
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        monkeypatch.setitem(sys.modules, "pkg_resources", types.ModuleType("pkg_resources"))
    from repro_eval.metadata import MetadataHandler

    return MetadataHandler


def test_the_block_is_the_sidecars_and_repro_eval_reads_it(ws, monkeypatch):
    handler = _repro_eval_reader(monkeypatch)
    run, annotated = ws / "runs/tiny/bm25.test.trec", ws / "bm25.meta.trec"
    read = handler.read_metadata(str(annotated))
    expected = metadata(read_sidecar(run), qrels="qrels/tiny.test.txt")
    assert read == expected
    side = read_sidecar(run)
    assert read["tag"] == side["tag"] and read["method"]["retrieval"][0]["params"]["k1"] == 0.9
    assert read["implementation"]["executable"]["cmd"].startswith("cmrkit run bm25 ")
    java = read["platform"]["software"]["libraries"]["java"]
    assert "lucene==" + side["versions"]["lucene"] in java
    assert read["data"]["test collection"]["name"] == "tiny"
    # below the block, the run as it was: repro_eval strips the block to the same run
    import pytrec_eval

    text = annotated.read_text()
    assert text.endswith(run.read_text()) and text.startswith("# ir_metadata.start\n")
    with open(run) as f:
        assert handler.strip_metadata(str(annotated)) == pytrec_eval.parse_run(f)


def test_trec_eval_10_eval_and_compare_score_it_as_the_run(ws, trec_eval):  # noqa: F811
    run, annotated, qrels = "runs/tiny/bm25.test.trec", "bm25.meta.trec", "qrels/tiny.test.txt"
    c10, c9 = trec_eval["10"] / "trec_eval", trec_eval["9"] / "trec_eval"

    def c_program(binary, path):
        return subprocess.run([str(binary), "-q", "-m", "all_trec", qrels, path],
                              capture_output=True, text=True)  # fmt: skip

    assert c_program(c10, annotated).stdout == c_program(c10, run).stdout != ""
    assert c_program(c9, annotated).returncode != 0  # 9.0.8 has no comment lines
    for version in ("10", "9"):  # the ranking engine: as 10.0 reads runs, whatever the version
        got = [invoke("eval", p, qrels, "-m", "AP", "-m", "nDCG@10", "-q", "-f", "json",
                      "--trec-eval", version).stdout for p in (annotated, run)]  # fmt: skip
        assert json.loads(got[0])["per_query"] == json.loads(got[1])["per_query"]
    trec = [invoke("eval", p, qrels, "-m", "all_trec", "-q", "-f", "trec").stdout
            for p in (annotated, run)]  # fmt: skip
    assert trec[0] == trec[1] == c_program(c10, run).stdout
    res = invoke("eval", annotated, qrels, "-m", "official", "--trec-eval", "9", code=2)
    assert "trec_eval 9.0.8 has no comment lines" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    other = "runs/tiny/qe-rm3.test.trec"
    compared = [
        json.loads(
            invoke("compare", qrels, p, other, "-m", "AP", "--bootstrap", "50", "-f", "json").stdout
        )  # fmt: skip
        for p in (annotated, run)
    ]
    for obj in compared:  # the same numbers; only the first run's name and path differ
        obj.pop("paths", None)
        first = next(iter(obj["systems"]))
        obj["systems"]["bm25"] = obj["systems"].pop(first)
        obj["systems"]["bm25"].pop("run")
    assert json.dumps(compared[0]).replace('"bm25.meta"', '"bm25.test"') == json.dumps(compared[1])


def test_outputs_are_kept_unless_forced_and_bad_inputs_refused(ws):
    run = "runs/tiny/bm25.test.trec"
    again = invoke("export", "ir-metadata", run, "-o", "bm25.meta.trec")
    assert "is up to date" in again.stdout
    Path("other.trec").write_text("q Q0 d 1 1 t\n")
    refusals = [
        ((run, "-o", "other.trec"), "--force"),
        ((run, "-o", run), "the run itself"),
        ((run, "-o", "runs/tiny/qe-rm3.test.trec", "--force"), "is a run cmrkit wrote"),
        (("other.trec", "-o", "x.trec"), "no cmrkit sidecar"),
    ]
    for args, message in refusals:
        res = invoke("export", "ir-metadata", *args, code=2)
        assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert Path("other.trec").read_text() == "q Q0 d 1 1 t\n" and not Path("x.trec").exists()
    invoke("export", "ir-metadata", run, "-o", "other.trec", "--force")
    assert Path("other.trec").read_bytes() == Path("bm25.meta.trec").read_bytes()


def test_an_unclosed_block_is_refused_naming_its_lines_and_nothing_is_written(ws):
    """Issue 42 item 2: a run whose first line is '# ir_metadata.start' with no end mark (a
    cut-off file, one written by hand) exported as the comment lines alone, none of its
    results, exit 0. ir_metadata's spec ends the header with 'ir_metadata.end' before the
    results: a result line inside the block, or a block that never ends, is refused."""
    import shutil

    run, sidecar = Path("runs/tiny/bm25.test.trec"), Path("runs/tiny/bm25.test.json")
    results = run.read_text().splitlines(keepends=True)
    cases = {
        "cut.trec": ["# ir_metadata.start\n", "# tag: bm25\n", *results],
        "blank.trec": ["# ir_metadata.start\n", "# tag: bm25\n", "\n", *results[:2]],
        "header.trec": ["# ir_metadata.start\n", "# tag: bm25\n"],
    }
    for name, lines in cases.items():
        Path(name).write_text("".join(lines))
        shutil.copy(sidecar, Path(name).with_suffix(".json"))
        res = invoke("export", "ir-metadata", name, "-o", f"out-{name}", code=2)
        message = res.stderr.strip()
        assert len(message.splitlines()) == 1 and message.startswith(f"error: {name}: ")
        if name == "header.trec":
            assert "the ir_metadata block that line 1 opens" in message and "never ends" in message
        else:
            first = 3 if name == "cut.trec" else 4
            assert message.startswith(f"error: {name}: line {first}: a result line inside the "
                                      "ir_metadata block that line 1 opens")  # fmt: skip
            assert "'# ir_metadata.end'" in message
        assert not Path(f"out-{name}").exists()
    # closed, the block is replaced and every result kept
    closed = ["# ir_metadata.start\n", "# tag: old\n", "# ir_metadata.end\n", *results]
    Path("closed.trec").write_text("".join(closed))
    shutil.copy(sidecar, "closed.json")
    invoke("export", "ir-metadata", "closed.trec", "-o", "out-closed.trec")
    exported = Path("out-closed.trec").read_text()
    assert exported.endswith("".join(results)) and "# tag: old" not in exported
    assert exported == Path("bm25.meta.trec").read_text()
