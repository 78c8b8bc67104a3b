"""Cross-document coreference from a collection's mentions: topic scopes (``scopes.py``), the
lemma baselines (``lemma.py``), thresholded average-link clustering (``agglomerative.py``) and
the clustering of a split by a method within a scope (``cluster.py``), which `cmrkit cluster`
calls; ``evaluation/coref.py`` scores the result."""
