"""Coreference measures against the CoNLL-2012 reference scorer (Perl v8.01) and coval's LEA."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from coref_fixtures import (
    TEST_CASES,
    chain_numbers,
    ecbplus_documents,
    need_perl,
    perturb,
    run_perl,
    run_perl_each,
    without_singletons,
    write_documents,
)

from cmrkit.collection.clusters import read_clustering, write_conll
from cmrkit.errors import CmrkitError
from cmrkit.evaluation.coref import Blanc, Counts, perl_percent, score

PERL_MEASURES = ("mentions", "muc", "bcub", "ceafm", "ceafe", "blanc")


def _printed(value: float) -> str:
    return f"{value:.2f}"


def _same_print(ours: str, value: float, perl: str) -> bool:
    """Equal prints, or a value on a truncation boundary (231/280 = 82.5%): there the scorer
    itself prints 82.49 or 82.5 depending on Perl's hash order (its sums run over hash keys;
    seen across PERL_HASH_SEED), so either side of the boundary is the reference's answer."""
    if ours == perl:
        return True
    scaled = value * 10000
    on_boundary = abs(scaled - round(scaled)) < 1e-6
    return on_boundary and abs(float(ours) - float(perl)) < 0.011


def assert_equals_perl(result, perl: dict[str, list[float]]) -> None:
    """Every count to 12 significant digits and every printed percentage exactly (up to the
    scorer's own hash-order wobble on a truncation boundary)."""
    for m in PERL_MEASURES:
        v = result.total[m]
        p = perl[m]
        if isinstance(v, Blanc):
            ours = [v.recall, 1, v.precision, 1]
            for side, counts in (("blanc_coref", v.coref), ("blanc_noncoref", v.noncoref)):
                expected = perl[side]
                got = [counts.recall_num, counts.recall_den, counts.precision_num]
                got.append(counts.precision_den)
                assert got == pytest.approx([expected[0], expected[1], expected[3], expected[4]])
        else:
            ours = [v.recall_num, v.recall_den, v.precision_num, v.precision_den]
        assert ours == pytest.approx([p[0], p[1], p[3], p[4]], rel=1e-12, abs=1e-12), m
        values = (v.recall, v.precision, v.f1)
        for value, expected in zip(values, (p[2], p[5], p[6]), strict=True):
            assert _same_print(perl_percent(value), value, _printed(expected)), (m, value, expected)


CASES = sorted(p.name for p in TEST_CASES.glob("*.response")) if TEST_CASES.is_dir() else []


@pytest.mark.parametrize("response", CASES)
def test_reference_scorer_test_cases(response):
    need_perl()
    key = TEST_CASES / (response.rsplit("-", 1)[0] + ".key")
    try:
        perl = run_perl(key, TEST_CASES / response)
    except RuntimeError:  # TC-A-9: 10 repeats per metric, over 10 summed over metrics
        perl = run_perl_each(key, TEST_CASES / response)
    result = score(read_clustering(key), read_clustering(TEST_CASES / response))
    assert_equals_perl(result, perl)


def test_the_reference_scorers_test_cases_are_found():
    need_perl()
    assert len(CASES) == 36


@pytest.fixture(scope="module")
def ecb():
    return chain_numbers(ecbplus_documents("test"))


@pytest.mark.parametrize(
    ("seed", "docs", "singletons"),
    [(0, None, "keep"), (1, 40, "keep"), (2, 40, "remove"), (3, 60, "keep"), (4, 60, "remove")],
)
def test_random_ecbplus_clusterings_per_document(ecb, tmp_path, seed, docs, singletons):
    need_perl()
    names = sorted(ecb)[: docs or len(ecb)]
    key_docs = {n: ecb[n] for n in names}
    response_docs = perturb(key_docs, seed)
    key = write_documents(tmp_path / "key.conll", key_docs)
    response = write_documents(tmp_path / "response.conll", response_docs)
    if singletons == "remove":
        perl = run_perl(
            write_documents(tmp_path / "k.conll", without_singletons(key_docs)),
            write_documents(tmp_path / "r.conll", without_singletons(response_docs)),
        )
    else:
        perl = run_perl(key, response)
    result = score(read_clustering(key), read_clustering(response), singletons=singletons)
    assert result.documents == len(names)
    assert_equals_perl(result, perl)


