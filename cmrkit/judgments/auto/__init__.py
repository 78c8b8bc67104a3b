"""Automatic judges: label pool pairs on the assessment page's 5-point scale.

``labels`` (the labels file and its sidecar: the contract with ``judgments check`` and the
hybrid judging), ``judges`` (one interface: ``reader:DIR``, ``llm:URL``, ``llm:local``),
``cache`` (every label kept by judge, prompt and pair), ``calibration`` (scores to
probabilities to Likert labels), ``auto`` (``judgments auto``: pairs in, labels out). Import the
submodules themselves: this face loads nothing."""
