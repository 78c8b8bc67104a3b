"""The reader: a cross-encoder over the marked query and one candidate unit (CoreSearch's
end-to-end system), with start/end span heads and a passage-selection head.

``features`` turns texts into token windows (character offsets kept), ``model`` holds the
network and its folder, ``scoring`` reads (query, unit) pairs with it (``score_pairs``: what
``run rerank``, the dev reranking of training and the reader judge call), ``train`` is ``cmrkit
train reader`` and ``rerank`` is ``cmrkit run rerank``. torch is imported only inside functions
(and in ``model``, which the others import lazily).
"""
