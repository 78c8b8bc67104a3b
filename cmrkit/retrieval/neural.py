"""What the neural parts (``dense/`` and ``reader/``) share to run a model: the device, quiet
Hugging Face libraries, a model folder's identity (the sha256 of its files), the batch order,
eval mode under ``torch.inference_mode``, and the library versions a run records.

torch is imported inside the functions that need it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from cmrkit._version import __version__
from cmrkit.errors import CmrkitError

# files that do not change what a model computes (``.cache`` folders neither: see fingerprint)
NOT_HASHED = {"README.md", ".gitattributes", "cmrkit-train.json", "loss.png"}
_fingerprints: dict[str, str] = {}  # by the files' names, sizes and times: hashed once a run


def fingerprint(path: Path) -> str:
    """sha256 over the relative names and contents of a model folder's files (not those in
    ``NOT_HASHED``, nor anything under a ``.cache`` folder, where derived files such as a
    quantized copy are kept)."""
    path = Path(path)
    files = sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and p.name not in NOT_HASHED and ".cache" not in p.parts
    )
    stats = hashlib.sha256()
    for p in files:
        st = p.stat()
        stats.update(f"{p.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    key = stats.hexdigest()
    if key in _fingerprints:
        return _fingerprints[key]
    total = hashlib.sha256()
    for p in files:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        total.update(f"{p.relative_to(path).as_posix()}\0{h.hexdigest()}\n".encode())
    digest = total.hexdigest()
    _fingerprints[key] = digest
    return digest


def resolve_device(device: str) -> str:
    """``cpu`` or ``cuda``; ``auto`` picks cuda when a GPU is visible."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise CmrkitError("--device cuda: no CUDA GPU is visible to torch; use --device cpu")
    return device


def quiet_hub() -> None:
    """No progress bars or warnings from the Hugging Face libraries on stderr (set before they
    are imported)."""
    import os

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def quiet_transformers(*loggers: str) -> None:
    """transformers' (and ``loggers``') warnings and progress bars off, once it is imported."""
    import logging

    from transformers.utils import logging as transformers_logging

    for name in ("transformers", *loggers):
        logging.getLogger(name).setLevel(logging.ERROR)
    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()  # "Loading weights", "Writing model shards"


def longest_first(lengths: Sequence[int]) -> np.ndarray:
    """Positions ordered by length, longest first, ties by position (batches pad little)."""
    n = len(lengths)
    return np.lexsort((np.arange(n), -np.fromiter(lengths, dtype=np.int64, count=n)))


@contextmanager
def inference(model: Any) -> Iterator[None]:
    """``model`` in eval mode under ``torch.inference_mode``; its training mode comes back
    after."""
    import torch

    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)


def versions() -> dict[str, str]:
    """The versions of cmrkit and the libraries that compute a neural run."""
    from importlib.metadata import PackageNotFoundError, version

    found = {"cmrkit": __version__}
    for package in ("torch", "transformers", "sentence-transformers", "numpy"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    return found
