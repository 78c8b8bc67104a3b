"""What a Lucene index and a dense encoding share: a folder inside the collection whose manifest
names its format, its index id and the sha256 of the corpus it was built from; whether it is
there, cmrkit's, and current (one check for both); and the corpus hash they are checked against.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmrkit.collection.layout import corpus_path
from cmrkit.fileio import sha256_file


@dataclass(frozen=True)
class StoredIndex:
    """An index (Lucene or dense) that matches its collection's corpus."""

    collection: Path
    path: Path
    manifest: dict[str, Any]
    up_to_date: bool = False  # found current with the settings asked for, and kept

    @property
    def index_id(self) -> str:
        return str(self.manifest["index_id"])

    @property
    def corpus_sha256(self) -> str:
        return str(self.manifest["corpus_sha256"])


_HASHED: dict[tuple[str, int, int, int, int], str] = {}


def corpus_sha256(coll: Path) -> str:
    """The sha256 of the collection's corpus, hashed once per process while the file stays the
    same one (inode, size, modification and change times to the nanosecond): a command that
    checks the index twice (`run` builds a missing index, then opens it) reads it once."""
    path = corpus_path(coll)
    st = path.stat()
    key = (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _HASHED:
        _HASHED.clear()
        _HASHED[key] = sha256_file(path)
    return _HASHED[key]


def forget_corpus_hashes() -> None:
    """Hash every corpus again on its next check, as a new process does (for benchmarks that
    time a command's whole work in one process)."""
    _HASHED.clear()


def read_manifest(path: Path, fmt: str | None = None) -> dict[str, Any] | None:
    """The JSON object at ``path`` (of format ``fmt`` when given); None when it is missing,
    unreadable, or another format."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or (fmt is not None and value.get("format") != fmt):
        return None
    return value


def state(coll: Path, target: Path, manifest: str, fmt: str) -> str:
    """``missing``, ``foreign`` (no readable manifest of format ``fmt``: not cmrkit's), ``stale``
    (built from another corpus) or ``current``."""
    if not target.exists():
        return "missing"
    found = read_manifest(target / manifest, fmt)
    if found is None:
        return "foreign"
    if found.get("corpus_sha256") != corpus_sha256(coll):
        return "stale"
    return "current"
