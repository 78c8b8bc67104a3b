"""The Ray engine, run for real: a local Ray cluster of 2 workers against the single machine.

The index built in shards and merged must hold the same documents and postings as the
single-machine index (compared term by term, and by searching); runs on Ray must write the
single-machine run file byte for byte. Workers are killed for real (``$CMRKIT_FAULTS``).
"""

from __future__ import annotations

import ctypes
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

from cmrkit.errors import CmrkitError
from cmrkit.retrieval import QE, Searcher, build_index, open_index, run_bm25, run_fields, run_qe
from cmrkit.retrieval.distributed.engine import EngineOptions, connect, disconnect
from cmrkit.retrieval.distributed.index import build_sharded, index_shard
from cmrkit.retrieval.docnos import TABLE, read_table
from cmrkit.retrieval.index import MANIFEST

ray = pytest.importorskip("ray")

RAY = EngineOptions("ray", workers=2)
QUERIES = {
    "a": "storm Berlin",
    "b": "Angela Merkel",
    "c": "Tara Reid trial Friday",
    "d": "flood Chicago Monday",
    "e": "he him election",
}
SEARCHES = [
    (None, None),
    ({"contents": 1.0, "document": 0.1}, None),
    ({"entities": 1.0, "title": 0.3}, None),
    ({"chain": 1.0}, None),
    (None, QE(method="rm3", fb_docs=5, fb_terms=5)),
    ({"contents": 1.0, "document": 0.1}, QE(method="rocchio")),
]


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
def single(tmp_path_factory):
    """The collection and its single-machine index."""
    coll = write_dist(tmp_path_factory.mktemp("single"))
    build_index(coll, progress=False)
    return coll


def copy_collection(coll: Path, dest: Path) -> Path:
    """The collection's files without its index."""
    shutil.copytree(coll, dest, ignore=shutil.ignore_patterns("index"))
    return dest


def postings(index_dir: Path) -> dict:
    """Every field's statistics, every term's postings (unit id, frequency, positions) and
    every unit's norms, keyed by unit id (doc numbers differ between equal indexes)."""
    from cmrkit.retrieval.java import jclass

    ids = (index_dir / TABLE).read_text(encoding="utf-8").split("\n")[1:-1]
    path = jclass("java.io.File")(str(index_dir)).toPath()
    from jnius import cast

    reader = cast(
        "org.apache.lucene.index.IndexReader",
        jclass("org.apache.lucene.index.DirectoryReader").open(
            jclass("org.apache.lucene.store.FSDirectory").open(path)
        ),
    )
    multi = jclass("org.apache.lucene.index.MultiTerms")
    norms = jclass("org.apache.lucene.index.MultiDocValues")
    flags = jclass("org.apache.lucene.index.PostingsEnum").POSITIONS
    end = jclass("org.apache.lucene.search.DocIdSetIterator").NO_MORE_DOCS
    found: dict = {"docs": sorted(ids)}
    try:
        assert int(reader.maxDoc()) == len(ids)
        for field in ("contents", "title", "entities", "document", "chain"):
            terms = multi.getTerms(reader, field)
            if terms is None:
                continue
            found[field] = (terms.getDocCount(), terms.getSumTotalTermFreq(), terms.size())
            it = terms.iterator()
            while (term := it.next()) is not None:
                docs = []
                pe = it.postings(None, flags)
                while (d := pe.nextDoc()) != end:
                    docs.append((ids[d], [pe.nextPosition() for _ in range(pe.freq())]))
                found[(field, term.utf8ToString())] = sorted(docs)
            values = norms.getNormValues(reader, field)
            per_doc = {}
            while values is not None and (d := values.nextDoc()) != end:
                per_doc[ids[d]] = values.longValue()
            found[("norms", field)] = per_doc
    finally:
        reader.close()
    return found


def searches(coll: Path) -> list:
    s = Searcher(open_index(coll))
    try:
        out = []
        for fields, qe in SEARCHES:
            s.set_qe(qe)
            out.append(s.search(QUERIES, k=1000, fields=fields, exclude={"a": "U:0"}))
        return out
    finally:
        s.close()


