"""Retrieval baselines over a collection's Lucene index (Anserini through Pyserini).

Importing this package is cheap: the JVM, Pyserini and spaCy load inside the functions.
"""

from cmrkit.retrieval.index import IndexInfo, build_index, open_index
from cmrkit.retrieval.systems import (
    PRESETS,
    QE,
    RunResult,
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
    "RunResult",
    "Searcher",
    "build_index",
    "open_index",
    "parse_weights",
    "run_bm25",
    "run_fields",
    "run_qe",
]
