"""Runs given together that are one run: the same documents with the same scores for every
query (a copy, the run exported with its ir_metadata block). Ranked or compared as two
systems, they weigh one system twice, so the commands that rank systems say so."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from cmrkit.trec import RunColumns, run_columns


def _signature(cols: RunColumns) -> tuple:
    """Equal for identical runs, whatever the order of their lines: the queries, the number
    of lines, and a digest of the sorted scores."""
    import numpy as np

    scores = np.sort(np.asarray(cols.scores, dtype=np.float64))
    return (
        tuple(sorted(cols.qids)),
        len(scores),
        hashlib.sha256(scores.tobytes()).hexdigest(),
    )


def identical_runs(runs: Mapping[str, RunColumns | Mapping[str, Mapping[str, float]]]):
    """The groups (two runs or more, in the order given) of ``runs`` (name -> run) that hold
    the same documents with the same scores for every query."""
    cols = {n: r if isinstance(r, RunColumns) else run_columns(r) for n, r in runs.items()}
    by_signature: dict[tuple, list[str]] = {}
    for name, c in cols.items():
        by_signature.setdefault(_signature(c), []).append(name)
    groups = []
    for names in by_signature.values():
        canon: list[tuple[dict, list[str]]] = []
        for name in names if len(names) > 1 else ():
            run = cols[name].to_run()  # dicts compare whatever their order
            for seen, members in canon:
                if seen == run:
                    members.append(name)
                    break
            else:
                canon.append((run, [name]))
        groups += [members for _, members in canon if len(members) > 1]
    order = list(cols)
    return sorted(groups, key=lambda g: order.index(g[0]))
