"""NER words/s for the index's entities field: before (one process) and now (workers, cache).

    python bench/bench_ner.py [N] [--rounds R] [--smoke]

Texts: N passages of about 100 words made of random real sentences of the ECB+ train documents
(seeded; default N = 3,000, some 300,000 words). Timed, alternating, R rounds (best kept):

- before: the code as it was, the NER-only pipeline in this process, nlp.pipe(batch_size=256);
- now, cold: cmrkit.retrieval.entities.iter_entities with 2 worker processes, cache off (the
  workers' start-up, about a model load each, included);
- now, warm: the same texts again with the entity cache filled (a rebuild, another collection
  over the same distractors, query formulation).

The entities are checked to be the same in all three.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_end_to_end import SAMPLE, sentences, write_distractors  # noqa: E402

from cmrkit.retrieval import entities as ner  # noqa: E402
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL  # noqa: E402

MODEL = DEFAULT_SPACY_MODEL


def before(texts: list[str]) -> list[list[tuple[str, int, int]]]:
    import spacy

    nlp = spacy.load(
        MODEL, exclude=["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "senter"]
    )
    return [
        [(e.text, e.start_char, e.end_char) for e in doc.ents]
        for doc in nlp.pipe(texts, batch_size=256)
    ]


def now(texts: list[str], cache: bool) -> list[list[tuple[str, int, int]]]:
    return list(ner.iter_entities(texts, MODEL, processes=2, cache=cache))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int, nargs="?", default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="seconds: 100 passages, 1 round")
    args = parser.parse_args()
    if args.smoke:
        args.n, args.rounds = 100, 1
    with tempfile.TemporaryDirectory(prefix="bench-ner-") as tmp:
        os.environ["CMRKIT_CACHE_DIR"] = tmp
        path = Path(tmp) / "passages.txt"
        words = write_distractors(
            path, args.n, sentences(SAMPLE / "ecbplus.train-documents.txt.gz")
        )
        texts = path.read_text(encoding="utf-8").splitlines()
        ner.load(MODEL)  # the model load is not what is measured
        best = {"before": float("inf"), "cold": float("inf"), "warm": float("inf")}
        results = {}
        for _ in range(args.rounds):
            t = time.perf_counter()
            results["before"] = before(texts)
            best["before"] = min(best["before"], time.perf_counter() - t)
            t = time.perf_counter()
            results["cold"] = now(texts, cache=False)
            best["cold"] = min(best["cold"], time.perf_counter() - t)
        now(texts, cache=True)
        t = time.perf_counter()
        results["warm"] = now(texts, cache=True)
        best["warm"] = time.perf_counter() - t
    assert results["before"] == results["cold"] == results["warm"]
    table = Table(title=f"NER: {args.n:,} passages, {words:,} words ({MODEL})")
    for col in ("path", "seconds", "words/s", "vs before"):
        table.add_column(col, justify="left" if col == "path" else "right")
    labels = {
        "before": "before: 1 process",
        "cold": "now: 2 workers, cache cold",
        "warm": "now: cache warm",
    }
    for key, label in labels.items():
        table.add_row(
            label,
            f"{best[key]:.1f}",
            f"{words / best[key]:,.0f}",
            f"{best['before'] / best[key]:.2f}x",
        )
    console = Console(width=100)
    console.print(table)
    console.print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
