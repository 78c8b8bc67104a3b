"""Searches through cmrkit's Lucene helper equal Anserini's own, hit for hit and score for score.

The reference is the path cmrkit took before the helper: Anserini's SimpleSearcher.batch_search
(which loads every hit's stored record) read one hit at a time through pyjnius, each score
written with 6 decimals and the list put in trec_eval's order, on an index of the same corpus
that stores term vectors (what cmrkit's index stored before; Anserini's RM3 and Rocchio read the
feedback documents from them). cmrkit's own index stores the contents text instead and the
helper analyses it again for feedback.
"""

from __future__ import annotations

import random
import shutil
import zipfile

import numpy as np
import pytest
from retrieval_collection import topic, unit, write_collection

from cmrkit.retrieval import QE, Searcher, build_index, open_index, run_bm25
from cmrkit.retrieval import helper as java_helper
from cmrkit.retrieval.docnos import TABLE, read_table
from cmrkit.retrieval.runfile import written_scores
from cmrkit.trec import format_score, ranked

WORDS = "storm flood river bridge mayor police fire school market train".split()


def reference_search(s: Searcher, queries, *, k, exclude, fields=None, threads=2):
    jlist = s._jclass("java.util.ArrayList")
    qs, ids = jlist(), jlist()
    searchable = [q for q, text in queries.items() if s.terms(text)]
    for qid in searchable:
        qs.add(queries[qid])
        ids.add(qid)
    if fields:
        jfields = s._jclass("java.util.HashMap")()
        for name, weight in sorted(s.index_fields(fields).items()):
            jfields.put(name, s._jclass("java.lang.Float")(float(weight)))
        results = s.java.batch_search_fields(qs, ids, k + 1, threads, jfields)
    else:
        results = s.java.batch_search(qs, ids, k + 1, threads)
    run = {}
    for qid in searchable:
        docs = {}
        for h in results.get(qid):
            if h.docid != exclude.get(qid):
                docs[h.docid] = float(format_score(h.score))
        run[qid] = ranked(docs)[:k]
    return run


@pytest.fixture(scope="module")
def tied(tmp_path_factory):
    """600 units over a 10-word vocabulary: many exact score ties, ties of more than 100
    units (where Anserini's 1e-6 steps cross a 1e-4 boundary) and scores above 16 (where
    float32 cannot hold a 1e-6 step). Indexed twice: cmrkit's default index, and one of the
    same corpus with term vectors."""
    rng = random.Random(3)
    root = tmp_path_factory.mktemp("tied")
    units, topics = [], []
    for i in range(600):
        n = rng.choice([1, 2, 3, 5, 8])
        text = " ".join(rng.choice(WORDS) for _ in range(n))
        units.append(unit(f"D:{rng.randrange(10**6)}:{i}", text, doc_id=f"d{i % 97}"))
    for j in range(40):
        own = units[rng.randrange(len(units))]
        mention = " ".join(rng.sample(WORDS, rng.choice([1, 2, 4])))
        context = f"{mention} {own['contents']}"
        topics.append(topic(f"q{j}", "test", mention, context, own["id"]))
    coll = write_collection(root, "tied", units, topics)
    build_index(coll, entities=False, progress=False)
    with_vectors = write_collection(tmp_path_factory.mktemp("vectors"), "tied", units, topics)
    build_index(with_vectors, entities=False, progress=False, docvectors=True)
    return coll, topics, with_vectors


@pytest.mark.parametrize(
    "fields,qe",
    [
        (None, None),
        ({"contents": 1.0, "document": 0.1}, None),
        ({"contents": 1.0, "title": 0.3}, None),
        (None, QE(method="rm3", fb_docs=5, fb_terms=5)),
        (None, QE(method="rocchio")),
        ({"contents": 1.0, "document": 0.1}, QE(method="rocchio")),
    ],
)
def test_helper_equals_anserini_hit_for_hit(tied, fields, qe):
    coll, topics, with_vectors = tied
    queries = {t["qid"]: t["mention"] for t in topics}
    queries.update({t["qid"] + "c": t["context"] for t in topics[:10]})
    exclude = {t["qid"]: t["unit"] for t in topics}
    s = Searcher(open_index(coll), k1=1.2, b=0.75)
    ref = Searcher(open_index(with_vectors), k1=1.2, b=0.75)
    try:
        s.set_qe(qe)
        ref.set_qe(qe)
        for k in (1000, 7):
            ours = s.search(queries, k=k, exclude=exclude, fields=fields, threads=2)
            theirs = reference_search(ref, queries, k=k, exclude=exclude, fields=fields)
            assert ours == theirs
            # the helper on the index with term vectors reads them, and agrees too
            assert ref.search(queries, k=k, exclude=exclude, fields=fields, threads=2) == ours
            assert sum(len(v) for v in ours.values()) > 10 * len(queries) or k == 7
        # ties of more than 100 units: the written scores alone do not order them
        ranking = ours if k == 1000 else s.search(queries, k=1000, exclude=exclude)
        lengths = [len(v) for v in ranking.values()]
        assert max(lengths) > 200
        assert not s._batch.storedVectors() and ref._batch.storedVectors()
    finally:
        s.close()
        ref.close()


