"""Fast CPU inference on ONNX Runtime: a model's transformer encoder exported to ONNX, its
linear layers quantized to int8, made once and cached with the hash of the weights it was made
from.

``--precision onnx-int8`` (``encode``, ``run dense``, ``run rerank``, the reader judge) exports
the encoder with ``torch.onnx.export`` (the TorchScript exporter, batch and sequence axes
dynamic), quantizes it with ``onnxruntime.quantization.quantize_dynamic`` (:data:`RECIPE`) and
runs it in an ONNX Runtime session on the CPU: one batch in, ``last_hidden_state`` out as a
torch tensor, so pooling (sentence-transformers) and the reader's heads run in torch as before.
The session is deterministic on one CPU: a fixed number of threads (torch's,
``torch.get_num_threads()``, which ``OMP_NUM_THREADS`` sets), sequential execution and
deterministic kernels; as with torch's int8, activations are quantized per batch, so the same
inputs and batch size give the same bytes.

The ONNX file is kept where :func:`quantized.cache_folder` says (``MODEL/.cache/cmrkit-onnx-int8/``
beside a model folder of the user; ``onnx-int8/<tag>/`` under the cmrkit cache folder for the
packaged model and the Hugging Face cache). ``cmrkit-onnx.json`` beside it records the sha256 of
the model it was made from, its own sha256, the recipe and the versions; a file made from other
weights or with another recipe, that is not what was recorded, or that ONNX Runtime cannot load
(a damaged file whose record was made to match it), is made again with a note, never used
silently (the checks and the writing: ``retrieval/artifacts.py``).

onnxruntime and onnx come with the ``dense`` extra; torch, onnx and onnxruntime are imported
inside the functions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from cmrkit.errors import CmrkitError
from cmrkit.retrieval.artifacts import Artifact, Cached

log = logging.getLogger("cmrkit")

FORMAT = "cmrkit-onnx/1"
MODEL = "encoder.onnx"
RECORD = "cmrkit-onnx.json"
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "last_hidden_state"
EXTRA = "pip install 'cmrkit[dense]'"
RECIPE = {
    "runtime": "ONNX Runtime (CPUExecutionProvider)",
    "export": f"torch.onnx.export (TorchScript exporter), opset {OPSET}, dynamic batch and "
    "sequence axes",
    "quantization": "onnxruntime.quantization.quantize_dynamic: every MatMul with constant "
    "weights (the linear layers) int8 per output channel, activations uint8 per batch at run "
    "time",
    "fp32": "embeddings, LayerNorm, attention products, pooling, the reader's heads",
}
# the quantize_dynamic arguments the recipe above names (chosen by RR@10: docs/benchmarks.md)
QUANTIZE: dict[str, Any] = {"per_channel": True, "reduce_range": False}

# the cached ONNX model: checked by its hashes and recipe (retrieval/artifacts.py)
ONNX = Artifact(MODEL, RECORD, FORMAT, cache="ONNX", noun="the ONNX model", recipe=RECIPE)


def check_installed(precision: str) -> None:
    """Refuse ``precision`` (an ONNX Runtime one) when onnxruntime or onnx is missing."""
    import importlib.util

    for package in ("onnxruntime", "onnx"):
        if importlib.util.find_spec(package) is None:
            raise CmrkitError(
                f"--precision {precision} runs on ONNX Runtime and needs {package}, which is not "
                f"installed: {EXTRA}"
            )


@dataclass(frozen=True)
class OnnxModel(Cached):
    """The exported, quantized encoder in its cache folder, checked against the model it was
    made from."""

    precision: str = "onnx-int8"
    path_key: ClassVar[str] = "model"

    def details(self) -> dict[str, Any]:
        import onnxruntime

        return {**RECIPE, "onnxruntime": onnxruntime.__version__, "threads": threads()}


def threads() -> int:
    """The session's intra-op threads: torch's (so ``OMP_NUM_THREADS`` sets both)."""
    import torch

    return int(torch.get_num_threads())


def build(encoder: Any, folder: Path, source_sha256: str) -> tuple[Any, OnnxModel]:
    """``encoder`` (a Hugging Face encoder, fp32, on the CPU) as a torch module that runs the
    cached int8 ONNX model on ONNX Runtime, and that model: read from the cache ``folder`` when
    it was made from ``source_sha256`` (with this recipe), else exported, quantized and cached
    first. ``encoder`` itself is left as it was."""
    check_installed("onnx-int8")
    path = folder / MODEL
    digest = ONNX.cached(folder, source_sha256)
    if digest is not None:
        try:
            return wrap(path, encoder), OnnxModel(path, digest, source_sha256)
        except _Unreadable as e:  # a record that matches a damaged file: made again
            log.warning(f"{path}: ONNX Runtime cannot read the cached ONNX model ({e}); "
                        "making it again")  # fmt: skip
    digest = _make(encoder, folder, source_sha256)
    try:
        return wrap(path, encoder), OnnxModel(path, digest, source_sha256)
    except _Unreadable as e:
        raise CmrkitError(
            f"ONNX Runtime cannot read the ONNX model just made ({e}); use --precision int8 or "
            "fp32",
            path=path,
        ) from None


class _Unreadable(Exception):
    """ONNX Runtime refused to load a model file (its reason, in one line)."""


def _make(encoder: Any, folder: Path, source_sha256: str) -> str:
    """Export and quantize ``encoder`` into the cache ``folder``; the model's sha256."""
    import onnx
    import onnxruntime
    import torch

    def make(out: Path) -> None:
        fp32 = out.parent / "fp32.onnx"
        export(encoder, fp32)
        quantize(fp32, out, **QUANTIZE)

    fields = {
        "torch": torch.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "opset": OPSET,
    }
    return ONNX.store(folder, source_sha256, make, fields)


