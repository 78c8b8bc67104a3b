"""Time `cmrkit index` and `cmrkit run bm25` against Anserini/Pyserini on the same data.

For each N: a synthetic collection of N 100-word passages (Zipf-like vocabulary of 50,000
words, seeded) and 1,000 test topics (the mention: 3 consecutive words of a random passage,
whose unit is the query's own unit). In one process (one JVM), with 2 threads:

- index: Anserini's own ``IndexCollection`` on a plain JSONL copy of the corpus (id, contents;
  positions, document vectors, raw: what Pyserini's RM3 needs; 2 files, 2 threads) vs
  ``cmrkit.retrieval.build_index`` (--no-entities; positions and contents, no document vectors)
  from corpus.jsonl.gz, which also hashes, checks and prepares the corpus;
- search, for bm25, fields (--preset doc) and qe (rm3): Pyserini's ``LuceneSearcher.batch_search``
  (k=1001, its dict of hits; ``fields={"contents": 1.1}``, which is what the doc preset searches
  in an index of units alone; ``set_rm3(10, 10, 0.5)``) on Anserini's index (the same corpus, the
  same BM25 statistics; Pyserini's RM3 needs its document vectors) vs the whole
  ``cmrkit.retrieval.run_*`` call (--query mention, k=1000: corpus re-hashed to check the index,
  topics read, searched, own unit removed, sorted, run file and sidecar written); the search-only
  column is the sidecar's search time;
- ``cmrkit --help`` wall time (best of 5).

    python bench/bench_retrieval.py                 # N = 100k and 1M
    python bench/bench_retrieval.py 20000           # a quick check
    python bench/bench_retrieval.py --smoke         # seconds: that it runs (N = 300, 30 topics)
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cmrkit.fileio import gzip_writer

N_QUERIES = 1000  # --queries
WARM = 2000  # the passages of the collection that warms the JVM up


def make_collection(root: Path, n: int, seed: int = 7) -> Path:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(50_000)]
    cum = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(vocab))))
    coll = root / "collections" / f"synth{n}"
    coll.mkdir(parents=True)
    picks = set(rng.sample(range(n), min(N_QUERIES, n)))
    topics = []
    with (
        gzip_writer(coll / "corpus.jsonl.gz", compresslevel=1) as f,
        open(root / "plain.jsonl", "w", encoding="utf-8") as plain,
    ):
        for i in range(n):
            words = rng.choices(vocab, cum_weights=cum, k=100)
            text = " ".join(words)
            docno = f"D:synth:{i}"
            f.write(
                json.dumps(
                    {
                        "id": docno,
                        "contents": text,
                        "doc_id": None,
                        "title": None,
                        "kind": "distractor",
                    }
                )
                + "\n"
            )
            plain.write(json.dumps({"id": docno, "contents": text}) + "\n")
            if i in picks:
                at = rng.randrange(97)
                mention = " ".join(words[at : at + 3])
                start = len(" ".join(words[:at])) + (1 if at else 0)
                topics.append(
                    {
                        "qid": f"q{i}",
                        "split": "test",
                        "mention": mention,
                        "span": [start, start + len(mention)],
                        "context": text,
                        "unit": docno,
                    }
                )
    with open(coll / "topics.jsonl", "w", encoding="utf-8") as f:
        for t in topics:
            f.write(json.dumps(t) + "\n")
    return coll


def anserini_index(plain: Path, out: Path, threads: int) -> float:
    from cmrkit.retrieval.java import jclass, quiet

    shards = plain.parent / "shards"
    shards.mkdir()
    files = [open(shards / f"part-{i}.jsonl", "w", encoding="utf-8") for i in range(threads)]
    with open(plain, encoding="utf-8") as src:
        for i, line in enumerate(src):
            files[i % threads].write(line)
    for f in files:
        f.close()
    args = [
        "-collection",
        "JsonCollection",
        "-input",
        str(shards),
        "-index",
        str(out),
        "-generator",
        "DefaultLuceneDocumentGenerator",
        "-threads",
        str(threads),
        "-storePositions",
        "-storeDocvectors",
        "-storeRaw",
        "-quiet",
    ]
    t = time.perf_counter()
    with quiet(None):
        jclass("io.anserini.index.IndexCollection").main(args)
    return time.perf_counter() - t


def help_wall(repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "cmrkit", "--help"], check=True, stdout=subprocess.DEVNULL
        )
        times.append(time.perf_counter() - t)
    return min(times)


SYSTEMS = ("bm25", "fields-doc", "qe-rm3")


def run_system(system: str, coll: Path, runs: Path, threads: int):
    from cmrkit.retrieval import run_bm25, run_fields, run_qe
    from cmrkit.retrieval.stored import forget_corpus_hashes

    forget_corpus_hashes()  # as in a new `cmrkit run` process: the corpus is hashed again

    common = {"query": "mention", "k": 1000, "threads": threads, "runs_dir": runs, "force": True}
    if system == "bm25":
        return run_bm25(coll, **common)
    if system == "fields-doc":
        return run_fields(coll, preset="doc", **common)
    return run_qe(coll, method="rm3", **common)


def pyserini_search(searcher, system: str, texts: list[str], qids: list[str], threads: int):
    """Seconds for Pyserini's batch_search of the same queries (k=1001: the own unit)."""
    searcher.unset_rm3()
    t = time.perf_counter()
    if system == "bm25":
        hits = searcher.batch_search(texts, qids, k=1001, threads=threads)
    elif system == "fields-doc":
        # an index of units alone in their documents: `document` is `contents` (1 + 0.1)
        hits = searcher.batch_search(texts, qids, k=1001, threads=threads, fields={"contents": 1.1})
    else:
        searcher.set_rm3(10, 10, 0.5)
        hits = searcher.batch_search(texts, qids, k=1001, threads=threads)
    seconds = time.perf_counter() - t
    assert len(hits) == len(qids)
    return seconds