def test_feedback_terms_without_term_vectors_equal_anserinis(tied):
    coll, topics, with_vectors = tied
    s = Searcher(open_index(coll))
    ref = Searcher(open_index(with_vectors))
    try:
        for searcher in (s, ref):
            searcher.set_qe(QE(method="rm3", fb_docs=5, fb_terms=5))
        for t in topics[:10]:
            ours = s.feedback_terms(t["context"])
            assert ours == {
                str(e.getKey()): float(e.getValue())
                for e in ref.java.get_feedback_terms(t["context"]).entrySet().toArray()
            }
            assert ours
    finally:
        s.close()
        ref.close()


def test_index_stores_contents_not_term_vectors(tied):
    coll, _, with_vectors = tied
    assert open_index(coll).manifest["settings"]["stored"] == ["positions", "contents", "raw"]
    assert "docvectors" in open_index(with_vectors).manifest["settings"]["stored"]
    # Anserini alone cannot expand a query on cmrkit's index: the helper is what makes it work
    s = Searcher(open_index(coll))
    try:
        s.set_qe(QE(method="rm3"))
        with pytest.raises(Exception, match="doc vectors"):
            s.java.search("storm flood", 10)
    finally:
        s.close()


def test_ties_reordered_by_written_score_as_trec_eval_reads_them(tied):
    coll, topics, _ = tied
    s = Searcher(open_index(coll))
    try:
        run = s.search({"q": "storm"}, k=1000, exclude={})
    finally:
        s.close()
    scores = [score for _, score in run["q"]]
    assert scores == sorted(scores, reverse=True)
    tie = [d for d, score in run["q"] if score == scores[0]]
    assert tie == sorted(tie, reverse=True)


def test_written_scores_equal_python_formatting():
    rng = np.random.default_rng(5)
    values = np.concatenate(
        [
            rng.uniform(0, 60, 20000),
            rng.uniform(0, 1e-4, 2000),
            np.arange(0, 1 << 16, 7) / 128.0,  # exact halves at the 7th decimal (1/128 = ...5)
            [0.0, 5e-7, 2.5e-6, 8388608.5, 1e7 + 0.25, -3.2500005, 1e-30],
        ]
    ).astype(np.float32)
    expected = [float(f"{float(v):.6f}") for v in values]
    assert written_scores(values).tolist() == expected


def test_docno_table_cached_beside_the_index_and_rebuilt_when_wrong(tied, tmp_path):
    coll, topics, _ = tied
    copy = tmp_path / "tied"
    shutil.copytree(coll, copy)
    path = copy / "index" / TABLE
    assert path.exists()  # written with the index
    info = open_index(copy)
    s = Searcher(info)
    try:
        expected = s.search({"q": "flood river"}, k=50, exclude={})
        batch, _ = s._helper(2)
        commit, n = str(batch.commitId()), int(batch.maxDoc())
    finally:
        s.close()
    table = read_table(path, info.index_id, commit, n)
    assert table is not None and sorted(table.names.tolist()) == sorted(_corpus_ids(copy))
    assert read_table(path, "another-index", commit, n) is None
    for damage in (b"", path.read_bytes()[:-40], path.read_bytes().replace(b"D:", b"X:", 1)):
        path.write_bytes(damage)
        s = Searcher(open_index(copy))
        try:
            assert s.search({"q": "flood river"}, k=50, exclude={}) == expected
        finally:
            s.close()
        assert read_table(path, info.index_id, commit, n) is not None  # rebuilt


def _corpus_ids(coll):
    from cmrkit.collection.layout import iter_corpus

    return [r["id"] for _, r in iter_corpus(coll)]


def test_run_uses_helper_and_is_byte_identical_across_threads(tied, tmp_path):
    coll, _, _ = tied
    one = run_bm25(coll, query="mention", threads=1, runs_dir=tmp_path / "a")
    two = run_bm25(coll, query="mention", threads=2, runs_dir=tmp_path / "b")
    assert one.run_path.read_bytes() == two.run_path.read_bytes()


def test_shipped_jar_is_built_from_the_source_beside_it():
    manifest = java_helper.jar_manifest()
    assert manifest["Cmrkit-Source-SHA256"] == java_helper.source_sha256()
    with zipfile.ZipFile(java_helper.JAR) as z:
        names = z.namelist()
    assert "cmrkit/lucene/BatchSearcher.class" in names


def test_jar_rebuilds_from_source_with_javac(tmp_path):
    try:
        javac = java_helper.find_javac()
    except Exception:
        pytest.skip("no javac of Java 17+ on this machine")
    out = java_helper.build(tmp_path / "rebuilt.jar", javac)
    with zipfile.ZipFile(out) as z:
        rebuilt = {n: z.read(n) for n in z.namelist()}
    with zipfile.ZipFile(java_helper.JAR) as z:
        shipped = {n: z.read(n) for n in z.namelist()}
    assert sorted(rebuilt) == sorted(shipped)
    if java_helper.jar_manifest(out)["Created-By"] == java_helper.jar_manifest()["Created-By"]:
        assert rebuilt == shipped  # the same javac gives the same bytes
