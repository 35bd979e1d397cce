"""PyKEEN integration: kgeval as a PyKEEN evaluator (pipeline, stopper, HPO), and PyKEEN models scored as PyKEEN
predicts (:mod:`kgeval.adapters.pykeen`, which kgeval also uses for any PyKEEN model it meets).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from pykeen.evaluation import Evaluator, MetricResults
from pykeen.evaluation import RankBasedMetricResults as PyKEENRankBasedMetricResults

from kgeval.accumulator import MetricAccumulator
from kgeval.adapters.inductive import check_mode
from kgeval.adapters.pykeen import PyKEENPredicting, PyKEENQueryCandidate, PyKEENScoring, pykeen_view
from kgeval.evaluator import RankBasedEvaluator as KGEvalRankBasedEvaluator
from kgeval.integrations.pykeen_classification import ClassificationEvaluator, ClassificationMetricResults
from kgeval.results import RankBasedMetricResults as KGEvalRankBasedMetricResults
from kgeval.typing import EntityTarget
from kgeval.variants.macro import macro_results
from kgeval.variants.precomputed import ranks_in_full_rows
from kgeval.variants.sampled import SampledRankBasedEvaluator as KGEvalSampledRankBasedEvaluator


class RankBasedMetricResults(KGEvalRankBasedMetricResults, MetricResults):
    """kgeval's results that are also a ``pykeen.evaluation.MetricResults``, so PyKEEN code that checks
    ``isinstance(results, MetricResults)`` accepts them; what the PyKEEN-facing evaluators return. Everything else is
    :class:`kgeval.RankBasedMetricResults` (whose methods come first)."""

    @classmethod
    def of(cls, results: KGEvalRankBasedMetricResults) -> RankBasedMetricResults:
        """The same results (data, ks, records, raw results, null model) as this class."""
        if isinstance(results, cls):
            return results
        return cls(**{field.name: getattr(results, field.name) for field in dataclasses.fields(results)})


class _ScoreStreaming:
    """PyKEEN's streaming interface on kgeval's accumulators, shared by the PyKEEN-facing evaluators: ranks of each
    target side are added with :meth:`_stream`, and :meth:`finalize` reports the ranks seen since the last
    :meth:`clear` (through :meth:`_reported`, which a macro evaluator weights)."""

    ks: tuple[int, ...]
    clear_on_finalize: bool
    num_entities: int | None
    _streamed: dict[str, MetricAccumulator]

    def _stream(
        self,
        target: str,
        ranks: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        hrt_batch: torch.Tensor,
        num_entities: int,
    ) -> None:
        accumulator = self._streamed.get(target)
        if accumulator is None:
            accumulator = self._streamed[target] = MetricAccumulator(ks=self.ks, keep_records=True)
        accumulator.update(*ranks, triples=hrt_batch)
        self.num_entities = num_entities

    def clear(self) -> None:
        """Forget the ranks streamed through ``process_scores_`` (``evaluate`` keeps no state)."""
        self._streamed = {}

    def finalize(self) -> RankBasedMetricResults:
        """The metrics of the ranks streamed since the last :meth:`clear` (then cleared, with
        ``clear_on_finalize``); a ValueError when there are none."""
        results = self._reported(self._streamed_ranks())
        if self.clear_on_finalize:
            self.clear()
        return results

    def finalize_multi(self, n_boot: int = 1_000, seed: int = 42) -> dict[str, list[float]]:
        """Every flat metric key -> its values over ``n_boot`` bootstrap resamples of the streamed tasks (each side's
        tasks drawn with replacement, resample i seeded by ``seed + i``); the ranks are kept."""
        records = self._streamed_ranks().records
        assert records is not None
        sides = [np.flatnonzero(records.side == code) for code in np.unique(records.side)]
        values: dict[str, list[float]] = {}
        for i in range(n_boot):
            rng = np.random.default_rng(seed + i)
            drawn = np.concatenate([rows[rng.integers(0, rows.size, rows.size)] for rows in sides])
            resampled = records.select(drawn)
            resampled_results = self._reported(KGEvalRankBasedMetricResults.from_records(resampled, ks=self.ks))
            for key, value in resampled_results.to_flat_dict().items():
                values.setdefault(key, []).append(value)
        return values

    def finalize_with_confidence(
        self,
        estimator: str | Callable[[Sequence[float]], float] = np.median,
        ci: int | str | Callable[[Sequence[float]], float] = 90,
        n_boot: int = 1_000,
        seed: int = 42,
    ) -> dict[str, tuple[float, float]]:
        """Every flat metric key -> (central tendency, confidence) over :meth:`finalize_multi`'s resamples, summarised
        by PyKEEN's own ``summarize_values`` (``ci`` an int: the inter-percentile range of that width)."""
        from pykeen.evaluation.rank_based_evaluator import summarize_values

        return {key: summarize_values(values, estimator=estimator, ci=ci)
                for key, values in self.finalize_multi(n_boot=n_boot, seed=seed).items()}  # fmt: skip

    def _streamed_ranks(self) -> KGEvalRankBasedMetricResults:
        """The (unweighted) results of the streamed ranks, with their records."""
        if not self._streamed:
            raise ValueError("no ranks to finalize: process_scores_ has not been called since the last clear()")
        return KGEvalRankBasedMetricResults.from_accumulators(self._streamed, self.ks)

    def _reported(self, results: KGEvalRankBasedMetricResults) -> RankBasedMetricResults:
        """What this evaluator reports of results with records: themselves, as PyKEEN-facing results."""
        return RankBasedMetricResults.of(results)


