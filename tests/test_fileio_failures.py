"""The file system saying no: a read-only folder, a full disk, a missing parent, permission
denied; each one line, nothing half-written (cmrkit.fileio.failures).

The real components run: the CLI as its own process, real signals and file systems (see
fault_tools)."""

from __future__ import annotations

import os

from fault_tools import (
    MOUNTABLE,
    cmrkit,
    digest_tree,
    leftovers,
    one_error_line,
    read_only_folder,
    tmpfs,
)

# === 3. the file system says no =============================================================


def test_read_only_output_folder_is_one_line_and_nothing_is_written(tmp_path):
    with read_only_folder(tmp_path / "ro") as ro:
        r = cmrkit("build-collection", "--qrels-dir", ro / "qrels", cwd=tmp_path, obey_modes=True)
        line = one_error_line(r, 2)
        assert str(ro) in line and ("read-only" in line or "permission denied" in line), line
        assert not (tmp_path / "collections" / "sample").exists()
        assert (
            leftovers(tmp_path / "collections") == []
            if (tmp_path / "collections").exists()
            else True
        )


def test_full_disk_is_one_line_exit_1_and_the_old_output_survives(tmp_path):
    if not MOUNTABLE:
        # the equivalent without a mount: a file-size limit makes the big write fail
        r = cmrkit("build-collection", cwd=tmp_path, limit_bytes=1_000_000)
        line = one_error_line(r, 1)
        assert "file too large" in line and "nothing was written" in line, line
        assert list((tmp_path / "collections").iterdir()) == []
        return
    with tmpfs(tmp_path / "disk", "400k") as disk:
        r = cmrkit("build-collection", "--collections-dir", disk, cwd=tmp_path)
        line = one_error_line(r, 1)
        assert "no space left" in line and "nothing was written" in line, line
        assert list(disk.iterdir()) == []
    # room for one sample collection (about 5.7 MB), not for a second one beside it
    with tmpfs(tmp_path / "disk", "8m") as disk:
        assert cmrkit("build-collection", "--collections-dir", disk, cwd=tmp_path).returncode == 0
        before = digest_tree(disk / "sample")
        r = cmrkit(
            "build-collection",
            "--collections-dir",
            disk,
            "--min-relevant",
            "2",
            "--force",
            cwd=tmp_path,
        )
        line = one_error_line(r, 1)
        assert "no space left" in line and str(disk / "sample") in line, line
        assert digest_tree(disk / "sample") == before
        assert leftovers(disk) == []


def _fill(disk, free_pages: int) -> None:
    """Fill the tmpfs ``disk`` but ``free_pages`` pages of 4 kB."""
    with open(disk / "fill", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"x" * 4096)
        except OSError:
            pass
    os.truncate(disk / "fill", max(0, os.path.getsize(disk / "fill") - free_pages * 4096))


def test_a_full_disk_leaves_no_lock_staging_or_folder_behind(tmp_path, cli):
    """Issue 33.8: `assess export` onto a full disk left `.NAME.csv.cmrkit-lock` (its holder's
    line was written after the lock file was made: the write failed and nothing removed it).
    Each degree of fullness fails at another step (the lock, the staging folder's owner, its
    target list, the outputs, the commit): one line naming the output, exit 1, and nothing
    left on the disk. Without mount rights a file-size limit of 0 bytes fails the first write
    the same way (EFBIG instead of ENOSPC)."""
    from fault_tools import pool_workspace

    pool_workspace(tmp_path, ["q1", "q2"], ["d1", "d2", "d3"])
    commands = [("pool", "create", "runs/tiny/r.trec", "-o", "{disk}/new/p.jsonl")]
    try:
        import sqlalchemy  # noqa: F401  (the assess extra)
    except ImportError:
        pass
    else:
        from assess_server_fixtures import make_app

        assert cli("pool", "create", "runs/tiny/r.trec", "-o", "p.jsonl").exit_code == 0
        db = f"sqlite:///{tmp_path / 'a.sqlite'}"
        make_app(db, tmp_path / "p.jsonl", assessors=1)
        commands.append(("assess", "export", "--db", db, "-o", "{disk}/judged.csv"))
    for command in commands:
        if not MOUNTABLE:
            r = cmrkit(*(a.format(disk=tmp_path) for a in command), cwd=tmp_path, limit_bytes=0)
            line = one_error_line(r, 1)
            assert "file too large" in line and "nothing was written" in line, line
            assert leftovers(tmp_path) == [] and not (tmp_path / "new").exists()
            continue
        for free in range(6):
            with tmpfs(tmp_path / "disk", "64k") as disk:
                _fill(disk, free)
                r = cmrkit(*(a.format(disk=disk) for a in command), cwd=tmp_path)
                if r.returncode == 0:  # it fitted: nothing but the outputs
                    assert free > 0 and leftovers(disk) == []
                    continue
                line = one_error_line(r, 1)
                assert os.listdir(disk) == ["fill"], (free, os.listdir(disk))
                assert "no space left" in line and "nothing was written" in line, line
                assert str(disk) in line, line  # the output named


def test_missing_parent_and_file_in_the_way_are_one_line(tmp_path):
    (tmp_path / "afile").write_text("x")
    r = cmrkit("build-collection", "--collections-dir", "afile/sub", cwd=tmp_path)
    line = one_error_line(r, 2)
    assert "afile" in line and "not a folder" in line, line
    r = cmrkit("build-collection", "-i", "no/such/file.json", cwd=tmp_path)
    assert "no/such/file.json" in one_error_line(r, 2)


def test_permission_denied_is_one_line(tmp_path):
    assert cmrkit("build-collection", cwd=tmp_path).returncode == 0
    locked = tmp_path / "locked"
    locked.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text("[]")
    locked.chmod(0o555)
    secret.chmod(0o000)
    try:
        r = cmrkit(
            "build-collection",
            "--name",
            "other",
            "--qrels-dir",
            locked,
            cwd=tmp_path,
            obey_modes=True,
        )
        line = one_error_line(r, 2)
        assert "permission denied" in line and str(locked) in line, line
        r = cmrkit("build-collection", "-i", secret, "--name", "s", cwd=tmp_path, obey_modes=True)
        line = one_error_line(r, 2)
        assert "permission denied" in line and "secret.json" in line, line
    finally:
        locked.chmod(0o755)
        secret.chmod(0o644)
    assert leftovers(tmp_path) == []
