"""Text as assessors read it: detokenised, and cut to a window around what matters.

Annotated contexts are often tokens joined by spaces (WEC-Eng, ECB+: "Tuesday , July 2nd",
"`` quoted ''"); :func:`detokenize` joins them back for reading and moves the highlighted spans
with the text. :func:`window` picks the part of a long unit to show first (whole sentences
around a focus span, the rest folded); :class:`Prepared` picks that focus from what every
candidate has alike (the sentence sharing most words with the query mention) unless its marked
spans give it, so in blind tasks the window never depends on whether a candidate was annotated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

Span = tuple[int, int]

_TOKEN = re.compile(r"\S+")
# tokens glued to the token before them ("word ," -> "word,"; "do n't" -> "don't")
_NO_SPACE_BEFORE = re.compile(
    r"^(?:[,.;:!?%)\]}]+|'(?:s|re|ve|d|ll|m|S|RE|VE|D|LL|M)|n't|N'T|''|'|\.\.\.)$"
)
# tokens glued to the token after them ("( a" -> "(a"; "$ 5" -> "$5")
_NO_SPACE_AFTER = re.compile(r"^(?:[(\[{$#]|``)$")
_REPLACE = {"``": "\u201c", "''": "\u201d", "-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]"}
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"\u201d')\]]*\s+(?=[\"\u201c'(\[]?[A-Z0-9])")
_WORD = re.compile(r"\w+")
_STOP = frozenset(
    "a an and are as at be been but by for from had has have he her his in is it its of on or "
    "she that the their them they this to was were which who will with".split()
)


@dataclass
class Shown:
    """A text with spans to mark, and the window ``[start, end)`` shown before unfolding."""

    text: str
    spans: list[Span] = field(default_factory=list)
    window: Span | None = None


def detokenize(text: str, spans: list[Span] = ()) -> tuple[str, list[Span]]:
    """Space-separated tokens joined as written text, and ``spans`` moved with their characters
    (one for one; a span of whitespace only becomes empty).

    Plain text passes unchanged apart from runs of whitespace becoming one space."""
    out: list[str] = []
    pos = [0] * (len(text) + 1)
    length = 0
    prev_glues_next = True
    quote_open = False
    at = 0
    for m in _TOKEN.finditer(text):
        s, e = m.span()
        tok = m.group()
        if tok == '"' and s > 0 and e < len(text) and text[s - 1] == " " and text[e] == " ":
            # a straight quote standing alone: alternately opens and closes
            glue_before, glue_after = quote_open, not quote_open
            quote_open = not quote_open
        else:
            glue_before = bool(_NO_SPACE_BEFORE.match(tok))
            glue_after = bool(_NO_SPACE_AFTER.match(tok))
        space = bool(out) and s > at and not glue_before and not prev_glues_next
        for i in range(at, s):
            pos[i] = length
        if space:
            out.append(" ")
            length += 1
        new = _REPLACE.get(tok, tok)
        for k in range(e - s):
            pos[s + k] = length + min(k, len(new))
        out.append(new)
        length += len(new)
        prev_glues_next = glue_after
        at = e
    for i in range(at, len(text) + 1):
        pos[i] = length
    return "".join(out), [(pos[s], pos[e]) for s, e in spans]


def sentences(text: str) -> list[Span]:
    """Sentence spans of written text (a punctuation rule: enough to cut a window)."""
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        spans.append((start, m.start() + len(m.group().rstrip())))
        start = m.end()
    if start < len(text) or not spans:
        spans.append((start, len(text)))
    return spans


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP}


class Prepared:
    """A unit's text detokenised once, with its marked spans, sentences and their words, ready
    to be shown around any query's mention."""

    def __init__(self, text: str, spans: list[Span] = ()):
        self.text, moved = detokenize(text, list(spans))
        self.spans = [(s, e) for s, e in moved if e > s]
        self.sentences = sentences(self.text)
        self._words: list[set[str]] | None = None

    def focus_for(self, mention: str) -> Span | None:
        """The first sentence sharing the most words with the query ``mention``, or None when
        none shares any."""
        if self._words is None:
            self._words = [_words(self.text[s:e]) for s, e in self.sentences]
        wanted = _words(mention)
        best, best_score = None, 0
        for span, words in zip(self.sentences, self._words, strict=True):
            score = len(wanted & words)
            if score > best_score:
                best, best_score = span, score
        return best

    def shown(self, mention: str, max_chars: int = 600) -> Shown:
        """The text, its marked spans, and the window around the first span, or else around the
        sentence that shares most words with the query ``mention``."""
        focus = self.spans[0] if self.spans else self.focus_for(mention)
        return Shown(self.text, self.spans, window(self.text, focus, max_chars, self.sentences))


def window(
    text: str, focus: Span | None, max_chars: int = 600, sents: list[Span] | None = None
) -> Span:
    """The part of ``text`` to show first: the focus sentence with its neighbours while they fit
    in ``max_chars`` (from the start when there is no focus); a longer sentence is cut at words
    around the focus. ``sents`` are the text's sentences when already known."""
    if len(text) <= max_chars:
        return (0, len(text))
    sents = sents if sents is not None else sentences(text)
    at = focus[0] if focus else 0
    i = next((k for k, (s, e) in enumerate(sents) if s <= at < e or at < s), len(sents) - 1)
    start, end = sents[i]
    if end - start > max_chars:
        f0 = max(at, start)
        start = max(start, f0 - max_chars // 3)
        end = min(end, start + max_chars)
        if start > 0:
            space = text.find(" ", start)
            start = space + 1 if 0 <= space < f0 else start
        if end < len(text):
            space = text.rfind(" ", start, end)
            end = space if space > max(f0, start) else end
        return (start, end)
    lo, hi = i, i
    while True:
        grown = False
        if hi + 1 < len(sents) and sents[hi + 1][1] - start <= max_chars:
            hi += 1
            end = sents[hi][1]
            grown = True
        if lo > 0 and end - sents[lo - 1][0] <= max_chars:
            lo -= 1
            start = sents[lo][0]
            grown = True
        if not grown:
            return (start, end)
