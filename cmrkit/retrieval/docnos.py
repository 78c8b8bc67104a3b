"""The table from Lucene doc numbers to unit ids, built once per index and kept beside it.

Searches return Lucene doc numbers; the table turns them into unit ids without loading any
stored record. It lives in the index folder as ``cmrkit-docnos.txt``: a header line
``cmrkit-docnos/1 INDEX_ID COMMIT_ID N SHA256`` (cmrkit's index id, the id of the Lucene commit
the doc numbers belong to, the number of documents, the sha256 of the rest of the file), then the
N ids, one a line, in doc-number order. A table whose header does not match the index it sits
beside, or whose ids do not match their checksum, is rebuilt from the index (seconds per million
units), never trusted.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

TABLE = "cmrkit-docnos.txt"
FORMAT = "cmrkit-docnos/1"


@dataclass(frozen=True)
class DocnoTable:
    """Unit ids by doc number (``names``), and each doc number's place in the code-point order
    of the ids (``order``; trec_eval breaks score ties by docno)."""

    names: np.ndarray  # object array of str
    order: np.ndarray  # int64

    @classmethod
    def from_bytes(cls, body: bytes, n: int) -> DocnoTable | None:
        """The table of a body of ``n`` ids, one a line; None when it holds another number."""
        raw = body.split(b"\n")
        if raw and raw[-1] == b"":
            raw.pop()
        if len(raw) != n or (n and not all(raw)):
            return None
        names = np.array(body.decode("utf-8").split("\n")[:n], dtype=object)
        # UTF-8 byte order is code-point order, which is how Python compares str
        by_bytes = np.array(raw, dtype=np.bytes_) if n else np.array([], dtype="S1")
        order = np.empty(n, dtype=np.int64)
        order[np.argsort(by_bytes, kind="stable")] = np.arange(n, dtype=np.int64)
        return cls(names, order)


def header(index_id: str, commit: str, n: int, body: bytes) -> bytes:
    digest = hashlib.sha256(body).hexdigest()
    return f"{FORMAT} {index_id} {commit} {n} {digest}\n".encode()


def read_table(path: Path, index_id: str, commit: str, n: int) -> DocnoTable | None:
    """The table stored at ``path`` when it belongs to this index commit; else None."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    first, sep, body = data.partition(b"\n")
    if not sep or first + b"\n" != header(index_id, commit, n, body):
        return None
    try:
        return DocnoTable.from_bytes(body, n)
    except UnicodeDecodeError:
        return None


def load_table(index_dir: Path, index_id: str, helper: Any) -> DocnoTable:
    """The doc-number table of the index that ``helper`` (a cmrkit BatchSearcher) has open,
    read from beside the index or built and stored there (in memory only when the folder is
    read-only)."""
    commit = str(helper.commitId())
    n = int(helper.maxDoc())
    path = Path(index_dir) / TABLE
    table = read_table(path, index_id, commit, n)
    if table is not None:
        return table
    return write_table(index_dir, index_id, helper, commit=commit, n=n)


def write_table(
    index_dir: Path, index_id: str, helper: Any, *, commit: str | None = None, n: int | None = None
) -> DocnoTable:
    """Build the table from the index and store it beside it (staged, then moved into place)."""
    commit = str(helper.commitId()) if commit is None else commit
    n = int(helper.maxDoc()) if n is None else n
    path = Path(index_dir) / TABLE
    body_path = path.with_name(f".{TABLE}.{os.getpid()}.body")
    staged = path.with_name(f".{TABLE}.{os.getpid()}.tmp")
    try:
        helper.writeDocnos(str(body_path.resolve()))
        body = body_path.read_bytes()
    finally:
        body_path.unlink(missing_ok=True)
    table = DocnoTable.from_bytes(body, n)
    if table is None:
        raise RuntimeError(f"Lucene listed another number of ids than its {n} documents")
    try:
        with open(staged, "wb") as f:
            f.write(header(index_id, commit, n, body))
            f.write(body)
        staged.replace(path)
    except OSError:
        staged.unlink(missing_ok=True)  # a read-only index: the table stays in memory
    except BaseException:  # an interrupt: no half-written table left in the index
        staged.unlink(missing_ok=True)
        raise
    return table
