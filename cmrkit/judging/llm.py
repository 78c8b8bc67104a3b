"""The LLM judges: ``llm:URL`` (any OpenAI-compatible chat endpoint: vLLM, llama.cpp's server,
Ollama, a hosted API) and ``llm:local`` (the same prompt in-process, :mod:`.local`).

The endpoint is asked at temperature 0 with a seed, at most ``--concurrency`` requests at once,
each with ``--timeout`` seconds; a request that fails for a reason that may pass (no connection,
a timeout, HTTP 408, 429 or 5xx) is retried ``--retries`` times after 0.5, 1, 2, ... seconds.
Other refusals (401, 404, ...) are not retried. The reply's label is read by
:func:`prompt.parse_answer` (never guessed); its probability from the logprobs of the answer's
digit when the endpoint returns them (``logprobs``/``top_logprobs``; an endpoint that refuses
them is asked without). Token counts come from the reply's ``usage``.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.judging.cache import Entry, LabelCache
from cmrkit.judging.judges import Request
from cmrkit.judging.options import LlmOptions
from cmrkit.judging.pairs import Pair, PairTexts
from cmrkit.judging.prompt import (
    Prompt,
    load_prompt,
    openai_logprobs,
    parse_answer,
    relevant_probability,
)

MAX_TOKENS = 8  # a digit, or "Final score: 4"
TOP_LOGPROBS = 5
BACKOFF = 0.5  # seconds before the first retry; doubled for each next one
RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class EndpointDown(Exception):
    """The endpoint could not answer (after the retries)."""


def chat_url(url: str) -> str:
    """The chat-completions URL of an endpoint given as its base (``.../v1``) or in full."""
    url = url.rstrip("/")
    return url if url.endswith("/chat/completions") else url + "/chat/completions"


def pair_messages(prompt: Prompt, texts: PairTexts, pair: Pair) -> list[dict]:
    """The chat messages that ask an LLM judge about one pair (query, unit)."""
    t = texts.topics[pair[0]]
    return prompt.render(t.context, t.span, t.mention, texts.texts[pair[1]])


def label_of(entry: Entry) -> tuple[int, float | None] | None:
    """An LLM's cached answer as (label, probability); None when it gave no label."""
    return None if entry.label is None else (entry.label, entry.probability)


class EndpointJudge:
    """An OpenAI-compatible chat endpoint as a judge."""

    kind = "llm"

    def __init__(self, url: str, model: str, opts: LlmOptions):
        opts.check()
        self.url, self.model, self.opts = chat_url(url), model, opts
        self.key = None
        if opts.api_key_env:
            self.key = os.environ.get(opts.api_key_env)
            if not self.key:
                raise CmrkitError(
                    f"--api-key-env {opts.api_key_env}: that environment variable is not set "
                    "(or empty); export the endpoint's API key in it"
                )
        self.prompt = load_prompt(opts.prompt)
        self.prompt_sha256 = self.prompt.sha256
        self.identity: dict[str, Any] = {
            "kind": self.kind,
            "url": self.url,
            "model": model,
            "temperature": 0,
            "seed": opts.seed,
            "max_tokens": MAX_TOKENS,
        }
        self.logprobs = True

    def _body(self, messages: list[dict]) -> bytes:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "seed": self.opts.seed,
            "max_tokens": MAX_TOKENS,
        }
        if self.logprobs:
            body.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        return json.dumps(body, ensure_ascii=False).encode("utf-8")

    def _post(self, messages: list[dict]) -> dict[str, Any]:
        """One request: the reply, or EndpointDown (``retry`` says whether it may pass)."""
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        req = urllib.request.Request(self.url, self._body(messages), headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.opts.timeout) as resp:
                reply = json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            detail = e.read(300).decode("utf-8", "replace").strip().replace("\n", " ")
            if e.code == 400 and self.logprobs and "logprob" in detail.lower():
                self.logprobs = False  # an endpoint without logprobs: labels alone
                return self._post(messages)
            err = EndpointDown(f"refused the request (HTTP {e.code}: {detail[:120]})")
            err.retry = e.code in RETRY_STATUS  # type: ignore[attr-defined]
            raise err from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            reason = getattr(e, "reason", None) or e
            err = EndpointDown(f"is unreachable ({reason})")
            err.retry = True  # type: ignore[attr-defined]
            raise err from None
        except (ValueError, UnicodeDecodeError):
            err = EndpointDown("answered with something that is not JSON")
            err.retry = True  # type: ignore[attr-defined]
            raise err from None
        if not isinstance(reply, dict) or not reply.get("choices"):
            err = EndpointDown("answered without choices (not a chat-completions endpoint?)")
            err.retry = False  # type: ignore[attr-defined]
            raise err
        return reply

    def ask(self, messages: list[dict]) -> Entry:
        """The endpoint's answer to one prompt, with retries and backoff."""
        for attempt in range(self.opts.retries + 1):
            try:
                reply = self._post(messages)
                break
            except EndpointDown as e:
                if not getattr(e, "retry", False) or attempt == self.opts.retries:
                    tries = attempt + 1
                    raise EndpointDown(
                        f"{e} after {tries} tr{'y' if tries == 1 else 'ies'}"
                    ) from None
                time.sleep(BACKOFF * 2**attempt)
        choice = reply["choices"][0]
        content = (choice.get("message") or {}).get("content")
        usage = reply.get("usage") or {}
        label = parse_answer(content)
        probs = openai_logprobs(choice) if label is not None else None
        return Entry(
            label=label,
            probability=relevant_probability(probs),
            answer=content if isinstance(content, str) else json.dumps(content),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )

    def answer(self, request: Request) -> None:
        texts, cache, progress = request.texts, request.cache, request.progress
        todo = request.todo()
        if not todo:
            return
        order = {p: i for i, p in enumerate(todo)}
        pool = ThreadPoolExecutor(self.opts.concurrency, thread_name_prefix="cmrkit-llm")
        futures: dict[Future, Pair] = {}
        try:
            futures = {pool.submit(self.ask, pair_messages(self.prompt, texts, p)): p for p in todo}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
                for f in sorted(done, key=lambda f: order[futures[f]]):
                    if f.exception() is None:
                        cache.put([(texts.key(futures[f]), f.result())])
                        progress(1)
                failed = [f for f in done if f.exception() is not None]
                if failed:
                    raise self._down(failed[0].exception(), cache)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _down(self, e: BaseException | None, cache: LabelCache) -> CmrkitError:
        where = f" in the cache {cache.path}" if cache.path is not None else ""
        return CmrkitError(
            f"{self.url}: the endpoint {e}; the {cache.written} label(s) made are kept{where} "
            "(a rerun resumes); check the URL and that the server runs"
        )

    def label(self, entry: Entry) -> tuple[int, float | None] | None:
        return label_of(entry)

    def close(self) -> None:
        pass


def endpoint_judge(url: str, model: str, opts: LlmOptions) -> EndpointJudge:
    """``llm:URL --model NAME``."""
    return EndpointJudge(url, model, opts)
