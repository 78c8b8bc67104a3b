"""The README's sample recipe, run as written in a fresh folder: it cannot rot unnoticed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def recipe() -> list[str]:
    """The bash blocks marked ``<!-- sample recipe -->`` in the README, in order."""
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- sample recipe -->\n```bash\n(.*?)```", text, flags=re.S)
    return [b.replace(".venv/bin/cmrkit", "cmrkit") for b in blocks]


def test_the_recipe_is_marked_and_uses_what_cmrkit_writes():
    blocks = recipe()
    assert len(blocks) >= 2
    first = blocks[0]
    assert re.search(r"^cmrkit build-collection", first, flags=re.M)
    assert "cmrkit run bm25" in first and "cmrkit eval runs/sample/bm25.test.trec" in first


def test_the_readme_sample_recipe_runs_as_written(tmp_path):
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["COLUMNS"] = "80"
    script = "set -euo pipefail\n" + "\n".join(recipe())
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for path in (
        "runs/sample/bm25.test.trec",
        "runs/sample/fields-doc.test.trec",
        "pools/sample.pool.jsonl",
        "pools/sample.html",
        "pools/sample.key.tsv",
        "pools/round1.csv",
        "qrels/sample.pooled.txt",
    ):
        assert (tmp_path / path).is_file(), path
    assert not (tmp_path / "pools/mturk").exists()  # --dry-run writes nothing
    assert re.search(
        r"[\d,]+ pool pairs \+ [\d,]+ gold pairs in [\d,]+ HITs; at \$0\.13", done.stdout
    )
    # every step is done: run again, each says so and exits 0
    again = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "collections/sample is up to date" in again.stdout
    assert "runs/sample/bm25.test.trec is up to date" in again.stdout
    assert "pools/sample.pool.jsonl is up to date" in again.stdout
    assert "qrels/sample.pooled.txt is up to date" in again.stdout
