"""The CoNLL-2012 reference coreference scorer (Perl v8.01, in tests/reference/) as a test oracle,
and random clusterings of the real ECB+ event mentions (the embedded sample's files) written as
CoNLL files."""

from __future__ import annotations

import gzip
import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cmrkit.collection.clusters import write_conll

SCORERS = Path(__file__).resolve().parent / "reference" / "reference-coreference-scorers"
SCORER = SCORERS / "scorer.pl"
TEST_CASES = SCORERS / "test" / "DataFiles"
SAMPLE = Path(__file__).resolve().parents[1] / "cmrkit" / "data" / "sample"
PERL_METRICS = ("muc", "bcub", "ceafm", "ceafe", "blanc")

_NUM = r"(\S+)"
_RPF = re.compile(
    rf"Recall: \({_NUM} / {_NUM}\) {_NUM}%\tPrecision: \({_NUM} / {_NUM}\) {_NUM}%\tF1: {_NUM}%"
)


def need_perl() -> None:
    if shutil.which("perl") is None:
        pytest.skip("perl is not installed")
    if not SCORER.is_file():
        pytest.skip(f"the reference scorer is not at {SCORER}")


def run_perl(key: Path, response: Path, metric: str = "all") -> dict[str, list[float]]:
    """The scorer's TOTALS: {metric: [recall num, den, %, precision num, den, %, F1 %]}, with
    ``mentions`` (identification), ``blanc_coref`` and ``blanc_noncoref`` (link counts)."""
    proc = subprocess.run(
        ["perl", str(SCORER), metric, str(key), str(response), "none"],
        capture_output=True,
        text=True,
        cwd=SCORERS,
    )
    if proc.returncode:
        raise RuntimeError(f"scorer.pl failed: {proc.stderr.strip()}")
    out: dict[str, list[float]] = {}
    current = metric
    for line in proc.stdout.splitlines():
        m = re.match(r"METRIC (\w+):", line)
        if m:
            current = m.group(1)
            continue
        m = _RPF.search(line)
        if m is None:
            continue
        values = [float(x) for x in m.groups()]
        if line.startswith("Identification"):
            out["mentions"] = values
        elif line.startswith("Coreference links"):
            out["blanc_coref"] = values
        elif line.startswith("Non-coreference links"):
            out["blanc_noncoref"] = values
        elif line.startswith("BLANC"):
            out["blanc"] = values
        elif line.startswith("Coreference:"):
            out[current] = values
    return out


def run_perl_each(key: Path, response: Path) -> dict[str, list[float]]:
    """All metrics, one scorer call each (with ``all`` the scorer counts repeated mentions
    across its five metrics and refuses a response repeating 3 or more)."""
    out: dict[str, list[float]] = {}
    for metric in PERL_METRICS:
        out.update(run_perl(key, response, metric))
    return out


# ---------------------------------------------------------------------------------------------
# ECB+ mentions as CoNLL documents


def ecbplus_documents(split: str = "test") -> dict[str, tuple[int, list[tuple[int, int, str]]]]:
    """{doc_id: (tokens, [(first, last, chain)])} from the ECB+ mentions in WEC-Eng shape."""
    path = SAMPLE / f"ecbplus.{split}.json.gz"
    if not path.is_file():
        pytest.skip(f"the ECB+ data is not at {path}")
    docs: dict[str, tuple[int, list[tuple[int, int, str]]]] = {}
    for m in json.loads(gzip.decompress(path.read_bytes())):
        tokens = len(m["mention_context"])
        span = (min(m["tokens_number"]), max(m["tokens_number"]), str(m["coref_chain"]))
        docs.setdefault(m["doc_id"], (tokens, []))[1].append(span)
    return docs


def chain_numbers(docs: dict) -> dict:
    """The same documents with chains renamed to numbers (CoNLL chains are digits)."""
    numbers: dict[str, str] = {}
    return {
        name: (tokens, [(s, e, numbers.setdefault(c, str(len(numbers)))) for s, e, c in ms])
        for name, (tokens, ms) in docs.items()
    }


