"""The compiled reader (cmrkit/_trecread.c) against the numpy and line-by-line readers.

Every test reads the same bytes with the compiled reader and with it switched off
($CMRKIT_PURE_PYTHON, as on a machine without a compiler), and wants the same columns, the same
ranking, the same printed scores and the same one-line errors.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from typer.testing import CliRunner

from cmrkit import trec
from cmrkit.cli import app
from cmrkit.evaluation import trec_eval as te


@pytest.fixture
def module():
    """cmrkit._trecread; its absence skips these tests, except on CI, where pip must build it."""
    if os.environ.get(trec.PURE_PYTHON, "") not in ("", "0"):
        pytest.skip(f"the compiled reader is switched off (${trec.PURE_PYTHON})")
    got = trec.compiled()
    if got is None:
        assert not os.environ.get("CI"), "the compiled reader was not built by pip install"
        pytest.skip("cmrkit._trecread is not built (pip install -e . builds it)")
    return got


@pytest.fixture
def pure(monkeypatch):
    """A function switching the compiled reader off (True) or back on (False)."""

    def switch(off: bool) -> None:
        if off:
            monkeypatch.setenv(trec.PURE_PYTHON, "1")
        else:
            monkeypatch.delenv(trec.PURE_PYTHON, raising=False)

    yield switch
    monkeypatch.delenv(trec.PURE_PYTHON, raising=False)


# --- random files ---------------------------------------------------------------------------

DOC_CHARS = "abcdDE019._-/:"


def _docno(r: random.Random) -> str:
    if r.random() < 0.5:
        return f"D{r.randint(0, 60)}"  # D1 and D10: a prefix ranks below
    return "".join(r.choice(DOC_CHARS) for _ in range(r.randint(1, 12)))


def _score(r: random.Random) -> str:
    """Scores as files hold them: ties, ties in single precision only, every way float() reads
    a number (exponents, signs, no leading or trailing digit, more than 15 digits, subnormal)."""
    kind = r.random()
    if kind < 0.25:
        return r.choice(["1", "2.5", "-0.5", "0", "3.25"])
    if kind < 0.35:
        return repr(7.5 + r.choice([1e-9, 2e-9, 3e-9]))
    if kind < 0.55:
        return f"{r.uniform(-50, 50):.{r.randint(0, 6)}f}"
    if kind < 0.7:
        return repr(r.uniform(-1e6, 1e6))
    return r.choice([
        "1e-3", "-2.5E+2", "+3", "-0", "-0.0", ".5", "5.", "-.25", "00012.5", "1e308",
        "0.12345678901234567", "123456789012345678901234567890", "4.9e-324", "1E5", "+.5e1",
        "0." + "0" * 40 + "1", "9" * 15, "9" * 16, "-" + "1" * 15 + ".5",
    ])  # fmt: skip


def _rank(r: random.Random) -> str:
    return r.choice([str(r.randint(0, 999)), "0", "1" * 30, "007"])


def _run_text(seed: int) -> str:
    r = random.Random(seed)
    lines = []
    for q in range(r.randint(1, 12)):
        qid = r.choice([f"q{q}", f"{q}", f"Q-{q}.x", "query_" * 3 + str(q)])
        docs = list(dict.fromkeys(_docno(r) for _ in range(r.randint(1, 40))))
        for d in docs:
            lines.append(f"{qid} Q0 {d} {_rank(r)} {_score(r)} tag{seed % 3}")
    text = "\n".join(lines)
    return text if r.random() < 0.2 else text + "\n"  # sometimes no final newline


def _grade(r: random.Random) -> str:
    return r.choice(["1", "0", "-1", "2", "3", "1.0", "-1.00", "+1", "01", "3.", "-0", "0.0"])


def _qrels_text(seed: int) -> str:
    r = random.Random(seed)
    lines = []
    for q in range(r.randint(1, 12)):
        qid = r.choice([f"q{q}", f"{q}", f"Q-{q}.x"])
        docs = list(dict.fromkeys(_docno(r) for _ in range(r.randint(1, 30))))
        for d in docs:
            lines.append(f"{qid} {r.choice(['0', 'PER', 'Q0'])} {d} {_grade(r)}")
    return "\n".join(lines) + "\n"


def _line_run(path) -> trec.RunColumns:
    """The line-by-line reader's columns (what every irregular file gets)."""
    saved = trec._read_run_columns_fast
    trec._read_run_columns_fast = lambda raw: None
    try:
        return trec.run_columns(trec.read_run(path))
    finally:
        trec._read_run_columns_fast = saved


