"""Time `build-collection --source tac` on synthetic TAC data of growing size; print a table.

Usage: python bench/bench_tac.py [N_DOCS ...]   (default: 200 1000)
       python bench/bench_tac.py --smoke        (seconds: 60 documents)

Each document is a news <DOC> of 4 paragraphs (about 8 sentences, 150 words) with XML escapes;
one in ten documents carries gold mentions of 50 recurring entities. Times: reading and
checking the SGML (no spaCy), then the whole build with and without the NER pass for chains.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from cmrkit.sources import tac
from cmrkit.tac.collection import TacInputs, TacOptions, build_tac_collection

FIRST = ["Bobby", "Maria", "Chen", "Omar", "Lena", "Ravi", "Ana", "Tom", "Ines", "Yuki"]
LAST = ["Hall", "Garcia", "Wei", "Haddad", "Berg"]
ORGS = ["United Nations", "World Bank", "Red Cross", "AT&T", "Nokia"]
FILLER = (
    "Officials said the talks would continue next week. Prices rose slightly in early trading. "
    "The committee met on Tuesday to discuss the budget and the new rules. "
)


def write(root: Path, n_docs: int, seed: int = 7) -> tuple[Path, Path]:
    rng = random.Random(seed)
    docs_dir = root / "docs"
    docs_dir.mkdir()
    gold = []
    per_file = 50
    for f in range(0, n_docs, per_file):
        parts = []
        for i in range(f, min(f + per_file, n_docs)):
            doc_id = f"AFP_ENG_2009{1 + i % 12:02d}{1 + i % 28:02d}.{i:04d}"
            person = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
            org = rng.choice(ORGS)
            paras = [
                f"{person} spoke to the {org.replace('&', '&amp;')} on Monday. {FILLER}",
                f"{FILLER}{person.split()[1]} said the plan was sound.",
                FILLER,
                f"The {org.replace('&', '&amp;')} did not comment. {FILLER}",
            ]
            head = f'<DOC id="{doc_id}" type="story" >\n<HEADLINE>\nNews {i}\n</HEADLINE>\n<TEXT>\n'
            body = "".join(f"<P>\n{p}\n</P>\n" for p in paras)
            text = head + body + "</TEXT>\n</DOC>\n"
            if i % 10 == 0:
                s = text.index(person)
                gold.append(
                    (f"M{i}a", person, doc_id, s, s + len(person) - 1, "NIL" + person, "PER")
                )
                raw_org = org.replace("&", "&amp;")
                s = text.index(raw_org)
                gold.append((f"M{i}b", org, doc_id, s, s + len(raw_org) - 1, "E" + org, "ORG"))
            parts.append(text)
        (docs_dir / f"part{f // per_file:04d}.sgm").write_text("".join(parts), encoding="utf-8")
    mentions = root / "gold.tab"
    mentions.write_text(
        "".join(
            f"LDC\t{m}\t{t}\t{d}:{s}-{e}\t{k}\t{ty}\tNAM\t1.0\n" for m, t, d, s, e, k, ty in gold
        ),
        encoding="utf-8",
    )
    return docs_dir, mentions


def main(sizes: list[int]) -> None:
    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            docs, mentions = write(root, n)
            t0 = time.perf_counter()
            n_blocks = sum(len(d.blocks) for d in tac.iter_documents(docs))
            read_s = time.perf_counter() - t0
            timings = {}
            for chains in (False, True):
                t0 = time.perf_counter()
                report = build_tac_collection(
                    TacInputs(docs, mentions),
                    TacOptions(f"b{int(chains)}", queries="all", chains=chains),
                    collections_dir=root / "collections",
                    qrels_dir=root / "qrels",
                )
                timings[chains] = time.perf_counter() - t0
            rows.append((n, n_blocks, report.counts["corpus_units"], read_s, *timings.values()))
    print(f"{'docs':>6} {'blocks':>7} {'units':>7} {'read+mask s':>12} {'build s':>9} "
          f"{'build+NER s':>12} {'docs/s (NER)':>13}")  # fmt: skip
    for n, blocks, units, read_s, plain, ner in rows:
        print(f"{n:>6} {blocks:>7} {units:>7} {read_s:>12.2f} {plain:>9.2f} {ner:>12.2f} "
              f"{n / ner:>13.1f}")  # fmt: skip


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", type=int, nargs="*", help="documents N [default: 200 1000]")
    ap.add_argument("--smoke", action="store_true", help="seconds: 60 documents")
    a = ap.parse_args()
    main([60] if a.smoke else a.sizes or [200, 1000])
