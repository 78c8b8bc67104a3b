"""A model artifact derived from a model's weights (torch's int8 weights, ``quantized.py``; the
int8 ONNX model, ``onnxrt.py``), cached in a folder with a JSON record beside it and checked by
hashes before it is used.

The record (:attr:`Artifact.record`) names the artifact's format, the sha256 of the weights it
was made from (``source_sha256``), the artifact's own sha256, the recipe where one is checked,
and what the maker adds (library versions). A cache made from other weights, in another format
or with another recipe, or whose file is not what was recorded, is made again with a note
(:meth:`Artifact.cached`), never used silently. An artifact is written whole into a temporary
folder beside it and moved into place (mode 0644), and the record goes in last
(:meth:`Artifact.store`): a record names only an artifact that is whole.

What a run uses is a :class:`Cached` (``quantized.Int8Weights``, ``onnxrt.OnnxModel``): the
artifact's path and sha256, the weights' sha256, and what a run's sidecar records of them.

Nothing heavy is imported here: the makers (torch, ONNX Runtime) stay in their modules.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from cmrkit.fileio.inputs import sha256_file

log = logging.getLogger("cmrkit")


@dataclass(frozen=True)
class Cached:
    """A cached artifact as a run uses it, checked against the weights it was made from."""

    path: Path
    sha256: str
    source_sha256: str
    precision: str
    # the name a record gives the artifact's path ("weights", "model")
    path_key: ClassVar[str] = "path"

    def record(self) -> dict[str, Any]:
        """What a run's sidecar (or an encoding's manifest) records of it: the precision, the
        path, both hashes, then :meth:`details`."""
        return {
            "precision": self.precision,
            self.path_key: str(self.path),
            "sha256": self.sha256,
            "source_sha256": self.source_sha256,
            **self.details(),
        }

    def details(self) -> dict[str, Any]:
        """The recipe and the runtime, as the record ends."""
        return {}


@dataclass(frozen=True)
class Artifact:
    """One kind of cached artifact: its file and record names, its format, the words its notes
    use, and the recipe it is checked against (None: the record keeps no ``recipe`` to check)."""

    file: str  # the artifact's file name in the cache folder
    record: str  # the record's file name beside it
    format: str  # the record's "format"
    cache: str  # the cache's name in notes: "the {cache} cache has no readable ..."
    noun: str  # the artifact in notes: "the int8 weights", "the ONNX model"
    plural: bool = False  # whether ``noun`` is plural ("were ... making them again")
    recipe: dict[str, Any] | None = None

    def cached(self, folder: Path, source_sha256: str) -> str | None:
        """The sha256 of the artifact in ``folder`` when it was made from ``source_sha256``
        (with this recipe) and is what its record says; None otherwise, with a note saying why
        when there is a cache."""
        record_path, artifact = folder / self.record, folder / self.file
        if not record_path.exists() and not artifact.exists():
            return None
        it, was = ("them", "were") if self.plural else ("it", "was")
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = None
        if not isinstance(record, dict) or record.get("format") != self.format:
            unreadable = f"the {self.cache} cache has no readable {self.record}"
            log.warning(f"{folder}: {unreadable}; making it again")
            return None
        if record.get("source_sha256") != source_sha256:
            log.warning(
                f"{folder}: {self.noun} {was} made from other weights (sha256 "
                f"{str(record.get('source_sha256'))[:12]}..., the model is "
                f"{source_sha256[:12]}...); making {it} again"
            )
            return None
        if self.recipe is not None and record.get("recipe") != self.recipe:
            log.warning(f"{folder}: {self.noun} {was} made with another recipe; making {it} again")
            return None
        found = sha256_file(artifact) if artifact.is_file() else None
        if found != record.get("sha256"):
            differ = "differ" if self.plural else "differs"
            log.warning(
                f"{artifact}: {self.noun} {differ} from what was written; making {it} again"
            )
            return None
        return found

    def store(
        self,
        folder: Path,
        source_sha256: str,
        make: Callable[[Path], None],
        fields: dict[str, Any],
    ) -> str:
        """Make the artifact into ``folder`` and record it; its sha256. ``make(path)`` writes
        it at ``path``, in a temporary folder inside ``folder`` (it may write other files
        there: they are removed); the record holds the format, ``source_sha256``, the sha256,
        the recipe (when checked) and ``fields``."""
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder, prefix=".making-") as tmp:
            out = Path(tmp) / self.file
            make(out)
            digest = sha256_file(out)
            os.chmod(out, 0o644)
            os.replace(out, folder / self.file)
        recipe = {} if self.recipe is None else {"recipe": self.recipe}
        record = {
            "format": self.format,
            "source_sha256": source_sha256,
            **recipe,
            "sha256": digest,
            **fields,
        }
        # the record goes in last: a record names only an artifact that is whole
        text = json.dumps(record, indent=2, sort_keys=True) + "\n"
        (folder / self.record).write_text(text, "utf-8")
        return digest
