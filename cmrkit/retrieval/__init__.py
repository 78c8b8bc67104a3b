"""Retrieval baselines over a collection's Lucene index (Anserini through Pyserini).

Importing this package is cheap: the names below load their modules on first use (so a command
that needs only ``runfile``, as ``eval`` reading a run's sidecar, does not load the systems),
and the JVM, Pyserini and spaCy load inside the functions.
"""

_NAMES = {
    "IndexInfo": "index",
    "build_index": "index",
    "ensure_index": "index",
    "open_index": "index",
    "RunOptions": "options",
    "RunResult": "runfile",
    "PRESETS": "systems",
    "QE": "systems",
    "Searcher": "systems",
    "parse_weights": "systems",
    "run_bm25": "systems",
    "run_fields": "systems",
    "run_qe": "systems",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str):
    module = _NAMES.get(name)
    if module == "index":
        import cmrkit.retrieval.index as found
    elif module == "options":
        import cmrkit.retrieval.options as found
    elif module == "runfile":
        import cmrkit.retrieval.runfile as found
    elif module == "systems":
        import cmrkit.retrieval.systems as found
    else:
        raise AttributeError(f"module 'cmrkit.retrieval' has no attribute {name!r}")
    return getattr(found, name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_NAMES])
