"""Retrieval baselines over a collection's Lucene index (Anserini through Pyserini).

Importing this package is cheap: the JVM, Pyserini and spaCy load inside the functions.
"""

from cmrkit.retrieval.index import IndexInfo, build_index, ensure_index, open_index
from cmrkit.retrieval.options import RunOptions
from cmrkit.retrieval.runfile import RunResult
from cmrkit.retrieval.systems import (
    PRESETS,
    QE,
    Searcher,
    parse_weights,
    run_bm25,
    run_fields,
    run_qe,
)

__all__ = [
    "PRESETS",
    "QE",
    "IndexInfo",
    "RunOptions",
    "RunResult",
    "Searcher",
    "build_index",
    "ensure_index",
    "open_index",
    "parse_weights",
    "run_bm25",
    "run_fields",
    "run_qe",
]
