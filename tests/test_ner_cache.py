"""spaCy NER over worker processes and the entity cache, with the real model."""

from __future__ import annotations

import json
import sqlite3

import pytest
from retrieval_collection import topic, unit, write_collection

from cmrkit.collection.layout import Topic
from cmrkit.nercache import EntityCache, cache_root
from cmrkit.retrieval import build_index, open_index
from cmrkit.retrieval import entities as ner
from cmrkit.retrieval.queries import formulate
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

TEXTS = [
    "Angela Merkel met Barack Obama in Berlin on Tuesday.",
    "The storm hit Florida and Georgia, the National Weather Service said.",
    "nothing to see here",
    "Apple bought a start-up in London for $ 2 billion last year.",
    "Angela Merkel met Barack Obama in Berlin on Tuesday.",  # a repeat
    "Tara Reid checked into Promises Treatment Center, People magazine said.",
] * 3


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CMRKIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def spacy_entities(texts):
    nlp = ner.load(DEFAULT_SPACY_MODEL)
    return [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in nlp.pipe(texts)]


def test_workers_and_cache_give_spacy_entities(cache_dir, monkeypatch):
    expected = spacy_entities(TEXTS)
    assert any(expected)
    monkeypatch.setattr(ner, "POOL_MIN_CHARS", 1)
    monkeypatch.setattr(ner, "TASK", 2)
    with ner.Recogniser(processes=2) as rec:
        assert rec.block(list(TEXTS)) == expected
        assert rec.recognised == 5 and rec.cached == 0  # distinct texts, each once
    with ner.Recogniser(processes=2) as rec:
        assert rec.block(list(TEXTS)) == expected
        assert rec.recognised == 0 and rec.cached == len(TEXTS)
    assert (cache_dir / "entities").is_dir()
    found = list(ner.iter_entities(TEXTS[:1]))
    assert found[0] == [(TEXTS[0][s:e], s, e) for s, e, _ in expected[0]]
    assert ("Angela Merkel", 0, 13) in found[0]


