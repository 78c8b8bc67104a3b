"""`cmrkit eval ... -f trec` against the real trec_eval 9.0.8 and 10.0, built from source.

trec_eval's own test suite (every command of `make quicktest` in both Makefiles, compared
line for line with its expected out.test.* files), then randomized runs and qrels (ties,
scores equal only in single precision, graded and negative judgments, queries without
relevant documents, queries missing on either side) compared with the C program's output.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cmrkit.cli import app

VERSIONS = {"9": "9.0.8", "10": "10.0"}
REPO = Path(__file__).resolve().parent.parent


def _sources() -> Path | None:
    """../shared/tools/trec_eval next to the checkout (or above a worktree)."""
    env = os.environ.get("CMRKIT_TREC_EVAL_SRC")
    if env:
        return Path(env)
    for parent in [REPO, *REPO.parents]:
        candidate = parent / "shared" / "tools" / "trec_eval"
        if (candidate / "10.0" / "Makefile").exists():
            return candidate
    return None


@pytest.fixture(scope="session")
def trec_eval(tmp_path_factory) -> dict[str, Path]:
    """{version: build folder} with the trec_eval binary built from the unchanged sources."""
    src = _sources()
    if src is None:
        pytest.skip("trec_eval sources (../shared/tools/trec_eval) not found")
    if shutil.which("make") is None or shutil.which("cc") is None:
        pytest.skip("no C compiler or make to build trec_eval")
    out = {}
    root = tmp_path_factory.mktemp("trec_eval")
    for version, name in VERSIONS.items():
        folder = root / name
        shutil.copytree(src / name, folder)
        for path in folder.rglob("*"):
            path.chmod(path.stat().st_mode | 0o200)
        folder.chmod(folder.stat().st_mode | 0o200)
        done = subprocess.run(
            ["make", "-s", "trec_eval"], cwd=folder, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        out[version] = folder
    return out


def _quicktest(makefile: Path) -> list[tuple[list[str], str]]:
    """(trec_eval arguments, expected output file) of each `make quicktest` command."""
    commands = []
    inside = False
    for line in makefile.read_text().splitlines():
        if line.startswith("quicktest:"):
            inside = True
            continue
        if inside and line and not line[0].isspace():
            break
        if inside and "./trec_eval" in line and "| diff - " in line:
            command, _, expected = line.strip().partition(" | diff - ")
            commands.append((shlex.split(command)[1:], expected.strip()))
    return commands


def _cmrkit_args(args: list[str], folder: Path) -> list[str]:
    """trec_eval's command line (options, qrels, run) as `cmrkit eval RUN QRELS ...`."""
    options, files = [], []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and len(a) > 1:
            letter, attached = a[1], a[2:]
            if letter in "mlNMRZ":
                value = attached or args[i + 1]
                i += 0 if attached else 1
                if letter == "Z":
                    value = str(folder / value)
                options += [f"-{letter}", value]
            else:
                options.append(a)
        else:
            files.append(str(folder / a))
        i += 1
    qrels, run = files
    return ["eval", run, qrels, *options]


@pytest.mark.parametrize(("version", "count"), [("9", 11), ("10", 15)])
def test_make_quicktest_of_both_versions(trec_eval, version, count):
    folder = trec_eval[version]
    commands = _quicktest(folder / "Makefile")
    assert len(commands) == count
    for args, expected in commands:
        cli = [*_cmrkit_args(args, folder), "--trec-eval", version, "-f", "trec"]
        result = CliRunner().invoke(app, cli)
        assert result.exit_code == 0, (args, result.stderr)
        want = (folder / expected).read_text()
        assert result.stdout.splitlines() == want.splitlines(), args
        assert result.stdout == want, args