def test_sharded_index_equals_the_single_machine_index(faults, single, tmp_path):
    coll = copy_collection(single, tmp_path / "dist")
    info = build_sharded(coll, engine=RAY, progress=False)
    ref = open_index(single)
    assert info.manifest["engine"] == {
        "name": "ray",
        "address": "local",
        "workers": 2,
        "shards": 2,
    }
    for key in ("index_id", "corpus_sha256", "n_units", "settings", "format"):
        assert info.manifest[key] == ref.manifest[key]
    assert "document" in ref.manifest["settings"]["fields"]
    assert "chain" in ref.manifest["settings"]["fields"]
    # every unit from the entity cache the single-machine build filled (workers share it)
    assert info.manifest["ner"] == {"recognised": 0, "cached": ref.manifest["n_units"]}
    assert ref.manifest["n_units"] == 99 and ref.manifest["ner"]["recognised"] == 90
    table = (info.path / TABLE).read_bytes()
    s = Searcher(info)  # the doc-number table written beside the merged index is valid
    try:
        helper, _ = s._helper(1)
        commit, n = str(helper.commitId()), int(helper.maxDoc())
    finally:
        s.close()
    assert read_table(info.path / TABLE, info.index_id, commit, n) is not None
    assert (info.path / TABLE).read_bytes() == table  # used as written, not rebuilt
    ours, theirs = postings(info.path), postings(ref.path)
    assert ours == theirs
    assert len(theirs) > 100 and any(k[0] == "entities" for k in theirs if isinstance(k, tuple))
    found = searches(coll)
    assert found == searches(single)
    assert all(sum(map(len, run.values())) > 20 for run in found)
    # an index that is current is kept, as by the single-machine build
    assert build_sharded(coll, engine=RAY, progress=False).up_to_date
    assert not list(coll.glob(".cmrkit-staging-*"))


def test_runs_on_ray_write_the_single_machine_run_files(faults, single, tmp_path):
    coll = copy_collection(single, tmp_path / "dist")  # no index: the run builds it on Ray
    ray_runs, local_runs = tmp_path / "ray-runs", tmp_path / "local-runs"
    pairs = []
    for name, fn, params in (
        ("bm25", run_bm25, {}),
        ("fields", run_fields, {"preset": "doc"}),
        ("qe", run_qe, {"method": "rm3", "fb_docs": 5}),
        ("learned", run_fields, {"learn_weights": True, "tune_k": 50, "max_rounds": 1}),
    ):
        common = {"name": name, "split": "test"}
        if fn is run_fields:
            common["qrels_dir"] = single.parent.parent / "qrels"
        on_ray = fn(coll, runs_dir=ray_runs, engine=RAY, **common, **params)
        local = fn(single, runs_dir=local_runs, **common, **params)
        pairs.append((on_ray, local))
    assert json.loads((coll / "index" / MANIFEST).read_text())["engine"]["name"] == "ray"
    for on_ray, local in pairs:
        assert on_ray.run_path.read_bytes() == local.run_path.read_bytes()
        assert on_ray.sidecar["warnings"] == local.sidecar["warnings"]
        assert on_ray.sidecar["engine"] == {"name": "ray", "address": "local", "workers": 2}
        assert on_ray.sidecar["identity"] == local.sidecar["identity"]
    bm25, _ = pairs[0]
    assert bm25.sidecar["warnings"][0]["qid"] == "qstop"
    assert len(bm25.run) == 8 and "qstop" not in bm25.run
    assert all(len(v) > 10 for v in bm25.run.values())
    learned, local = pairs[3]
    assert learned.sidecar["learned_weights"] == local.sidecar["learned_weights"]


def test_a_worker_killed_mid_shard_is_retried(faults, single, tmp_path):
    coll = copy_collection(single, tmp_path / "dist")
    kill = faults / "kill-shard-1"
    kill.write_text("1")
    try:
        info = build_sharded(coll, engine=RAY, progress=False)
    finally:
        left = kill.read_text()
        kill.unlink()
    assert left == "0"  # the worker did die once
    assert postings(info.path) == postings(open_index(single).path)