def input_names(encoder: Any) -> list[str]:
    """The inputs the encoder's forward takes, of ``input_ids``, ``attention_mask`` and
    ``token_type_ids``."""
    import inspect

    params = inspect.signature(encoder.forward).parameters
    return [n for n in INPUTS if n in params]


def export(encoder: Any, path: Path) -> None:
    """``encoder``'s forward (``last_hidden_state`` only) as an fp32 ONNX file at ``path``."""
    import warnings

    import torch

    names = input_names(encoder)
    if "input_ids" not in names or "attention_mask" not in names:
        raise CmrkitError(
            f"--precision onnx-int8 exports a transformer encoder taking input_ids and "
            f"attention_mask, and {type(encoder).__name__} does not; use --precision fp32"
        )

    class Hidden(torch.nn.Module):
        def __init__(self, inner: Any):
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(names, args, strict=True))).last_hidden_state

    dummy = tuple(torch.ones((2, 8), dtype=torch.long) for _ in names)
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes[OUTPUT] = {0: "batch", 1: "sequence"}
    attention = getattr(encoder.config, "_attn_implementation", None)
    was_training = encoder.training
    encoder.eval()
    try:
        if attention not in (None, "eager"):  # sdpa's mask code does not trace; eager does
            encoder.config._attn_implementation = "eager"
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's tracer warnings
            torch.onnx.export(
                Hidden(encoder),
                dummy,
                str(path),
                input_names=names,
                output_names=[OUTPUT],
                dynamic_axes=axes,
                opset_version=OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
    except CmrkitError:
        raise
    except Exception as e:  # the exporter fails in many ways on models it cannot trace
        raise CmrkitError(
            f"--precision onnx-int8 cannot export this encoder ({type(encoder).__name__}) to "
            f"ONNX ({str(e).splitlines()[0] if str(e) else type(e).__name__}); use --precision "
            "int8 or fp32"
        ) from None
    finally:
        if attention not in (None, "eager"):
            encoder.config._attn_implementation = attention
        encoder.train(was_training)


def quantize(source: Path, target: Path, *, per_channel: bool, reduce_range: bool) -> None:
    """The MatMuls of ``source`` with constant weights (the linear layers) dynamically quantized
    to int8 into ``target``."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    root.addFilter(_no_advice)
    try:
        quantize_dynamic(
            str(source),
            str(target),
            op_types_to_quantize=["MatMul"],
            per_channel=per_channel,
            reduce_range=reduce_range,
            weight_type=QuantType.QInt8,
            extra_options={"MatMulConstBOnly": True},
        )
    finally:
        root.removeFilter(_no_advice)


def _no_advice(record: logging.LogRecord) -> bool:
    # the quantizer advises its pre-processing on the root logger at every call
    return "pre-processing before quantization" not in record.getMessage()


def session(path: Path) -> Any:
    """A deterministic ONNX Runtime session of ``path`` on the CPU; a file it cannot load
    (not a protobuf, a broken graph) is :class:`_Unreadable`."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.use_deterministic_compute = True
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime's InvalidProtobuf, InvalidGraph, Fail, NoSuchFile ...
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise _Unreadable(f"{type(e).__name__}: {first[:160]}") from None


def wrap(path: Path, encoder: Any) -> Any:
    """A torch module standing in for ``encoder``: the same keyword inputs, the ONNX model run
    on ONNX Runtime, a ``BaseModelOutput`` with ``last_hidden_state`` (a CPU float tensor)."""
    import numpy as np
    import torch
    from transformers.modeling_outputs import BaseModelOutput

    sess = session(path)
    wanted = [i.name for i in sess.get_inputs()]

    class OnnxEncoder(torch.nn.Module):
        """The encoder on ONNX Runtime (``retrieval/onnxrt.py``)."""

        def __init__(self) -> None:
            super().__init__()
            self.config = encoder.config
            self.session = sess
            # a (empty) parameter, so callers that ask a module for its device find one
            self.anchor = torch.nn.Parameter(torch.zeros(0), requires_grad=False)

        def forward(self, input_ids: Any, attention_mask: Any = None, **more: Any) -> Any:
            given = {"input_ids": input_ids, "attention_mask": attention_mask, **more}
            feed = {}
            for name in wanted:
                value = given.get(name)
                if value is None:
                    value = (
                        torch.ones_like(input_ids)
                        if name == "attention_mask"
                        else torch.zeros_like(input_ids)
                    )
                feed[name] = np.ascontiguousarray(value.detach().cpu().numpy(), dtype=np.int64)
            (hidden,) = self.session.run([OUTPUT], feed)
            return BaseModelOutput(last_hidden_state=torch.from_numpy(hidden))

    return OnnxEncoder().eval()