@pytest.mark.parametrize(("seed", "singletons"), [(5, "keep"), (6, "remove")])
def test_random_ecbplus_clusterings_across_documents(ecb, tmp_path, seed, singletons):
    """Corpus scope equals the reference scorer on all documents written as one."""
    need_perl()
    names = sorted(ecb)[40:58]
    key_docs = {n: ecb[n] for n in names}
    response_docs = perturb(key_docs, seed, cross_document=True)
    key = write_documents(tmp_path / "key.conll", key_docs)
    response = write_documents(tmp_path / "response.conll", response_docs)
    if singletons == "remove":
        key_docs = without_singletons(key_docs, per_document=False)
        response_docs = without_singletons(response_docs, per_document=False)
    perl = run_perl(
        write_documents(tmp_path / "k1.conll", key_docs, one_document="all"),
        write_documents(tmp_path / "r1.conll", response_docs, one_document="all"),
    )
    result = score(
        read_clustering(key), read_clustering(response), scope="corpus", singletons=singletons
    )
    assert result.documents == 1
    assert_equals_perl(result, perl)
    per_doc = score(read_clustering(key), read_clustering(response), singletons=singletons)
    assert per_doc.total["muc"] != result.total["muc"]  # cross-document links count here only


def test_many_repeats_per_metric_equal_the_scorer(ecb, tmp_path):
    """Ten repeated mentions: scored (the scorer's limit), each metric run on its own."""
    need_perl()
    names = sorted(ecb)[:30]
    key_docs = {n: ecb[n] for n in names}
    response_docs = perturb(key_docs, 7, repeats=10)
    key = write_documents(tmp_path / "key.conll", key_docs)
    response = write_documents(tmp_path / "response.conll", response_docs)
    result = score(read_clustering(key), read_clustering(response))
    assert any("10 repeated" in n for n in result.notes)
    assert_equals_perl(result, run_perl_each(key, response))


def _conll(tmp_path: Path, name: str, docs: dict) -> Path:
    path = tmp_path / name
    with open(path, "w") as f:
        write_conll(f, ((n, t, ms) for n, (t, ms) in docs.items()))
    return path


@pytest.mark.parametrize(
    ("key_docs", "response_docs"),
    [
        # empty response: the document is there, without mentions
        ({"d": (6, [(0, 0, "1"), (2, 3, "1"), (5, 5, "2")])}, {"d": (6, [])}),
        # the response lacks the document
        (
            {"d": (6, [(0, 0, "1"), (2, 3, "1")]), "e": (4, [(0, 1, "1"), (3, 3, "1")])},
            {"d": (6, [(0, 0, "1"), (2, 3, "1")])},
        ),
        # all singletons on both sides
        (
            {"d": (5, [(0, 0, "1"), (1, 1, "2"), (2, 2, "3")])},
            {"d": (5, [(0, 0, "7"), (1, 1, "8"), (4, 4, "9")])},
        ),
        # one-mention documents
        (
            {"a": (1, [(0, 0, "1")]), "b": (2, [(0, 1, "1")])},
            {"a": (1, [(0, 0, "3")]), "b": (2, [])},
        ),
        # response mentions the key lacks, and a document the key lacks
        (
            {"d": (8, [(0, 0, "1"), (3, 4, "1"), (6, 6, "2")])},
            {
                "d": (8, [(0, 0, "1"), (1, 2, "1"), (3, 4, "2"), (7, 7, "2")]),
                "x": (2, [(0, 0, "1")]),
            },
        ),
        # an invented mention written twice (the scorer keeps both)
        (
            {"d": (8, [(0, 0, "1"), (3, 4, "1"), (6, 6, "2")])},
            {"d": (8, [(0, 0, "1"), (1, 2, "1"), (1, 2, "2"), (6, 6, "2"), (7, 7, "2")])},
        ),
    ],
    ids=["empty", "missing-document", "singletons", "one-mention", "invented", "invented-twice"],
)
def test_edge_cases_equal_the_scorer(tmp_path, key_docs, response_docs):
    need_perl()
    key = _conll(tmp_path, "key.conll", key_docs)
    response = _conll(tmp_path, "response.conll", response_docs)
    result = score(read_clustering(key), read_clustering(response))
    assert_equals_perl(result, run_perl(key, response))


def test_empty_key_document_scores_zero(tmp_path):
    need_perl()
    key = _conll(tmp_path, "key.conll", {"d": (3, [])})
    response = _conll(tmp_path, "response.conll", {"d": (3, [(0, 1, "1"), (2, 2, "1")])})
    result = score(read_clustering(key), read_clustering(response))
    assert_equals_perl(result, run_perl(key, response))
    assert result.total["lea"] == Counts(0, 0, 0, 2)


# --- LEA ----------------------------------------------------------------------------------------


def _lea(tmp_path: Path, key: list[list[str]], response: list[list[str]]) -> Counts:
    k, r = tmp_path / "key.json", tmp_path / "response.json"
    k.write_text(json.dumps(key))
    r.write_text(json.dumps(response))
    return score(read_clustering(k), read_clustering(r), ["lea"]).total["lea"]