def _same_columns(a: trec.RunColumns, b: trec.RunColumns) -> None:
    assert a.qids == b.qids
    assert a.starts.tolist() == b.starts.tolist()
    assert a.scores.dtype == b.scores.dtype == np.float64
    assert np.array_equal(a.scores.view(np.int64), b.scores.view(np.int64))  # bit for bit
    norm = [[d.decode() if isinstance(d, bytes) else d for d in c.docnos] for c in (a, b)]
    assert norm[0] == norm[1]


@pytest.mark.parametrize("seed", range(40))
def test_random_runs_read_alike(module, pure, tmp_path, seed):
    path = tmp_path / "run.trec"
    path.write_text(_run_text(seed))
    raw = path.read_bytes()
    compiled = trec._read_run_columns_fast(raw)
    pure(True)
    numpy = trec._read_run_columns_fast(raw)
    assert compiled is not None and numpy is not None
    assert compiled.spans is not None and numpy.spans is None
    _same_columns(compiled, numpy)
    _same_columns(compiled, _line_run(path))
    assert compiled.to_run() == numpy.to_run()


@pytest.mark.parametrize("seed", range(40))
def test_random_qrels_read_alike(module, pure, tmp_path, seed):
    path = tmp_path / "qrels.txt"
    path.write_text(_qrels_text(seed))
    raw = path.read_bytes()
    as_dicts = trec._read_qrels_fast(raw)
    as_bytes = trec._read_qrels_fast(raw, byte_docnos=True)
    columns = trec._read_qrels_fast(raw, columns=True)
    assert isinstance(as_dicts, dict) and isinstance(columns, trec.QrelsColumns)
    pure(True)
    numpy = trec._read_qrels_fast(raw)
    numpy_bytes = trec._read_qrels_fast(raw, byte_docnos=True)
    lines, _ = trec._read_qrels_lines(path, stratified=False)
    assert as_dicts == numpy == lines == dict(columns)
    assert list(as_dicts) == list(lines) == list(columns)  # query order: the file's
    assert all(list(as_dicts[q]) == list(lines[q]) for q in lines)  # docno order too
    assert as_bytes == numpy_bytes
    grades, firsts, sizes = columns.judged(list(reversed(columns.qids)))
    flat = [g for q in reversed(columns.qids) for g in lines[q].values()]
    assert grades.tolist() == flat
    assert sizes.tolist() == [len(lines[q]) for q in reversed(columns.qids)]
    assert firsts.tolist() == (np.cumsum(sizes) - sizes).tolist()


MUTATIONS = b" \n\t\r\x00-+.e0123456789abQ#\x7f\xc3\xa9_"


def _mutated(r: random.Random, data: bytes) -> bytes:
    """``data`` with a few bytes inserted, deleted or replaced (separators, signs, digits, a NUL,
    a non-ASCII letter), sometimes cut short."""
    b = bytearray(data)
    for _ in range(r.randint(0, 4)):
        i = r.randint(0, len(b))
        op = r.random()
        if op < 0.4:
            b[i:i] = bytes([r.choice(MUTATIONS)])
        elif i < len(b):
            if op < 0.7:
                del b[i]
            else:
                b[i] = r.choice(MUTATIONS)
    if r.random() < 0.1:
        del b[r.randint(0, len(b)) :]
    return bytes(b)


@pytest.mark.parametrize("seed", range(4))
def test_mutated_files_read_alike(module, pure, seed):
    """Bytes changed at random: the compiled reader refuses exactly what the numpy reader
    refuses, and reads the rest to the same values."""
    r = random.Random(seed)
    run, qrels = _run_text(seed).encode(), _qrels_text(seed).encode()
    for _ in range(150):
        raw, q = _mutated(r, run), _mutated(r, qrels)
        pure(False)
        got = (trec._read_run_columns_fast(raw), trec._read_qrels_fast(q))
        pure(True)
        want = (trec._read_run_columns_fast(raw), trec._read_qrels_fast(q))
        assert (got[0] is None) == (want[0] is None) and got[1] == want[1]
        if got[0] is not None:
            _same_columns(got[0], want[0])


BASE_RUN = "q1 Q0 a 1 2.5 t\nq1 Q0 b 2 1.5 t\nq2 Q0 a 1 0.5 t\n"

