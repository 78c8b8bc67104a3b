"""Within-document chains (gold + the linking rule) and the acronym / trigram features."""

from __future__ import annotations

import pytest

from cmrkit.tac import chains


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("United Nations", "UN"),
        ("U.N.", "UN"),
        ("IBM", "IBM"),
        ("Bank of America", "BA"),
        ("the World Health Organization", "WHO"),
        ("Obama", ""),
    ],
)
def test_acronym(text, expected):
    assert chains.acronym(text) == expected


def test_char_trigrams_stay_within_words():
    grams = chains.char_trigrams("Bobby Hall")
    assert grams == ["bob", "obb", "bby", "hal", "all"]
    assert "yha" not in grams
    assert chains.char_trigrams("EU") == ["eu"]


def mention_span(text: str, needle: str, nth: int = 0) -> tuple[int, int]:
    pos = -1
    for _ in range(nth + 1):
        pos = text.index(needle, pos + 1)
    return pos, pos + len(needle)


TEXT = (
    "Bobby Hall met United Nations staff. Hall said the U.N. should act. "
    "Arsenio Hall disagreed. Nokia and NOKIA shares fell. Hall left."
)


def test_gold_chains_and_linked_tagger_mentions():
    def g(needle, entity, etype, nth=0):
        s, e = mention_span(TEXT, needle, nth)
        return (s, e, needle, entity, etype)

    def t(needle, etype, nth=0):
        s, e = mention_span(TEXT, needle, nth)
        return (s, e, needle, etype)

    gold = [g("Bobby Hall", "NIL0017", "PER"), g("United Nations", "E01", "ORG")]
    tagged = [
        t("Bobby Hall", "PER"),  # overlaps the gold mention: dropped
        t("Hall", "PER", 1),  # "Hall said": same head as Bobby Hall
        t("U.N.", "ORG"),  # acronym of United Nations
        t("Arsenio Hall", "PER"),  # another person with the same head: own chain
        t("Nokia", "ORG"),
        t("NOKIA", "ORG"),  # same string ignoring case: joins Nokia
        t("Hall", "PER", 3),  # "Hall left": joins the first chain it matches
    ]
    result = chains.build_chains("DOC1", gold, tagged)
    by_id = {c.id: c for c in result}
    assert [c.id for c in result] == ["NIL0017", "E01", "DOC1#1", "DOC1#2"]
    assert [(m.text, m.source) for m in by_id["NIL0017"].mentions] == [
        ("Bobby Hall", "gold"),
        ("Hall", "ner"),
        ("Hall", "ner"),
    ]
    assert [m.text for m in by_id["E01"].mentions] == ["United Nations", "U.N."]
    assert [m.text for m in by_id["DOC1#1"].mentions] == ["Arsenio Hall"]
    assert by_id["DOC1#2"].entity is None
    assert by_id["NIL0017"].words() == "Bobby Hall Hall"
    assert by_id["DOC1#2"].words() == "Nokia"


def test_head_rule_respects_types():
    text = "Jordan Smith visited Jordan."
    gold = [(0, 12, "Jordan Smith", "NIL1", "PER")]
    tagged = [(21, 27, "Jordan", "GPE")]
    result = chains.build_chains("D", gold, tagged)
    # "Jordan" is not the head of "Jordan Smith" anyway; a GPE "Smith" would not join a PER
    assert [c.id for c in result] == ["NIL1", "D#1"]
    assert text[21:27] == "Jordan"
    typed = chains.build_chains("D", gold, [(30, 35, "Smith", "GPE")])
    assert [c.id for c in typed] == ["NIL1", "D#1"]
    untyped = chains.build_chains("D", gold, [(30, 35, "Smith", None)])
    assert [c.id for c in untyped] == ["NIL1"]


def test_unannotated_document_gets_tagger_chains():
    tagged = [(0, 14, "United Nations", "ORG"), (20, 22, "UN", "ORG"), (30, 35, "Paris", "GPE")]
    result = chains.build_chains("D", [], tagged)
    assert [(c.id, [m.text for m in c.mentions]) for c in result] == [
        ("D#1", ["United Nations", "UN"]),
        ("D#2", ["Paris"]),
    ]


def test_unit_chain_words():
    result = chains.build_chains(
        "D",
        [(0, 10, "Bobby Hall", "NIL1", "PER")],
        [(40, 44, "Hall", "PER"), (60, 65, "Paris", "GPE")],
    )
    index = chains.chain_index(result)
    # a unit holding only "Hall" gets the words of the whole chain
    assert chains.unit_chain_words(index, 35, 50) == "Bobby Hall Hall"
    assert chains.unit_chain_words(index, 55, 70) == "Paris"
    assert chains.unit_chain_words(index, 11, 39) == ""