def test_lea_on_the_papers_worked_example(tmp_path):
    """Moosavi & Strube (2016), section 4: key {a b c} {d e f g}, response {a b} {c d}
    {f g h i}: recall (3 * 1/3 + 4 * 1/6) / 7, precision (2 * 1 + 2 * 0 + 4 * 1/6) / 8."""
    lea = _lea(
        tmp_path,
        [["a", "b", "c"], ["d", "e", "f", "g"]],
        [["a", "b"], ["c", "d"], ["f", "g", "h", "i"]],
    )
    assert lea.recall == pytest.approx((3 * 1 / 3 + 4 * 1 / 6) / 7)
    assert lea.precision == pytest.approx((2 * 1 + 2 * 0 + 4 * 1 / 6) / 8)
    assert perl_percent(lea.recall) == "23.80"
    assert perl_percent(lea.precision) == "33.33"


def test_lea_singletons_resolve_by_their_self_link(tmp_path):
    # a key singleton found alone counts fully, found inside a bigger chain not at all
    lea = _lea(tmp_path, [["a"], ["b", "c"]], [["a"], ["b"], ["c", "x"]])
    assert lea.recall == pytest.approx((1 * 1 + 2 * 0) / 3)
    assert lea.precision == pytest.approx((1 * 1 + 1 * 0 + 2 * 0) / 4)


@pytest.mark.parametrize(
    ("case", "recall", "precision"),
    [
        ("A-2", (1 + 3 * (1 / 3)) / 6, 1.0),
        ("A-3", 1.0, (1 + 3 * (1 / 3) + 4 * (3 / 6)) / 9),
        ("A-13", (3 / 3) / 6, 1 / 21),
        ("D-1", (5 + 2 + 5) / 12, (5 + 7 * (11 / 21)) / 12),
        ("K-1", (7 * 3 / 21) / 7, 3 / 9),
        ("N-4", 3 / 6, 3 / 6),
    ],
)
def test_lea_on_the_reference_test_cases(case, recall, precision):
    """Hand-derived from the definition (the same figures coval's unit tests state)."""
    key = TEST_CASES / f"TC-{case.split('-')[0]}.key"
    if not key.is_file():
        pytest.skip("the reference scorer's test files are not here")
    lea = score(read_clustering(key), read_clustering(TEST_CASES / f"TC-{case}.response"))
    assert lea.total["lea"].recall == pytest.approx(recall)
    assert lea.total["lea"].precision == pytest.approx(precision)


def test_lea_reads_repeated_mentions_as_written_like_coval(tmp_path):
    """TC-A-7 repeats b in its chain ({a} {b c x b} {d y} {z}); coval does not de-duplicate:
    the chain holds 3 of its 6 links, so precision is (1 + 4 * 3/6) / 8 = 3/8, where the
    de-duplicated response of the other measures would give (1 + 3/3) / 7."""
    key = TEST_CASES / "TC-A.key"
    if not key.is_file():
        pytest.skip("the reference scorer's test files are not here")
    result = score(read_clustering(key), read_clustering(TEST_CASES / "TC-A-7.response"))
    assert result.total["lea"].precision == pytest.approx(3 / 8)
    assert result.total["lea"].recall == pytest.approx((1 + 2) / 6)
    assert result.total["bcub"].precision_den == 7  # the scorer drops the repeat


# --- formats ------------------------------------------------------------------------------------


def _numbers(value) -> list[float]:
    if isinstance(value, Blanc):
        return _numbers(value.coref) + _numbers(value.noncoref)
    if isinstance(value, Counts):
        return [value.recall_num, value.recall_den, value.precision_num, value.precision_den]
    return [value]


def test_json_formats_score_like_conll(tmp_path, ecb):
    names = sorted(ecb)[:12]
    key_docs = {n: ecb[n] for n in names}
    response_docs = perturb(key_docs, 11, repeats=0)
    key = write_documents(tmp_path / "key.conll", key_docs)
    response = write_documents(tmp_path / "response.conll", response_docs)
    expected = score(read_clustering(key), read_clustering(response))

    def e2e(path: Path, docs: dict) -> Path:
        with open(path, "w") as f:
            for name, (_, ms) in docs.items():
                chains: dict[str, list] = {}
                for s, e, c in ms:
                    chains.setdefault(c, []).append([s, e])
                f.write(json.dumps({"doc_key": name, "clusters": list(chains.values())}) + "\n")
        return path

    def records(path: Path, docs: dict) -> Path:
        with open(path, "w") as f:
            for name, (_, ms) in docs.items():
                for s, e, c in ms:
                    f.write(json.dumps({"cluster": c, "doc_id": name, "start": s, "end": e}))
                    f.write("\n")
        return path

    for writer in (e2e, records):
        got = score(
            read_clustering(writer(tmp_path / "k.jsonl", key_docs)),
            read_clustering(writer(tmp_path / "r.jsonl", response_docs)),
        )
        for m in expected.measures:
            assert _numbers(got.total[m]) == pytest.approx(_numbers(expected.total[m])), m


