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


def _bash_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_the_readme_writes_outputs_into_their_folders_not_the_repository_root():
    """Recipes wrote diff.png, avg.jsonl, fused.trec and models/ into the repository root."""
    blocks = "\n".join(_bash_blocks()).replace("\\\n", " ")
    targets = re.findall(r"(?:\s-o|--output|--plot|--json)[ \t]+(\S+)", blocks)
    assert len(targets) >= 8
    placeholders = [t for t in targets if t.isupper() or t.startswith("DIR")]
    written = [t for t in targets if t not in placeholders]
    outside = [t for t in written if t.split("/")[0] not in GENERATED]
    assert outside == [], outside
    ignored = (README.parent / ".gitignore").read_text().split()
    for folder in {t.split("/")[0] for t in written} | {"models"}:
        assert f"/{folder}/" in ignored or f"/{folder}/*" in ignored, folder


GENERATED = {"collections", "qrels", "runs", "pools", "models"}


def test_no_two_readme_recipes_write_the_same_output():
    """The assessment block wrote qrels/sample.pooled.txt, which the pooling block had written
    (issue 32 trip 5): run after it, it was refused as another output, or with --force replaced
    it; and its aggregation lacked the --qrels the pool was made with, so it kept no query."""
    from collections import Counter

    blocks = "\n".join(_bash_blocks()).replace("\\\n", " ")
    targets = re.findall(r"(?:\s-o|--output|--plot|--json)[ \t]+(\S+)", blocks)
    assert [t for t, n in Counter(targets).items() if n > 1] == []
    served = [line for line in blocks.splitlines() if "judged.pool.jsonl" in line]
    assert served and all("--qrels qrels/sample.test.txt" in line for line in served)


def test_the_readme_uses_one_command_style_and_says_to_activate_the_venv():
    """First steps used .venv/bin/cmrkit and later recipes bare cmrkit, never saying to
    activate the virtual environment."""
    blocks = _bash_blocks()
    assert ". .venv/bin/activate" in blocks[0]
    commands = [line for b in blocks[1:] for line in b.splitlines() if "cmrkit " in line]
    assert commands and not [line for line in commands if ".venv/bin/cmrkit" in line]


def test_the_readme_names_the_dense_folder_and_the_ir_extra_as_they_are():
    import tomllib

    text = README.read_text(encoding="utf-8")
    assert "dense/TAG/" not in text and "dense/<model-tag>/`" not in text
    assert "dense/<model-tag>-p<passage length>/" in text
    from cmrkit.retrieval.dense.store import store_tag

    class Ref:
        tag = "m"

    assert store_tag(Ref(), 256) == "m-p256"  # type: ignore[arg-type]
    extras = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(r.startswith("ir-datasets") for r in extras["ir"])
    assert "pip install -e '.[ir]'" in text
