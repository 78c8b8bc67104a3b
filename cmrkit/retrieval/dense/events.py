"""EER's event strings: what a positive unit's mention says happened, in EER's prompt template.

``--event-term`` (spaCy): the unit's text is parsed once (the ``--spacy-model`` pipeline's
tagger and parser); the mention is the one of the query's cluster that the unit holds (the
first, as ``train reader`` takes it; a unit without one is read from its first sentence). Its
sentence gives the triple:

- the action: the mention's head when it is a verb, else its nearest verb ancestor (``the
  earthquake struck ...``: *struck*), else the head itself;
- the subject: the action's first ``nsubj``/``nsubjpass``/``csubj``/``csubjpass`` child;
- the object: its first ``dobj``/``obj``/``attr``/``oprd``/``dative`` child, else the object
  of its ``agent`` (a passive's *by* phrase), else of its first preposition;

each slot a word with its compound, flat, adjectival, numeric and possessive modifiers that
stand right before it (``Los Angeles``), or ``none``. The string is :data:`EVENT_TEMPLATE`
filled in: EER's prompt ("In [X], the subject is [MASK], the object is [MASK], the action is
[MASK]") in its order, [X] being what the event is of, here the mention itself (a unit holds
many events, and the mention names the one the cluster is about; the released code's Chinese
prompt, "the sentence's subject is [MASK], verb is [MASK], object is [MASK]", has no [X]).

``--event-decoder``: :class:`EventDecoder`, an encoder-decoder (transformers'
``EncoderDecoderModel``, BERT2BERT-style) whose encoder is the passage encoder itself and
whose decoder is a copy of it with cross-attention added, trained to write the spaCy string
from the mention's sentence; what it generates (greedy) is then the event string. It is not
part of the saved model.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cmrkit.errors import CmrkitError

EVENT_TEMPLATE = (
    "In {mention}, the subject is {subject}, the object is {object}, the action is {action}"
)
EMPTY = "none"
SUBJECTS = ("nsubj", "nsubjpass", "csubj", "csubjpass")
OBJECTS = ("dobj", "obj", "attr", "oprd", "dative")
MODIFIERS = ("compound", "flat", "amod", "nummod", "poss")
GENERATED_TOKENS = 32  # the decoder writes at most this many tokens
SENTENCE_TOKENS = 64  # the decoder reads at most this many tokens of the sentence
DECODER_EXTRA = "install the dense extra: pip install 'cmrkit[dense]'"


@dataclass(frozen=True)
class Event:
    """One positive's event: its mention, sentence and triple, and the filled template."""

    mention: str
    sentence: str
    subject: str
    object: str
    action: str

    @property
    def text(self) -> str:
        return EVENT_TEMPLATE.format(
            mention=self.mention, subject=self.subject, object=self.object, action=self.action
        )


def _phrase(token: Any) -> str:
    """A word with the modifiers standing right before it."""
    start = token.i
    for child in reversed(list(token.lefts)):
        if child.dep_ in MODIFIERS and child.i == start - 1:
            start = child.i
    return token.doc[start : token.i + 1].text


def _action(head: Any) -> Any:
    node = head
    while node.pos_ not in ("VERB", "AUX"):
        if node.head.i == node.i:  # the root (spaCy makes a new Token object at each access)
            return head
        node = node.head
    return node


def _slots(action: Any) -> tuple[str, str]:
    subject = next((c for c in action.children if c.dep_ in SUBJECTS), None)
    obj = next((c for c in action.children if c.dep_ in OBJECTS), None)
    for dep in ("agent", "prep"):
        if obj is not None:
            break
        for c in action.children:
            if c.dep_ == dep:
                obj = next((g for g in c.children if g.dep_ == "pobj"), None)
                if obj is not None:
                    break
    return (
        _phrase(subject) if subject is not None else EMPTY,
        _phrase(obj) if obj is not None else EMPTY,
    )


def load_parser(model: str) -> Any:
    """The spaCy pipeline that parses positives (its tagger and parser)."""
    import spacy

    try:
        return spacy.load(model, exclude=["ner", "lemmatizer"])
    except OSError:
        raise CmrkitError(
            f"spaCy model {model!r} is not installed; install it or name another with "
            "--spacy-model (the event term needs its parser)"
        ) from None