def _checked_score_batch(
    evaluator: Any, hrt_batch: torch.Tensor, target: str, scores: torch.Tensor, true_scores: torch.Tensor | None
) -> torch.Tensor:
    """The true scores of a ``process_scores_`` batch as a (B,) tensor of the scores' dtype, after checking the
    batch (see :meth:`RankBasedEvaluator.process_scores_`)."""
    if true_scores is None:
        raise ValueError(f"{type(evaluator).__name__}.process_scores_ needs the true scores (true_scores=...)")
    if target not in ("head", "relation", "tail"):
        raise ValueError(f"target must be 'head', 'relation' or 'tail', got {target!r}")
    if scores.dim() != 2 or true_scores.numel() != scores.shape[0] or hrt_batch.shape != (scores.shape[0], 3):
        shapes = f"{tuple(hrt_batch.shape)}, {tuple(scores.shape)} and {tuple(true_scores.shape)}"
        raise ValueError(f"expected hrt_batch (B, 3), scores (B, C) and true_scores (B, 1) for one B, got {shapes}")
    true = true_scores.reshape(-1).to(scores.dtype)
    nan_true = torch.isnan(true)
    if bool(nan_true.any()):
        row = int(nan_true.nonzero()[0, 0])
        raise ValueError(f"the true score of the {target} task of triple {hrt_batch[row].tolist()} is NaN")
    return true


