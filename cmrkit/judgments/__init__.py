"""Judgments, in one home: ``scale`` (the 5-point Likert scale every judgment uses, binarize,
majority), ``human`` (people's answers read and aggregated into qrels), ``simulated`` (assessors
who know complete qrels and err at a given rate), ``agreement`` (the kappas), ``pooled`` (what
they read of a pool they are handed) and ``auto`` (the automatic judges). Import the submodules
themselves: this face loads nothing."""