# irregular for both bulk readers (the line reader then reads or refuses each line)
IRREGULAR_RUNS = {
    "tab": BASE_RUN.replace("a 1 2.5", "a\t1 2.5"),
    "two spaces": BASE_RUN.replace("b 2", "b  2"),
    "leading space": " " + BASE_RUN,
    "trailing space": BASE_RUN.replace("1.5 t\n", "1.5 t \n"),
    "crlf": BASE_RUN.replace("\n", "\r\n"),
    "blank line": BASE_RUN.replace("t\nq2", "t\n\nq2"),
    "blank last line": BASE_RUN + "\n",
    "non-ascii docno": BASE_RUN.replace("q2 Q0 a", "q2 Q0 \u00e9"),
    "nbsp inside a docno": BASE_RUN.replace("q2 Q0 a", "q2 Q0 a\u00a0b"),
    "unit separator inside a docno": BASE_RUN.replace("q2 Q0 a", "q2 Q0 a\x1fb"),
    "arabic-indic score": BASE_RUN.replace("1.5", "\u0661\u066b\u0665"),
    "fullwidth score": BASE_RUN.replace("1.5", "\uff11"),
    "five fields": BASE_RUN.replace("q2 Q0 a 1 0.5 t", "q2 Q0 a 1 0.5"),
    "extra column": BASE_RUN.replace("0.5 t", "0.5 t extra"),
    "score word": BASE_RUN.replace("1.5", "high"),
    "score nan": BASE_RUN.replace("1.5", "nan"),
    "score inf": BASE_RUN.replace("1.5", "-inf"),
    "score overflow": BASE_RUN.replace("1.5", "1e400"),
    "score underscore": BASE_RUN.replace("1.5", "1_5"),
    "score hex": BASE_RUN.replace("1.5", "0x1p3"),
    "score two dots": BASE_RUN.replace("1.5", "1.5.1"),
    "score sign only": BASE_RUN.replace("1.5", "-"),
    "score dot only": BASE_RUN.replace("1.5", "."),
    "rank negative": BASE_RUN.replace("b 2", "b -2"),
    "rank fraction": BASE_RUN.replace("b 2", "b 2.0"),
    "repeated docno": BASE_RUN.replace("q1 Q0 b", "q1 Q0 a"),
    "query split": BASE_RUN + "q1 Q0 c 3 0.1 t\n",
    "long qid": BASE_RUN.replace("q2", "q" * 65),
    "long score": BASE_RUN.replace("1.5", "1." + "5" * 70),
    "nul byte": BASE_RUN.replace("b 2", "b\x002"),
    "comment": "# a comment\n" + BASE_RUN,
    # a line starting with '#' is a comment in trec_eval 10.0 and data in 9.0.8: the line
    # reader reads it as the version asked for, whatever its number of fields
    "comment with six fields": "#q Q0 a 1 2 t\n" + BASE_RUN,
    "comment with six fields inside": BASE_RUN.replace("t\nq2", "t\n# Q0 a 1 2 t\nq2"),
    "comment with six fields last": BASE_RUN + "# Q0 a 1 2 t\n",
    "form feed": BASE_RUN.replace("b 2", "b\f2"),
    "empty": "",
    "newline only": "\n",
}
REGULAR_RUNS = {
    "no final newline": BASE_RUN[:-1],
    "del byte in docno": BASE_RUN.replace("q2 Q0 a", "q2 Q0 a\x7fb"),
    "long docno": BASE_RUN.replace("q2 Q0 a", "q2 Q0 " + "x" * 200),
    "hash inside a line": BASE_RUN.replace("q2 Q0 a 1 0.5 t", "q2# Q0 #a 1 0.5 #t"),
}


@pytest.mark.parametrize("name", sorted(IRREGULAR_RUNS) + sorted(REGULAR_RUNS))
def test_irregular_runs_fall_back_as_before(module, pure, tmp_path, name):
    text = IRREGULAR_RUNS.get(name, REGULAR_RUNS.get(name))
    raw = text.encode()
    compiled = trec._read_run_columns_fast(raw)
    pure(True)
    numpy = trec._read_run_columns_fast(raw)
    assert (compiled is None) == (numpy is None) == (name in IRREGULAR_RUNS)
    if compiled is not None:
        _same_columns(compiled, numpy)
        path = tmp_path / "run"
        path.write_bytes(raw)
        _same_columns(compiled, _line_run(path))


