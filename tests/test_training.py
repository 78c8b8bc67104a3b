"""What both trainers share (`cmrkit.retrieval.training`), on a small real torch model and real
folders: the model folder's claim, keep and refuse, the decay groups, the schedule, the epoch
loop with its log and dev measures, the seeds."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cmrkit.errors import CmrkitError  # noqa: E402
from cmrkit.retrieval import training  # noqa: E402

META = "cmrkit-reader.json"  # a reader's metadata file (kind "reader")


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 1)
        self.LayerNorm = torch.nn.LayerNorm(3)

    def forward(self, x):
        return self.linear(self.LayerNorm(x))


def _data(n: int = 24) -> list[tuple[list[float], float]]:
    rng = random.Random(5)
    out = []
    for _ in range(n):
        x = [rng.uniform(-1, 1) for _ in range(3)]
        out.append((x, 2 * x[0] - x[1] + 0.5 * x[2]))
    return out


def _train(net, examples, *, epochs=3, batch_size=4, steps=None, eval_dev=None, dev_before=True):
    named = list(net.named_parameters())
    optimizer = training.adamw([(named, 0.05)], 0.01)
    epoch_lists = [examples] * epochs
    steps = steps or training.total_steps(epoch_lists, batch_size, None)
    timings: dict[str, float] = {}

    def batch_loss(batch):
        x = torch.tensor([b[0] for b in batch])
        y = torch.tensor([b[1] for b in batch])
        return torch.nn.functional.mse_loss(net(x).squeeze(-1), y)

    log, step = training.train_epochs(
        epoch_lists,
        batch_size=batch_size,
        steps=steps,
        batch_loss=batch_loss,
        train_mode=net.train,
        parameters=[p for _, p in named],
        optimizer=optimizer,
        scheduler=training.linear_schedule(optimizer, 0.1, steps),
        eval_dev=eval_dev,
        timings=timings,
        progress=False,
        label="test",
        dev_before=dev_before,
    )
    return log, step, timings


def test_check_steps_refuses_bad_values_in_one_line():
    training.check_steps(None, 0.0)
    training.check_steps(1, 0.99)
    for max_steps, warmup, flag in (
        (0, 0.1, "--max-steps"),
        (5, 1.0, "--warmup"),
        (5, -0.1, "--warmup"),
    ):
        with pytest.raises(CmrkitError, match=flag):
            training.check_steps(max_steps, warmup)


def test_total_steps_counts_batches_of_every_epoch_and_caps_them():
    epochs = [list(range(5)), list(range(3))]
    assert training.total_steps(epochs, 2, None) == 3 + 2
    assert training.total_steps(epochs, 2, 4) == 4
    assert training.total_steps(epochs, 10, None) == 2


def test_adamw_leaves_biases_and_layer_norms_without_decay_at_each_parts_rate():
    net = _Net()
    named = list(net.named_parameters())
    heads = [("head.weight", torch.nn.Parameter(torch.zeros(2)))]
    optimizer = training.adamw([(named, 1e-3), (heads, 5e-2)], 0.25)
    groups = [
        (g["lr"], g["weight_decay"], {id(p) for p in g["params"]}) for g in optimizer.param_groups
    ]
    by_param = {
        id(p): (lr, wd)
        for lr, wd, ids in groups
        for p in [*net.parameters(), heads[0][1]]
        if id(p) in ids
    }
    assert by_param[id(net.linear.weight)] == (1e-3, 0.25)
    assert by_param[id(net.linear.bias)] == (1e-3, 0.0)
    assert by_param[id(net.LayerNorm.weight)] == (1e-3, 0.0)
    assert by_param[id(heads[0][1])] == (5e-2, 0.25)


def test_linear_schedule_warms_up_then_decays_to_zero():
    p = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([p], lr=1.0)
    scheduler = training.linear_schedule(optimizer, 0.2, 10)  # 2 warm-up steps
    rates = []
    for _ in range(10):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates[0] < rates[1] < rates[2] == pytest.approx(1.0)
    assert all(a > b for a, b in zip(rates[2:], rates[3:], strict=False))
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.0)


def test_train_epochs_lowers_the_loss_logs_each_step_and_scores_dev_after_each_epoch():
    training.seed_all(3)
    net = _Net()
    dev_calls = []

    def eval_dev():
        dev_calls.append(net.training)
        return {"RR@10": float(len(dev_calls))}

    log, step, timings = _train(net, _data(), epochs=3, eval_dev=eval_dev)
    assert step == 18 and [e["step"] for e in log["loss"]] == list(range(1, 19))
    assert [e["epoch"] for e in log["epochs"]] == [0, 1, 2, 3]  # 0: before training
    assert [e.get("steps") for e in log["epochs"]] == [None, 6, 6, 6]
    assert [e["dev"]["RR@10"] for e in log["epochs"]] == [1.0, 2.0, 3.0, 4.0]
    means = [e["mean_loss"] for e in log["epochs"][1:]]
    assert means[-1] < means[0] / 2
    assert set(timings) == {"dev", "train", "steps_per_second"}


def test_train_epochs_stops_at_the_step_limit_and_skips_the_dev_score_before():
    net = _Net()
    log, step, timings = _train(
        net, _data(), epochs=3, steps=7, eval_dev=lambda: {}, dev_before=False
    )
    assert step == 7 and len(log["loss"]) == 7
    assert [(e["epoch"], e["steps"]) for e in log["epochs"]] == [(1, 6), (2, 1)]
    assert "dev" in timings


def test_seed_all_makes_the_same_training_twice():
    runs = []
    for _ in range(2):
        training.seed_all(11)
        draws = (random.random(), float(np.random.rand()), float(torch.rand(1)))
        net = _Net()
        _train(net, _data(), epochs=1)
        runs.append((draws, [p.detach().clone() for p in net.parameters()]))
    assert runs[0][0] == runs[1][0]
    assert all(torch.equal(a, b) for a, b in zip(runs[0][1], runs[1][1], strict=True))


@dataclass(frozen=True)
class _Opts:
    seed: int = 13
    where: Path = Path("runs/x.trec")


def test_options_record_and_write_json_are_plain_sorted_json(tmp_path):
    record = training.options_record(_Opts())
    assert record == {"seed": 13, "where": "runs/x.trec"}
    training.write_json(tmp_path / "a.json", {"b": 1, "a": [1, 2]})
    assert (tmp_path / "a.json").read_text() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'


def _write_model(folder: training.ModelFolder, metadata: dict, log: dict) -> None:
    target = folder.target()
    target.mkdir(parents=True, exist_ok=True)
    (target / "weights.bin").write_bytes(b"w")
    training.write_json(target / META, metadata)
    folder.finish(log, None)


def _meta(seed: int = 13, steps: int = 4) -> dict:
    return {"parameters": {"seed": seed, "steps": steps}, "data": {"collection": "c"}}


def test_model_folder_writes_whole_then_keeps_an_up_to_date_model(tmp_path):
    out = tmp_path / "model"
    with training.ModelFolder(
        out, kind="reader", metadata=META, files=["weights.bin"], force=False
    ) as folder:
        assert folder.kept(_meta(), varying=["data.collection"]) is None
        assert not out.exists()  # nothing at the final path before finish
        _write_model(folder, _meta(), {"loss": [1.0]})
    assert json.loads((out / training.TRAIN_LOG).read_text()) == {"loss": [1.0]}
    moved = _meta()
    moved["data"]["collection"] = "elsewhere"
    with training.ModelFolder(
        out, kind="reader", metadata=META, files=["weights.bin"], force=False
    ) as folder:
        folder.check_options({"seed": 13})
        assert folder.kept(moved, varying=["data.collection"]) == {"loss": [1.0]}


def test_model_folder_refuses_a_model_trained_otherwise_naming_the_difference(tmp_path):
    out = tmp_path / "model"
    with training.ModelFolder(
        out, kind="reader", metadata=META, files=["weights.bin"], force=False
    ) as folder:
        _write_model(folder, _meta(), {})
    with training.ModelFolder(out, kind="reader", metadata=META, force=False) as folder:
        with pytest.raises(CmrkitError, match=r"trained otherwise \(parameters.seed: 13 here, 14"):
            folder.check_options({"seed": 14})
        with pytest.raises(CmrkitError, match=r"parameters.steps: 4 here, 5 asked"):
            folder.kept(_meta(steps=5))
    with training.ModelFolder(
        out, kind="reader", metadata=META, files=["weights.bin"], force=True
    ) as folder:
        assert folder.kept(_meta(steps=5)) is None  # --force: trained again
        _write_model(folder, _meta(steps=5), {"again": True})
    assert json.loads((out / META).read_text())["parameters"]["steps"] == 5


def test_check_options_counts_an_absent_mode_as_its_default_and_names_a_mode_first(tmp_path):
    out = tmp_path / "model"
    with training.ModelFolder(
        out, kind="reader", metadata=META, files=["weights.bin"], force=False
    ) as folder:
        _write_model(folder, _meta(), {})  # a folder from before the mode existed
    modes = {"objective": "coresearch"}
    with training.ModelFolder(out, kind="reader", metadata=META, force=False) as folder:
        folder.check_options({"seed": 13}, implicit=modes)  # absent: the default, kept
        with pytest.raises(CmrkitError, match=r'parameters.objective: "coresearch" here, "eer"'):
            folder.check_options({"seed": 13, "objective": "eer"}, implicit=modes)
        # the mode is named before the other difference (seed sorts first)
        with pytest.raises(CmrkitError, match=r"parameters.objective: "):
            folder.check_options({"seed": 14, "objective": "eer"}, implicit=modes)
        with pytest.raises(CmrkitError, match=r"parameters.seed: 13 here, 14 asked"):
            folder.check_options({"seed": 14}, implicit=modes)


def test_model_folder_refuses_a_folder_that_is_not_a_model_and_a_model_missing_files(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(CmrkitError, match="a folder that cmrkit did not write"):
        training.ModelFolder(other, kind="reader", metadata=META, force=False)
    assert (other / "notes.txt").read_text() == "mine"
    out = tmp_path / "model"
    with training.ModelFolder(
        out, kind="reader", metadata=META, files=["weights.bin"], force=False
    ) as folder:
        _write_model(folder, _meta(), {})
    (out / "weights.bin").unlink()
    with training.ModelFolder(
        out, kind="reader", metadata=META, files=["weights.bin"], force=False
    ) as folder:
        with pytest.raises(CmrkitError, match="weights.bin is missing"):
            folder.kept(_meta())


def test_model_folder_leaves_nothing_when_training_fails(tmp_path):
    out = tmp_path / "model"
    with pytest.raises(RuntimeError):
        with training.ModelFolder(out, kind="reader", metadata=META, force=False) as folder:
            folder.target().mkdir(parents=True)
            (folder.target() / "weights.bin").write_bytes(b"half")
            raise RuntimeError("interrupted")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_train_qrels_refuses_a_split_without_qrels(tmp_path):
    from retrieval_collection import topic, unit, write_collection

    units = [unit("P:1", "some text"), unit("P:2", "more text")]
    topics = [topic("q1", "dev", "some", "some text", "P:1")]
    coll = write_collection(tmp_path, "c", units, topics, {"dev": {"q1": ["P:2"]}})
    path, qrels = training.train_qrels(coll, "dev", tmp_path / "qrels")
    assert path == tmp_path / "qrels" / "c.dev.txt" and dict(qrels["q1"]) == {"P:2": 1}
    with pytest.raises(CmrkitError, match="no qrels for the train split 'train'"):
        training.train_qrels(coll, "train", tmp_path / "qrels")


def test_train_epochs_counts_the_queries_its_steps_used():
    """`train reader --max-steps 20` said "trained 20 steps on 949 queries" when the steps took
    about 40 of them: the log now counts the examples the steps took and their queries (the
    first item of each example), of the queries in all epochs."""
    rng = random.Random(2)
    examples = [(f"q{i % 10}", *_data(1)[0]) for i in range(30)]  # 10 queries, 3 each
    rng.shuffle(examples)

    def run(steps: int) -> dict:
        net = _Net()
        named = list(net.named_parameters())
        optimizer = training.adamw([(named, 0.05)], 0.01)

        def batch_loss(batch):
            x = torch.tensor([b[1] for b in batch])
            return net(x).pow(2).mean()

        log, _ = training.train_epochs(
            [examples, examples], batch_size=4, steps=steps, batch_loss=batch_loss,
            train_mode=net.train, parameters=[p for _, p in named], optimizer=optimizer,
            scheduler=training.linear_schedule(optimizer, 0.1, steps), eval_dev=None,
            timings={}, progress=False, label="test",
        )  # fmt: skip
        return log["used"]

    first = examples[:8]
    assert run(2) == {"examples": 8, "queries": len({x[0] for x in first}), "of_queries": 10}
    assert run(16) == {"examples": 60, "queries": 10, "of_queries": 10}
    # examples of another shape (the first item a list): the queries are not counted
    log, _, _ = _train(_Net(), _data(), epochs=1)
    assert log["used"] == {"examples": 24, "queries": None, "of_queries": None}


def test_the_loss_plot_has_whole_step_ticks_and_says_what_was_trained(tmp_path):
    """Loss plots had fractional step ticks (0.0, 0.5, ... for two steps) and no title: the
    ticks are whole steps and epochs, and the title names the model's kind, collection and
    split, the steps and the queries they used."""
    from cmrkit.figures import training_figure

    drawn = {}

    def draw(log, path):
        drawn["log"] = log
        Path(path).write_bytes(b"png")

    out = tmp_path / "model"
    meta = {"parameters": {"seed": 1}, "data": {"collection": "collections/ecb", "train_split":
            "train"}}  # fmt: skip
    log = {
        "loss": [{"step": 1, "epoch": 1, "loss": 0.9}, {"step": 2, "epoch": 1, "loss": 0.7}],
        "epochs": [{"epoch": 1, "steps": 2, "mean_loss": 0.8, "dev": {"RR@10": 0.5}},
                   {"epoch": 2, "steps": 0, "mean_loss": 0.8, "dev": {"RR@10": 0.6}}],
        "used": {"examples": 4, "queries": 4, "of_queries": 949},
    }  # fmt: skip
    with training.ModelFolder(
        out, kind="reader", metadata=META, files=["weights.bin"], force=False
    ) as folder:
        target = folder.target()
        target.mkdir(parents=True)
        (target / "weights.bin").write_bytes(b"w")
        training.write_json(target / META, meta)
        folder.finish(log, draw)
    title = "reader (train reader) trained on ecb train: 2 steps on 4 of 949 queries"
    assert drawn["log"]["title"] == title
    assert "title" not in json.loads((out / training.TRAIN_LOG).read_text())
    fig = training_figure(drawn["log"], ("RR@10",))
    fig.canvas.draw()
    assert fig._suptitle.get_text() == title
    for ax in fig.axes:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
    import matplotlib.pyplot as plt

    plt.close(fig)
