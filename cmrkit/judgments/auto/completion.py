"""An OpenAI chat completion read from an endpoint's reply, checked field by field.

What is read: ``choices[0].message.content`` (a string, or null), the first digit token of
``choices[0].logprobs.content`` with its ``top_logprobs``, and ``usage``'s token counts. Each is
checked before use: a reply that is not JSON, JSON nested too deeply, ``choices`` that are not a
list of objects, a message that is not an object, content that is not a string (a list of
content parts included), token counts that are not counts, a logprob that is no number <= 0
(NaN, 1000) is :class:`NotCompletion`, saying what the endpoint sent. The label comes from
:func:`prompt.parse_answer` and its probability from the logprobs (:func:`prompt.openai_logprobs`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from cmrkit.judgments.auto.cache import Entry
from cmrkit.judgments.auto.prompt import openai_logprobs, parse_answer, relevant_probability

SHOWN = 60  # characters of a value shown in a message
LOGPROB_SLACK = 1e-3  # a logprob above 0 by float32 rounding is taken; above this it is not one


class NotCompletion(Exception):
    """What the endpoint sent is not an OpenAI chat completion (``str``: what is wrong);
    ``retry``: whether asking again may give a proper one (a reply cut in transit)."""

    def __init__(self, text: str, retry: bool = False):
        super().__init__(text)
        self.retry = retry


def shown(value: Any) -> str:
    """A value as a message shows it: its JSON (or repr), cut to :data:`SHOWN` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json(data: bytes) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NotCompletion(f"a reply that is not UTF-8 text (byte {e.start})") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise NotCompletion("JSON nested too deeply to be a chat completion") from None
    except ValueError:
        start = " ".join(text[:SHOWN].split())
        raise NotCompletion(
            f"a reply that is not JSON (it starts {start!r})" if start else "an empty reply",
            retry=True,
        ) from None


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise NotCompletion(f"{where} is {shown(value)}, not an object")
    return value


def _count(usage: dict[str, Any], name: str) -> int:
    value = usage.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise NotCompletion(f"usage.{name} is {shown(value)}, not a count of tokens")
    return value


def _logprob(value: Any, where: str) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or math.isnan(value) or value > LOGPROB_SLACK:
        raise NotCompletion(f"{where} is {shown(value)}, not a log-probability (a number <= 0)")


def _check_logprobs(choice: dict[str, Any]) -> None:
    """``choices[0].logprobs`` is null, or its ``content`` a list of tokens with logprobs."""
    where = "choices[0].logprobs"
    logprobs = choice.get("logprobs")
    if logprobs is None:
        return
    content = _object(logprobs, where).get("content")
    if content is None:
        return
    if not isinstance(content, list):
        raise NotCompletion(f"{where}.content is {shown(content)}, not a list of tokens")
    for i, entry in enumerate(content):
        at = f"{where}.content[{i}]"
        entry = _object(entry, at)
        if not isinstance(entry.get("token"), str):
            raise NotCompletion(f"{at}.token is {shown(entry.get('token'))}, not a string")
        _logprob(entry.get("logprob"), f"{at}.logprob")
        tops = entry.get("top_logprobs")
        if tops is None:
            continue
        if not isinstance(tops, list):
            raise NotCompletion(f"{at}.top_logprobs is {shown(tops)}, not a list")
        for j, top in enumerate(tops):
            top = _object(top, f"{at}.top_logprobs[{j}]")
            _logprob(top.get("logprob"), f"{at}.top_logprobs[{j}].logprob")


def read_completion(data: bytes) -> Entry:
    """The answer in a chat-completions reply (its body as bytes): the reply's content, its
    label (None: unparsed), P(relevant) from the logprobs when there are any, token counts."""
    reply = _object(_json(data), "the reply")
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices:
        what = "no choices" if choices is None else f"choices {shown(choices)}"
        raise NotCompletion(f"{what}, not a list of choices")
    choice = _object(choices[0], "choices[0]")
    message = _object(choice.get("message"), "choices[0].message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        kind = "a list (content parts)" if isinstance(content, list) else shown(content)
        raise NotCompletion(f"choices[0].message.content is {kind}, not a string")
    usage = reply.get("usage")
    usage = {} if usage is None else _object(usage, "usage")
    prompt_tokens, completion_tokens = (
        _count(usage, "prompt_tokens"),
        _count(usage, "completion_tokens"),
    )
    _check_logprobs(choice)
    label = parse_answer(content)
    probs = openai_logprobs(choice) if label is not None else None
    return Entry(
        label=label,
        probability=relevant_probability(probs),
        answer=content if content is not None else "null",
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )
