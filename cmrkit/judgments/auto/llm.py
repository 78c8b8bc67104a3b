"""The LLM judges: ``llm:URL`` (any OpenAI-compatible chat endpoint: vLLM, llama.cpp's server,
Ollama, a hosted API) and ``llm:local`` (the same prompt in-process, :mod:`.local`).

The endpoint is asked at temperature 0 with a seed, at most ``--concurrency`` requests at once,
each done within ``--timeout`` seconds (the whole exchange: connecting, the headers, the body;
:mod:`.fetch`), its reply read up to :data:`MAX_REPLY` bytes; a request that fails for a
reason that may pass (no connection, a timeout, HTTP 408, 429 or 5xx) is retried ``--retries``
times after 0.5, 1, 2, ... seconds.
Other refusals (401, 404, ...) are not retried. The reply's label is read by
:func:`prompt.parse_answer` (never guessed); its probability from the logprobs of the answer's
digit when the endpoint returns them (``logprobs``/``top_logprobs``; an endpoint that refuses
them is asked without: the switch is made once, by whichever request is refused first, and every
request refused for asking is asked again without). Token counts come from the reply's
``usage``. A reply is checked field by field (:mod:`.completion`): what is not an OpenAI chat
completion is one line saying what the endpoint sent.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.judgments.auto import fetch
from cmrkit.judgments.auto.cache import Entry, LabelCache
from cmrkit.judgments.auto.completion import NotCompletion, read_completion
from cmrkit.judgments.auto.judges import Request
from cmrkit.judgments.auto.options import LlmOptions
from cmrkit.judgments.auto.pairs import Pair, PairTexts
from cmrkit.judgments.auto.prompt import Prompt, load_prompt

MAX_TOKENS = 8  # a digit, or "Final score: 4"
TOP_LOGPROBS = 5
BACKOFF = 0.5  # seconds before the first retry; doubled for each next one
RETRY_STATUS = {408, 429, 500, 502, 503, 504}
MAX_REPLY = 256 * 1024  # bytes of a reply read at most (a judgment is a few hundred)
CHECK_SERVER = "check the URL and that the server runs"
NOT_CHAT = "check that the URL is an OpenAI-compatible chat-completions endpoint"


class EndpointDown(Exception):
    """The endpoint could not answer (after the retries); ``retry``: whether it may pass,
    ``hint``: what to check."""

    def __init__(self, text: str, *, retry: bool = False, hint: str = CHECK_SERVER):
        super().__init__(text)
        self.retry, self.hint = retry, hint


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

    def _body(self, messages: list[dict], logprobs: bool) -> bytes:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "seed": self.opts.seed,
            "max_tokens": MAX_TOKENS,
        }
        if logprobs:
            body.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        return json.dumps(body, ensure_ascii=False).encode("utf-8")

    def _post(self, messages: list[dict]) -> Entry:
        """One request: the answer, or EndpointDown (``retry`` says whether it may pass)."""
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        logprobs = self.logprobs  # what this request asks (another thread may switch it off)
        body = self._body(messages, logprobs)
        try:
            data = fetch.post(self.url, body, headers, self.opts.timeout, MAX_REPLY)
        except fetch.Refused as e:
            if e.status == 400 and logprobs and "logprob" in e.detail.lower():
                self.logprobs = False  # an endpoint without logprobs: labels alone
                return self._post(messages)
            raise EndpointDown(
                f"refused the request (HTTP {e.status}: {e.detail[:120]})",
                retry=e.status in RETRY_STATUS,
            ) from None
        except fetch.Timeout:
            raise EndpointDown(
                f"did not answer within --timeout {self.opts.timeout:g} s", retry=True
            ) from None
        except fetch.TooLarge:
            raise EndpointDown(
                f"sent a reply longer than {MAX_REPLY // 1024} KiB (cut there and not read "
                f"further; a judgment of at most {MAX_TOKENS} tokens is a few hundred bytes)",
                hint=NOT_CHAT,
            ) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
            reason = getattr(e, "reason", None) or e
            raise EndpointDown(f"is unreachable ({reason})", retry=True) from None
        try:
            return read_completion(data)
        except NotCompletion as e:
            raise EndpointDown(
                f"sent what is not an OpenAI chat completion: {e}", retry=e.retry, hint=NOT_CHAT
            ) from None

    def ask(self, messages: list[dict]) -> Entry:
        """The endpoint's answer to one prompt, with retries and backoff."""
        for attempt in range(self.opts.retries + 1):
            try:
                return self._post(messages)
            except EndpointDown as e:
                if not e.retry or attempt == self.opts.retries:
                    tries = attempt + 1
                    after = f" after {tries} tr{'y' if tries == 1 else 'ies'}" if e.retry else ""
                    raise EndpointDown(f"{e}{after}", retry=e.retry, hint=e.hint) from None
                time.sleep(BACKOFF * 2**attempt)
        raise AssertionError("unreachable")  # the loop returns or raises

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
                        cache.put([(request.key(futures[f]), f.result())])
                        progress(1)
                failed = [f for f in done if f.exception() is not None]
                if failed:
                    raise self._down(failed[0].exception(), cache)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _down(self, e: BaseException | None, cache: LabelCache) -> CmrkitError:
        where = f" in the cache {cache.path}" if cache.path is not None else ""
        hint = e.hint if isinstance(e, EndpointDown) else CHECK_SERVER
        return CmrkitError(
            f"{self.url}: the endpoint {e}; the {cache.written} label(s) made are kept{where} "
            f"(a rerun resumes); {hint}"
        )

    def label(self, entry: Entry) -> tuple[int, float | None] | None:
        return label_of(entry)

    def close(self) -> None:
        pass


def endpoint_judge(url: str, model: str, opts: LlmOptions) -> EndpointJudge:
    """``llm:URL --model NAME``."""
    return EndpointJudge(url, model, opts)