class RankBasedEvaluator(_ScoreStreaming, KGEvalRankBasedEvaluator, Evaluator):  # type: ignore[misc]
    """kgeval's evaluator as a ``pykeen.evaluation.Evaluator``, for PyKEEN's pipeline, stopper, callbacks and HPO.

    The one line a PyKEEN user changes::

        from kgeval.integrations.pykeen import RankBasedEvaluator   # was: from pykeen.evaluation import ...
        pipeline(..., evaluator=RankBasedEvaluator, stopper="early")

    The class itself, an instance, or ``evaluator_kwargs`` (``filtered``, ``ks``, ``batch_size``, ...) all work;
    ``evaluate`` is kgeval's (it accepts PyKEEN's keyword arguments). PyKEEN's streaming interface, which its
    evaluation loops (``LCWAEvaluationLoop``, the ``evaluation-loop`` training callback) drive, works too:
    :meth:`process_scores_` takes batches of scores and ``finalize`` returns the metrics of the ranks seen
    since the last ``clear`` (``finalize_multi`` / ``finalize_with_confidence`` bootstrap them).

    Parameters
    ----------
    filtered, **kwargs
        Those of :class:`kgeval.RankBasedEvaluator`.
    metrics, metrics_kwargs : optional
        PyKEEN's way of choosing metrics (names, classes or instances, and their keyword arguments), resolved by
        PyKEEN's own resolver: an unknown metric is PyKEEN's error, and the k of each requested hits@k joins
        ``ks``. kgeval reports every metric anyway (they come from the same ranks at no extra cost), so the
        results hold the requested ones and more; ``add_defaults=False`` does not shrink them.
    add_defaults : bool, default=True
        Accepted for PyKEEN's signature (see ``metrics``).
    clear_on_finalize : bool, default=True
        PyKEEN's: forget the streamed ranks once ``finalize`` has reported them.
    mode : {"training", "validation", "testing"}, optional
        PyKEEN's inductive mode: :meth:`evaluate` scores an inductive model (``InductiveNodePiece``, ...) against
        the entities of that mode's graph, the triples in its ids (``evaluate(..., mode=...)`` of
        :class:`kgeval.RankBasedEvaluator`); PyKEEN's evaluation loops read it too. None: transductive.
    """

    metric_result_cls = PyKEENRankBasedMetricResults  # PyKEEN's HPO normalises metric keys with it

    def __init__(
        self,
        filtered: bool | str = True,
        metrics: Any = None,
        metrics_kwargs: Any = None,
        add_defaults: bool = True,
        clear_on_finalize: bool = True,
        mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        if metrics is not None:
            kwargs["ks"] = _ks_with_requested_hits(kwargs.get("ks", (1, 3, 5, 10)), metrics, metrics_kwargs)
        KGEvalRankBasedEvaluator.__init__(self, filtered=filtered, **kwargs)  # type: ignore[arg-type]
        self.add_defaults = bool(add_defaults)
        self.requires_positive_mask = False
        self.mode = None if mode is None else check_mode(mode)
        self.clear_on_finalize = bool(clear_on_finalize)
        self.num_entities: int | None = None  # PyKEEN's: the width of the last score batch
        self._streamed: dict[str, MetricAccumulator] = {}

    def process_scores_(
        self,
        hrt_batch: torch.Tensor,
        target: str,
        scores: torch.Tensor,
        true_scores: torch.Tensor | None = None,
        dense_positive_mask: torch.Tensor | None = None,
    ) -> None:
        """Rank one batch of tasks from their scores, as PyKEEN's ``RankBasedEvaluator`` does.

        Parameters
        ----------
        hrt_batch : LongTensor of shape (B, 3)
            The evaluated triples.
        target : {"head", "relation", "tail"}
        scores : FloatTensor of shape (B, C)
            Every candidate's score, the true answer's included; NaN marks a candidate that is not ranked (PyKEEN's
            evaluation loops set the filtered ones to NaN).
        true_scores : FloatTensor of shape (B, 1) or (B,)
            The true answers' scores (required).
        dense_positive_mask : ignored
            PyKEEN's rank-based evaluator does not use it either (``requires_positive_mask`` is False).

        Raises
        ------
        ValueError
            Without true scores, for mismatched shapes, or for a NaN true score (naming its triple).

        Notes
        -----
        optimistic = 1 + #(scores > true), pessimistic = #(scores >= true), num_candidates = #(scores not NaN):
        PyKEEN's ranks task for task. One difference: PyKEEN counts only finite scores as candidates, so a +-inf
        score makes its num_candidates (and adjusted metrics) differ; kgeval counts +-inf scores as the ordinary
        values they are (METRICS.md), so a rank never exceeds its number of candidates.
        """
        true = _checked_score_batch(self, hrt_batch, target, scores, true_scores)
        self._stream(target, ranks_in_full_rows(true, scores.detach()), hrt_batch, scores.shape[1])

    def evaluate(self, model: Any, mapped_triples: torch.Tensor, **kwargs: Any) -> RankBasedMetricResults:  # type: ignore[override]
        """:meth:`kgeval.RankBasedEvaluator.evaluate` (PyKEEN's keyword arguments accepted; ``mode`` defaults to the
        evaluator's), as PyKEEN-facing results."""
        kwargs.setdefault("mode", self.mode)
        return self._reported(KGEvalRankBasedEvaluator.evaluate(self, model, mapped_triples, **kwargs))


class MacroRankBasedEvaluator(RankBasedEvaluator):
    """PyKEEN's ``MacroRankBasedEvaluator`` on kgeval's engine: the ranks of :class:`RankBasedEvaluator`, each task
    weighted by 1 / the number of tasks of its side with the same query (:mod:`kgeval.variants.macro`), through
    ``evaluate`` and the streaming interface alike; usable in PyKEEN's pipeline
    (``evaluator=MacroRankBasedEvaluator``).

    Equal to PyKEEN's values, except: the median absolute deviation keeps the normal scale (x 1.4826) that the
    unweighted MAD has in both libraries (PyKEEN's weighted branch drops it), and the inverse median rank of
    optimistic / pessimistic ranks is 1 / median (PyKEEN's integer reciprocal gives 0). ``keep_records`` must stay
    True; the results hold no records.
    """

    def __init__(self, filtered: bool | str = True, **kwargs: Any) -> None:
        if kwargs.get("keep_records", True) is not True:
            raise ValueError("MacroRankBasedEvaluator needs the per-task records (keep_records=True)")
        super().__init__(filtered=filtered, **kwargs)

    def _reported(self, results: KGEvalRankBasedMetricResults) -> RankBasedMetricResults:
        return RankBasedMetricResults.of(macro_results(results))


def _ks_with_requested_hits(ks: Sequence[int], metrics: Any, metrics_kwargs: Any) -> tuple[int, ...]:
    """``ks`` with the k of every hits@k-family metric among PyKEEN's ``metrics`` / ``metrics_kwargs`` (resolved by
    PyKEEN's own metric resolver, which raises for names it does not know)."""
    from pykeen.metrics.ranking import rank_based_metric_resolver

    requested = rank_based_metric_resolver.make_many(metrics, metrics_kwargs)
    extra = []
    for metric in requested:
        hits = getattr(metric, "base", metric)  # adjusted / z hits@k wrap a HitsAtK
        k = getattr(hits, "k", None)
        if isinstance(k, int):
            extra.append(k)
    return tuple(sorted({*ks, *extra}))


class SampledRankBasedEvaluator(_ScoreStreaming, KGEvalSampledRankBasedEvaluator, Evaluator):
    """kgeval's sampled-negatives evaluator as a ``pykeen.evaluation.Evaluator``, for PyKEEN's pipeline and
    stopper (``pipeline(evaluator=SampledRankBasedEvaluator, evaluator_kwargs={"evaluation_factory": ...})``) and
    its evaluation loops (:meth:`process_scores_`, ``finalize``).

    Construction is :class:`kgeval.SampledRankBasedEvaluator`'s (PyKEEN's ``evaluation_factory`` first);
    :meth:`evaluate` takes PyKEEN's keyword arguments as well (see its docstring).
    """

    metric_result_cls = PyKEENRankBasedMetricResults

    def __init__(self, evaluation_factory: Any = None, clear_on_finalize: bool = True, mode: str | None = None,
                 **kwargs: Any) -> None:  # fmt: skip
        KGEvalSampledRankBasedEvaluator.__init__(self, evaluation_factory, **kwargs)
        self.requires_positive_mask = False
        self.mode = None if mode is None else check_mode(mode)
        self.clear_on_finalize = bool(clear_on_finalize)
        self.batch_size: int | None = None  # PyKEEN's pipeline reads these of any evaluator
        self.slice_size: int | None = None
        self.num_entities: int | None = None
        self._streamed: dict[str, MetricAccumulator] = {}

    def evaluate(  # type: ignore[override]
        self,
        model: Any,
        mapped_triples: torch.Tensor,
        batch_size: int | None = None,
        slice_size: int | None = None,
        device: Any = None,
        use_tqdm: bool = False,
        tqdm_kwargs: Any = None,
        restrict_entities_to: Any = None,
        restrict_relations_to: Any = None,
        do_time_consuming_checks: bool = True,
        additional_filter_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
        pre_filtered_triples: bool = True,
        targets: Sequence[EntityTarget] = ("head", "tail"),
        **kwargs: Any,
    ) -> RankBasedMetricResults:
        """:meth:`kgeval.SampledRankBasedEvaluator.evaluate` with PyKEEN's signature: ``batch_size`` (None: 256),
        ``additional_filter_triples`` and ``targets`` as there; ``mode`` (default: the evaluator's) the inductive
        graph the negatives are drawn from; ``slice_size``, ``tqdm_kwargs``, ``do_time_consuming_checks`` and
        ``pre_filtered_triples`` are accepted and have nothing to do (each task scores its K + 1 candidates at
        once); ``device`` must be the model's (kgeval never moves a model); ``restrict_entities_to`` /
        ``restrict_relations_to`` are refused (the negatives define the candidates)."""
        mode = kwargs.pop("mode", self.mode)
        if kwargs:
            raise TypeError(f"evaluate() got unexpected keyword arguments {sorted(kwargs)}")
        if restrict_entities_to is not None or restrict_relations_to is not None:
            raise ValueError("restrict_entities_to / restrict_relations_to do not apply to sampled negatives (the "
                             "negatives are the candidates); evaluate with RankBasedEvaluator to restrict")  # fmt: skip
        del slice_size, tqdm_kwargs, do_time_consuming_checks, pre_filtered_triples  # nothing to do (docstring)
        results = KGEvalSampledRankBasedEvaluator.evaluate(
            self, model, mapped_triples, additional_filter_triples=additional_filter_triples,
            targets=tuple(targets), batch_size=256 if batch_size is None else batch_size, use_tqdm=use_tqdm,
            device=device, mode=mode,
        )  # fmt: skip
        return self._reported(results)

    def process_scores_(
        self,
        hrt_batch: torch.Tensor,
        target: str,
        scores: torch.Tensor,
        true_scores: torch.Tensor | None = None,
        dense_positive_mask: torch.Tensor | None = None,
    ) -> None:
        """Rank one batch of tasks among their negatives, from full rows of scores, as PyKEEN's
        ``SampledRankBasedEvaluator`` does.

        Each triple of ``hrt_batch`` must be a triple of ``evaluation_factory``; its task's negatives are those of
        its first row there, the ones :meth:`evaluate` uses (drawn once, for the entity count of the score rows).
        Of each row of ``scores`` (B, num_entities) only the negatives' scores count, plus the true score: optimistic
        = 1 + #(negative scores > true), pessimistic = 1 + #(negative scores >= true), num_candidates = 1 + #(negatives
        whose score is not NaN; PyKEEN's loops set filtered candidates to NaN). ``dense_positive_mask`` is ignored,
        as by PyKEEN.
        """
        del dense_positive_mask
        true = _checked_score_batch(self, hrt_batch, target, scores, true_scores)
        if target not in ("head", "tail"):
            raise ValueError(f"sampled negatives rank heads and tails, got target {target!r}")
        negatives = self.negatives_of(hrt_batch, scores.shape[1], target).to(scores.device)  # type: ignore[arg-type]
        picked = scores.detach().gather(1, negatives.clamp(min=0))
        picked = torch.where(negatives >= 0, picked, torch.full_like(picked, torch.nan))
        candidates = torch.cat([true.unsqueeze(1), picked], dim=1)
        self._stream(target, ranks_in_full_rows(true, candidates), hrt_batch, scores.shape[1])


__all__ = (
    "ClassificationEvaluator", "ClassificationMetricResults", "MacroRankBasedEvaluator", "PyKEENPredicting",
    "PyKEENQueryCandidate", "PyKEENScoring", "RankBasedEvaluator",
    "RankBasedMetricResults", "SampledRankBasedEvaluator", "pykeen_view",
)  # fmt: skip
