"""Scoring runs: trec_eval-exact ranking measures, groups, significance tests, reports, plots.

One module per idea: ``measures`` (every measure defined beside its kernel, and the names
users type), the layouts that feed the kernels: ``ranking`` (trec_eval-exact scoring, per
query), ``trec_eval`` with ``trec_bulk`` and ``trec_prefs`` (trec_eval itself), ``rescore``
(fixed runs against many qrels); ``groups``, ``significance``, ``agreement`` (two rankings of
the same systems: tau, tau_AP, RBO), ``repro`` (a run against its reproduction, as
repro_eval), ``rbo`` (both RBOs), ``bootstrap`` (resampling queries), ``report`` (JSON, CSV,
trec_eval text) and ``plot``; for coreference:
``coref`` (MUC, B3, CEAF, BLANC, LEA, CoNLL F1 as the reference scorer computes them),
``partitions`` (ARI, NMI), ``clusters`` (runs to clusters), ``spans`` (answer EM/F1) and
``units`` (a collection's annotated units). Those load numpy and are imported from their
modules, so that importing this package stays light.
"""

from cmrkit.evaluation.groups import NO_GROUP, NO_TOPIC, GroupResult, by_group, load_groups
from cmrkit.evaluation.measures import DEFAULT_MEASURES, Measure, parse_measure, parse_measures
from cmrkit.evaluation.plot import plot_differences, plot_means, plot_scatter
from cmrkit.evaluation.ranking import Result, aggregate, evaluate, evaluate_files
from cmrkit.evaluation.report import (
    comparison_to_csv,
    comparison_to_json,
    comparison_to_latex,
    comparison_to_trec,
    fixed,
    format_p,
    p_text,
    result_to_csv,
    result_to_json,
    result_to_trec,
)
from cmrkit.evaluation.significance import (
    CORRECTIONS,
    TESTS,
    Comparison,
    MeasureComparison,
    PairComparison,
    bootstrap_test,
    cohens_dz,
    compare,
    correct_pvalues,
    paired_p,
    paired_t_test,
    permutation_test,
    run_names,
    sign_test,
    tukey_hsd,
    wilcoxon_test,
)

__all__ = [
    "CORRECTIONS",
    "DEFAULT_MEASURES",
    "NO_GROUP",
    "NO_TOPIC",
    "TESTS",
    "Comparison",
    "GroupResult",
    "Measure",
    "MeasureComparison",
    "PairComparison",
    "Result",
    "aggregate",
    "bootstrap_test",
    "by_group",
    "cohens_dz",
    "compare",
    "comparison_to_csv",
    "comparison_to_json",
    "comparison_to_latex",
    "comparison_to_trec",
    "correct_pvalues",
    "evaluate",
    "evaluate_files",
    "fixed",
    "format_p",
    "load_groups",
    "paired_p",
    "p_text",
    "paired_t_test",
    "parse_measure",
    "parse_measures",
    "permutation_test",
    "plot_differences",
    "plot_means",
    "plot_scatter",
    "result_to_csv",
    "result_to_json",
    "result_to_trec",
    "run_names",
    "sign_test",
    "tukey_hsd",
    "wilcoxon_test",
]
