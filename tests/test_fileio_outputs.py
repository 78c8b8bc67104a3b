"""Outputs under faults: atomic replacement and --force, killed replacements finished by the next
command, stale staging removed, racing writers, readers never seeing a mix (cmrkit.fileio.outputs).

The real components run: the CLI as its own process, real signals and file systems (see
fault_tools)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from fault_tools import (
    ROOT,
    cmrkit,
    digest_tree,
    leftovers,
    one_error_line,
    pool_workspace,
    start,
)

from cmrkit.errors import CmrkitError
from cmrkit.fileio import STAGING_PREFIX, StagedOutputs, reading

# === 1. atomic replacement and --force ======================================================


def test_force_never_deletes_a_folder_cmrkit_did_not_write(tmp_path, cli):
    ws = pool_workspace(tmp_path, ["q1"], ["d1", "d2"])
    assert cli("pool", "create", "runs/tiny/r.trec", "-o", "p.jsonl").exit_code == 0
    mine = tmp_path / "my-notes"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    for fmt in ("html", "jsonl"):
        r = cli("pool", "export", "p.jsonl", "-f", fmt, "-o", mine, "--force")
        assert r.exit_code == 2
        assert "folder that cmrkit did not write" in r.output and str(mine) in r.output
    assert (mine / "thesis.tex").read_text() == "years of work"
    assert leftovers(ws) == []


def test_force_replaces_cmrkit_own_collection_and_leaves_nothing_behind(tmp_path):
    first = cmrkit("build-collection", "--queries", "longest", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = digest_tree(tmp_path / "collections" / "sample")
    again = cmrkit("build-collection", "--force", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    after = digest_tree(tmp_path / "collections" / "sample")
    assert after != before and ".cmrkit" in after
    assert leftovers(tmp_path) == []


def test_force_replaces_only_an_output_of_the_same_kind(tmp_path, cli):
    """Issue 33.1: `train reader -o collections/s2 --force` replaced the collection s2 by a
    reader (exit 0). The mark records each folder's kind; another kind is refused in one line
    naming what is there, --force or not, and stays byte for byte."""
    import shutil

    assert cli("build-collection").exit_code == 0
    shutil.copytree(tmp_path / "collections" / "sample", tmp_path / "collections" / "s2")
    s2 = digest_tree(tmp_path / "collections" / "s2")
    qrels = digest_tree(tmp_path / "qrels")
    for force in (["--force"], []):
        r = cmrkit("train", "reader", "collections/sample", "--train-split", "dev",
                   "-o", "collections/s2", "--max-steps", "5", *force, cwd=tmp_path)  # fmt: skip
        assert "collections/s2: is a collection, not a reader;" in one_error_line(r, 2)
    r = cli("export", "beir", "collections/sample", "-o", "collections/s2", "--force")
    assert r.exit_code == 2 and "collections/s2: is a collection, not a BEIR export" in r.output
    assert cli("export", "beir", "collections/sample", "-o", "out/beir").exit_code == 0
    r = cli("build-collection", "--name", "beir", "--collections-dir", "out", "--force")
    assert r.exit_code == 2 and "out/beir: is a BEIR export, not a collection" in r.output
    # runs: a run replaces a run; nothing replaces a qrels file or a file inside a collection
    runs = tmp_path / "runs" / "x"
    runs.mkdir(parents=True)
    (runs / "a.trec").write_text("q1 Q0 d1 1 1.0 t\n")
    (runs / "b.trec").write_text("q1 Q0 d2 1 1.0 t\n")
    fuse = ("run", "fuse", "runs/x/a.trec", "runs/x/b.trec", "-o")
    r = cli(*fuse, "qrels/sample.test.txt", "--force")
    assert r.exit_code == 2 and "qrels/sample.test.txt: is not a run cmrkit wrote" in r.output
    assert not (tmp_path / "qrels" / "sample.test.json").exists()
    for inside in ("collections/s2/topics.jsonl", "collections/s2/topics.test.tsv"):
        r = cli(*fuse, inside, "--force")
        assert r.exit_code == 2, r.output
        assert f"{inside}: is part of a collection (collections/s2)" in r.output
    assert cli(*fuse, "runs/x/f.trec").exit_code == 0
    assert cli(*fuse, "runs/x/f.trec", "--method", "combsum", "--force").exit_code == 0
    assert "combsum" in (runs / "f.json").read_text()
    assert digest_tree(tmp_path / "collections" / "s2") == s2
    assert digest_tree(tmp_path / "qrels") == qrels
    # the same kind is replaced: a collection by a collection
    assert cli("build-collection", "--name", "s2", "--queries", "longest", "--force").exit_code == 0
    assert digest_tree(tmp_path / "collections" / "s2") != s2
    assert leftovers(tmp_path) == []


def test_folders_marked_before_kinds_were_recorded_are_known_by_their_files(tmp_path):
    """A mark without a kind (cmrkit before this change) or no mark (before marks): the one
    file each kind has always held says what it is; a folder those files do not tell apart is
    of unknown kind and is not replaced by anything."""
    from cmrkit.fileio import KINDS, UNNAMED, output_kind
    from cmrkit.fileio.outputs import MARKER

    old_mark = '{"version": "0.1.0", "written_by": "cmrkit"}'
    for kind, spec in KINDS.items():
        folder = tmp_path / kind
        folder.mkdir()
        (folder / MARKER).write_text(old_mark)
        text = '{"cmrkit_version": "0.1.0"}' if kind == "collection" else "{}"
        (folder / spec.signature).write_text(text)
        assert output_kind(folder) == kind
        unmarked = tmp_path / f"{kind}-unmarked"
        folder.rename(unmarked)
        (unmarked / MARKER).unlink()
        # before marks, only collections, indexes and dense encodings were cmrkit's
        before = kind in ("collection", "index", "dense-encoding")
        assert output_kind(unmarked) == (kind if before else None)
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / MARKER).write_text(old_mark)
    assert output_kind(unknown) == ""
    (unknown / "cmrkit-reader.json").write_text("{}")
    (unknown / "cmrkit-model.json").write_text("{}")  # two kinds' files: still unknown
    assert output_kind(unknown) == ""
    for kind in (*KINDS, None):
        with pytest.raises(CmrkitError, match="without recording what it is"):
            StagedOutputs([unknown], force=True, kinds={unknown: kind} if kind else None)
    assert sorted(p.name for p in unknown.iterdir()) == [
        MARKER, "cmrkit-model.json", "cmrkit-reader.json"]  # fmt: skip
    # an old-marked collection is replaced by a collection (and marked with its kind then)
    old = tmp_path / "collection-unmarked"
    with StagedOutputs([old], force=True, kinds={old: "collection"}) as staged:
        staged.path(old).mkdir()
        (staged.path(old) / "manifest.json").write_text('{"cmrkit_version": "0.2.0"}')
    assert json.loads((old / MARKER).read_text())["kind"] == "collection"
    plain = tmp_path / "plain"
    with StagedOutputs([plain]) as staged:
        staged.path(plain).mkdir()
    assert output_kind(plain) == UNNAMED
    with pytest.raises(CmrkitError, match="is a cmrkit output of no named kind, not a reader"):
        StagedOutputs([plain], force=True, kinds={plain: "reader"})


def test_each_kind_s_signature_is_the_file_its_owner_writes():
    from cmrkit.collection import layout
    from cmrkit.coref import encoder
    from cmrkit.exports import beir
    from cmrkit.fileio import KINDS
    from cmrkit.retrieval import index
    from cmrkit.retrieval.dense import models, store
    from cmrkit.retrieval.reader import model

    owners = {
        "collection": layout.MANIFEST,
        "index": index.MANIFEST,
        "dense-encoding": store.MANIFEST,
        "dense-model": models.METADATA,
        "reader": model.READER_METADATA,
        "coref-model": encoder.METADATA,
        "beir": beir.QUERIES,
    }
    assert {k: v.signature for k, v in KINDS.items()} == owners


def test_a_failed_write_keeps_the_old_outputs_whole(tmp_path):
    a, b = tmp_path / "out" / "a.txt", tmp_path / "other" / "b"
    a.parent.mkdir()
    a.write_text("old a")
    with pytest.raises(RuntimeError), StagedOutputs([a, b], force=True) as staged:
        staged.path(a).write_text("new a")
        staged.path(b).mkdir()
        raise RuntimeError("the writer failed half way")
    assert a.read_text() == "old a" and not b.exists()
    assert not (tmp_path / "other").exists()  # the folder it created for b is gone again
    assert leftovers(tmp_path) == []


def test_symbolic_link_in_the_way_is_refused(tmp_path, cli):
    pool_workspace(tmp_path, ["q1"], ["d1"])
    assert cli("pool", "create", "runs/tiny/r.trec", "-o", "p.jsonl").exit_code == 0
    precious = tmp_path / "precious.html"
    precious.write_text("keep me")
    (tmp_path / "link.html").symlink_to(precious)
    (tmp_path / "dangling.html").symlink_to(tmp_path / "nowhere")
    for target in ("link.html", "dangling.html"):
        r = cli("pool", "export", "p.jsonl", "-f", "html", "-o", target, "--force")
        assert r.exit_code == 2 and "is a symbolic link" in r.output, r.output
    assert precious.read_text() == "keep me" and not (tmp_path / "nowhere").exists()


_KILL_MID_COMMIT = """
import os, signal, sys
from pathlib import Path
from cmrkit.fileio import StagedOutputs
a, b = Path(sys.argv[1]), Path(sys.argv[2])
real = os.rename
calls = []
def rename(src, dst):
    real(src, dst)
    calls.append(dst)
    if len(calls) == int(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGKILL)