def test_cache_location_and_off_switch(monkeypatch, tmp_path):
    monkeypatch.setenv("CMRKIT_CACHE_DIR", "")
    assert cache_root() is None
    with ner.Recogniser() as rec:
        assert rec.cache is None and rec.block(TEXTS[:2]) == spacy_entities(TEXTS[:2])
    monkeypatch.delenv("CMRKIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "cmrkit"


def test_corrupt_file_and_another_models_entries_are_not_trusted(cache_dir):
    expected = spacy_entities(TEXTS)
    with ner.Recogniser() as rec:
        rec.block(list(TEXTS))
        path = rec.cache.path
    # a garbage file: set aside and rebuilt
    path.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    with ner.Recogniser() as rec:
        assert rec.block(list(TEXTS)) == expected and rec.recognised == 5
    # another model's identity in the same file: its entries are dropped
    other = EntityCache(path, {"model": "other", "model_version": "1", "spacy": "3"}, ["PERSON"])
    assert other.size() == 0
    other.put_many(["Angela Merkel met Barack Obama in Berlin on Tuesday."], [[(0, 5, "PERSON")]])
    other.close()
    with ner.Recogniser() as rec:
        assert rec.block(list(TEXTS)) == expected and rec.recognised == 5
    # a damaged row (its checksum fails) is recomputed and rewritten
    db = sqlite3.connect(path)
    key, value = db.execute("SELECT key, value FROM entities LIMIT 1").fetchone()
    db.execute("UPDATE entities SET value = ? WHERE key = ?", (b"\x00" + value[1:], key))
    db.commit()
    db.close()
    with ner.Recogniser() as rec:
        assert rec.block(list(TEXTS)) == expected and rec.recognised == 1


UNITS = [
    unit("P:a", "Angela Merkel spoke in Berlin about the storm.", doc_id="a", annotated=True),
    unit("P:b", "Barack Obama visited Florida after the storm.", doc_id="b", annotated=True),
    unit("D:c", "Tomatoes and basil grow in summer in Italy.", doc_id="c"),
]
TOPICS = [topic("q", "test", "storm", "Angela Merkel spoke in Berlin about the storm.", "P:a")]


def test_index_rebuild_and_other_collection_reuse_entities(cache_dir, tmp_path):
    first = write_collection(tmp_path, "one", UNITS, TOPICS)
    info = build_index(first, progress=False)
    assert info.manifest["ner"] == {"recognised": 3, "cached": 0}
    again = build_index(first, force=True, progress=False)
    assert again.manifest["ner"] == {"recognised": 0, "cached": 3}
    other = write_collection(tmp_path, "two", [*UNITS, unit("D:d", "Paris in May.")], TOPICS)
    info = build_index(other, progress=False)
    assert info.manifest["ner"] == {"recognised": 1, "cached": 3}
    manifest = json.loads((other / "index" / "cmrkit-index.json").read_text())
    assert manifest["settings"]["entities"]["model"] == DEFAULT_SPACY_MODEL


def test_query_entities_come_from_the_cache(cache_dir, monkeypatch):
    context = "Angela Merkel met Barack Obama in Berlin. Protests erupted violently on Monday."
    start = context.index("erupted")
    t = Topic("x", "test", "erupted violently", context, (start, start + 17), "u")
    first = formulate([t], "mention+entities")
    calls = []
    real = ner._recognise_here

    def spy(texts, model):
        calls.append(texts)
        return real(texts, model)

    monkeypatch.setattr(ner, "_recognise_here", spy)
    assert formulate([t], "mention+entities") == first
    assert calls == []  # the second formulation ran no NER
    assert "Angela Merkel" in first["x"]


def test_interrupted_rebuild_leaves_the_previous_index(cache_dir, tmp_path, monkeypatch):
    coll = write_collection(tmp_path, "keep", UNITS, TOPICS)
    before = build_index(coll, progress=False)
    files = sorted(p.name for p in (coll / "index").iterdir())

    def interrupted(self, texts, progress=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(ner.Recogniser, "block", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_index(coll, force=True, progress=False)
    assert sorted(p.name for p in (coll / "index").iterdir()) == files
    after = open_index(coll)
    assert after.index_id == before.index_id and after.manifest == before.manifest
    leftovers = [p for d in (coll, coll.parent) for p in d.iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_progress_moves_per_spacy_batch_not_per_block(cache_dir, monkeypatch):
    """`run bm25` on the sample sat at 0/977 for a minute: a block of 8,192 texts was reported
    only when done. Each spaCy batch (a worker task over processes) is reported as it ends."""
    monkeypatch.setattr(ner, "BATCH", 4)
    texts = [f"{t} ({n})" for n, t in enumerate(TEXTS)]  # 18 distinct texts, one block
    told: list[int] = []
    with ner.Recogniser() as rec:
        assert rec.block(texts[:7], told.append) == spacy_entities(texts[:7])
    assert told == [4, 3]
    told.clear()
    # 7 from the cache at once, 11 new ones in batches of 4, then 2 repeats of new texts
    with ner.Recogniser() as rec:
        found = rec.block(texts + texts[10:12], told.append)
    assert found == spacy_entities(texts + texts[10:12])
    assert told == [7, 4, 4, 3, 2]
    # over worker processes: one report per task, in order
    monkeypatch.setattr(ner, "POOL_MIN_CHARS", 1)
    monkeypatch.setattr(ner, "TASK", 5)
    told.clear()
    fresh = [t + "!" for t in texts]
    with ner.Recogniser(processes=2) as rec:
        assert rec.block(fresh, told.append) == spacy_entities(fresh)
    assert told == [5, 5, 5, 3]
    # iter_entities passes the reports on: several for one block, adding up to its size
    told.clear()
    list(ner.iter_entities([t + "?" for t in texts], progress=told.append))
    assert len(told) > 1 and sum(told) == len(texts)
