"""Time `cmrkit eval-coref` against the CoNLL-2012 reference scorer (scorer.pl v8.01) on the
same CoNLL files, and check that they print the same numbers.

Usage: python bench/bench_coref.py [--repeat 3] [--perl-timeout 600] [--synthetic 100000] [--smoke]
                                   [--scorer PATH] [--cases ecb-doc,ecb-corpus,synthetic]

Cases (keys written as CoNLL-2012, responses a seeded random perturbation: chains split and
merged, mentions moved, dropped and invented):
- ecb-doc: the ECB+ test split (cmrkit/data/sample/ecbplus.test.json.gz, 1,780 mentions in 206
  documents), each document scored on its own (`scorer.pl all KEY RESPONSE`);
- ecb-corpus: the same split as one document, cross-document chains (how ECB+ is scored); the
  scorer runs metric by metric, each stopped after --perl-timeout seconds;
- synthetic: N mentions in documents of 100 mentions (chain sizes skewed, many singletons).
Each command is a subprocess; wall and CPU seconds (user + system) are the minimum over
--repeat runs (the scorer runs once per case when it takes over a minute). `cmrkit (5)` computes
the scorer's five metrics and mention identification; `cmrkit (all)` adds LEA, the CoNLL F1,
ARI and NMI.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cmrkit.collection.clusters import write_conll  # noqa: E402

SAMPLE = ROOT / "cmrkit" / "data" / "sample"
SCORERS = ROOT / "tests" / "reference" / "reference-coreference-scorers"
PERL_METRICS = ("muc", "bcub", "ceafm", "ceafe", "blanc")
OURS_PERL = "mentions,muc,bcub,ceafm,ceafe,blanc"
_RPF = re.compile(
    r"Recall: \((\S+) / (\S+)\) (\S+)%\tPrecision: \((\S+) / (\S+)\) (\S+)%\tF1: (\S+)%"
)


def ecbplus(split: str = "test") -> dict:
    path = SAMPLE / f"ecbplus.{split}.json.gz"
    docs: dict = {}
    numbers: dict[str, str] = {}
    for m in json.loads(gzip.decompress(path.read_bytes())):
        chain = numbers.setdefault(str(m["coref_chain"]), str(len(numbers)))
        span = (min(m["tokens_number"]), max(m["tokens_number"]), chain)
        docs.setdefault(m["doc_id"], [len(m["mention_context"]), []])[1].append(span)
    return docs


def synthetic(mentions: int, per_doc: int = 100, seed: int = 0) -> dict:
    """Documents of ``per_doc`` mentions on distinct tokens; chain sizes skewed."""
    rng = random.Random(seed)
    docs: dict = {}
    chain = 0
    for d in range(max(1, mentions // per_doc)):
        spans = []
        for i in range(per_doc):
            if not spans or rng.random() < 0.35:
                chain += 1
                spans.append((4 * i, 4 * i + rng.randint(0, 2), str(chain)))
            else:
                spans.append((4 * i, 4 * i + rng.randint(0, 2), rng.choice(spans)[2]))
        docs[f"doc{d:05d}"] = [4 * per_doc + 4, spans]
    return docs


def perturb(docs: dict, seed: int, cross_document: bool = False) -> dict:
    rng = random.Random(seed)
    fresh = [1 + max(int(c) for _, ms in docs.values() for *_, c in ms)]

    def new_chain() -> str:
        fresh[0] += 1
        return str(fresh[0])

    names = list(docs)
    out = {}
    for name in names:
        tokens, ms = docs[name]
        chains = sorted({c for *_, c in ms}, key=int)
        split = {c: new_chain() for c in chains if rng.random() < 0.1}
        merge = {c: rng.choice(chains) for c in chains if rng.random() < 0.1}
        taken = {(s, e) for s, e, _ in ms}
        new = []
        for s, e, c in ms:
            r = rng.random()
            if r < 0.05:
                continue
            if r < 0.12:
                c = rng.choice(chains)
            elif c in split and rng.random() < 0.5:
                c = split[c]
            elif c in merge:
                c = merge[c]
            new.append((s, e, c))
        for _ in range(max(1, len(ms) // 20)):
            s = rng.randrange(tokens)
            if (s, s) not in taken:
                taken.add((s, s))
                new.append((s, s, rng.choice(chains + [new_chain()])))
        out[name] = [tokens, new]
    if cross_document:
        for _ in range(len(names) // 2):
            a, b = rng.sample(names, 2)
            i = rng.randrange(len(out[a][1]))
            s, e, _ = out[a][1][i]
            out[a][1][i] = (s, e, rng.choice(out[b][1])[2])
    for name in names:  # brackets cannot hold crossing mentions of one chain
        fixed = []
        for s, e, c in out[name][1]:
            if any(a < s <= b < e or s < a <= e < b for a, b, d in fixed if d == c):
                c = new_chain()
            fixed.append((s, e, c))
        out[name][1] = fixed
    return out


def write(path: Path, docs: dict, one_document: bool = False) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        if not one_document:
            write_conll(f, ((n, t, ms) for n, (t, ms) in docs.items()))
        else:
            offset, merged = 0, []
            for tokens, ms in docs.values():
                merged += [(s + offset, e + offset, c) for s, e, c in ms]
                offset += tokens
            write_conll(f, [("all", offset, merged)])
    return path


def timed(cmd: list[str], timeout: float | None = None, cwd: Path | None = None):
    """(wall s, CPU s, stdout) of a subprocess; None times when it ran past ``timeout``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, check=True
        )
    except subprocess.TimeoutExpired:
        return None, None, ""
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def perl_totals(stdout: str, metric: str) -> dict[str, list[str]]:
    out, current = {}, metric
    for line in stdout.splitlines():
        m = re.match(r"METRIC (\w+):", line)
        if m:
            current = m.group(1)
        m = _RPF.search(line)
        if m is None:
            continue
        if line.startswith("Identification"):
            out["mentions"] = list(m.groups())
        elif line.startswith("BLANC"):
            out["blanc"] = list(m.groups())
        elif line.startswith("Coreference:"):
            out[current] = list(m.groups())
    return out