IRREGULAR_QRELS = {
    "fraction": "q1 0 a 1\nq1 0 b 0.5\n",
    "exponent": "q1 0 a 1e0\n",
    "word": "q1 0 a yes\n",
    "sixteen digits": "q1 0 a 1234567890123456\n",
    "identical duplicate": "q1 0 a 1\nq1 0 a 1\n",
    "conflicting duplicate": "q1 0 a 1\nq1 0 a 0\n",
    "tabs": "q1\t0\ta\t1\n",
    "three fields": "q1 0 a\n",
    "query split": "q1 0 a 1\nq2 0 a 1\nq1 0 b 0\n",
    "sign only": "q1 0 a -\n",
    "digit after point": "q1 0 a 1.01\n",
    "crlf": "q1 0 a 1\r\nq1 0 b 0\r\n",
    "comment with four fields": "# 0 a 1\nq1 0 a 1\n",
    "comment with four fields inside": "q1 0 a 1\n# 0 a 1\nq2 0 a 1\n",
    "comment with four fields last": "q1 0 a 1\n# 0 a 1\n",
}


@pytest.mark.parametrize("name", sorted(IRREGULAR_QRELS))
def test_irregular_qrels_fall_back_as_before(module, pure, name):
    raw = IRREGULAR_QRELS[name].encode()
    assert trec._read_qrels_fast(raw) is None
    assert trec._read_qrels_fast(raw, columns=True) is None
    pure(True)
    assert trec._read_qrels_fast(raw) is None


def test_hash_inside_a_qrels_line_stays_regular(module, pure):
    raw = b"q1 0 a 1\nq2# 0 #b 0\n"
    want = {"q1": {"a": 1}, "q2#": {"#b": 0}}
    assert trec._read_qrels_fast(raw) == want
    pure(True)
    assert trec._read_qrels_fast(raw) == want


def _invoke(pure, off: bool, args: list[str], stdin: bytes | None = None):
    pure(off)
    result = CliRunner().invoke(app, args, input=stdin)
    return result.exit_code, result.stdout, result.stderr


FAILING = {"score word", "five fields", "repeated docno", "score nan", "score underscore", "empty",
           "arabic-indic score", "fullwidth score"}  # fmt: skip


@pytest.mark.parametrize("name", sorted(IRREGULAR_RUNS) + sorted(REGULAR_RUNS))
@pytest.mark.parametrize("options", [[], ["-m", "all_trec", "-f", "trec"]], ids=["ir", "port"])
def test_odd_runs_print_the_same(module, pure, tmp_path, name, options):
    """Output, one-line error and exit code alike, whichever reader took the file."""
    run = tmp_path / "run"
    run.write_bytes(IRREGULAR_RUNS.get(name, REGULAR_RUNS.get(name)).encode())
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 a 1\nq2 0 a 0\n")
    args = ["eval", str(run), str(qrels), *options]
    compiled = _invoke(pure, False, args)
    if name in FAILING:  # one line naming the file, exit 2
        assert compiled[0] == 2 and compiled[2].count("\n") == 1 and str(run) in compiled[2]
    assert compiled == _invoke(pure, True, args)


@pytest.mark.parametrize("name", ["fraction", "word", "conflicting duplicate"])
def test_qrels_errors_name_the_same_line(module, pure, tmp_path, name):
    run = tmp_path / "run"
    run.write_text(BASE_RUN)
    qrels = tmp_path / "qrels"
    qrels.write_bytes(IRREGULAR_QRELS[name].encode())
    for options in ([], ["-m", "all_trec", "-f", "trec"]):
        args = ["eval", str(run), str(qrels), *options]
        compiled = _invoke(pure, False, args)
        assert compiled[0] == 2 and "line " in compiled[2]
        assert compiled == _invoke(pure, True, args)


def _eval_case(folder, seed: int):
    """A run and qrels that overlap in part: queries only in one of them, queries without a
    relevant document, ties, graded and negative judgments."""
    r = random.Random(seed)
    run_lines, qrels_lines = [], []
    for q in range(r.randint(5, 14)):
        qid = f"q{q:02d}"
        pool = list(dict.fromkeys(_docno(r) for _ in range(60)))
        if q % 5 != 3:  # a run query without judgments otherwise
            grades = ["-1", "0", "0", "1", "1", "2", "3"] if q % 4 else ["-1", "0"]
            for d in r.sample(pool, r.randint(1, min(25, len(pool)))):
                qrels_lines.append(f"{qid} 0 {d} {r.choice(grades)}")
        if q % 6 == 4:
            continue  # a qrels query the run lacks
        for d in r.sample(pool, r.randint(1, len(pool))):
            run_lines.append(f"{qid} Q0 {d} {_rank(r)} {_score(r)} run{seed}")
    run = folder / f"run{seed}"
    qrels = folder / f"qrels{seed}"
    run.write_text("\n".join(run_lines) + "\n")
    qrels.write_text("\n".join(qrels_lines) + "\n")
    return run, qrels


