"""The real trec_eval 9.0.4 binary (from the Anserini jar inside the Pyserini wheel) and runs
and qrels with the quirks found in the wild, written by the tests themselves."""

from __future__ import annotations

import importlib.util
import platform
import random
import stat
import subprocess
import zipfile
from pathlib import Path

import pytest

MEMBER = "trec_eval/trec_eval-linux-amd64"


def extract_trec_eval(dest: Path) -> Path:
    """Extract trec_eval from the jar Pyserini ships (without importing Pyserini)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the trec_eval binary in the Anserini jar is built for linux x86_64")
    spec = importlib.util.find_spec("pyserini")
    if spec is None or spec.origin is None:
        pytest.skip("pyserini (which carries the trec_eval binary) is not installed")
    jars = sorted((Path(spec.origin).parent / "resources" / "jars").glob("anserini-*.jar"))
    assert jars, "no Anserini jar inside the pyserini package"
    with zipfile.ZipFile(jars[-1]) as zf:
        target = dest / "trec_eval"
        target.write_bytes(zf.read(MEMBER))
    target.chmod(target.stat().st_mode | stat.S_IEXEC)
    return target


def run_trec_eval(binary: Path, qrels: Path, run: Path, *args: str) -> str:
    """stdout of ``trec_eval -q ARGS qrels run``."""
    proc = subprocess.run(
        [str(binary), "-q", *args, str(qrels), str(run)],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout


def parse_trec_eval(text: str) -> dict[tuple[str, str], str]:
    """{(measure, qid): printed value} from trec_eval output."""
    values = {}
    for line in text.splitlines():
        measure, qid, value = line.split()
        values[(measure, qid)] = value
    return values


def write_collection(
    folder: Path, seed: int = 7, n_queries: int = 40, name: str = "run"
) -> tuple[Path, Path, dict[str, str]]:
    """A qrels file, a run file and qid -> entity type, full of real-world quirks.

    - qrels: tab- or space-separated, the entity type in column 2 (as in the CMR qrels),
      grades written as ``1``, ``1.0``, ``-1.0``, graded 2/3, unjudged -1, a query with no
      relevant document, queries absent from the run;
    - run: ties (equal scores, and scores equal only in single precision), a rank column that
      disagrees with the scores, short and long rankings, queries absent from the qrels.
    """
    r = random.Random(seed)
    types = {}
    qrels_lines = []
    run_lines = []
    for q in range(n_queries):
        qid = f"TAC14:NIL{q:04d}:EDL14_{q}"
        etype = ("PER", "ORG", "GPE")[q % 3]
        types[qid] = etype
        pool = [
            f"DOC{r.randint(0, 400):04d}:{r.randint(0, 90)}:{r.randint(91, 200)}"
            for _ in range(120)
        ]
        pool = list(dict.fromkeys(pool))
        in_qrels = q % 9 != 4
        in_run = q % 11 != 6
        if in_qrels:
            judged = r.sample(pool, min(len(pool), r.randint(5, 40)))
            grades = [-1, 0, 0, 0, 1, 1, 2, 3]
            if q % 13 == 5:
                grades = [-1, 0]  # a query without any relevant document
            sep = "\t" if q % 2 else " "
            for docno in judged:
                rel = r.choice(grades)
                text = f"{rel}.0" if q % 4 < 2 else str(rel)
                qrels_lines.append(sep.join([qid, etype if q % 3 else "0", docno, text]))
        if in_run:
            n = r.choice([3, 8, 25, 60, 110])
            docs = r.sample(pool, min(n, len(pool)))
            base = r.choice([0.5, 3.0, 12.0])
            for docno in docs:
                kind = r.random()
                if kind < 0.3:
                    score = round(r.random() * 4, 1)  # many exact ties
                elif kind < 0.4:
                    score = base + r.choice([1e-8, 2e-8, 3e-8])  # equal in float32 only
                else:
                    score = r.random() * 10
                run_lines.append(f"{qid} Q0 {docno} {r.randint(1, 200)} {score!r} {name}")
    for extra in range(3):
        run_lines.append(f"NOT_JUDGED_{extra} Q0 DOC0001:0:99 1 1.0 {name}")
    r.shuffle(qrels_lines)
    qrels_path = folder / "qrels.txt"
    run_path = folder / f"{name}.trec"
    qrels_path.write_text("\n".join(qrels_lines) + "\n")
    run_path.write_text("\n".join(run_lines) + "\n")
    return qrels_path, run_path, types
