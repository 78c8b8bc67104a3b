"""The named-entity cache: spaCy's entities of each text, kept across commands and collections.

Indexing a collection, rebuilding it, building another collection over the same distractors and
formulating ``mention+entities`` queries all ask for the entities of texts seen before; the cache
answers them without running spaCy again.

Where: ``$CMRKIT_CACHE_DIR/entities/`` when that variable is set (an empty value turns the cache
off), else ``$XDG_CACHE_HOME/cmrkit/entities/``, else ``~/.cache/cmrkit/entities/``. One SQLite
file per model: ``MODEL-MODELVERSION-spacySPACYVERSION.sqlite``. TAC collections keep the
sentences and entities of their pipeline (parser and NER) the same way under ``tac/``.

What: a row per distinct text, keyed by a 16-byte BLAKE2b hash of the model's identity (name,
version, spaCy version, pipeline) and the text; the value holds each entity's start and end
character and label, and a CRC32 over key and entities. About 100 bytes per text with 6
entities (measured): some 100 MB for a million passages. Nothing is evicted: delete the folder
to reclaim the space (the next run rebuilds what it needs).

Never trusted: a file whose recorded identity differs from the model's, or that SQLite cannot
read, is set aside and rebuilt; a row whose checksum fails, or whose spans do not fit its text,
is recomputed and overwritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FORMAT = "cmrkit-entities/1"
_ENTRY = struct.Struct("<IIH")  # start, end, label index
_LOOKUP_CHUNK = 500

Span = tuple[int, int, str]  # start, end (character offsets), spaCy label
SENTENCE = "<s>"  # the label of a sentence span, for pipelines that cache sentences too


def cache_root() -> Path | None:
    """The cache folder (None: turned off with an empty $CMRKIT_CACHE_DIR)."""
    if "CMRKIT_CACHE_DIR" in os.environ:
        value = os.environ["CMRKIT_CACHE_DIR"]
        return Path(value) if value else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cmrkit"


class EntityCache:
    """Entities by text for one model identity, in an SQLite file."""

    def __init__(self, path: Path, identity: dict[str, Any], labels: Sequence[str]):
        self.path = Path(path)
        self.identity = dict(identity)
        self.labels = list(labels)
        self._label_index = {label: i for i, label in enumerate(self.labels)}
        text = json.dumps({"identity": self.identity, "labels": self.labels}, sort_keys=True)
        self._salt = hashlib.blake2b(text.encode(), digest_size=16).digest()
        self._meta = text
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = self._open()

    @classmethod
    def for_model(
        cls, identity: dict[str, Any], labels: Sequence[str], *, name: str = "entities"
    ) -> EntityCache | None:
        """The cache of a model in the cache folder's ``name`` subfolder (None when the cache
        is turned off or its folder cannot be written)."""
        root = cache_root()
        if root is None:
            return None
        file = (
            f"{identity['model']}-{identity['model_version']}-spacy{identity['spacy']}.sqlite"
        ).replace("/", "_")
        try:
            return cls(root / name / file, identity, labels)
        except (OSError, sqlite3.Error):
            return None

    def _open(self) -> sqlite3.Connection:
        try:
            db = self._connect()
            row = db.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()
            if row is not None and row[0] == self._meta:
                return db
            db.close()  # another model's file
        except sqlite3.DatabaseError:
            pass  # not a database SQLite can read
        return self._reset(None)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute(
            "CREATE TABLE IF NOT EXISTS entities (key BLOB PRIMARY KEY, value BLOB) WITHOUT ROWID"
        )
        row = db.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()
        if row is None:
            db.execute("INSERT INTO meta VALUES ('identity', ?)", (self._meta,))
            db.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
            db.commit()
        return db

    def key(self, text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8"), digest_size=16, key=self._salt).digest()

    def get_many(self, texts: Sequence[str]) -> list[list[Span] | None]:
        """The cached entities of each text (None where there are none to trust)."""
        keys = [self.key(t) for t in texts]
        found: dict[bytes, bytes] = {}
        try:
            for start in range(0, len(keys), _LOOKUP_CHUNK):
                part = keys[start : start + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(part))
                found.update(
                    self._db.execute(
                        f"SELECT key, value FROM entities WHERE key IN ({marks})", part
                    ).fetchall()
                )
        except sqlite3.DatabaseError:
            self._db = self._reset(self._db)
            return [None] * len(texts)
        return [self._decode(k, found.get(k), t) for k, t in zip(keys, texts, strict=True)]

    def put_many(self, texts: Sequence[str], entities: Sequence[Sequence[Span]]) -> None:
        rows = []
        for text, spans in zip(texts, entities, strict=True):
            encoded = self._encode(self.key(text), spans)
            if encoded is not None:
                rows.append(encoded)
        try:
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO entities VALUES (?, ?)", rows)
        except sqlite3.DatabaseError:
            self._db = self._reset(self._db)

    def _reset(self, db: sqlite3.Connection | None) -> sqlite3.Connection:
        """Set the file aside and start an empty one."""
        if db is not None:
            try:
                db.close()
            except sqlite3.Error:
                pass
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)
        return self._connect()

    def _encode(self, key: bytes, spans: Sequence[Span]) -> tuple[bytes, bytes] | None:
        payload = bytearray()
        for start, end, label in spans:
            index = self._label_index.get(label)
            if index is None:
                return None  # a label the model did not declare: not cached
            payload += _ENTRY.pack(start, end, index)
        crc = zlib.crc32(key + bytes(payload))
        return key, bytes(payload) + struct.pack("<I", crc)

    def _decode(self, key: bytes, value: bytes | None, text: str) -> list[Span] | None:
        if value is None or len(value) < 4 or (len(value) - 4) % _ENTRY.size:
            return None
        payload, (crc,) = value[:-4], struct.unpack("<I", value[-4:])
        if zlib.crc32(key + payload) != crc:
            return None
        spans = []
        for start, end, index in _ENTRY.iter_unpack(payload):
            if not (0 <= start < end <= len(text)) or index >= len(self.labels):
                return None
            spans.append((start, end, self.labels[index]))
        return spans

    def size(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM entities").fetchone()[0])

    def close(self) -> None:
        self._db.close()
