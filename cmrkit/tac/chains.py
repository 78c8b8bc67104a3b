"""Within-document coreference chains and the string features of the CMR baselines.

Chains of one document are built from two kinds of mentions:

1. gold mentions (annotations): mentions with the same KB or NIL id form one chain;
2. named-entity mentions found by a tagger (spaCy), which join a chain by a simple rule.

The linking rule (applied to the tagger's mentions in document order; a tagger mention that
overlaps a gold mention is dropped in favour of the gold one): a mention joins the first chain
(gold chains first, then tagger chains in the order they were started) holding a mention that

- has the same text, ignoring case, punctuation and spacing; or
- is its acronym, or has it as acronym (``UN`` / ``U.N.`` and ``United Nations``); or
- shares its head word (the last word), when the joining mention is that single word and the
  other holds more words, and the types agree where both are known (``Hall`` joins
  ``Bobby Hall``; ``Arsenio Hall`` does not join a chain of ``Bobby Hall`` and ``Hall``).

Otherwise it starts a chain of its own. So unannotated documents get chains too.

Features (protocols.md, DiscK): the acronym of a mention is the first letters of its
non-stopword words (a single all-capital word is its own acronym); character trigrams are taken
within each lower-cased word.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

STOPWORDS = frozenset("a an and at by de del der for from in of on the to van von with".split())
_WORD = re.compile(r"[^\W_]+(?:[.'’&-][^\W_]+)*\.?", re.UNICODE)
_ACRONYM_LIKE = re.compile(r"(?:[A-Z]\.?){2,8}|[A-Z][A-Z0-9&]{1,7}")


def words(text: str) -> list[str]:
    """The words of a mention string."""
    return _WORD.findall(text)


def normalize(text: str) -> str:
    """Lower-cased letters and digits of the words, single-spaced."""
    return " ".join(re.sub(r"[^\w]", "", w).lower() for w in words(text)).strip()


def acronym(text: str) -> str:
    """``United Nations`` -> ``UN``; ``U.N.`` -> ``UN``; one ordinary word -> ``""``."""
    ws = words(text)
    if len(ws) == 1 and _ACRONYM_LIKE.fullmatch(ws[0]):
        return ws[0].replace(".", "").upper()
    letters = [w[0].upper() for w in ws if w.lower() not in STOPWORDS and w[0].isalpha()]
    return "".join(letters) if len(letters) >= 2 else ""


def char_trigrams(text: str) -> list[str]:
    """Character trigrams within each lower-cased word (a shorter word is kept whole)."""
    grams: list[str] = []
    for w in words(text):
        w = re.sub(r"[^\w]", "", w).lower()
        if len(w) <= 3:
            if w:
                grams.append(w)
            continue
        grams.extend(w[i : i + 3] for i in range(len(w) - 2))
    return grams


def head(text: str) -> str:
    """The last word, lower-cased, without a possessive ending."""
    ws = words(text)
    if not ws:
        return ""
    return re.sub(r"(?:'s|’s|')$", "", ws[-1]).lower().rstrip(".")


@dataclass
class ChainMention:
    """A mention in a chain: raw document span ``[start, end)``."""

    start: int
    end: int
    text: str
    type: str | None
    source: str  # "gold" or "ner"


@dataclass
class Chain:
    """Mentions of one entity within one document."""

    id: str
    entity: str | None
    type: str | None
    mentions: list[ChainMention] = field(default_factory=list)

    def words(self) -> str:
        """The distinct mention strings of the chain, in document order, space-joined."""
        seen: set[str] = set()
        out = []
        for m in sorted(self.mentions, key=lambda m: (m.start, m.end)):
            key = normalize(m.text)
            if key and key not in seen:
                seen.add(key)
                out.append(" ".join(m.text.split()))
        return " ".join(out)


def _matches(new: ChainMention, old: ChainMention) -> bool:
    """Whether a tagger mention may join a chain holding ``old`` (see the module rule)."""
    nn, no = normalize(new.text), normalize(old.text)
    if not nn or not no:
        return False
    if nn == no:
        return True
    wn, wo = words(new.text), words(old.text)
    an, ao = acronym(new.text), acronym(old.text)
    if an and an == ao and (len(wn) == 1) != (len(wo) == 1):
        return True
    if len(wn) == 1 and len(wo) > 1 and head(new.text) == head(old.text):
        return head(new.text) not in STOPWORDS and (
            new.type is None or old.type is None or new.type == old.type
        )
    return False


def build_chains(
    doc_id: str,
    gold: Iterable[tuple[int, int, str, str, str | None]],
    tagged: Iterable[tuple[int, int, str, str | None]],
) -> list[Chain]:
    """Chains of one document.

    ``gold``: (start, end, text, entity id, type) annotations; ``tagged``: (start, end, text,
    type) tagger mentions. Spans are raw ``[start, end)``. Chain ids: the entity id for gold
    chains, ``DOC#n`` for chains the rule starts.
    """
    chains: dict[str, Chain] = {}
    gold_spans: list[tuple[int, int]] = []
    for start, end, text, entity, etype in sorted(gold, key=lambda g: (g[0], g[1])):
        chain = chains.setdefault(entity, Chain(entity, entity, etype))
        chain.mentions.append(ChainMention(start, end, text, etype, "gold"))
        gold_spans.append((start, end))
    order = list(chains.values())
    n = 0
    for start, end, text, etype in sorted(tagged, key=lambda t: (t[0], t[1])):
        if any(s < end and start < e for s, e in gold_spans):
            continue
        mention = ChainMention(start, end, text, etype, "ner")
        target = next((c for c in order if any(_matches(mention, m) for m in c.mentions)), None)
        if target is None:
            n += 1
            target = Chain(f"{doc_id}#{n}", None, etype)
            order.append(target)
        target.mentions.append(mention)
    return order


def chain_index(chains: Sequence[Chain]) -> list[tuple[int, int, Chain]]:
    """(start, end, chain) of every mention, sorted by position."""
    return sorted(
        ((m.start, m.end, c) for c in chains for m in c.mentions), key=lambda x: (x[0], x[1])
    )


def unit_chain_words(index: Sequence[tuple[int, int, Chain]], start: int, end: int) -> str:
    """Words of every chain with a mention inside the raw span ``[start, end)``."""
    seen: set[str] = set()
    parts = []
    for s, e, chain in index:
        if s >= start and e <= end and chain.id not in seen:
            seen.add(chain.id)
            parts.append(chain.words())
    return " ".join(p for p in parts if p)