def parse_events(
    nlp: Any, texts: dict[str, str], wanted: Iterable[tuple[str, tuple[int, int] | None]]
) -> dict[tuple[str, tuple[int, int] | None], Event]:
    """The :class:`Event` of each ``(unit, mention span)`` wanted (span None: the unit's first
    sentence, its root the action), each unit parsed once."""
    wanted = sorted(set(wanted), key=lambda w: (w[0], w[1] or (-1, -1)))
    units = sorted({u for u, _ in wanted})
    docs = dict(zip(units, nlp.pipe([texts[u] for u in units], batch_size=16), strict=True))
    out = {}
    for unit, span in wanted:
        doc = docs[unit]
        mention = doc.char_span(*span, alignment_mode="expand") if span is not None else None
        if mention is None or len(mention) == 0:
            sentence = next(iter(doc.sents), doc[:])
            head = sentence.root
            name = head.text
        else:
            sentence = mention.sent
            head = mention.root
            name = mention.text
        action = _action(head)
        subject, obj = _slots(action)
        out[(unit, span)] = Event(name, sentence.text.strip(), subject, obj, _phrase(action))
    return out


def check_decoder_extra() -> None:
    """Refuse ``--event-decoder`` in one line where transformers' EncoderDecoderModel cannot
    be imported (the dense extra)."""
    try:
        from transformers import EncoderDecoderModel  # noqa: F401
    except ImportError:
        raise CmrkitError(
            f"--event-decoder needs transformers' EncoderDecoderModel, which is not installed; "
            f"{DECODER_EXTRA}"
        ) from None


class EventDecoder:
    """EER's generative decoder over the passage encoder ``passage`` (a sentence-transformers
    model whose first module is a Hugging Face transformer): an ``EncoderDecoderModel`` with
    that transformer as encoder and a causal-LM copy of it (cross-attention added, new weights
    seeded by torch's generator) as decoder."""

    def __init__(self, passage: Any) -> None:
        check_decoder_extra()
        from transformers import AutoModelForCausalLM, EncoderDecoderModel

        encoder = passage[0].auto_model
        config = encoder.config.__class__.from_dict(
            {**encoder.config.to_dict(), "is_decoder": True, "add_cross_attention": True}
        )
        try:
            decoder = AutoModelForCausalLM.from_config(config)
        except ValueError as e:
            raise CmrkitError(
                f"--event-decoder: this encoder ({config.model_type}) has no causal-LM form in "
                f"transformers to make the decoder from ({str(e).splitlines()[0]})"
            ) from None
        base = getattr(decoder, decoder.base_model_prefix)
        base.load_state_dict(encoder.state_dict(), strict=False)
        self.tokenizer = passage.tokenizer
        tok = self.tokenizer
        self.model = EncoderDecoderModel(encoder=encoder, decoder=decoder).to(encoder.device)
        cfg = self.model.config
        cfg.decoder_start_token_id = tok.cls_token_id
        cfg.pad_token_id = tok.pad_token_id
        cfg.eos_token_id = tok.sep_token_id
        self.model.generation_config.decoder_start_token_id = tok.cls_token_id
        self.model.generation_config.pad_token_id = tok.pad_token_id
        self.model.generation_config.eos_token_id = tok.sep_token_id

    @property
    def decoder(self) -> Any:
        """The decoder alone (what training adds to the optimizer and leaves out of the save)."""
        return self.model.decoder

    def _inputs(self, sentences: Sequence[str]) -> dict[str, Any]:
        enc = self.tokenizer(
            list(sentences),
            truncation=True,
            max_length=SENTENCE_TOKENS,
            padding=True,
            return_tensors="pt",
        )
        return {k: v.to(self.model.device) for k, v in enc.items() if k != "token_type_ids"}

    def loss(self, sentences: Sequence[str], targets: Sequence[str]) -> Any:
        """The generation loss: cross-entropy of writing each target from its sentence."""
        labels = self.tokenizer(
            list(targets),
            truncation=True,
            max_length=GENERATED_TOKENS,
            padding=True,
            return_tensors="pt",
        )
        ids = labels["input_ids"].masked_fill(labels["attention_mask"] == 0, -100)
        with warnings.catch_warnings():  # transformers' note on losses before its 4.12
            warnings.simplefilter("ignore", FutureWarning)
            return self.model(**self._inputs(sentences), labels=ids.to(self.model.device)).loss

    def generate(self, sentences: Sequence[str]) -> list[str]:
        """The event each sentence makes the decoder write (greedy), as text."""
        from cmrkit.retrieval.neural import inference

        with inference(self.model):
            out = self.model.generate(
                **self._inputs(sentences), max_new_tokens=GENERATED_TOKENS, do_sample=False
            )
        texts = self.tokenizer.batch_decode(out, skip_special_tokens=True)
        return [t.strip() or EMPTY for t in texts]
