"""The LLM judges' prompt: a versioned template file, its messages filled with the pair as data,
and the reply read back as a Likert label (and a probability from the digits' logprobs).

The shipped template is ``cmrkit/data/judging/coref-v1.prompt`` (UMBRELA's structure, Upadhyay
et al. 2024, rewritten for coreference: is the marked mention the same event or entity as one
the passage mentions?); ``--prompt FILE`` replaces it. A template is a ``### system`` section
and a ``### user`` section (each a chat message; lines before the first section are ignored)
with the placeholders ``{{QUERY}}`` (the context, the mention between ``<m>`` and ``</m>``),
``{{MENTION}}`` and ``{{PASSAGE}}``. The sections are split before anything is filled, and each
value is put in as a JSON string (quotes, backslashes and line breaks escaped) in a single pass
(:func:`cmrkit.escaping.fill`): a unit's text can neither end its string, nor start a message,
nor be read as a placeholder, whatever it says. The prompt's identity is the sha256 of the
template file.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.escaping import fill

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "judging" / "coref-v1.prompt"
ROLES = ("system", "user")
PLACEHOLDERS = ("QUERY", "MENTION", "PASSAGE")
MARK = ("<m>", "</m>")
DIGITS = "12345"
_SECTION = re.compile(r"^### (system|user)[ \t]*$", re.MULTILINE)
# a reply that starts with its score: "4", "4.", "4 - likely", "Final score: 4", "##final score:
# 4", "4/5", "The score is 4", "The final score is: 4"; not "45", "4.5" or "4,5" (which score?)
_ANSWER = re.compile(
    r"\s*(?:#+\s*)?(?:(?:the\s+)?(?:final\s+)?score(?:\s+is)?\s*[:=]?\s*)?([1-5])(?![0-9]|[.,][0-9])",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Prompt:
    """A prompt template: its messages (role, text with placeholders), path and sha256."""

    messages: tuple[tuple[str, str], ...]
    path: str
    sha256: str

    def render(self, context: str, span: tuple[int, int], mention: str, unit: str) -> list[dict]:
        """The chat messages for one pair, the pair's texts as JSON strings."""
        s, e = span
        marked = context[:s] + MARK[0] + context[s:e] + MARK[1] + context[e:]
        values = {
            "QUERY": json.dumps(marked, ensure_ascii=False),
            "MENTION": json.dumps(mention, ensure_ascii=False),
            "PASSAGE": json.dumps(unit, ensure_ascii=False),
        }
        return [{"role": r, "content": fill(text, values)} for r, text in self.messages]

    def prefix(self) -> list[dict]:
        """The messages up to the first placeholder (what every pair's prompt starts with)."""
        out: list[dict] = []
        for role, text in self.messages:
            at = text.find("{{")
            if at >= 0:
                out.append({"role": role, "content": text[:at]})
                break
            out.append({"role": role, "content": text})
        return out


def load_prompt(path: str | os.PathLike | None = None) -> Prompt:
    """The template at ``path`` (None: the shipped one), checked: its sections and its
    placeholders, each used at least once."""
    p = Path(path) if path is not None else SHIPPED
    try:
        data = p.read_bytes()
    except OSError as e:
        raise CmrkitError(f"cannot read the prompt template ({e.strerror})", path=p) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CmrkitError("the prompt template is not UTF-8 text", path=p) from None
    found = list(_SECTION.finditer(text))
    if not found or [m[1] for m in found] not in (["user"], ["system", "user"]):
        raise CmrkitError(
            "a prompt template needs a '### user' section (after an optional '### system' one), "
            "each on its own line, then the message's text",
            path=p,
        )
    messages = []
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        messages.append((m[1], text[m.end() : end].strip("\n")))
    body = "".join(t for _, t in messages)
    used = set(re.findall(r"\{\{([A-Z][A-Z0-9_]*)\}\}", body))
    if not set(PLACEHOLDERS) <= used or not used <= set(PLACEHOLDERS):
        missing = sorted(set(PLACEHOLDERS) - used)
        unknown = sorted(used - set(PLACEHOLDERS))
        what = f"lacks {', '.join(missing)}" if missing else f"has unknown {', '.join(unknown)}"
        raise CmrkitError(
            f"the prompt template {what}; use the placeholders "
            + ", ".join("{{" + n + "}}" for n in PLACEHOLDERS),
            path=p,
        )
    return Prompt(tuple(messages), str(p), hashlib.sha256(data).hexdigest())


def parse_answer(text: str | None) -> int | None:
    """The Likert label of a reply that starts with it (``4``, ``4.``, ``4 - likely``, ``Final
    score: 4``, ``##final score: 4``, ``4/5``, ``The score is 4.``, SmolLM2's usual reply);
    None for anything else (``45``, ``4.5``, ``I think 4``): never guessed."""
    if text is None:
        return None
    m = _ANSWER.match(text)
    return int(m[1]) if m else None


def digit_probabilities(candidates: Iterable[tuple[str, float]]) -> dict[int, float] | None:
    """P(label) over 1..5 from (token, logprob) alternatives of the answer's token: tokens that
    are a digit 1..5 (spaces around ignored) summed per digit, renormalised over the digits."""
    mass = dict.fromkeys(range(1, 6), 0.0)
    for token, logprob in candidates:
        t = token.strip()
        if len(t) == 1 and t in DIGITS and math.isfinite(logprob):
            mass[int(t)] += math.exp(logprob)
    total = sum(mass.values())
    if total <= 0:
        return None
    return {d: v / total for d, v in mass.items()}


def relevant_probability(probs: Mapping[int, float] | None) -> float | None:
    """P(relevant) = P(4) + P(5) (kept in 0..1 where rounding would step past 1)."""
    return None if probs is None else min(1.0, max(0.0, probs[4] + probs[5]))


def openai_logprobs(choice: Mapping[str, Any]) -> dict[int, float] | None:
    """The digits' probabilities of an OpenAI-style chat choice: ``logprobs.content``'s first
    token that is a digit 1..5, with its ``top_logprobs``; None when there are none."""
    content = ((choice.get("logprobs") or {}).get("content")) or []
    for entry in content:
        if not isinstance(entry, dict):
            return None
        token = str(entry.get("token", "")).strip()
        if len(token) != 1 or token not in DIGITS:
            continue
        tops = entry.get("top_logprobs") or [
            {"token": entry.get("token"), "logprob": entry.get("logprob")}
        ]
        pairs = [
            (str(t.get("token", "")), float(t.get("logprob", -math.inf)))
            for t in tops
            if isinstance(t, dict) and isinstance(t.get("logprob"), int | float)
        ]
        return digit_probabilities(pairs)
    return None
