"""Reading runs and qrels as trec_eval 9.0.4 does (checked against the binary)."""

from __future__ import annotations

import gzip
import random
import warnings

import pytest
from test_trec_eval import trec_eval  # noqa: F401 (the fixture: trec_eval built from its sources)
from trec_eval_fixtures import extract_trec_eval, parse_trec_eval, run_trec_eval

from cmrkit.errors import CmrkitError
from cmrkit.trec import ranked, read_qrels, read_run


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    return extract_trec_eval(tmp_path_factory.mktemp("bin"))


def _naive_run(text: str) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if line.strip():
            qid, _, docno, _, score, _ = line.split()
            run.setdefault(qid, {})[docno] = float(score)
    return run


def test_float_and_integer_relevances_read_alike(tmp_path, binary):
    as_float = tmp_path / "float.qrels"
    as_float.write_text("q1\tPER\ta\t1.0\nq1\tPER\tb\t-1.0\nq1\tPER\tc\t0.0\nq1\tPER\td\t2.00\n")
    as_int = tmp_path / "int.qrels"
    as_int.write_text("q1 0 a 1\nq1 0 b -1\nq1 0 c 0\nq1 0 d 2\n")
    assert read_qrels(as_float) == read_qrels(as_int) == {"q1": {"a": 1, "b": -1, "c": 0, "d": 2}}
    run = tmp_path / "run"
    run.write_text("q1 Q0 a 1 4 t\nq1 Q0 b 2 3 t\nq1 Q0 c 3 2 t\nq1 Q0 d 4 1 t\n")
    # trec_eval agrees: both files give the same numbers
    measures = ["-m", "infAP", "-m", "ndcg", "-m", "num_rel", "-m", "relstring.4"]
    assert run_trec_eval(binary, as_float, run, *measures) == run_trec_eval(
        binary, as_int, run, *measures
    )


def test_fractional_relevance_is_refused_not_truncated(tmp_path, binary):
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 a 1\nq1 0 b 0.5\n")
    with pytest.raises(CmrkitError, match=r"qrels: line 2: .*whole number"):
        read_qrels(qrels)
    # why: trec_eval reads the grade with atol, so 0.5 would silently become non-relevant
    run = tmp_path / "run"
    run.write_text("q1 Q0 b 1 2 t\nq1 Q0 a 2 1 t\n")
    printed = parse_trec_eval(run_trec_eval(binary, qrels, run, "-m", "num_rel"))
    assert printed[("num_rel", "q1")] == "1"


def test_ranking_is_trec_eval_order(tmp_path, binary):
    # ten documents with grades 0..9 make trec_eval's relstring spell out its order
    scores = {
        "d0": 2.0, "d1": 2.0, "d2": 1.00000001, "d3": 1.00000002, "d4": 1.0, "d5": 3.5,
        "d6": -1.0, "d7": 1.00000002, "d8": 3.5000001, "d9": 0.0,
    }  # fmt: skip
    grades = {d: int(d[1]) for d in scores}
    qrels = tmp_path / "qrels"
    qrels.write_text("".join(f"q1 0 {d} {g}\n" for d, g in grades.items()))
    run = tmp_path / "run"
    lines = [f"q1 Q0 {d} {i} {s!r} t\n" for i, (d, s) in enumerate(scores.items(), 1)]
    random.Random(3).shuffle(lines)
    run.write_text("".join(lines))
    printed = parse_trec_eval(run_trec_eval(binary, qrels, run, "-m", "relstring.10"))
    expected = printed[("relstring_10", "q1")].strip("'")
    ours = "".join(str(grades[d]) for d, _ in ranked(read_run(run)["q1"]))
    assert ours == expected
    # the same rule on double-precision scores gives another order: single precision matters
    double = sorted(scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    assert ours != "".join(str(grades[d]) for d, _ in double)


def test_irregular_files_read_like_regular_ones(tmp_path):
    r = random.Random(5)
    lines = [
        f"q{q} Q0 D{d} {i} {r.random():.6f} tag"
        for q in range(20)
        for i, d in enumerate(r.sample(range(500), 30), 1)
    ]
    regular = tmp_path / "regular.trec"
    regular.write_text("\n".join(lines) + "\n")
    irregular = tmp_path / "irregular.trec"
    irregular.write_text(
        "\r\n".join(line.replace(" ", "\t", 1).replace(" ", "  ", 1) for line in lines) + "\r\n\r\n"
    )
    gz = tmp_path / "run.trec.gz"
    gz.write_bytes(gzip.compress(regular.read_bytes(), mtime=0))
    shuffled = tmp_path / "shuffled.trec"
    mixed = lines[:]
    r.shuffle(mixed)
    shuffled.write_text("\n".join(mixed))  # no final newline, queries interleaved
    expected = _naive_run(regular.read_text())
    for path in (regular, irregular, gz, shuffled):
        assert read_run(path) == expected, path.name

    qrels_lines = [f"q{q} 0 D{d} {r.choice([-1, 0, 1, 2])}" for q in range(20) for d in range(9)]
    regular_q = tmp_path / "regular.qrels"
    regular_q.write_text("\n".join(qrels_lines) + "\n")
    irregular_q = tmp_path / "irregular.qrels"
    irregular_q.write_text("\n".join(" " + line.replace(" ", "\t") for line in qrels_lines))
    assert read_qrels(regular_q) == read_qrels(irregular_q)
    assert sum(map(len, read_qrels(regular_q).values())) == len(qrels_lines)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("q1 Q0 a 1 1.0 t\nq1 Q0 b x 0.5 t\n", r"line 2: rank 'x' is not an integer"),
        ("q1 Q0 a 1 1_0 t\n", r"line 1: score '1_0' is not a number"),
        ("q1 Q0 a 1 inf t\n", r"line 1: score 'inf' is not finite"),
        ("q1 Q0 a 1 1.0 t\nq2 Q0 a 1 1.0 t\nq1 Q0 a 2 0.5 t\n",
         r"line 3: .*twice \(first on line 1\)"),
        ("q1 Q0 a 1 1.0 t extra\n", r"line 1: expected 6 fields"),
    ],
)  # fmt: skip
def test_bad_run_lines(tmp_path, text, match):
    path = tmp_path / "run.trec"
    path.write_text(text)
    with pytest.raises(CmrkitError, match=match):
        read_run(path)


