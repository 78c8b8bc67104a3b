"""The cached int8 ONNX model (retrieval/onnxrt.py) on a real, tiny BERT encoder: a file damaged
in a way its record was made to match (the sha256 updated: the checks by hash pass) is not
loaded blindly; ONNX Runtime's refusal is a note and the model is made again."""

from __future__ import annotations

import hashlib
import json
import logging

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def encoder():
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=48,
        max_position_embeddings=32,
    )
    return BertModel(config).eval()


def _hidden(module):
    import torch

    ids = torch.tensor([[2, 5, 9, 3, 0], [2, 7, 3, 0, 0]])
    return module(input_ids=ids, attention_mask=(ids > 0).long()).last_hidden_state


def test_a_damaged_onnx_model_whose_record_matches_it_is_made_again_with_a_note(
    encoder, tmp_path, caplog
):
    from cmrkit.retrieval import onnxrt

    source = "ab" * 32
    folder = tmp_path / "onnx"
    first, made = onnxrt.build(encoder, folder, source)
    expected = _hidden(first).numpy().tobytes()
    record_path = folder / onnxrt.RECORD
    model = folder / onnxrt.MODEL
    # damaged, and the record made to match it (a copy gone wrong, a hand edit)
    model.write_bytes(b"\x08\x07" + b"not a protobuf" * 10)
    record = json.loads(record_path.read_text(encoding="utf-8"))
    record["sha256"] = hashlib.sha256(model.read_bytes()).hexdigest()
    record_path.write_text(json.dumps(record), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="cmrkit"):
        again, remade = onnxrt.build(encoder, folder, source)
    notes = [r.getMessage() for r in caplog.records]
    assert any(
        n.startswith(f"{model}: ONNX Runtime cannot read the cached ONNX model (")
        and n.endswith("making it again")
        for n in notes
    ), notes
    assert _hidden(again).numpy().tobytes() == expected
    assert remade.sha256 == hashlib.sha256(model.read_bytes()).hexdigest() == made.sha256
    assert json.loads(record_path.read_text(encoding="utf-8"))["sha256"] == made.sha256