def test_a_shard_that_keeps_failing_stops_in_one_line_keeping_the_index(
    faults, single, tmp_path, cli
):
    coll = copy_collection(single, tmp_path / "dist")
    build_index(coll, entities=False, progress=False)  # the previous index, other settings
    before = {p.name: p.read_bytes() for p in (coll / "index").iterdir()}
    kill = faults / "kill-shard-0"
    kill.write_text("9")
    try:
        result = cli("index", coll, "--engine", "ray", "--workers", "2", "--force", "--quiet")
    finally:
        left = int(kill.read_text())
        kill.unlink()
    assert left == 6  # the first run and two reruns
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "shard 0 of 2 failed: its worker died 3 times" in lines[0]
    assert {p.name: p.read_bytes() for p in (coll / "index").iterdir()} == before
    assert not list(coll.glob(".cmrkit-staging-*"))


def test_interrupting_keeps_the_previous_index(faults, single, tmp_path):
    coll = copy_collection(single, tmp_path / "dist")
    build_index(coll, entities=False, progress=False)
    before = {p.name: p.read_bytes() for p in (coll / "index").iterdir()}
    folder = tmp_path / "faults"
    folder.mkdir()
    stall = folder / "stall-shard-0"
    stall.write_text("")
    env = {**os.environ, "CMRKIT_FAULTS": str(folder)}
    command = [sys.executable, "-m", "cmrkit", "index", str(coll), "--engine", "ray"]
    proc = subprocess.Popen(
        [*command, "--workers", "2", "--force", "--quiet"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_child_signals,  # SIGINT as a terminal's child has it, whatever pytest has
    )
    try:
        deadline = time.monotonic() + 240
        # shard 0 is written and its worker waits: the build is under way
        while not list(coll.glob(".cmrkit-staging-*/shards/shard-0000-*/index/segments_*")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        stall.unlink()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert {p.name: p.read_bytes() for p in (coll / "index").iterdir()} == before
    assert not list(coll.glob(".cmrkit-staging-*"))


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_commands_on_ray_leave_no_process_behind(faults, single, tmp_path):
    coll = copy_collection(single, tmp_path / "dist")
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, "CMRKIT_TEST_MARK": mark}
    for args in (
        ["index", str(coll), "--engine", "ray", "--workers", "2", "--no-entities", "--quiet"],
        [
            "run",
            "bm25",
            str(coll),
            "--engine",
            "ray",
            "--workers",
            "2",
            "--query",
            "mention",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--quiet",
        ],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "cmrkit", *args], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        # cmrkit ends its process with os._exit: Ray's cluster must have been stopped before
        assert left_behind(mark) == [], args


def native_handlers() -> dict[int, bytes]:
    """The process's native handler (``sa_handler``, the first field of ``struct sigaction``)
    of each signal the JVM handles itself."""
    libc = ctypes.CDLL(None)
    found = {}
    for number in (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL):
        buffer = ctypes.create_string_buffer(512)
        assert libc.sigaction(number, None, buffer) == 0
        found[number] = buffer.raw[: ctypes.sizeof(ctypes.c_void_p)]
    return found


def test_ray_start_and_stop_keep_the_jvm_signal_handlers(faults, single):
    # Ray's core worker takes SIGSEGV & co. when it starts and resets them when it stops; the
    # JVM of this process (started by the fixture) needs its own, or Java dies at its next
    # safepoint or null check
    expected = searches(single)
    jvm = native_handlers()
    assert any(h.strip(b"\0") for h in jvm.values())
    disconnect()
    assert native_handlers() == jvm
    connect(RAY)
    assert native_handlers() == jvm
    assert searches(single) == expected


def test_a_worker_that_cannot_see_the_collection_says_so(tmp_path):
    with pytest.raises(CmrkitError, match="storage that every Ray node shares"):
        index_shard(str(tmp_path / "nowhere"), 0, str(tmp_path), False, "m", False, "x")


def test_engine_options_are_checked(single, cli, monkeypatch):
    result = cli("index", single, "--address", "auto")
    assert result.exit_code == 2
    assert "--address and --workers apply to --engine ray only" in result.stderr
    result = cli("run", "bm25", single, "--engine", "spark")
    assert result.exit_code == 2 and "'spark' is not one of 'local', 'ray'" in result.stderr
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    result = cli("index", single, "--engine", "ray", "--force")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: --engine ray needs Ray, an optional extra: pip install 'cmrkit[ray]'"
    )
    assert (single / "index" / MANIFEST).exists()
    result = cli("run", "qe", single, "--query", "mention+entities", "--engine", "ray")
    assert result.exit_code == 2 and "pip install 'cmrkit[ray]'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
