"""Deprecated: the simulated assessors are :mod:`cmrkit.judgments.simulated`, the Likert scale
:mod:`cmrkit.judgments.scale` and the kappas :mod:`cmrkit.judgments.agreement`; this path goes
in the next release."""

from cmrkit.judgments.moved import moved

__getattr__ = moved(
    __name__,
    {
        **dict.fromkeys(
            ("LIKERT", "LABELS", "LABELS_TEXT", "MAX_ASSESSORS", "binarize", "majority"),
            "cmrkit.judgments.scale",
        ),
        **dict.fromkeys(
            ("agreement_rows", "fleiss_kappa", "cohen_kappa", "weighted_kappa"),
            "cmrkit.judgments.agreement",
        ),
        **dict.fromkeys(("SimulatedAssessors", "check_assessors"), "cmrkit.judgments.simulated"),
    },
)