def perturb(docs: dict, seed: int, *, repeats: int = 2, cross_document: bool = False) -> dict:
    """A random response: chains split and merged, mentions moved, dropped and invented
    (some invented twice), and up to ``repeats`` key mentions written twice."""
    rng = random.Random(seed)
    out = {name: (tokens, list(ms)) for name, (tokens, ms) in docs.items()}
    next_chain = 1 + max(int(c) for _, ms in docs.values() for *_, c in ms)

    def fresh() -> str:
        nonlocal next_chain
        next_chain += 1
        return str(next_chain)

    names = sorted(out)
    for name in names:
        tokens, ms = out[name]
        chains = sorted({c for *_, c in ms}, key=int)
        new: list[tuple[int, int, str]] = []
        renamed: dict[str, str] = {}
        for c in chains:
            op = rng.random()
            if op < 0.15:
                renamed[c] = fresh()  # split: some mentions go to a new chain
            elif op < 0.3 and len(chains) > 1:
                renamed[c] = rng.choice(chains)  # merge with another chain of the document
        for s, e, c in ms:
            r = rng.random()
            if r < 0.08:
                continue  # missing mention
            if r < 0.16:
                c = rng.choice(chains)  # moved
            elif c in renamed and rng.random() < 0.6:
                c = renamed[c]
            new.append((s, e, c))
        for _ in range(rng.randint(0, 3)):  # invented mentions
            s = rng.randrange(tokens)
            e = min(tokens - 1, s + rng.randint(0, 2))
            if any((s, e) == (a, b) for a, b, _ in ms):
                continue
            c = rng.choice(chains + [fresh()])
            new.append((s, e, c))
            if rng.random() < 0.2:
                new.append((s, e, rng.choice(chains)))  # an invented mention written twice
        out[name] = (tokens, new)
    if cross_document:  # mentions moved to a chain of another document
        for _ in range(len(names) // 4):
            a, b = rng.sample(names, 2)
            if out[a][1] and out[b][1]:
                i = rng.randrange(len(out[a][1]))
                s, e, _ = out[a][1][i]
                out[a][1][i] = (s, e, rng.choice(out[b][1])[2])
    key_spans = {(n, s, e) for n, (_, ms) in docs.items() for s, e, _ in ms}
    present = sorted({(n, s, e) for n in names for s, e, _ in out[n][1]} & key_spans)
    for name, s, e in rng.sample(present, repeats):  # key mentions written twice
        chains = sorted({c for *_, c in out[name][1]})
        out[name][1].append((s, e, rng.choice(chains)))
    for name in names:  # CoNLL brackets cannot hold crossing mentions of one chain
        tokens, ms = out[name]
        fixed: list[tuple[int, int, str]] = []
        for s, e, c in ms:
            if any(a < s <= b < e or s < a <= e < b for a, b, d in fixed if d == c):
                c = fresh()
            fixed.append((s, e, c))
        out[name] = (tokens, fixed)
    return out


def write_documents(path: Path, docs: dict, *, one_document: str | None = None) -> Path:
    """Write documents as CoNLL; with ``one_document`` all of them as that one document (their
    tokens one after the other), which the reference scorer then scores as a whole."""
    with open(path, "w", encoding="utf-8") as f:
        if one_document is None:
            write_conll(f, ((n, t, ms) for n, (t, ms) in docs.items()))
        else:
            offset, merged = 0, []
            for _, (tokens, ms) in docs.items():
                merged += [(s + offset, e + offset, c) for s, e, c in ms]
                offset += tokens
            write_conll(f, [(one_document, offset, merged)])
    return path


def without_singletons(docs: dict, *, per_document: bool = True) -> dict:
    """Drop the chains with one mention (per document, or over all documents)."""
    from collections import Counter

    if per_document:
        return {
            n: (t, [m for m in ms if Counter(c for *_, c in ms)[m[2]] > 1])
            for n, (t, ms) in docs.items()
        }
    sizes = Counter(c for _, ms in docs.values() for *_, c in ms)
    return {n: (t, [m for m in ms if sizes[m[2]] > 1]) for n, (t, ms) in docs.items()}
