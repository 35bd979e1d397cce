"""kgeval: exact, fast and lean rank-based evaluation of knowledge-graph-embedding models.

>>> from kgeval import RankBasedEvaluator
>>> evaluator = RankBasedEvaluator(filtered=True, ks=(1, 3, 5, 10))
"""

from types import ModuleType
from typing import TYPE_CHECKING

from kgeval import _moved
from kgeval._version import __version__ as __version__
from kgeval.accumulator import MetricAccumulator
from kgeval.constraints import TypeConstraints
from kgeval.early_stopping import EarlyStopper
from kgeval.evaluator import RankBasedEvaluator
from kgeval.exceptions import UndefinedMetricWarning
from kgeval.predict import predict_top_k
from kgeval.results import RankBasedMetricResults
from kgeval.variants.macro import MacroRankBasedEvaluator
from kgeval.variants.precomputed import evaluate_scores
from kgeval.variants.sampled import SampledRankBasedEvaluator
from kgeval.variants.temporal import TemporalRankBasedEvaluator

__all__ = [
    "EarlyStopper",
    "MacroRankBasedEvaluator",
    "MetricAccumulator",
    "RankBasedEvaluator",
    "RankBasedMetricResults",
    "SampledRankBasedEvaluator",
    "TemporalRankBasedEvaluator",
    "TypeConstraints",
    "UndefinedMetricWarning",
    "evaluate_scores",
    "predict_top_k",
]

_moved.install()  # the module paths that moved warn and forward for one minor release (kgeval._moved.MOVED)

if not TYPE_CHECKING:  # hidden from type checkers, which would otherwise accept any name of the package

    def __getattr__(name: str) -> ModuleType:
        """``kgeval.<old module>`` read as an attribute: the moved module's stand-in, with its FutureWarning."""
        return _moved.moved_attribute(__name__, name)
