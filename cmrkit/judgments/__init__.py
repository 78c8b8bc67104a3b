"""Judgments, in one home: ``scale`` (the 5-point Likert scale every judgment uses, binarize,
majority), ``human`` (people's answers read and aggregated into qrels), ``simulated`` (assessors
who know complete qrels and err at a given rate), ``agreement`` (the kappas), ``pooled`` (what
they read of a pool they are handed) and ``auto`` (the automatic judges). Import the submodules
themselves: this face loads nothing. The names of the module ``cmrkit.judgments`` was until 0.5
resolve here for one release, with a DeprecationWarning naming their new home."""

from cmrkit.judgments.moved import moved

_HUMAN = "cmrkit.judgments.human"
_SCALE = "cmrkit.judgments.scale"
_AGREEMENT = "cmrkit.judgments.agreement"
_SIMULATED = "cmrkit.judgments.simulated"

__getattr__ = moved(
    __name__,
    {
        **dict.fromkeys(
            (
                "SIMPLE_COLUMNS",
                "BLIND_COLUMNS",
                "MTURK_COLUMNS",
                "Judgment",
                "read_judgments",
                "read_feedback",
                "decide",
                "needed_more",
                "Aggregate",
                "undecidable",
                "nothing_kept",
                "aggregate",
                "write_simple_csv",
            ),
            _HUMAN,
        ),
        **dict.fromkeys(("simulate", "SimulatedAssessors", "check_assessors"), _SIMULATED),
        **dict.fromkeys(("LABELS", "LABELS_TEXT", "MAX_ASSESSORS", "binarize", "majority"), _SCALE),
        **dict.fromkeys(("agreement_rows", "cohen_kappa", "fleiss_kappa"), _AGREEMENT),
    },
)
