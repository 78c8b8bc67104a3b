"""A small collection for the Ray engine tests: named entities, units that share a document or a
passage (some repeating their paragraph, as one unit per mention does), units alone, a feature
field on some units, and queries of every kind."""

from __future__ import annotations

import random
from pathlib import Path

from retrieval_collection import topic, unit, write_collection

PEOPLE = ["Angela Merkel", "Barack Obama", "Tara Reid", "Lindsay Lohan", "Vladimir Putin"]
PLACES = ["Berlin", "Paris", "Florida", "London", "Moscow", "Chicago"]
EVENTS = ["storm", "earthquake", "election", "trial", "summit", "fire", "flood"]
VERBS = ["hit", "visited", "left", "reached", "named", "praised"]


def sentence(rng: random.Random) -> str:
    who, where, what = rng.choice(PEOPLE), rng.choice(PLACES), rng.choice(EVENTS)
    day = rng.choice(["Monday", "Friday"])
    return f"{who} {rng.choice(VERBS)} {where} after the {what} on {day}."


def write(root: Path, name: str = "dist", n: int = 90, seed: int = 7) -> Path:
    """Write collections/NAME with ``n`` texts (a tenth of them in two units) and test/train
    topics (with qrels)."""
    rng = random.Random(seed)
    units = []
    for i in range(n):
        text = " ".join(sentence(rng) for _ in range(rng.choice([1, 2])))
        kind = i % 5
        if kind == 0:  # alone in its document
            units.append(unit(f"U:{i}", text, doc_id=f"solo{i}", title=f"Solo {i}"))
        elif kind in (1, 2):  # documents of several units
            units.append(unit(f"U:{i}", text, doc_id=f"doc{i % 7}", annotated=kind == 1))
        elif kind == 3:  # sentence units of a passage
            units.append(unit(f"U:{i}", text, doc_id=f"doc{i % 4}", passage=f"p{i % 6}"))
        else:  # no document at all
            units.append(unit(f"U:{i}", text))
        if i % 3 == 0:
            units[-1]["chain"] = f"{rng.choice(PEOPLE)} he him {rng.choice(EVENTS)}"
        if kind == 1 and i % 2 == 0:  # one unit per mention (--unit mention): text repeated
            units.append(unit(f"U:{i}.2", text, doc_id=f"doc{i % 7}", annotated=True))
    topics, qrels = [], {"test": {}, "train": {}}
    for j in range(16):
        own = units[rng.randrange(len(units))]
        mention = rng.choice(EVENTS + PLACES)
        split = "test" if j % 2 == 0 else "train"
        t = topic(f"q{j}", split, mention, f"{mention}: {own['contents']}", own["id"])
        topics.append(t)
        qrels[split][t["qid"]] = [u["id"] for u in units if mention in u["contents"]][:5]
    # a query of stopwords only (no index terms: a warning, no results)
    topics.append(topic("qstop", "test", "the", "the and of", units[0]["id"]))
    return write_collection(root, name, units, topics, qrels)