def _write_case(
    folder: Path, seed: int, *, complete_run: bool, grouped: bool = False
) -> tuple[Path, Path]:
    """Random qrels and run; ``grouped``: each query's lines together and no extra columns (the
    layout cmrkit reads in bulk), else shuffled lines, some with extra columns (line by line)."""
    r = random.Random(seed)
    qrels_lines, run_lines = [], []
    for q in range(r.randint(8, 14)):
        qid = f"q{q:02d}" if q % 4 else f"{q}"
        pool = [f"D{r.randint(0, 150):03d}" for _ in range(70)]
        pool = list(dict.fromkeys(pool))
        judged = r.sample(pool, r.randint(1, min(30, len(pool))))
        grades = [-1, 0, 0, 1, 1, 2, 3] if q % 5 != 2 else [-1, 0]  # some without relevant
        for d in judged:
            qrels_lines.append(f"{qid} 0 {d} {r.choice(grades)}")
        if q % 6 == 5 and not complete_run:
            continue  # a qrels query the run lacks
        n = r.choice([0, 1, 3, 12, 40, 70]) if q % 7 else 0
        docs = r.sample(pool, min(n, len(pool))) or [pool[0]]
        base = r.choice([1.0, 7.5])
        for d in docs:
            kind = r.random()
            if kind < 0.3:
                score = round(r.random() * 3, 1)  # exact ties
            elif kind < 0.45:
                score = base + r.choice([1e-9, 2e-9, 3e-9])  # equal as C floats only
            else:
                score = r.random() * 10
            extra = " extra column" if kind > 0.97 and not grouped else ""
            run_lines.append(f"{qid} Q0 {d} {r.randint(1, 99)} {score!r} tag{seed}{extra}")
    run_lines.append(f"zz_unjudged Q0 D001 1 1.5 tag{seed}")
    r.shuffle(run_lines)
    if grouped:
        run_lines.sort(key=lambda line: line.split(" ", 1)[0])
    qrels = folder / f"qrels{seed}.txt"
    run = folder / f"run{seed}.trec"
    qrels.write_text("\n".join(qrels_lines) + "\n")
    run.write_text("\n".join(run_lines) + "\n")
    return qrels, run


OPTION_SETS = [
    ["-m", "all_trec"],
    ["-m", "all_trec", "-c", "-M", "9"],
    ["-m", "all_trec", "-m", "dcg", "-m", "ideal_dcg", "-J", "-l", "2"],
    ["-m", "P.3,11", "-m", "ndcg.0=1,1=2,2=4,3=9", "-m", "utility.1,-2,0,1", "-N", "500",
     "-m", "iprec_at_recall..15,.33,.5", "-m", "11pt_avg..2,.4", "-m", "rbp.p=0.7", "-m",
     "Rprec_mult.0.5,1.5", "-m", "set_F.0.25", "-m", "relstring.7", "-m", "ndcg_rel", "-m",
     "Rndcg", "-m", "G", "-m", "relative_P.2,5", "-c"],
    ["-m", "Rndcg.1=2,2=1,3=5", "-m", "G.0=1,2=4.5", "-m", "ndcg_rel.1=0.5,3=2", "-m",
     "rbp_resid.p=0.5", "-m", "bpref", "-m", "infAP", "-m", "binG", "-l", "2", "-M", "20", "-n"],
]  # fmt: skip