def test_dedupe_keeps_the_best_score(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 a 1 1.0 t\nq2 Q0 a 1 1.0 t\nq1 Q0 a 2 3.0 t\nq1 Q0 a 3 2.0 t\n")
    assert read_run(path, dedupe=True) == {"q1": {"a": 3.0}, "q2": {"a": 1.0}}


def test_duplicate_judgments(tmp_path):
    same = tmp_path / "same.qrels"
    same.write_text("q1 0 a 1\nq1 0 b 0\nq1 0 a 1\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read_qrels(same) == {"q1": {"a": 1, "b": 0}}
    assert any("duplicate" in str(w.message) for w in caught)
    conflict = tmp_path / "conflict.qrels"
    conflict.write_text("q1 0 a 1\nq1 0 b 0\nq1 0 a 2\n")
    with pytest.raises(CmrkitError, match=r"line 3: query q1 document a judged 1 on line 1 and 2"):
        read_qrels(conflict)


def test_fields_split_where_trec_evals_c_splits_them(tmp_path):
    """C's isspace (the "C" locale): a U+00A0 or U+3000 inside a docno is part of it, a \\v or
    \\f between fields separates them (str.split() splits on all of these)."""
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d\u00a01 1 2.0 t\nq1\vQ0 d\u30002 2 1.0\ft\n", encoding="utf-8")
    assert read_run(run) == {"q1": {"d\u00a01": 2.0, "d\u30002": 1.0}}
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d\u00a01 1\nq1 0 d\x1c2 0\n", encoding="utf-8")
    assert read_qrels(qrels) == {"q1": {"d\u00a01": 1, "d\x1c2": 0}}


def test_comment_lines_in_runs_are_read_as_trec_eval_10_reads_them(tmp_path, trec_eval):  # noqa: F811
    """A line whose first non-blank character is '#' is a comment in trec_eval 10.0 (an
    ir_metadata block opens a run so): `eval` with the ranking engine (`-m AP`, `-m P@5`)
    scores such a run as the C program does, under --trec-eval 10 and 9 alike (9.0.8 itself
    has no comments), and the bulk readers still read a run whose comments all open it."""
    import json
    import subprocess

    from typer.testing import CliRunner

    from cmrkit.cli import app
    from cmrkit.trec import compiled, read_run_columns

    r = random.Random(7)
    body = [f"q{q} Q0 d{d} {i} {r.randint(0, 50) / 10} t\n"
            for q in range(1, 6) for i, d in enumerate(r.sample(range(40), 12))]  # fmt: skip
    qrels = tmp_path / "qrels"
    qrels.write_text("".join(f"q{q} 0 d{d} {r.choice((0, 1, 2))}\n"
                             for q in range(1, 6) for d in r.sample(range(40), 20)))  # fmt: skip
    header = ["# ir_metadata.start\n", "# tag: t\n", "  \t# indented: still a comment\n",
              "#q1 Q0 d1 1 99 t\n", "# ir_metadata.end\n"]  # fmt: skip
    plain, leading, inside = tmp_path / "plain", tmp_path / "leading", tmp_path / "inside"
    plain.write_text("".join(body))
    leading.write_text("".join(header + body))
    inside.write_text("".join(header[:2] + body[:30] + header[2:] + body[30:]))
    assert read_run(leading) == read_run(inside) == read_run(plain)
    if compiled() is not None:  # comments only at the top: read in bulk, in the file's bytes
        assert read_run_columns(leading).spans is not None
    binary = trec_eval["10"] / "trec_eval"
    for path in (leading, inside):
        done = subprocess.run([str(binary), "-q", "-m", "map", "-m", "P.5", str(qrels), str(path)],
                              capture_output=True, text=True, check=True)  # fmt: skip
        reference = {
            (m, q): float(v) for m, q, v in (line.split() for line in done.stdout.splitlines())
        }
        for version in ("10", "9"):
            res = CliRunner().invoke(app, ["eval", str(path), str(qrels), "-m", "AP", "-m", "P@5",
                                           "-q", "-f", "json", "--trec-eval", version])  # fmt: skip
            assert res.exit_code == 0, res.output
            per_query = json.loads(res.stdout)["per_query"]
            for q, values in per_query.items():
                assert values["AP"] == pytest.approx(reference["map", q], abs=5e-5)
                assert values["P@5"] == pytest.approx(reference["P_5", q], abs=5e-5)
            assert len(per_query) == 5
