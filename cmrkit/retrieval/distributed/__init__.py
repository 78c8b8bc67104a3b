"""Past one machine: the Ray engine (``--engine ray``) for indexing and runs.

- :mod:`~cmrkit.retrieval.distributed.engine`: the engine options, the connection to a Ray
  cluster, and tasks run with retries;
- :mod:`~cmrkit.retrieval.distributed.index`: the index built shard by shard, then merged into
  one index equal in content to the single-machine one;
- :mod:`~cmrkit.retrieval.distributed.search`: the queries of a run split over workers that open
  the index from shared storage; the run file is the single-machine one, byte for byte.

The neural commands (``encode``, ``run dense``, ``run rerank``) run their tasks through
``engine.NeuralWork``; the tasks live beside the code they run (``dense/workers.py``,
``dense/search.py``, ``reader/scoring.py``).

Ray is an optional extra (``pip install 'cmrkit[ray]'``); importing this package does not import
it. See docs/scaling.md.
"""