def test_mention_id_records_and_lists_are_one_corpus(tmp_path):
    key = tmp_path / "key.jsonl"
    key.write_text(
        "".join(
            json.dumps({"cluster": c, "mention_id": m, "doc_id": d}) + "\n"
            for c, m, d in [("e1", "m1", "A"), ("e1", "m2", "B"), ("e2", "m3", "B")]
        )
    )
    response = tmp_path / "response.json"
    response.write_text(json.dumps([["m1", "m2", "m3"]]))
    result = score(read_clustering(key), read_clustering(response), ["muc", "bcub"])
    assert result.documents == 1
    assert result.total["muc"] == Counts(1, 1, 1, 2)
    assert result.total["bcub"].recall == pytest.approx(1.0)
    assert result.total["bcub"].precision == pytest.approx((2 / 3 + 2 / 3 + 1 / 3) / 3)


def test_identity_kinds_must_match(tmp_path):
    k, r = tmp_path / "k.json", tmp_path / "r.jsonl"
    k.write_text('[["m1", "m2"]]')
    r.write_text('{"cluster": 1, "doc_id": "d", "start": 0, "end": 1}\n')
    with pytest.raises(CmrkitError, match="mention_id|ids|spans|id"):
        score(read_clustering(k), read_clustering(r))


def test_agreement_equals_scikit_learn(tmp_path, ecb):
    sklearn = pytest.importorskip("sklearn.metrics")
    names = sorted(ecb)[:25]
    key_docs = {n: ecb[n] for n in names}
    response_docs = perturb(key_docs, 3, repeats=0, cross_document=True)
    key = write_documents(tmp_path / "key.conll", key_docs)
    response = write_documents(tmp_path / "response.conll", response_docs)
    k, r = read_clustering(key), read_clustering(response)
    result = score(k, r, ["ari", "nmi"], scope="corpus")
    # the items: the key mentions; one the response misses is a cluster of its own
    resp = {}
    for name, doc in r.documents.items():
        for ident, chain in zip(doc.ids, doc.chains, strict=True):
            resp.setdefault((name, ident), doc.names[chain])
    truth, pred = [], []
    for name, doc in k.documents.items():
        for ident, chain in zip(doc.ids, doc.chains, strict=True):
            truth.append(doc.names[chain])
            pred.append(resp.get((name, ident), f"alone {name} {ident}"))
    assert result.total["ari"] == pytest.approx(sklearn.adjusted_rand_score(truth, pred))
    assert result.total["nmi"] == pytest.approx(sklearn.normalized_mutual_info_score(truth, pred))


def test_agreement_limit_cases():
    from cmrkit.evaluation.partitions import adjusted_rand_index, normalized_mutual_information

    assert adjusted_rand_index([0, 0, 1, 1], [0, 0, 1, 1]) == 1.0
    assert adjusted_rand_index([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(-0.5)
    assert adjusted_rand_index([0, 0, 0, 0], [0, 1, 2, 3]) == 0.0
    assert adjusted_rand_index([], []) == 1.0
    assert normalized_mutual_information([0, 0, 1, 1], [1, 1, 0, 0]) == pytest.approx(1.0)
    assert normalized_mutual_information([0, 0, 0, 0], [0, 1, 2, 3]) == 0.0
    assert normalized_mutual_information([5, 5], [7, 7]) == 1.0


def test_alignment_equals_linear_sum_assignment():
    """CEAF's alignment: small components are tried exhaustively, larger ones go to scipy;
    both give scipy's optimum."""
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    from cmrkit.evaluation.coref import _best_alignment

    rng = np.random.default_rng(0)
    for _ in range(500):
        rows, cols = rng.integers(1, 10, 2)
        m = rng.random((rows, cols)) * (rng.random((rows, cols)) < 0.6)
        x, y = linear_sum_assignment(m, maximize=True)
        assert _best_alignment(m) == pytest.approx(m[x, y].sum(), abs=1e-12)


def test_empty_clusters_are_no_chains(tmp_path):
    k, r = tmp_path / "k.json", tmp_path / "r.json"
    k.write_text('[["a", "b"], [], ["c"]]')
    r.write_text('[[], ["a", "b"], ["c"], []]')
    result = score(read_clustering(k), read_clustering(r))
    for m in ("muc", "bcub", "ceafm", "ceafe", "blanc", "lea", "mentions"):
        assert result.total[m].f1 == 1.0, m
    assert result.total["ceafe"].recall_den == 2
