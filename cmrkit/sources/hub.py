"""Download WEC-Eng or CoreSearch from the Hugging Face hub (the only network path of cmrkit).

Files are fetched with ``huggingface_hub.hf_hub_download`` into its cache, at the revision given
(``--revision``; the resolved commit is recorded in the manifest). Offline, or when the hub
cannot be reached, the error says to pass local files instead.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from cmrkit.errors import CmrkitError

DATASETS: dict[str, dict[str, object]] = {
    "wec-eng": {
        "repo": "Intel/WEC-Eng",
        "source": "wec-eng",
        "files": {
            "train": ["Train_Event_gold_mentions.json"],
            "dev": ["Dev_Event_gold_mentions_validated.json"],
            "test": ["Test_Event_gold_mentions_validated.json"],
        },
    },
    "coresearch": {
        "repo": "biu-nlp/CoreSearch",
        "source": "coresearch",
        "files": {
            split.lower(): [f"clean/{split}_gold_clusters.json", f"clean/{split}_all_passages.json"]
            for split in ("Train", "Dev", "Test")
        },
    },
}
# The branch fetched unless --revision names a commit; the commit actually fetched is recorded.
DEFAULT_REVISION = "main"


def download(
    dataset: str, splits: list[str], revision: str = DEFAULT_REVISION, cache_dir: str | None = None
) -> tuple[str, list[tuple[str, Path]]]:
    """(source format, [(split, local path)]) for the dataset's files of the given splits."""
    if dataset not in DATASETS:
        raise CmrkitError(f"unknown hub dataset {dataset!r}; use one of {', '.join(DATASETS)}")
    spec = DATASETS[dataset]
    files: dict[str, list[str]] = spec["files"]  # type: ignore[assignment]
    for s in splits:
        if s not in files:
            raise CmrkitError(f"{dataset} has no split {s!r}; use {', '.join(files)}")
    try:
        from huggingface_hub import constants, hf_hub_download
        from huggingface_hub.utils import logging as hf_logging
    except ImportError:
        raise CmrkitError("huggingface-hub is not installed; pip install huggingface-hub") from None
    hf_logging.set_verbosity_error()  # its retry warnings would bury the one-line error
    # without a network, use the cache alone instead of waiting through the client's retries
    # HF_HUB_OFFLINE is read here too: the client reads it only once, when first imported
    offline = os.environ.get("HF_HUB_OFFLINE", "").upper() in {"1", "ON", "YES", "TRUE"}
    cache_only = offline or bool(constants.HF_HUB_OFFLINE) or not _reachable(constants.ENDPOINT)
    out: list[tuple[str, Path]] = []
    for s in splits:
        for name in files[s]:
            try:
                path = hf_hub_download(
                    repo_id=str(spec["repo"]),
                    filename=name,
                    repo_type="dataset",
                    revision=revision,
                    cache_dir=cache_dir,
                    local_files_only=cache_only,
                )
            except Exception as e:  # the hub client raises many types for "offline"
                why = "offline and not in the cache" if cache_only else type(e).__name__
                raise CmrkitError(
                    f"cannot download {spec['repo']}/{name} at revision {revision} ({why}); "
                    f"download the files elsewhere and pass them with --source {spec['source']} "
                    "--input PATH"
                ) from None
            out.append((s, Path(path)))
    return str(spec["source"]), out


def _reachable(endpoint: str) -> bool:
    """Whether the hub's host name resolves (a quick test for 'no network at all')."""
    host = urlparse(endpoint).hostname
    if not host:
        return False
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return False
    return True


def resolved_commit(path: Path) -> str | None:
    """The commit a cached hub file came from (…/snapshots/<commit>/<file>)."""
    parts = path.parts
    if "snapshots" in parts:
        i = parts.index("snapshots")
        if i + 1 < len(parts):
            return parts[i + 1]
    return None