def bench(n: int, threads: int = 2) -> dict:
    from cmrkit.retrieval import build_index
    from cmrkit.retrieval.java import quiet

    with tempfile.TemporaryDirectory(prefix="bench-retrieval-") as tmp:
        root = Path(tmp)
        coll = make_collection(root, n)
        warm = make_collection(root / "warm", WARM)
        build_index(warm, entities=False, progress=False, threads=threads)
        anserini_s = anserini_index(root / "plain.jsonl", root / "anserini-index", threads)
        t = time.perf_counter()
        build_index(coll, entities=False, progress=False, threads=threads)
        cmrkit_index_s = time.perf_counter() - t

        topics = [json.loads(line) for line in open(coll / "topics.jsonl", encoding="utf-8")]
        qids = [t["qid"] for t in topics]
        texts = [t["mention"] for t in topics]
        for system in SYSTEMS:
            run_system(system, warm, root / "runs", threads)  # JIT and the docno table
        # Pyserini's package makes an OpenAI client when imported (pyserini/encode/_openai.py),
        # which refuses an empty key; no request is made here, so any key serves
        os.environ.setdefault("OPENAI_API_KEY", "not-used-by-this-benchmark")
        with quiet(None):
            from pyserini.search.lucene import LuceneSearcher

            searcher = LuceneSearcher(str((root / "anserini-index").resolve()))
        searcher.set_bm25(0.9, 0.4)
        searcher.batch_search(texts[:50], qids[:50], k=1001, threads=threads)
        n_queries = len(qids)
        searches = {}
        for system in SYSTEMS:
            pyserini_s = pyserini_search(searcher, system, texts, qids, threads)
            t = time.perf_counter()
            result = run_system(system, coll, root / "runs", threads)
            searches[system] = {
                "pyserini_qps": n_queries / pyserini_s,
                "cmrkit_qps": n_queries / (time.perf_counter() - t),
                "cmrkit_search_qps": n_queries / result.sidecar["seconds"]["search"],
            }
        searcher.close()
    return {
        "n": n,
        "anserini_index_s": anserini_s,
        "cmrkit_index_s": cmrkit_index_s,
        "searches": searches,
    }


def main() -> None:
    global N_QUERIES, WARM
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", type=int, nargs="*", help="passages N [default: 100000 1000000]")
    ap.add_argument("--queries", type=int, default=N_QUERIES, help="test topics")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="seconds: N = 300, 30 topics")
    a = ap.parse_args()
    N_QUERIES = a.queries
    sizes = a.sizes or [100_000, 1_000_000]
    if a.smoke:
        sizes, N_QUERIES, WARM = [300], 30, 200
    index_table = Table(title=f"cmrkit index vs Anserini IndexCollection ({a.threads} threads)")
    for col in ("N", "Anserini index/s", "cmrkit index/s", "ratio"):
        index_table.add_column(col, justify="right")
    run_table = Table(title=f"cmrkit run vs Pyserini batch_search, k=1000 ({a.threads} threads)")
    for col in ("N", "system", "Pyserini q/s", "cmrkit run q/s", "ratio", "search-only q/s"):
        run_table.add_column(col, justify="right")
    for n in sizes:
        r = bench(n, a.threads)
        index_table.add_row(
            f"{n:,}",
            f"{n / r['anserini_index_s']:,.0f}",
            f"{n / r['cmrkit_index_s']:,.0f}",
            f"{r['anserini_index_s'] / r['cmrkit_index_s']:.2f}",
        )
        for system, s in r["searches"].items():
            run_table.add_row(
                f"{n:,}",
                system,
                f"{s['pyserini_qps']:.1f}",
                f"{s['cmrkit_qps']:.1f}",
                f"{s['cmrkit_qps'] / s['pyserini_qps']:.2f}",
                f"{s['cmrkit_search_qps']:.1f}",
            )
    console = Console(width=100)
    console.print(index_table)
    console.print(run_table)
    console.print(
        f"cmrkit --help: {help_wall(1 if a.smoke else 5):.2f} s wall (best of "
        f"{1 if a.smoke else 5}); "
        f"load average {statistics.mean(os.getloadavg()):.1f}"
    )


if __name__ == "__main__":
    main()
