"""Shared test helpers: run the CLI in-process and write small input fixtures."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cmrkit.cli import app


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the session (tests using it are marked ``needs_chromium``)."""
    from browser import start_browser

    driver = start_browser()
    yield driver
    driver.quit()


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """Run `cmrkit ARGS...` in a fresh working directory; returns the click Result."""
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

    return run


def write_json(path: Path, obj, gz: bool = False) -> Path:
    data = json.dumps(obj).encode()
    if gz:
        path.write_bytes(gzip.compress(data, mtime=0))
    else:
        path.write_bytes(data)
    return path


def wec_record(mid, chain, doc, tokens, idx, **extra):
    rec = {
        "coref_chain": chain,
        "coref_link": extra.pop("link", "NA"),
        "doc_id": doc,
        "mention_context": tokens,
        "tokens_number": idx,
        "tokens_str": " ".join(tokens[i] for i in idx),
        "mention_id": mid,
        "mention_type": 8,
        "topic_id": -1,
    }
    rec.update(extra)
    return rec


@pytest.fixture(autouse=True, scope="session")
def _entity_cache(tmp_path_factory):
    """The tests' own entity cache, never the user's (~/.cache/cmrkit)."""
    import os

    os.environ["CMRKIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("cmrkit-cache"))
