"""Token windows for the reader, with the character offsets that map spans back to the text.

A reader input is one sequence: the marked query window, then one window of the candidate
unit, in the model's own pair layout (for BERT-style models ``[CLS] query [SEP] passage [SEP]``,
the passage in segment 1). The query window is cut around the marked mention as for dense
retrieval (at most ``query_max_length`` tokens with the special tokens that precede and separate
the two segments); the passage takes the rest of ``max_length``. A unit longer than that is read
in overlapping windows whose starts lie ``stride`` tokens apart (the last window ends at the
unit's end).

Character offsets count characters of the Python string (code points), never bytes, so a unit
with multi-byte text maps back exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.retrieval.dense.encode import centred_window, marked_tokens


@dataclass(frozen=True)
class QueryWindow:
    """A marked query cut to its window: token ids (no special tokens) and the positions of the
    mention's first and last tokens (markers excluded) inside them."""

    ids: tuple[int, ...]
    mention: tuple[int, int]


@dataclass(frozen=True)
class PassageTokens:
    """A unit's tokens (no special tokens) and each token's character span in the unit."""

    ids: tuple[int, ...]
    offsets: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Layout:
    """Where a tokenizer puts its special tokens around a (query, passage) pair."""

    prefix: tuple[int, ...]
    middle: tuple[int, ...]
    suffix: tuple[int, ...]
    passage_type: int  # token type id of the passage segment
    typed: bool  # the model takes token_type_ids
    max_length: int
    query_max_length: int

    @property
    def query_budget(self) -> int:
        """Query tokens kept (without special tokens)."""
        return self.query_max_length - len(self.prefix) - len(self.middle)

    @property
    def passage_budget(self) -> int:
        """Passage tokens in one window."""
        return self.max_length - self.query_max_length - len(self.suffix)


def layout(tokenizer: Any, max_length: int, query_max_length: int) -> Layout:
    """The pair layout of ``tokenizer``, found by encoding a probe pair."""
    a = list(tokenizer("cmrkit", add_special_tokens=False)["input_ids"])
    b = list(tokenizer("zebra", add_special_tokens=False)["input_ids"])
    enc = tokenizer("cmrkit", "zebra", add_special_tokens=True)
    full = list(enc["input_ids"])
    found = None
    for i in range(len(full) - len(a) + 1):
        if full[i : i + len(a)] != a:
            continue
        for j in range(i + len(a), len(full) - len(b) + 1):
            if full[j : j + len(b)] == b:
                found = (i, j)
                break
        if found:
            break
    if found is None:
        raise CmrkitError("cannot tell where this tokenizer puts the two texts of a pair")
    i, j = found
    types = list(enc.get("token_type_ids") or [0] * len(full))
    out = Layout(
        tuple(full[:i]),
        tuple(full[i + len(a) : j]),
        tuple(full[j + len(b) :]),
        int(types[j]),
        "token_type_ids" in tokenizer.model_input_names,
        max_length,
        query_max_length,
    )
    if out.query_budget < 4:
        raise CmrkitError(f"--query-max-length {query_max_length} leaves no room for the query")
    if out.passage_budget < 16:
        raise CmrkitError(
            f"--max-length {max_length} leaves fewer than 16 passage tokens after a query of "
            f"{query_max_length}; raise --max-length or lower --query-max-length"
        )
    return out


def query_entities(
    contexts: Sequence[str], spans: Sequence[tuple[int, int]], spacy_model: str
) -> list[list[tuple[str, int, int]]]:
    """The named entities (spaCy, through the entity cache) of each query's context that do not
    overlap its mention: ``(text, start, end)``, nearest to the mention first (ties: earlier
    first). The same entities as ``run bm25``'s default ``mention+entities`` query."""
    from cmrkit.retrieval.entities import iter_entities

    out = []
    for (start, end), ents in zip(spans, iter_entities(contexts, spacy_model), strict=True):
        kept = [(t, s, e) for t, s, e in ents if not (s < end and start < e)]
        out.append(sorted(kept, key=lambda x: (max(start - x[2], x[1] - end, 0), x[1])))
    return out


ENTITY_SEPARATOR = " ; "  # between the window and each entity on the query side


