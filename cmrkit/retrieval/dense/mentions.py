"""A dense model as a mention encoder, for code that links or clusters mentions with it (the
graph partition of ``cmrkit cluster --method knn-graph``, arboEL's inference) rather than
retrieving units.

:meth:`MentionEncoder.load` resolves ``--model`` as ``run dense`` does (the packaged default, a
folder ``train dense`` wrote, the Hugging Face cache) and reads it with the markers and lengths
it was trained with; :meth:`MentionEncoder.mentions` encodes marked mentions in their context
with the query encoder (what ``train dense`` trains a query against), :meth:`MentionEncoder.texts`
encodes plain texts with the passage encoder (units, or entity texts such as a cluster's title:
what an arborescence's entity node is). Vectors are float32 rows in input order, the same for
the same inputs, batch size and device; :meth:`MentionEncoder.record` is what a result made
with them should record of the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cmrkit.retrieval.dense.models import Encoders, lengths, load_encoders, resolve_model
from cmrkit.retrieval.dense.options import DEFAULT_MODEL, DenseOptions


@dataclass
class MentionEncoder:
    """The loaded encoders of a dense model, with its markers and token limits."""

    encoders: Encoders
    markers: tuple[str, str]
    query_len: int
    passage_len: int
    batch_size: int

    @classmethod
    def load(
        cls,
        model: str = DEFAULT_MODEL,
        *,
        device: str = "auto",
        batch_size: int = 32,
        download: bool = False,
        precision: str = "fp32",
    ) -> MentionEncoder:
        """``model`` read with its training markers and lengths (the defaults otherwise)."""
        from cmrkit.retrieval.neural import quiet_hub

        quiet_hub()
        options = DenseOptions(
            model=model, device=device, batch_size=batch_size, download=download,
            precision=precision,
        )  # fmt: skip
        ref = resolve_model(model, download=download)
        query_len, passage_len = lengths(ref, options)
        encoders = load_encoders(ref, device, precision)
        return cls(encoders, ref.markers, query_len, passage_len, batch_size)

    def mentions(self, contexts: Sequence[str], spans: Sequence[tuple[int, int]]) -> Any:
        """The query encoder's vectors of mentions (``spans``: characters, end exclusive) in
        their ``contexts``, marked and windowed as ``run dense`` reads a query."""
        from cmrkit.retrieval.dense.encode import encode_ids, query_ids

        query = self.encoders.query
        tokens = query_ids(query.tokenizer, contexts, spans, self.markers, self.query_len)
        return encode_ids(query, tokens, batch_size=self.batch_size)

    def texts(self, texts: Sequence[str]) -> Any:
        """The passage encoder's vectors of plain texts (units, entity texts)."""
        from cmrkit.retrieval.dense.encode import encode_ids, passage_ids

        passage = self.encoders.passage
        tokens = passage_ids(passage.tokenizer, texts, self.passage_len)
        return encode_ids(passage, tokens, batch_size=self.batch_size)

    def record(self) -> dict[str, Any]:
        """The model's identity, training metadata, markers and lengths, for a sidecar."""
        ref = self.encoders.ref
        return {
            **ref.identity(),
            "tag": ref.tag,
            "trained": ref.metadata or None,
            "markers": list(self.markers),
            "query_max_length": self.query_len,
            "passage_max_length": self.passage_len,
            "device": self.encoders.device,
            **self.encoders.precision_record(),
        }
