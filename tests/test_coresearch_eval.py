"""`cmrkit eval --convention coresearch`: the CoreSearch paper's columns, computed by hand."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from cmrkit.cli import app

QRELS = "q1 0 q1 1\nq1 0 a 1\nq1 0 b 1\nq1 0 c 0\nq2 0 x 1\nq3 0 z 0\n"
# q1 retrieves itself first (dropped), then c (non-relevant), then a; q2 finds x second
RUN = "q1 Q0 q1 1 9 t\nq1 Q0 c 2 8 t\nq1 Q0 a 3 7 t\nq2 Q0 y 1 5 t\nq2 Q0 x 2 4 t\nq3 Q0 z 1 1 t\n"


def test_coresearch_columns_by_hand(tmp_path):
    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.trec").write_text(RUN)
    args = ["eval", str(tmp_path / "r.trec"), str(tmp_path / "q.txt"), "--convention"]
    result = CliRunner().invoke(app, [*args, "coresearch", "-f", "json"])
    assert result.exit_code == 0, result.stderr
    obj = json.loads(result.stdout)
    m = obj["measures"]
    assert list(m) == ["MRR@10", "mAP@10", "mAP@50", "R@10", "R@50", "R@100", "R@500"]
    # q1: ranking c, a (its own passage dropped), relevant {a, b}; q2: y, x, relevant {x}
    assert m["MRR@10"] == (1 / 2 + 1 / 2) / 2
    assert m["mAP@10"] == ((1 / 2) / 2 + (1 / 2) / 1) / 2
    assert m["R@10"] == 2 / 3  # micro: 2 found of 3 relevant; trec_eval's recall would be 0.75
    assert obj["queries"] == 2 and obj["skipped_queries"] == ["q3"]
    assert "1 run queries without relevant judgments skipped" in result.stderr
    trec = CliRunner().invoke(app, [*args, "coresearch", "-m", "AP"])
    assert trec.exit_code == 2 and "drop -m" in trec.stderr
