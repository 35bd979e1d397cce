"""Evaluation variants built on the evaluator: each a module of its own (triple classification a package).

- :mod:`kgeval.variants.sampled`: ranks among sampled negatives (``SampledRankBasedEvaluator``);
- :mod:`kgeval.variants.macro`: macro-weighted metrics, every query weighted alike (``MacroRankBasedEvaluator``);
- :mod:`kgeval.variants.temporal`: temporal link prediction, time-aware filters (``TemporalRankBasedEvaluator``);
- :mod:`kgeval.variants.precomputed`: ranks of scores a caller computed (``evaluate_scores``);
- :mod:`kgeval.variants.classification`: triple classification, thresholds fitted on validation
  (``classify_triples``), negatives drawn with a seed (``draw_negatives``), PyKEEN's all-pairs protocol
  (``classify_all_pairs``), intervals and paired comparisons (``classification_interval``);
- :mod:`kgeval.variants.undirected`: relation prediction without the direction (``evaluate_undirected_relations``);
- :mod:`kgeval.variants.ranked_lists`: ranked lists a model hands in (``evaluate_ranked_lists``), OGB-LSC's
  WikiKG90Mv2 MRR (``wikikg90mv2_mrr``);
- :mod:`kgeval.variants.examples`: per-example rows, each triple's filtered ranks and top-k predictions from one
  pass (``rank_examples``, ``write_examples``).

A new variant is a new module here, re-exported below (CONTRIBUTING.md); the link-prediction evaluators and
``evaluate_scores`` -- the headline APIs -- are also re-exported from :mod:`kgeval`, the other questions' functions
(classification, undirected relations, ranked lists, per-example rows) are imported from here.
"""

from kgeval.variants.classification import (
    CLASSIFICATION_METRICS,
    CONVENTIONS,
    NEGATIVE_STRATEGIES,
    AllPairsResults,
    DrawnNegativesReport,
    LabelledTriples,
    TripleClassificationResults,
    average_precision,
    best_threshold,
    classification_interval,
    classify_all_pairs,
    classify_scores,
    classify_triples,
    compare_classifications,
    draw_negatives,
    load_split_with_negatives,
    read_labelled_triples,
    roc_auc,
    score_triples,
    split_with_drawn_negatives,
    top_p_predictions,
)
from kgeval.variants.examples import rank_examples, write_examples
from kgeval.variants.macro import MacroRankBasedEvaluator, macro_results, query_weights
from kgeval.variants.precomputed import evaluate_scores
from kgeval.variants.ranked_lists import RankedListResults, evaluate_ranked_lists, wikikg90mv2_mrr
from kgeval.variants.sampled import SampledRankBasedEvaluator
from kgeval.variants.temporal import (
    TEMPORAL_FILTERS,
    TemporalFilter,
    TemporalRankBasedEvaluator,
    TemporalRankBasedMetricResults,
)
from kgeval.variants.undirected import evaluate_undirected_relations

__all__ = [
    "CLASSIFICATION_METRICS",
    "CONVENTIONS",
    "NEGATIVE_STRATEGIES",
    "TEMPORAL_FILTERS",
    "AllPairsResults",
    "DrawnNegativesReport",
    "LabelledTriples",
    "MacroRankBasedEvaluator",
    "RankedListResults",
    "SampledRankBasedEvaluator",
    "TemporalFilter",
    "TemporalRankBasedEvaluator",
    "TemporalRankBasedMetricResults",
    "TripleClassificationResults",
    "average_precision",
    "best_threshold",
    "classification_interval",
    "classify_all_pairs",
    "classify_scores",
    "classify_triples",
    "compare_classifications",
    "draw_negatives",
    "evaluate_ranked_lists",
    "evaluate_scores",
    "evaluate_undirected_relations",
    "load_split_with_negatives",
    "macro_results",
    "query_weights",
    "rank_examples",
    "read_labelled_triples",
    "roc_auc",
    "score_triples",
    "split_with_drawn_negatives",
    "top_p_predictions",
    "wikikg90mv2_mrr",
    "write_examples",
]