EVAL_OPTIONS = [
    ["-f", "json"],
    ["-q"],
    ["-m", "nDCG@5", "-m", "Bpref", "-m", "Rprec", "-m", "nDCG", "-q", "-f", "csv"],
    ["-M", "7", "-c", "-f", "json"],
    ["-q", "-m", "all_trec", "-f", "trec", "--trec-eval", "10"],
    ["-q", "-m", "all_trec", "-f", "trec", "--trec-eval", "9"],
    ["-q", "-c", "-M", "5", "-m", "all_trec", "-f", "trec"],
    ["-q", "-m", "all_trec", "-J", "-l", "2", "-f", "trec"],
    ["-m", "xinfAP", "-m", "infNDCG", "-m", "NumRel", "-q", "-c", "-f", "json"],
]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("options", EVAL_OPTIONS, ids=lambda o: "".join(o))
def test_eval_prints_the_same_with_and_without_the_compiled_reader(
    module, pure, tmp_path, seed, options
):
    run, qrels = _eval_case(tmp_path, seed)
    args = ["eval", str(run), str(qrels), *options]
    compiled = _invoke(pure, False, args)
    assert compiled[0] == 0, compiled[2]
    assert compiled == _invoke(pure, True, args)


def test_compare_prints_the_same(module, pure, tmp_path):
    run, qrels = _eval_case(tmp_path, 12)
    other = tmp_path / "other"
    lines = run.read_text().splitlines()
    other.write_text("".join(f"{line[: line.rindex(' ')]} other\n" for line in lines[::2]))
    args = ["compare", str(qrels), str(run), str(other), "-m", "AP", "-m", "nDCG@10", "-f", "json"]
    compiled = _invoke(pure, False, args)
    assert compiled[0] == 0, compiled[2]
    assert compiled == _invoke(pure, True, args)


def test_stdin_run_reads_the_same(module, pure, tmp_path):
    run, qrels = _eval_case(tmp_path, 7)
    args = ["eval", "-", str(qrels), "-q", "-m", "all_trec", "-f", "trec"]
    compiled = _invoke(pure, False, args, run.read_bytes())
    assert compiled[0] == 0, compiled[2]
    assert compiled == _invoke(pure, True, args, run.read_bytes())


def test_comments_and_extra_columns_are_counted_as_before(module, pure, tmp_path):
    run, qrels = _eval_case(tmp_path, 8)
    lines = run.read_text().splitlines()
    lines.insert(3, "# a comment")
    lines[5] += " extra columns"
    run.write_text("\n".join(lines) + "\n")
    qrels.write_text("# judged\n" + qrels.read_text())
    args = ["eval", str(run), str(qrels), "-q", "-m", "all_trec", "-f", "trec"]
    compiled = _invoke(pure, False, args)
    assert compiled[0] == 0 and "1 '#' comment lines skipped" in compiled[2]
    assert "1 lines with text after the 6th column" in compiled[2]
    assert compiled == _invoke(pure, True, args)


def test_port_reads_runs_and_qrels_alike(module, pure, tmp_path):
    run, qrels = _eval_case(tmp_path, 9)
    for version in ("9", "10"):
        pure(False)
        results = te.read_results(run, version)
        info = te.read_rel_info(qrels, "qrels", version)
        assert results.cols.spans is not None
        assert isinstance(info.qrels, trec.QrelsColumns) and info.byte_docnos
        pure(True)
        assert results.queries == te.read_results(run, version).queries
        assert dict(info.qrels) == te.read_rel_info(qrels, "qrels", version).qrels


def test_scoring_never_makes_the_docnos(module, tmp_path):
    """The ranking and the qrels join read the docnos in the files' bytes."""
    from cmrkit.evaluation import evaluate

    run, qrels = _eval_case(tmp_path, 10)
    cols = trec.read_run_columns(run)
    judged = trec.read_qrels(qrels, columns=True)
    assert isinstance(cols.docnos, trec.Docnos) and isinstance(judged, trec.QrelsColumns)
    evaluate(cols, judged, ["AP", "nDCG@10", "P@5", "RR@10", "Judged@10", "infAP"])
    assert cols.docnos._made is None
    assert not judged._made  # no query's dict was made either


