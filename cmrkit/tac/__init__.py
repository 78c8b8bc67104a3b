"""TAC KBP entity collections in the CMR layout: ``collection`` (sentence units, queries, qrels),
``chains`` (within-document chains and their features) and ``cmr`` (the published CMR files)."""