def same_numbers(ours: dict, perl: dict[str, list[str]]) -> bool:
    """Printed percentages equal (the scorer truncates to 2 decimals)."""
    from cmrkit.evaluation.coref import perl_percent

    for metric, values in perl.items():
        v = ours["measures"][metric]
        got = [perl_percent(v["recall"]), perl_percent(v["precision"]), perl_percent(v["f1"])]
        if got != [f"{float(values[i]):.2f}" for i in (2, 5, 6)]:
            return False
    return True


def run_case(name, key, response, scope, per_metric, args, counts) -> list[str]:
    scorer = args.scorer
    perl_cmds = (
        [(m, ["perl", str(scorer), m, str(key), str(response), "none"]) for m in PERL_METRICS]
        if per_metric
        else [("all", ["perl", str(scorer), "all", str(key), str(response), "none"])]
    )
    ours = [sys.executable, "-m", "cmrkit", "eval-coref", str(key), str(response)]
    ours += ["--scope", scope, "-f", "json"]
    rows = []
    perl_wall = perl_cpu = 0.0
    perl_done, perl_numbers = True, {}
    for metric, cmd in perl_cmds:
        best = None
        for _ in range(args.repeat):
            wall, cpu, stdout = timed(cmd, args.perl_timeout, cwd=scorer.parent)
            if wall is None:
                best = None
                break
            perl_numbers.update(perl_totals(stdout, metric))
            best = (wall, cpu) if best is None else (min(best[0], wall), min(best[1], cpu))
            if wall > 60:
                break
        if best is None:
            perl_done = False
            perl_wall += args.perl_timeout
            perl_cpu += args.perl_timeout
            continue
        perl_wall += best[0]
        perl_cpu += best[1]
    for label, measures in (("cmrkit (5)", OURS_PERL), ("cmrkit (all)", None)):
        cmd = ours + (["-m", measures] if measures else [])
        walls, cpus, stdout = [], [], ""
        for _ in range(args.repeat):
            wall, cpu, stdout = timed(cmd)
            walls.append(wall)
            cpus.append(cpu)
        equal = same_numbers(json.loads(stdout), perl_numbers) if perl_numbers else None
        more = "" if perl_done else ">"
        rows.append(
            f"| {name} | {counts} | {label} | {more}{perl_wall:.1f} | {min(walls):.2f} | "
            f"{more}{perl_wall / min(walls):.0f}x | {more}{perl_cpu:.1f} | {min(cpus):.2f} | "
            f"{more}{perl_cpu / min(cpus):.0f}x | "
            f"{'-' if equal is None else ('yes' if equal else 'NO')} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--perl-timeout", type=float, default=600.0)
    parser.add_argument("--synthetic", type=int, default=100_000)
    parser.add_argument("--scorer", type=Path, default=None)
    parser.add_argument("--cases", default="ecb-doc,ecb-corpus,synthetic")
    parser.add_argument(
        "--smoke", action="store_true", help="seconds: ECB+ per document and 1,000 synthetic, once"
    )
    args = parser.parse_args()
    if args.smoke:
        args.repeat, args.synthetic, args.cases = 1, 1000, "ecb-doc,synthetic"
    args.scorer = args.scorer or SCORERS / "scorer.pl"
    cases = args.cases.split(",")
    print(f"scorer: {args.scorer}; python {sys.version.split()[0]}; {os.cpu_count()} cores")
    print()
    print("| case | key mentions / documents | command | scorer.pl wall s | cmrkit wall s | "
          "wall ratio | scorer.pl CPU s | cmrkit CPU s | CPU ratio | same numbers |")  # fmt: skip
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if {"ecb-doc", "ecb-corpus"} & set(cases):
            docs = ecbplus()
            n = sum(len(ms) for _, ms in docs.values())
            if "ecb-doc" in cases:
                key = write(folder / "ecb.key", docs)
                response = write(folder / "ecb.response", perturb(docs, 1))
                show(run_case(
                    "ECB+ test, per document", key, response, "document", False, args,
                    f"{n:,} / {len(docs)}",
                ))  # fmt: skip
            if "ecb-corpus" in cases:
                key = write(folder / "ecb1.key", docs, one_document=True)
                response = write(folder / "ecb1.response", perturb(docs, 1, True), True)
                show(run_case(
                    "ECB+ test, one document", key, response, "document", True, args,
                    f"{n:,} / 1",
                ))  # fmt: skip
        if "synthetic" in cases:
            docs = synthetic(args.synthetic)
            n = sum(len(ms) for _, ms in docs.values())
            key = write(folder / "syn.key", docs)
            response = write(folder / "syn.response", perturb(docs, 2))
            show(
                run_case(
                    "synthetic", key, response, "document", False, args, f"{n:,} / {len(docs):,}"
                )
            )


def show(rows: list[str]) -> None:
    for row in rows:
        print(row, flush=True)


if __name__ == "__main__":
    main()
