"""cmrkit: build, run, pool and score coreference-search test collections.

The Python API (pandas DataFrames, in the shape PyTerrier, ir_measures and ranx users know)::

    import cmrkit

    run = cmrkit.read_run("runs/sample/bm25.test.trec")        # qid, docno, score, rank
    qrels = cmrkit.read_qrels("qrels/sample.test.txt")         # qid, docno, label
    topics = cmrkit.read_topics("collections/sample")          # qid, query, ...
    col = cmrkit.load_collection("collections/sample")         # .topics .qrels .corpus
    cmrkit.evaluate(run, qrels, ["AP", "RR@10"])               # qid, measure, value
    cmrkit.compare({"bm25": run, "qe": "runs/sample/qe.test.trec"}, qrels, ["AP"])

The names load :mod:`cmrkit.api` (and pandas) on first use, so ``import cmrkit`` stays light.
"""

from cmrkit._version import __version__

_API = ("read_run", "read_qrels", "read_topics", "load_collection", "evaluate", "compare")
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        from cmrkit import api

        return getattr(api, name)
    raise AttributeError(f"module 'cmrkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
