"""Triple classification: can the model tell a true triple from a false one? Each labelled triple is scored by the
model, a threshold per relation is fitted on validation, and test triples scoring at or above their relation's
threshold are called true (:func:`classify_triples`; precomputed scores: :func:`classify_scores`).

The labelled triples come from a dataset split and CoDEx's hard negatives (:func:`load_split_with_negatives`), from a
``head relation tail label`` file as WN11 and FB13 ship them (:func:`read_labelled_triples`), or from tensors
(:class:`LabelledTriples`), or drawn with a seed (:func:`draw_negatives`, :func:`split_with_drawn_negatives`).
docs/classification.md describes the conventions (``"kgeval"``, ``"codex"``, ``"torchkge"``, ``"global"``,
``"pykeen"``), the drawn negatives and the metrics.

The modules, each importing only those above it here: :mod:`~kgeval.variants.classification.negatives` (negatives
drawn with a seed), :mod:`~kgeval.variants.classification.labelled` (the labelled triples: read, or a split with its
negatives), :mod:`~kgeval.variants.classification.metrics` (the metrics, ROC-AUC and average precision among them),
:mod:`~kgeval.variants.classification.thresholds` (the thresholds fitted on validation, by convention) and
:mod:`~kgeval.variants.classification.triples` (the model's scores, the classification and its results); beside
them PyKEEN's all-pairs protocol: :mod:`~kgeval.variants.classification.pair_counts` (exact counts of more pairs than
memory holds), :mod:`~kgeval.variants.classification.pykeen_formulas` (PyKEEN's 22 metrics, its quirks reproduced)
and :mod:`~kgeval.variants.classification.all_pairs` (:func:`classify_all_pairs`: every (query, entity) pair an
instance, scored in tiles).
"""

from kgeval.variants.classification.all_pairs import (
    AllPairsClassification,
    AllPairsResults,
    classify_all_pairs,
    classify_scored_pairs,
)
from kgeval.variants.classification.labelled import (
    LabelledTriples,
    load_split_with_negatives,
    read_labelled_triples,
    split_with_drawn_negatives,
)
from kgeval.variants.classification.metrics import CLASSIFICATION_METRICS, average_precision, roc_auc
from kgeval.variants.classification.negatives import NEGATIVE_STRATEGIES, DrawnNegativesReport, draw_negatives
from kgeval.variants.classification.statistics import (
    CLASSIFICATION_TESTS,
    classification_interval,
    compare_classifications,
)
from kgeval.variants.classification.thresholds import CONVENTIONS, best_threshold, top_p_predictions
from kgeval.variants.classification.triples import (
    TripleClassificationResults,
    classify_scores,
    classify_triples,
    score_triples,
)

__all__ = [
    "CLASSIFICATION_METRICS",
    "CLASSIFICATION_TESTS",
    "CONVENTIONS",
    "NEGATIVE_STRATEGIES",
    "AllPairsClassification",
    "AllPairsResults",
    "DrawnNegativesReport",
    "LabelledTriples",
    "TripleClassificationResults",
    "average_precision",
    "best_threshold",
    "classification_interval",
    "classify_all_pairs",
    "classify_scored_pairs",
    "classify_scores",
    "classify_triples",
    "compare_classifications",
    "draw_negatives",
    "load_split_with_negatives",
    "read_labelled_triples",
    "roc_auc",
    "score_triples",
    "split_with_drawn_negatives",
    "top_p_predictions",
]