os.rename = rename
with StagedOutputs([a, b], force=True) as staged:
    staged.path(a).write_text("new a")
    staged.path(b).mkdir()
    (staged.path(b) / "f").write_text("new b")
"""


@pytest.mark.parametrize("renames", [1, 2, 3])
def test_killed_mid_replacement_is_finished_by_the_next_command(tmp_path, renames):
    """SIGKILL between the renames of a commit: the next writer in that folder finishes the
    replacement (the outputs were complete), so the folder holds all new outputs."""
    out = tmp_path / "out"
    out.mkdir()
    a, b = out / "a.txt", out / "b"
    a.write_text("old a")
    b.mkdir()
    (b / ".cmrkit").write_text('{"kind": "output"}')  # a folder of no named kind
    (b / "f").write_text("old b")
    proc = subprocess.run(
        [sys.executable, "-c", _KILL_MID_COMMIT, str(a), str(b), str(renames)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == -signal.SIGKILL
    assert [p.name for p in out.iterdir() if p.name.startswith(STAGING_PREFIX)]
    r = cmrkit("judgments", "simulate", "--help", cwd=tmp_path)  # writes nothing: no clean-up
    assert r.returncode == 0
    with StagedOutputs([out / "c.txt"]) as staged:  # the next writer in that folder
        staged.path(out / "c.txt").write_text("c")
    assert a.read_text() == "new a" and (b / "f").read_text() == "new b"
    assert leftovers(tmp_path) == []


def test_stale_staging_of_a_killed_run_is_removed_and_reported(tmp_path):
    pool_workspace(tmp_path, ["q1", "q2"], ["d1", "d2", "d3"])
    held = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom pathlib import Path\nfrom cmrkit.fileio import StagedOutputs\n"
            "s = StagedOutputs([Path('p.jsonl')])\ns.path(Path('p.jsonl')).write_text('x' * 5000)\n"
            "print('ready', flush=True)\ntime.sleep(600)\n",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert held.stdout.readline().strip() == "ready"
    busy = cmrkit("pool", "create", "runs/tiny/r.trec", "-o", "p.jsonl", cwd=tmp_path)
    line = one_error_line(busy, 1)
    assert f"being written by process {held.pid}" in line and "p.jsonl" in line
    held.kill()
    held.wait()
    (tmp_path / ".cmrkit-tmp-old").mkdir()  # left by an earlier cmrkit version
    r = cmrkit("pool", "create", "runs/tiny/r.trec", "-o", "p.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"took over the lock left by process {held.pid}" in r.stderr
    assert "removed .cmrkit-staging-" in r.stderr and f"process {held.pid}" in r.stderr
    assert ".cmrkit-tmp-old: staging folder of an interrupted run of an earlier cmrkit" in r.stderr
    assert leftovers(tmp_path) == [".cmrkit-tmp-old"]


# === 2. concurrency =========================================================================


def test_racing_commands_one_wins_the_others_name_the_holder(tmp_path):
    """Four processes pool to one file at once, each with another depth: one writes it, the
    others fail naming the holder (or, later, finding other content there); none is lost."""
    queries = [f"q{i}" for i in range(40)]
    docs = [f"d{i}" for i in range(200)]
    pool_workspace(tmp_path, queries, docs)
    depths = [10, 20, 30, 40]
    procs = [
        start("pool", "create", "runs/tiny/r.trec", "--depth", d, "-o", "p.jsonl", cwd=tmp_path)
        for d in depths
    ]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    winners = [d for d, (rc, _) in zip(depths, results, strict=True) if rc == 0]
    assert len(winners) == 1, results
    for rc, err in results:
        if rc != 0:
            assert "Traceback" not in err, err
            busy = rc == 1 and "p.jsonl: being written by process" in err
            assert busy or (rc == 2 and "already exists with other content" in err), err
    header = json.loads((tmp_path / "p.jsonl").read_text().splitlines()[0])
    assert header["depth"] == winners[0]
    assert leftovers(tmp_path) == []


_SWAPPER = """
import sys
from pathlib import Path
from cmrkit.fileio import StagedOutputs
target = Path(sys.argv[1])
for generation in range(int(sys.argv[2])):
    with StagedOutputs([target], force=True) as staged:
        d = staged.path(target)
        d.mkdir()
        for name in "abcdefgh":
            (d / name).write_text(str(generation) * 1000)
"""


def test_readers_see_the_old_or_the_new_output_never_a_mix(tmp_path):
    """A writer replaces a multi-file output 300 times while this process reads it whole,
    under :func:`reading` (as ``open_index`` does): every read sees one generation."""
    target = tmp_path / "out" / "index"
    writer = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(target), "300"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    reads = 0
    while writer.poll() is None or reads == 0:
        with reading(target):
            try:
                seen = {(target / name).read_text()[:1] for name in "abcdefgh"}
            except FileNotFoundError:
                assert not target.exists() or reads == 0
                continue
        assert len(seen) == 1, seen
        reads += 1
    assert writer.wait() == 0 and reads > 0
