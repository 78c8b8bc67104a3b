"""Fast CPU inference: a model's transformer encoder with int8 linear layers (torch dynamic
quantization), made once and cached with the hash of the weights it was made from; and the one
place that picks the runtime a ``--precision`` runs on (:func:`fast_encoder`: ``int8`` here,
``onnx-int8`` on ONNX Runtime in ``retrieval/onnxrt.py``).

``--precision int8`` (``encode``, ``run dense``, ``run rerank``, the reader judge) replaces every
``nn.Linear`` of the encoder (attention projections, feed-forward layers: nearly all of its
arithmetic) by torch's dynamically quantized one: int8 weights per output channel, activations
quantized per batch at run time (fbgemm kernels). Embeddings, LayerNorm, the attention products,
pooling and the reader's heads stay fp32. ``fp32`` (the default) is torch as before. Because an
activation's scale is taken over its whole batch, an int8 score can move by a quantization step
with the sequences batched beside it; the same inputs and batch size give the same bytes on the
same CPU.

The int8 weights are kept in a cache folder (:func:`cache_folder`): beside the model, in
``MODEL/.cache/cmrkit-int8/`` (``.cache`` is never part of a model's identity), for model folders
of the user; under the cmrkit cache folder (``$CMRKIT_CACHE_DIR``, else
``$XDG_CACHE_HOME/cmrkit``) in ``int8/<tag>/`` for the packaged default model and the Hugging
Face cache. ``cmrkit-int8.json`` beside them records the sha256 of the model they were made
from, their own sha256, the recipe and the torch version. A cache made from other weights, or
whose file is not what was recorded, is made again with a note, never used silently (the checks
and the writing: ``retrieval/artifacts.py``, which ``onnxrt.py`` shares).

torch is imported inside the functions.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from cmrkit.errors import CmrkitError
from cmrkit.retrieval.artifacts import Artifact, Cached

PRECISIONS = ("fp32", "int8", "onnx-int8")
FORMAT = "cmrkit-int8/1"
WEIGHTS = "encoder.int8.pt"
RECORD = "cmrkit-int8.json"
BESIDE = Path(".cache") / "cmrkit-int8"
BESIDE_ONNX = Path(".cache") / "cmrkit-onnx-int8"
RECIPE = {
    "runtime": "torch dynamic quantization (torch.ao.quantization.quantize_dynamic)",
    "quantized": "every nn.Linear of the encoder: int8 weights per output channel, activations "
    "quantized per batch at run time",
    "fp32": "embeddings, LayerNorm, attention products, pooling, the reader's heads",
}

# the cached int8 weights: checked by their hashes (retrieval/artifacts.py); the recipe is
# recorded flat beside them (not under "recipe") and not checked
INT8 = Artifact(WEIGHTS, RECORD, FORMAT, cache="int8", noun="the int8 weights", plural=True)


def check_precision(precision: str, device: str = "cpu") -> None:
    """``fp32``, ``int8`` or ``onnx-int8``; int8 runs on the CPU only, onnx-int8 on ONNX
    Runtime (which must be installed), on the CPU."""
    if precision not in PRECISIONS:
        raise CmrkitError(f"--precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision != "fp32" and device == "cuda":
        kernels = "torch's int8 kernels" if precision == "int8" else "ONNX Runtime's CPU kernels"
        raise CmrkitError(
            f"--precision {precision} runs on the CPU ({kernels}); use --device cpu, or "
            "--precision fp32 on the GPU"
        )
    if precision == "onnx-int8":
        from cmrkit.retrieval.onnxrt import check_installed

        check_installed(precision)


def cache_folder(model_path: Path, source: str, tag: str, precision: str = "int8") -> Path:
    """Where the int8 weights (or the ONNX model) of a model are kept: beside a model folder
    of the user (``source`` ``local``), else under the cmrkit cache folder (the packaged model,
    the Hugging Face cache)."""
    from cmrkit.nercache import cache_root

    if source == "local":
        return Path(model_path) / (BESIDE if precision == "int8" else BESIDE_ONNX)
    root = cache_root()
    if root is None:
        made = "int8 weights" if precision == "int8" else "int8 ONNX model"
        raise CmrkitError(
            f"--precision {precision} keeps the {made} of this model in the cmrkit cache "
            "folder, which an empty $CMRKIT_CACHE_DIR turns off; set it to a folder"
        )
    return root / precision / tag


def fast_encoder(encoder: Any, precision: str, folder: Path, source_sha256: str) -> tuple[Any, Any]:
    """The one place that picks the runtime: ``encoder`` (a Hugging Face encoder, fp32, on the
    CPU) as it runs at ``precision`` (``int8``: torch's dynamically quantized linear layers;
    ``onnx-int8``: the int8 ONNX model on ONNX Runtime, ``retrieval/onnxrt.py``), and what it
    runs (``Int8Weights`` or ``onnxrt.OnnxModel``: ``precision``, ``record()``), made once into
    the cache ``folder`` from the weights of sha256 ``source_sha256``."""
    if precision == "int8":
        return quantize(encoder, folder, source_sha256)
    if precision == "onnx-int8":
        from cmrkit.retrieval import onnxrt

        return onnxrt.build(encoder, folder, source_sha256)
    raise ValueError(f"no fast runtime for precision {precision!r}")


@dataclass(frozen=True)
class Int8Weights(Cached):
    """The int8 weights in their cache folder, checked against the model they were made from."""

    precision: str = "int8"
    path_key: ClassVar[str] = "weights"

    def details(self) -> dict[str, Any]:
        import torch

        return {**RECIPE, "engine": torch.backends.quantized.engine}


def quantize(encoder: Any, folder: Path, source_sha256: str) -> tuple[Any, Int8Weights]:
    """``encoder`` (fp32, on the CPU) with int8 linear layers, and the cached weights it runs:
    read from the cache ``folder`` when they were made from ``source_sha256``, else made and
    cached first. ``encoder`` itself is left as it was."""
    import torch

    linear = [n for n, m in encoder.named_modules() if isinstance(m, torch.nn.Linear)]
    if not linear:
        raise CmrkitError(
            f"--precision int8 quantizes a transformer's linear layers and this model's encoder "
            f"({type(encoder).__name__}) has none; use --precision fp32"
        )
    if torch.backends.quantized.engine not in ("fbgemm", "x86", "qnnpack"):
        raise CmrkitError(
            f"--precision int8: this torch build has no int8 engine for this CPU (engine "
            f"{torch.backends.quantized.engine!r}); use --precision fp32"
        )
    model = _quantized(encoder)
    digest = INT8.cached(folder, source_sha256)
    if digest is not None:
        with warnings.catch_warnings():  # TypedStorage's deprecation, inside torch.load
            warnings.simplefilter("ignore")
            state = torch.load(folder / WEIGHTS, map_location="cpu", weights_only=True)
            model.load_state_dict(state)
        return model, Int8Weights(folder / WEIGHTS, digest, source_sha256)
    buffer = io.BytesIO()  # not a file name: torch names the archive after it
    torch.save(model.state_dict(), buffer)
    data = buffer.getvalue()
    fields = {**RECIPE, "torch": torch.__version__}
    digest = INT8.store(folder, source_sha256, lambda path: path.write_bytes(data), fields)
    return model, Int8Weights(folder / WEIGHTS, digest, source_sha256)


def _quantized(encoder: Any) -> Any:
    """A copy of ``encoder`` (eval mode) with each ``nn.Linear`` dynamically quantized."""
    import torch

    with warnings.catch_warnings():  # torch.ao.quantization announces its move to torchao
        warnings.simplefilter("ignore")
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        return quantize_dynamic(
            encoder.eval(),
            {torch.nn.Linear: per_channel_dynamic_qconfig},
            dtype=torch.qint8,
            inplace=False,
        )
