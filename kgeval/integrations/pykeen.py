"""PyKEEN integration: kgeval as a PyKEEN evaluator (pipeline, stopper, HPO), and PyKEEN models scored as PyKEEN
predicts (:mod:`kgeval.integrations.pykeen_scoring`, which kgeval also uses for any PyKEEN model it meets).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pykeen.evaluation import Evaluator
from pykeen.evaluation import RankBasedMetricResults as PyKEENRankBasedMetricResults

from kgeval.evaluator import RankBasedEvaluator as KGEvalRankBasedEvaluator
from kgeval.integrations.pykeen_scoring import PyKEENPredicting, PyKEENQueryCandidate, PyKEENScoring, pykeen_view


class RankBasedEvaluator(KGEvalRankBasedEvaluator, Evaluator):
    """kgeval's evaluator as a ``pykeen.evaluation.Evaluator``, for PyKEEN's pipeline, stopper, callbacks and HPO.

    The one line a PyKEEN user changes::

        from kgeval.integrations.pykeen import RankBasedEvaluator   # was: from pykeen.evaluation import ...
        pipeline(..., evaluator=RankBasedEvaluator, stopper="early")

    The class itself, an instance, or ``evaluator_kwargs`` (``filtered``, ``ks``, ``batch_size``, ...) all work;
    ``evaluate`` is kgeval's (it accepts PyKEEN's keyword arguments). PyKEEN's streaming interface
    (``process_scores_`` / ``finalize``) is not offered: kgeval ranks inside ``evaluate``.
    """

    metric_result_cls = PyKEENRankBasedMetricResults  # PyKEEN's HPO normalises metric keys with it

    def __init__(self, filtered: bool | str = True, **kwargs: Any) -> None:
        KGEvalRankBasedEvaluator.__init__(self, filtered=filtered, **kwargs)  # type: ignore[arg-type]
        self.requires_positive_mask = False
        self.mode = None  # transductive: PyKEEN's inductive mode does not apply

    def process_scores_(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("kgeval ranks inside evaluate(); it does not take PyKEEN's score batches")

    def clear(self) -> None:
        """Nothing to clear: kgeval keeps no state between evaluations."""

    def finalize(self) -> Any:
        raise NotImplementedError("kgeval ranks inside evaluate(), which returns the results")


__all__: Collection[str] = (
    "PyKEENPredicting", "PyKEENQueryCandidate", "PyKEENScoring", "RankBasedEvaluator", "pykeen_view",
)  # fmt: skip