def test_plain_readers_still_return_dicts(module, tmp_path):
    run, qrels = _eval_case(tmp_path, 11)
    assert type(trec.read_qrels(qrels)) is dict
    assert all(type(d) is dict for d in trec.read_qrels(qrels).values())
    run_dict = trec.read_run(run)
    assert type(run_dict) is dict and all(isinstance(d, str) for d in next(iter(run_dict.values())))


def test_compiled_functions_refuse_bad_arrays(module):
    raw = BASE_RUN.encode()
    qids, starts, scores, begins, ends = module.run(raw)
    keys = np.frombuffer(scores)
    rows = np.asarray([0, 1, 5], dtype=np.int64)
    with pytest.raises(IndexError):
        module.docnos(raw, begins, ends, rows, False)
    with pytest.raises(ValueError):
        module.rank(keys[:2], starts, None, raw, begins, ends)
    with pytest.raises(ValueError):
        module.rank(np.asarray([np.nan, 1.0, 2.0]), starts, None, raw, begins, ends)
    with pytest.raises(ValueError):
        module.docnos(raw, begins, np.frombuffer(ends, np.int64) + 100, None, False)
    with pytest.raises(TypeError):
        module.run("text, not bytes")
    q = module.qrels(b"q1 0 a 1\n")
    with pytest.raises(IndexError):
        module.grades(raw, begins, ends, None, starts, b"q1 0 a 1\n", q[3], q[4], q[2], q[1],
                      np.asarray([0, 5], np.int64), -1)  # fmt: skip
    assert module.docnos(raw, begins, ends, None, True) == ["a", "b", "a"]


def test_ranking_ties_by_docno_descending(module, tmp_path):
    """Equal scores (and scores equal only as C floats under 9.0.8) rank by docno descending,
    a docno above its prefixes; the same order as the numpy path's."""
    lines = [
        "q1 Q0 D1 1 2 t", "q1 Q0 D10 1 2 t", "q1 Q0 D1a 1 2.0 t", "q1 Q0 C 1 3 t",
        "q1 Q0 F 1 1.000000001 t", "q1 Q0 E 1 1.000000002 t", "q1 Q0 G 1 -0 t", "q1 Q0 H 1 0 t",
    ]  # fmt: skip
    path = tmp_path / "run"
    path.write_text("\n".join(lines) + "\n")
    from cmrkit.evaluation.order import MISSING, rank_all

    cols = trec.read_run_columns(path)
    qrels = {"q1": {"D1": 1}}
    for version, names in [
        ("10", ["C", "D1a", "D10", "D1", "E", "F", "H", "G"]),
        ("9", ["C", "D1a", "D10", "D1", "F", "E", "H", "G"]),  # E = F as C floats
    ]:
        ranked = rank_all(cols, [0], qrels, None, version)
        order, rel, docnos = ranked.order, ranked.grades, ranked.docnos
        assert [docnos[i].decode() for i in order] == names
        assert rel.tolist() == [MISSING] * 3 + [1] + [MISSING] * 4
        pure_order = _numpy_order(cols, version)
        assert pure_order == names


def _numpy_order(cols: trec.RunColumns, version: str) -> list[str]:
    from cmrkit.evaluation.order import _numpy_order as order_of

    single = cols.scores.astype(np.float32 if version == "9" else np.float64)
    docnos = list(cols.docnos)
    return [docnos[i].decode() for i in order_of(single, np.diff(cols.starts), 1, docnos)]


def test_a_build_from_another_source_is_not_used(module, monkeypatch, caplog):
    """The compiled reader records the sha256 of the `_trecread.c` it was built from; a build
    older than the source beside it (an editable install after a pull) is left unused, with a
    note saying how to rebuild it, and the numpy reader serves."""
    import hashlib
    from pathlib import Path

    source = Path(trec.__file__).with_name("_trecread.c")
    assert module.SOURCE_SHA256 == hashlib.sha256(source.read_bytes()).hexdigest()
    assert trec._built_from_source(module)

    class Stale:
        SOURCE_SHA256 = "0" * 64
        __file__ = module.__file__

    with caplog.at_level("WARNING", logger="cmrkit"):
        assert not trec._built_from_source(Stale())
    assert "was built from another version of" in caplog.text
    assert "rebuild it with `pip install -e .`" in caplog.text
    monkeypatch.setattr(trec, "_MODULE", [])
    monkeypatch.setattr(trec, "_built_from_source", lambda m: False)
    assert trec.extension() is None and trec.compiled() is None
