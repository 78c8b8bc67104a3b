"""The labels file of the automatic judges: written sorted, read back typed, read by
`judgments aggregate` as its simple CSV, bad files refused in one line naming the line."""

from __future__ import annotations

import pytest

from cmrkit.errors import CmrkitError
from cmrkit.judgments.auto.labels import (
    LABELS_COLUMNS,
    Label,
    labels_text,
    read_labels,
    read_labels_sidecar,
    sidecar_path,
    write_labels,
)
from cmrkit.judgments.human import read_judgments


def test_round_trip_sorted_and_aggregate_reads_it(tmp_path):
    labels = [
        Label("q10", "d1", "auto:reader", 5, 0.9732144),
        Label("q2", "d9", "auto:reader", 2, None),
        Label("q2", "=cmd", "auto:reader", 4, 0.5),
    ]
    path = tmp_path / "labels.csv"
    write_labels(labels, path)
    text = path.read_text(encoding="utf-8")
    assert text.splitlines() == [
        ",".join(LABELS_COLUMNS),
        "q2,'=cmd,auto:reader,4,0.500000",
        "q2,d9,auto:reader,2,",
        "q10,d1,auto:reader,5,0.973214",
    ]
    assert text == labels_text(reversed(labels))
    back = read_labels(path)
    assert [(x.qid, x.docno, x.judge, x.label, x.probability, x.line) for x in back] == [
        ("q2", "=cmd", "auto:reader", 4, 0.5, 2),
        ("q2", "d9", "auto:reader", 2, None, 3),
        ("q10", "d1", "auto:reader", 5, 0.973214, 4),
    ]
    people = read_judgments(path)
    assert [(j.qid, j.docno, j.worker, j.label) for j in people][0] == (
        "q2",
        "=cmd",
        "auto:reader",
        4,
    )
    assert read_labels_sidecar(path) is None
    assert sidecar_path(path).name == "labels.csv.json"


@pytest.mark.parametrize(
    "body,message",
    [
        ("query_id,doc_id,label\nq1,d1,5\n", "lacks worker_id"),
        ("query_id,doc_id,worker_id,label,probability\nq1,d1,auto:x,7,\n", "line 2: label '7'"),
        ("query_id,doc_id,worker_id,label,probability\nq1,d1,auto:x,5,1.5\n", "probability"),
        ("query_id,doc_id,worker_id,label,probability\nq1,d1,auto:x,5,nan\n", "probability"),
        ("query_id,doc_id,worker_id,label,probability\nq1,,auto:x,5,\n", "empty doc_id"),
        (
            "query_id,doc_id,worker_id,label,probability\nq1,d1,auto:x,5,\nq1,d1,auto:x,4,\n",
            "line 3: pair q1 d1 is labelled twice",
        ),
        ("", "empty labels file"),
    ],
)
def test_bad_labels_refused(tmp_path, body, message):
    path = tmp_path / "bad.csv"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(CmrkitError, match=message):
        read_labels(path)


def test_unreadable_sidecar(tmp_path):
    path = tmp_path / "l.csv"
    write_labels([], path)
    sidecar_path(path).write_text("{", encoding="utf-8")
    with pytest.raises(CmrkitError, match="not JSON"):
        read_labels_sidecar(path)