def query_windows(
    tokenizer: Any,
    contexts: Sequence[str],
    spans: Sequence[tuple[int, int]],
    markers: tuple[str, str],
    budget: int,
    entities: Sequence[Sequence[tuple[str, int, int]]] | None = None,
) -> list[QueryWindow]:
    """Marked queries cut to ``budget`` tokens around the marked mention (kept whole, centred),
    with the mention's token positions in the window.

    With ``entities`` (see :func:`query_entities`), the window takes what the entities leave
    of the budget, at least half of it, and is followed by each entity that it does not show,
    distinct (case-folded), nearest first, each after ``ENTITY_SEPARATOR``, as many as fit
    whole: the context's names a window of a few dozen tokens cuts off."""
    out: list[QueryWindow] = []
    tokenized = marked_tokens(tokenizer, contexts, spans, markers)
    sep = list(tokenizer(ENTITY_SEPARATOR, add_special_tokens=False)["input_ids"])
    names = sorted({t for ents in entities or [] for t, _, _ in ents})
    name_ids = (
        dict(zip(names, tokenizer(names, add_special_tokens=False)["input_ids"], strict=True))
        if names
        else {}
    )
    for n, ((start, end), (ids, offsets, first, last)) in enumerate(
        zip(spans, tokenized, strict=True)
    ):
        inner = (start + len(markers[0]), end + len(markers[0]))  # the mention's characters
        tokens = [i for i, (a, b) in enumerate(offsets) if b > inner[0] and a < inner[1]]
        ents = entities[n] if entities is not None else []
        extra: list[int] = []
        size = budget
        if ents:
            size = max(budget // 2, budget - sum(len(sep) + len(name_ids[t]) for t, _, _ in ents))
        lo, hi = centred_window(first, last, len(ids), size)
        if ents:
            # the window's characters in the unmarked context
            shift = len(markers[0]) + len(markers[1])
            a = offsets[lo][0] if lo < len(offsets) else 0
            b = offsets[hi - 1][1] if hi > lo else 0
            a = a if a <= start else a - shift
            b = b if b <= start else max(start, b - shift)
            shown = {t.casefold() for t, s, e in ents if a <= s and e <= b}
            seen: set[str] = set()
            for t, _, _ in ents:
                key = t.casefold()
                if key in shown or key in seen:
                    continue
                seen.add(key)
                piece = sep + list(name_ids[t])
                if (hi - lo) + len(extra) + len(piece) > budget:
                    break
                extra += piece
        inside = [i - lo for i in tokens if lo <= i < hi] or [max(0, first - lo)]
        out.append(QueryWindow(tuple(ids[lo:hi]) + tuple(extra), (inside[0], inside[-1])))
    return out


def query_spacy(params: Mapping[str, Any]) -> str | None:
    """The spaCy model whose entities extend the reader's query window (None: the window alone),
    from a reader's parameters (``vars`` of its training options, or as recorded: readers from
    before the option read the window alone)."""
    return str(params["spacy_model"]) if params.get("query_entities", False) else None


def topic_windows(
    tokenizer: Any,
    topics: Sequence[Any],
    markers: tuple[str, str],
    budget: int,
    spacy_model: str | None,
) -> list[QueryWindow]:
    """:func:`query_windows` of topics (``context`` and ``span``), with the entities of their
    contexts when ``spacy_model`` is given, without when it is None."""
    contexts = [t.context for t in topics]
    spans = [tuple(t.span) for t in topics]
    entities = query_entities(contexts, spans, spacy_model) if spacy_model else None
    return query_windows(tokenizer, contexts, spans, markers, budget, entities)


def passage_tokens(tokenizer: Any, texts: Sequence[str]) -> list[PassageTokens]:
    """Every token of each text (no truncation) with its character offsets."""
    if not texts:
        return []
    encoded = tokenizer(
        list(texts), add_special_tokens=False, return_offsets_mapping=True, truncation=False
    )
    return [
        PassageTokens(tuple(ids), tuple((int(a), int(b)) for a, b in offs))
        for ids, offs in zip(encoded["input_ids"], encoded["offset_mapping"], strict=True)
    ]


def window_starts(n_tokens: int, size: int, stride: int) -> list[int]:
    """First tokens of the windows over ``n_tokens`` tokens: 0, stride, 2 stride, ... until a
    window reaches the end."""
    starts = [0]
    while starts[-1] + size < n_tokens:
        starts.append(starts[-1] + stride)
    return starts


def char_to_tokens(
    offsets: Sequence[tuple[int, int]], start: int, end: int
) -> tuple[int, int] | None:
    """The first and last tokens covering characters ``[start, end)``; None when no token does."""
    first = next((i for i, (a, b) in enumerate(offsets) if b > start and b > a), None)
    if first is None:
        return None
    last = None
    for i in range(first, len(offsets)):
        a, b = offsets[i]
        if a >= end:
            break
        if b > a:
            last = i
    return None if last is None else (first, last)


def tokens_to_chars(offsets: Sequence[tuple[int, int]], first: int, last: int) -> tuple[int, int]:
    """The characters ``[start, end)`` that tokens ``first..last`` cover."""
    return offsets[first][0], offsets[last][1]


@dataclass(frozen=True)
class Item:
    """One reader input: a query window against one window of one unit."""

    ids: tuple[int, ...]
    types: tuple[int, ...]
    query_mention: tuple[int, int]  # sequence positions of the query mention
    passage_at: int  # sequence position of the window's first passage token
    window: int  # the unit token at passage_at
    n_passage: int  # passage tokens in this window


def item(lay: Layout, query: QueryWindow, passage: PassageTokens, start: int) -> Item:
    """The sequence of ``query`` against the window of ``passage`` that starts at ``start``."""
    window = passage.ids[start : start + lay.passage_budget]
    head = (*lay.prefix, *query.ids, *lay.middle)
    ids = (*head, *window, *lay.suffix)
    types = (0,) * len(head) + (lay.passage_type,) * (len(window) + len(lay.suffix))
    q0 = len(lay.prefix)
    return Item(
        ids,
        types,
        (q0 + query.mention[0], q0 + query.mention[1]),
        len(head),
        start,
        len(window),
    )


def items(lay: Layout, query: QueryWindow, passage: PassageTokens, stride: int) -> list[Item]:
    """Every window of ``passage`` against ``query``."""
    return [
        item(lay, query, passage, s)
        for s in window_starts(len(passage.ids), lay.passage_budget, stride)
    ]