# (10.0's dcg and ideal_dcg share ndcg's parameters and crash it when ndcg has some)
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("options", OPTION_SETS, ids=["all_trec", "c-M", "J-l2", "params", "gains"])
@pytest.mark.parametrize("version", ["9", "10"])
@pytest.mark.parametrize("grouped", [False, True], ids=["shuffled", "grouped"])
def test_random_runs_equal_the_c_program(trec_eval, tmp_path, seed, options, version, grouped):
    binary = trec_eval[version] / "trec_eval"
    complete = "-c" in options
    qrels, run = _write_case(tmp_path, seed, complete_run=not complete, grouped=grouped)
    if version == "9":  # measures 9.0.8 lacks
        options = _without(options, {"dcg", "ideal_dcg", "rbp.p=0.7", "rbp_resid.p=0.5"})
    expected = subprocess.run(
        [str(binary), "-q", *options, str(qrels), str(run)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cli = ["eval", str(run), str(qrels), "-q", *options, "--trec-eval", version, "-f", "trec"]
    result = CliRunner().invoke(app, cli)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected
    assert "with text after the 6th column" in result.stderr or "extra" not in run.read_text()


def _without(options: list[str], measures: set[str]) -> list[str]:
    out = []
    i = 0
    while i < len(options):
        if options[i] == "-m" and options[i + 1] in measures:
            i += 2
            continue
        out.append(options[i])
        i += 1
    return out


def test_missing_queries_in_10_are_evaluated_as_9_with_a_note(trec_eval, tmp_path):
    qrels, run = _write_case(tmp_path, 4, complete_run=False)
    binary = trec_eval["10"] / "trec_eval"
    refused = subprocess.run([str(binary), str(qrels), str(run)], capture_output=True, text=True)
    assert refused.returncode == 4 and "not found in qrels" in refused.stderr
    nine = subprocess.run(
        [str(trec_eval["9"] / "trec_eval"), "-m", "all_trec", str(qrels), str(run)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result = CliRunner().invoke(app, ["eval", str(run), str(qrels), "-m", "all_trec", "-f", "trec"])
    assert result.exit_code == 0, result.stderr
    assert "missing from the run not evaluated" in result.stderr
    assert "10.0 itself stops" in result.stderr
    # the same queries as 9.0.8; values differ only where single-precision ties do
    ours = dict(line.rsplit("\t", 1) for line in result.stdout.splitlines())
    theirs = dict(line.rsplit("\t", 1) for line in nine.splitlines())
    assert ours["num_q                 \tall"] == theirs["num_q                 \tall"]


def test_stdin_run_and_comment_lines(trec_eval, tmp_path):
    qrels, run = _write_case(tmp_path, 5, complete_run=True)
    text = "# a comment\n" + run.read_text()
    commented = tmp_path / "commented.trec"
    commented.write_text(text)
    binary = trec_eval["10"] / "trec_eval"
    expected = subprocess.run(
        [str(binary), "-q", "-m", "all_trec", str(qrels), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result = CliRunner().invoke(
        app, ["eval", "-", str(qrels), "-q", "-m", "all_trec", "-f", "trec"], input=text
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected
    assert "1 '#' comment lines skipped" in result.stderr
    refused = CliRunner().invoke(
        app, ["eval", str(commented), str(qrels), "--trec-eval", "9", "-f", "trec"]
    )
    assert refused.exit_code == 2 and "10.0 only" in refused.stderr


def _hash_case(folder: Path, case: str) -> tuple[Path, Path]:
    """A regular (bulk-readable) run and qrels, then the lines of ``case`` starting with '#'
    that have the run's 6 or the qrels' 4 fields: a comment in trec_eval 10.0, data (query
    '#...') in 9.0.8."""
    qrels, run = _write_case(folder, 4, complete_run=True, grouped=True)
    q, r = qrels.read_text().splitlines(), run.read_text().splitlines()
    middle = next(i for i, line in enumerate(q) if line.split()[0] != q[0].split()[0])
    hashed = f"# Q0 {q[0].split()[2]} 1 99.5 hashtag"
    if case == "run first":
        r.insert(0, hashed)
    elif case == "run last":  # 10.0 takes the runid from the last data line
        r.append(hashed)
    elif case == "run indented":  # 10.0 skips a run line whose first non-blank is '#'
        r.insert(0, "  " + hashed)
    elif case == "qrels first":
        q.insert(0, f"# 0 {q[0].split()[2]} 1")
    elif case == "qrels inside":
        q.insert(middle, f"#q 0 {q[0].split()[2]} 2")
    elif case == "qrels two in a row":  # 10.0 reads the second as data
        q[middle:middle] = [f"# 0 {q[0].split()[2]} 1", f"# 0 {q[1].split()[2]} 1"]
    elif case == "qrels indented":  # 10.0 skips a judgment line whose first byte is '#'
        q.insert(0, f"  # 0 {q[0].split()[2]} 1")
    elif case == "both":
        r.insert(0, hashed)
        q.insert(0, f"# 0 {q[0].split()[2]} 1")
    elif case == "both indented":  # 10.0: the run's line a comment, the qrels' line data
        r.insert(0, "  " + hashed)
        q.insert(0, f"  # 0 {q[0].split()[2]} 1")
    qrels.write_text("\n".join(q) + "\n")
    run.write_text("\n".join(r) + "\n")
    return qrels, run


HASH_CASES = ["run first", "run last", "run indented", "qrels first", "qrels inside",
              "qrels two in a row", "qrels indented", "both", "both indented"]  # fmt: skip


@pytest.mark.parametrize("reader", ["compiled", "pure"])
@pytest.mark.parametrize("case", HASH_CASES)
@pytest.mark.parametrize("version", ["9", "10"])
def test_hash_lines_as_each_version_reads_them(trec_eval, tmp_path, monkeypatch, version, case,
                                               reader):  # fmt: skip
    """Lines starting with '#' with a data line's number of fields, in otherwise regular files
    (the bulk readers' files): 10.0 skips them as comments, 9.0.8 reads them as data; cmrkit
    prints what the chosen version prints, with the compiled reader and without it."""
    from cmrkit import trec

    if reader == "pure":
        monkeypatch.setenv(trec.PURE_PYTHON, "1")
    else:
        monkeypatch.delenv(trec.PURE_PYTHON, raising=False)
        if trec.compiled() is None:
            pytest.skip("cmrkit._trecread is not built")
    qrels, run = _hash_case(tmp_path, case)
    options = ["-c", "-q", "-m", "all_trec"]
    expected = subprocess.run(
        [str(trec_eval[version] / "trec_eval"), *options, str(qrels), str(run)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cli = ["eval", str(run), str(qrels), *options, "--trec-eval", version, "-f", "trec"]
    result = CliRunner().invoke(app, cli)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected
    if version == "9":
        assert "read as data, as trec_eval 9.0.8 reads them" in result.stderr
    elif case != "qrels indented":
        assert "'#' comment lines skipped" in result.stderr
    if version == "10" and case in ("qrels two in a row", "qrels indented", "both indented"):
        assert "1 lines starting with '#' read as data, as trec_eval 10.0" in result.stderr


@pytest.mark.parametrize("version", ["9", "10"])
def test_hash_lines_trec_eval_refuses_are_refused_with_the_reason(trec_eval, tmp_path, version):
    """A '#' line read as data that is not a valid line: trec_eval says "Malformed line",
    cmrkit names the line and says why it was read as data."""
    qrels, run = _write_case(tmp_path, 5, complete_run=True, grouped=True)
    lines = qrels.read_text().splitlines()
    lines[1:1] = ["# judged by two people", "# twice"]  # 9.0.8: both data; 10.0: the second
    qrels.write_text("\n".join(lines) + "\n")
    binary = str(trec_eval[version] / "trec_eval")
    c = subprocess.run([binary, str(qrels), str(run)], capture_output=True, text=True)
    assert c.returncode != 0 and "Malformed line" in c.stderr
    result = CliRunner().invoke(
        app, ["eval", str(run), str(qrels), "--trec-eval", version, "-f", "trec"]
    )
    assert result.exit_code == 2
    line = 2 if version == "9" else 3
    assert f"line {line}: expected 4 fields" in result.stderr
    assert ("9.0.8 has no comment lines" if version == "9" else "right after a comment line") in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["-m", "P.x"], "whole numbers"),
        (["-m", "nosuch"], "unknown measure"),
        (["-m", "rbp", "--trec-eval", "9"], "10.0 only"),
        (["-m", "map_avgjg"], "-R qrels_jg"),
        (["-R", "prefs"], "-R prefs"),
        (["-m", "ndcg.1=x"], "not a number"),
    ],
)
def test_bad_measures_and_formats_are_one_line(tmp_path, args, words):
    qrels, run = _write_case(tmp_path, 6, complete_run=True)
    result = CliRunner().invoke(app, ["eval", str(run), str(qrels), *args, "-f", "trec"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], lines


def test_swapped_arguments_give_the_usage(tmp_path):
    qrels, run = _write_case(tmp_path, 7, complete_run=True)
    result = CliRunner().invoke(app, ["eval", str(qrels), str(run)])
    assert result.exit_code == 2
    assert "swapped" in result.stderr and "usage: cmrkit eval RUN QRELS" in result.stderr


def test_run_and_qrels_cannot_both_be_stdin(tmp_path):
    qrels, _ = _write_case(tmp_path, 7, complete_run=True)
    result = CliRunner().invoke(app, ["eval", "-", "-"], input=qrels.read_text())
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert "cannot both come from stdin" in result.stderr


def test_zscores_missing_a_query_or_measure_as_trec_eval_and_said(trec_eval, tmp_path):
    folder = trec_eval["10"]
    lines = (folder / "test" / "zscores_file").read_text().splitlines()
    kept = [x for x in lines if not x.startswith("302 ") and " map " not in x]
    z = tmp_path / "z.txt"
    z.write_text("\n".join(kept) + "\n")
    qrels, run = folder / "test" / "qrels.test", folder / "test" / "results.test"
    expected = subprocess.run(
        [str(folder / "trec_eval"), "-q", "-m", "all_trec", "-Z", str(z), str(qrels), str(run)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result = CliRunner().invoke(
        app, ["eval", str(run), str(qrels), "-q", "-m", "all_trec", "-Z", str(z), "-f", "trec"]
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected
    assert "no line for 1 queries (302)" in result.stderr
    assert "lacks 1 measures for some queries (map)" in result.stderr


def _write_prefs_case(folder: Path, seed: int) -> tuple[Path, Path, Path]:
    """prefs (judgment groups with one or two subgroups, consistent levels), qrels_jg and a
    run over the same documents."""
    r = random.Random(seed)
    prefs, jg_lines, run_lines = [], [], []
    for q in range(6):
        qid = f"{100 + q}"
        docs = [f"P{q}D{i:02d}" for i in range(r.randint(4, 16))]
        level = {d: r.choice([0, 0, 1, 2, 3]) for d in docs}  # one level per document
        for g in range(r.randint(1, 3)):
            subgroups = r.choice([1, 1, 2])
            judged = r.sample(docs, r.randint(2, len(docs)))
            for k, d in enumerate(judged):
                jsg = f"s{k % subgroups}"
                prefs.append(f"{qid} g{g} {jsg} {d} {level[d]}")
                jg_lines.append(f"{qid} g{g} {d} {level[d] if r.random() > 0.1 else -1}")
        ranked = r.sample(docs + [f"X{q}{i}" for i in range(5)], r.randint(1, len(docs) + 5))
        for i, d in enumerate(ranked):
            score = round(r.random() * 3, 1) if i % 3 else 10 - i
            run_lines.append(f"{qid} Q0 {d} {i + 1} {score} prefs{seed}")
    files = []
    for name, lines in (("prefs", prefs), ("qrels_jg", jg_lines), ("run", run_lines)):
        path = folder / f"{name}{seed}.txt"
        r.shuffle(lines)
        path.write_text("\n".join(dict.fromkeys(lines)) + "\n")
        files.append(path)
    return files[0], files[1], files[2]


@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize("version", ["9", "10"])
def test_random_prefs_and_judgment_groups_equal_the_c_program(trec_eval, tmp_path, seed, version):
    prefs, jg, run = _write_prefs_case(tmp_path, seed)
    binary = str(trec_eval[version] / "trec_eval")
    for fmt, rel, measures in (("prefs", prefs, "all_prefs"), ("qrels_jg", jg, "qrels_jg")):
        args = ["-q", "-m", measures, "-R", fmt]
        expected = subprocess.run(
            [binary, *args, str(rel), str(run)], capture_output=True, text=True, check=True
        ).stdout
        result = CliRunner().invoke(
            app, ["eval", str(run), str(rel), *args, "--trec-eval", version, "-f", "trec"]
        )
        assert result.exit_code == 0, (fmt, result.stderr)
        assert result.stdout == expected, fmt


TREC_ONLY = ["set_F.0.5", "binG", "utility.1,-2,0,1", "relative_P.5", "G", "Rprec_mult..5",
             "num_nonrel_judged_ret", "ndcg_rel", "rbp"]  # fmt: skip


def test_trec_eval_measures_in_groups_and_compare_equal_the_c_program(trec_eval, tmp_path):
    """trec_eval's measures without an ir_measures name, grouped (`eval --by`) and compared:
    every per-query value as the C program prints it, and compare's means of them."""
    import json
    import math

    qrels, run = _write_case(tmp_path, 5, complete_run=True)
    run.write_text(run.read_text().replace(" extra column", ""))  # the strict reader's runs
    c_args = [a for m in TREC_ONLY for a in ("-m", m)]
    expected = subprocess.run(
        [str(trec_eval["10"] / "trec_eval"), "-q", *c_args, str(qrels), str(run)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    c_values: dict[str, dict[str, str]] = {}
    for line in expected.splitlines():
        name, qid, value = line.split()
        if qid != "all":
            c_values.setdefault(qid, {})[name] = value
    qids = sorted(c_values)
    topics = tmp_path / "types.tsv"
    topics.write_text("".join(f"{q}\t{'a' if i % 2 else 'b'}\n" for i, q in enumerate(qids)))
    cli = ["eval", str(run), str(qrels), *c_args, "--topics", str(topics), "--by", "type",
           "-f", "json"]  # fmt: skip
    result = CliRunner().invoke(app, cli)
    assert result.exit_code == 0, result.stderr
    got = json.loads(result.stdout)
    assert set(got["groups"]) == {"a", "b"}
    assert sorted(got["per_query"]) == qids
    names = list(c_values[qids[0]])
    assert len(names) == len(TREC_ONLY)
    for qid in qids:
        for name in names:
            value = got["per_query"][qid][name]
            printed = str(round(value)) if name == "num_nonrel_judged_ret" else f"{value:.4f}"
            assert printed == c_values[qid][name], (qid, name)

    other = tmp_path / "other.trec"  # every query, ranked the other way round
    fields = [line.split() for line in run.read_text().splitlines()]
    other.write_text("".join(f"{q} Q0 {d} {k} {-float(v)!r} t\n" for q, _, d, k, v, _ in fields))
    cli = ["compare", str(qrels), str(run), str(other), "-m", "set_F.0.5", "-m", "binG",
           "-f", "json"]  # fmt: skip
    result = CliRunner().invoke(app, cli)
    assert result.exit_code == 0, result.stderr
    means = json.loads(result.stdout)["systems"][run.stem]["measures"]
    for name in ("set_F_0.5", "binG"):
        mean = math.fsum(float(c_values[q][name]) for q in qids) / len(qids)
        assert abs(means[name] - mean) < 1e-4  # C's values are printed to 4 decimals


def test_trec_eval_measures_without_one_value_per_query_are_refused_in_groups(tmp_path):
    qrels, run = _write_case(tmp_path, 6, complete_run=True)
    topics = tmp_path / "types.tsv"
    topics.write_text("q01\ta\n")
    for measure, words in (("gm_map", "no value per query"), ("P", "needs a cutoff"),
                           ("relative_P", "a value per cutoff")):  # fmt: skip
        cli = ["eval", str(run), str(qrels), "-m", measure, "--topics", str(topics), "--by", "type"]
        result = CliRunner().invoke(app, cli)
        assert result.exit_code == 2, result.stdout
        assert words in result.stderr


@pytest.mark.parametrize("version", ["9", "10"])
def test_rankings_of_very_unequal_lengths_equal_the_c_program(trec_eval, tmp_path, version):
    """One long ranking among many short ones: the grade matrix would be mostly padding, so
    the measures go query by query (and gains of levels below -2 too); the same numbers."""
    r = random.Random(21)
    qrels_lines, run_lines = [], []
    for q in range(500):
        qid = f"t{q:03d}"
        n = 3000 if q == 7 else r.randint(1, 2)
        docs = [f"D{q}_{i}" for i in range(n)]
        for d in r.sample(docs, min(n, 40)):
            qrels_lines.append(f"{qid} 0 {d} {r.choice([-1, 0, 1, 2])}")
        for i, d in enumerate(docs):
            run_lines.append(f"{qid} Q0 {d} {i + 1} {r.random() * 5:.3f} long")
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.trec"
    qrels.write_text("\n".join(qrels_lines) + "\n")
    run.write_text("\n".join(run_lines) + "\n")
    options = ["-m", "all_trec", "-m", "ndcg.-5=2,1=3", "-m", "G.-4=1,2=5"]
    expected = subprocess.run(
        [str(trec_eval[version] / "trec_eval"), "-q", *options, str(qrels), str(run)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cli = ["eval", str(run), str(qrels), "-q", *options, "--trec-eval", version, "-f", "trec"]
    result = CliRunner().invoke(app, cli)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected


def _write_level_case(folder: Path, seed: int) -> tuple[Path, Path, Path]:
    """Qrels with negative, zero and graded judgments (queries judged only -1 or -1/-2, and
    documents judged -1 and -2 among graded ones), a run over judged and unjudged documents
    with every qrels query, and one lacking some (for -c). Each query's lines are together
    (in a shuffled order), as the bulk readers want them."""
    r = random.Random(seed)
    grade_sets = [[-1], [-1, -2, -2], [-2, -1, 0], [-2, -1, 0, 0, 1, 2, 3], [-1, 1], [0, 2, -2]]
    qrels_lines, run_lines, lacking = [], [], []
    queries = list(range(r.randint(10, 16)))
    r.shuffle(queries)
    for q in queries:
        qid = f"L{q:02d}" if q % 3 else f"{q}"
        pool = list(dict.fromkeys(f"D{r.randint(0, 90):02d}" for _ in range(45)))
        judged = r.sample(pool, r.randint(1, min(20, len(pool))))
        grades = [r.choice(grade_sets[(q + seed) % len(grade_sets)]) for _ in judged]
        # the C programs crash on a query whose grades are all below -1, and stop (exit 4) when
        # the first query they evaluate ("0") has no grade >= 0
        if max(grades) < (0 if q == 0 else -1):
            grades[0] = 0 if q == 0 else -1
        qrels_lines += [f"{qid} 0 {d} {g}" for d, g in zip(judged, grades, strict=True)]
        docs = r.sample(pool, min(r.choice([1, 2, 6, 15, 30, 45]), len(pool)))  # (shuffled)
        for i, d in enumerate(docs):
            score = round(r.random() * 2, 1) if i % 3 else r.random() * 10  # ties too
            line = f"{qid} Q0 {d} {i + 1} {score!r} lv{seed}"
            run_lines.append(line)
            if q % 4 != 1:
                lacking.append(line)
    paths = []
    for name, lines in (("qrels", qrels_lines), ("run", run_lines), ("lacking", lacking)):
        path = folder / f"{name}{seed}.txt"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths[0], paths[1], paths[2]


LEVEL_OPTIONS = [
    ["-m", "all_trec"],
    ["-m", "all_trec", "-J"],
    ["-m", "all_trec", "-M", "9", "-N", "60", "-m", "utility.1,-1,-2,0.5"],
    # (not with rbp: yaap's stack frame leaves a value in m_rbp.c's uninitialised min/max)
    ["-m", "yaap", "-m", "map", "-m", "gm_map", "-m", "binG", "-m", "set_F.0.5"],
    ["-m", "all_trec", "-J", "-M", "4", "-N", "25", "-m", "Rprec_mult.0.3,1,3",
     "-m", "iprec_at_recall.0,.25,.5,1", "-m", "11pt_avg.0,.5,1", "-m", "utility.2,-1,-1,1"],
]  # fmt: skip


@pytest.mark.parametrize("level", ["-2", "-1", "0", "1", "2"])
@pytest.mark.parametrize("version", ["9", "10"])
def test_relevance_levels_at_or_below_zero_equal_the_c_program(trec_eval, tmp_path, version,
                                                                level):  # fmt: skip
    """-l N with N <= 0: NONPOOL (-1) and UNJUDGED (-2) count as relevant for the measures
    that walk the ranking (P, map, iprec_at_recall's and Rprec_mult's walks, ...) but not in
    num_rel_ret (set_*, utility, ...); every output line as the C program prints it, through
    the bulk path, the per-query path (a run with an extra column is read line by line), -c
    (queries the run lacks), -J, -M and -N, and qrels_jg."""
    binary = str(trec_eval[version] / "trec_eval")
    for seed in (31, 32, 33):
        qrels, run, lacking = _write_level_case(tmp_path, seed)
        irregular = tmp_path / f"irregular{seed}.txt"
        lines = run.read_text().splitlines()
        irregular.write_text("\n".join([lines[0] + " extra", *lines[1:]]) + "\n")
        cases = [(o, p) for o in LEVEL_OPTIONS for p in (run, irregular)]
        cases.append((["-m", "all_trec", "-c", "-M", "12"], lacking))
        for options, path in cases:
            args = ["-q", "-l", level, *options]
            expected = subprocess.run(
                [binary, *args, str(qrels), str(path)], capture_output=True, text=True, check=True
            ).stdout
            cli = ["eval", str(path), str(qrels), *args, "--trec-eval", version, "-f", "trec"]
            result = CliRunner().invoke(app, cli)
            assert result.exit_code == 0, (seed, options, result.stderr)
            got, want = result.stdout.splitlines(), expected.splitlines()
            wrong = [(g, w) for g, w in zip(got, want, strict=False) if g != w]
            assert not wrong and len(got) == len(want), (seed, options, path.name, wrong[:5])
            assert result.stdout == expected
    prefs, jg, jg_run = _write_prefs_case(tmp_path, 34)
    args = ["-q", "-l", level, "-m", "qrels_jg", "-R", "qrels_jg"]
    for extra in ([], ["-J", "-M", "6"]):
        expected = subprocess.run(
            [binary, *args, *extra, str(jg), str(jg_run)], capture_output=True, text=True,
            check=True,
        ).stdout  # fmt: skip
        cli = ["eval", str(jg_run), str(jg), *args, *extra, "--trec-eval", version, "-f", "trec"]
        result = CliRunner().invoke(app, cli)
        assert result.exit_code == 0, result.stderr
        assert result.stdout == expected, extra


# --- fields and numbers exactly as the C programs read them (issue 33, items 13, 14, 11, 7)

# C's isspace() in the "C" locale splits on " \t\n\v\f\r" only (get_trec_results.c and
# get_qrels.c of both versions): U+00A0, U+2003, U+3000 and \x1c-\x1f are part of a docno
SPACED_QRELS = (
    "q1 0 d\u00a01 1\nq1 0 d1 0\nq1 0 e\u20032 1\nq1 0 e 0\nq1 0 f\x1c3 1\n"
    "q1 0 g\u30004 1\nq2 0 h 1\nq2\v0 i\f1\n"
)
SPACED_RUN = (
    "q1 Q0 d\u00a01 1 4.5 t\nq1 Q0 d1 2 4.0 t\nq1 Q0 e\u20032 3 3.5 t\nq1 Q0 e 4 3.0 t\n"
    "q1 Q0 f\x1c3 5 2.5 t\nq1 Q0 g\u30004 6 2.0 t\nq2\tQ0 i 1 1.0\vt\nq2 Q0 h 2 0.5 t\r\n"
)


@pytest.mark.parametrize("version", ["9", "10"])
def test_docnos_split_on_the_c_programs_spaces_only(trec_eval, tmp_path, version):
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_bytes(SPACED_QRELS.encode())
    run.write_bytes(SPACED_RUN.encode())
    binary = trec_eval[version] / "trec_eval"
    expected = subprocess.run(
        [str(binary), "-q", "-m", "all_trec", str(qrels), str(run)],
        capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    cli = ["eval", str(run), str(qrels), "-q", "-m", "all_trec", "--trec-eval", version, "-f",
           "trec"]  # fmt: skip
    result = CliRunner().invoke(app, cli)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected
    assert "P_5                   \tq1\t0.6000" in expected  # d\u00a01 is one relevant docno
    # the ranking engine reads them alike (trec.py's line readers)
    c_all = subprocess.run(
        [str(binary), "-m", "P.1,5", "-m", "map", str(qrels), str(run)],
        capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    c = {line.split()[0]: line.split()[2] for line in c_all.splitlines()}
    got = CliRunner().invoke(
        app, ["eval", str(run), str(qrels), "-m", "P@1,P@5,AP,RR@10", "--trec-eval", version,
              "-f", "json"],
    )  # fmt: skip
    assert got.exit_code == 0, got.stderr
    measures = json.loads(got.stdout)["measures"]
    assert [f"{measures[m]:.4f}" for m in ("P@1", "P@5", "AP")] == [c["P_1"], c["P_5"], c["map"]]


@pytest.mark.parametrize("version", ["9", "10"])
def test_scores_are_read_as_c_strtod_reads_them(trec_eval, tmp_path, version):
    """Hexadecimal and other forms strtod reads whole give trec_eval's numbers; a score C
    reads otherwise than written (Arabic-Indic or fullwidth digits, which its atof reads as 0;
    1_0 as 1) is refused in one line saying so, by both engines."""
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("q1 0 a 1\nq1 0 b 0\nq1 0 c 1\nq1 0 d 0\n")
    scores = {"a": "0x1p-3", "b": "0X1.8P1", "c": "+.5e-1", "d": "1E0"}
    run.write_text("".join(f"q1 Q0 {d} {i} {s} t\n" for i, (d, s) in enumerate(scores.items())))
    binary = trec_eval[version] / "trec_eval"
    expected = subprocess.run(
        [str(binary), "-q", "-m", "all_trec", str(qrels), str(run)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    cli = ["eval", str(run), str(qrels), "-q", "-m", "all_trec", "--trec-eval", version, "-f",
           "trec"]  # fmt: skip
    result = CliRunner().invoke(app, cli)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected
    assert "relstring             \tq1\t'0011'" in expected  # b (3.0) d (1.0) a (.125) c (.05)
    for odd, reads in (("\u0661\u0662", "0"), ("\uff11", "0"), ("1_0", "1"), ("12abc", "12")):
        run.write_text(f"q1 Q0 a 1 {odd} t\nq1 Q0 b 2 0.5 t\n")
        with_c = subprocess.run(
            [str(binary), "-m", "map", str(qrels), str(run)], capture_output=True, text=True
        )
        assert with_c.returncode == 0  # trec_eval reads it, as `reads`
        for extra in (["-f", "trec", "-m", "map"], ["-m", "AP"]):
            cli = ["eval", str(run), str(qrels), "--trec-eval", version, *extra]
            result = CliRunner().invoke(app, cli)
            assert result.exit_code == 2, result.output
            assert result.stderr.count("\n") == 1, result.stderr
            assert f"line 1: score {odd!r} is not a number as C reads it" in result.stderr
            assert f"atof reads {reads} from it" in result.stderr


def test_grades_beyond_what_trec_eval_can_count_are_refused_in_one_line(trec_eval, tmp_path):
    """A grade beyond a C long (trec_eval reads LONG_MAX and fails): one line, exit 2; a grade
    trec_eval would keep a counter per level for up to (2147483648: it fails or crashes): one
    line, exit 2, before any per-grade table is made (the measures that need none go on)."""
    run = tmp_path / "run"
    run.write_text("q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 0.5 t\n")
    qrels = tmp_path / "qrels"
    for grade, words in (("99999999999999999999", "beyond a C long"),
                         ("2147483648", "counter per grade")):  # fmt: skip
        qrels.write_text(f"q1 0 d1 {grade}\nq1 0 d2 0\n")
        for measure in (["-m", "ndcg"], ["-m", "map", "-f", "trec"], ["-m", "nDCG"]):
            result = CliRunner().invoke(app, ["eval", str(run), str(qrels), *measure])
            assert result.exit_code == 2, (grade, measure, result.output)
            assert result.stderr.count("\n") == 1 and words in result.stderr, result.stderr
    # AP and nDCG@k need no per-grade counts: the ranking engine scores the huge grade
    result = CliRunner().invoke(app, ["eval", str(run), str(qrels), "-m", "AP,nDCG@1000000000",
                                      "-f", "json"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["measures"] == {"AP": 1.0, "nDCG@1000000000": 1.0}
