"""EarlyStopper: from any training loop, evaluate the validation triples every ``frequency`` epochs, keep the best
weights (in the metric's own direction), and after ``patience`` evaluations without improvement restore them and
stop.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kgeval._checks import check_positive_int, check_writable_file
from kgeval._files import replace_atomically
from kgeval.keys import format_key, parse_key
from kgeval.metrics.registry import lookup, reported_keys
from kgeval.results import RankBasedMetricResults
from kgeval.typing import InductiveMode

__all__ = ["EarlyStopper", "StopperEvaluation"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StopperEvaluation:
    """One evaluation of an :class:`EarlyStopper`."""

    epoch: int
    value: float  #: the monitored metric
    improved: bool  #: whether it became the new best
    results: RankBasedMetricResults  #: every metric (without per-task records, to keep the history small)


class EarlyStopper:
    """Stop training when a validation metric stops improving; keep and restore the best weights.

    Parameters
    ----------
    evaluator : RankBasedEvaluator
    model : torch.nn.Module
        The model being trained; its ``state_dict`` is copied at every improvement and loaded back on stopping.
    mapped_triples : LongTensor of shape (n, 3)
        The validation triples.
    additional_filter_triples : LongTensor or sequence of them, optional
        Known triples to filter: train (+ valid) for validation, never test (see :mod:`kgeval.datasets.scenarios`).
    metric : str, default="mrr"
        A metric key (PyKEEN grammar) reported by ``evaluator``.
    patience : int, default=2
        Number of evaluations in a row without improvement after which training stops.
    frequency : int, default=1
        Evaluate at the epochs that are multiples of ``frequency`` (epochs counted from 1, as in PyKEEN).
    relative_delta : float, default=0.0
        Minimal relative improvement: a value v improves on the best b when ``v > b + relative_delta * |b|``
        (larger is better) or ``v < b - relative_delta * |b|`` (smaller is better). NaN never improves.
    larger_is_better : bool, optional
        None: from the metric's metadata (:attr:`kgeval.metrics.MetricInfo.increasing`).
    subset : int, optional
        Evaluate a fixed sample of this many validation triples (drawn once with ``seed``); all of
        ``mapped_triples`` stay in the filter set, so the sampled triples get the ranks a full evaluation gives.
    seed : int, default=0
        Seed of the subset sample.
    checkpoint_path : str or path-like, optional
        Keep the best weights in this file (``torch.save``) instead of in memory. Its folder must exist and be
        writable (checked here, not at the first improvement); each save goes to a temporary file renamed over
        the previous one, and the best epoch advances only once its weights are on disk, so a failed or
        interrupted save never loses the previous best weights.
    evaluate_kwargs : mapping, optional
        Further keyword arguments of ``evaluator.evaluate`` (default ``use_tqdm=False``).
    mode : {"training", "validation", "testing"}, optional
        Inductive link prediction: the graph the validation triples are ranked over (``evaluate(..., mode=)``), so
        that ``EarlyStopper(evaluator, model, **inductive_data.evaluation_kwargs("valid"))`` works as for
        transductive data (docs/inductive.md).

    Attributes
    ----------
    best_epoch : int or None
    best_metric : float or None
    history : list of StopperEvaluation
    stopped : bool
    best_results : RankBasedMetricResults or None
        The results of the best evaluation, with their per-task records.

    Notes
    -----
    Only the model's ``state_dict`` (parameters and buffers) is saved and restored, not the optimizer's state.
    Evaluation goes through ``evaluator.evaluate``, which puts the model in eval mode and restores its mode.
    """

    def __init__(
        self,
        evaluator: Any,
        model: torch.nn.Module,
        mapped_triples: torch.Tensor,
        additional_filter_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
        metric: str = "mrr",
        patience: int = 2,
        frequency: int = 1,
        relative_delta: float = 0.0,
        larger_is_better: bool | None = None,
        subset: int | None = None,
        seed: int = 0,
        checkpoint_path: str | os.PathLike[str] | None = None,
        evaluate_kwargs: Mapping[str, Any] | None = None,
        mode: InductiveMode | None = None,
    ) -> None:
        self.evaluator = evaluator
        self.model = model
        self.metric = _check_metric(metric, evaluator)
        self.larger_is_better = _direction(self.metric, larger_is_better)
        self.patience = check_positive_int(patience, "patience")
        self.frequency = check_positive_int(frequency, "frequency")
        self.relative_delta = _check_relative_delta(relative_delta)
        self.checkpoint_path = None  # checked now, not at the first improvement
        if checkpoint_path is not None:
            self.checkpoint_path = check_writable_file(checkpoint_path, "checkpoint_path")
        self.evaluate_kwargs = {"use_tqdm": False, **({"mode": mode} if mode is not None else {}),
                                **(evaluate_kwargs or {})}  # fmt: skip
        if not isinstance(mapped_triples, torch.Tensor):
            kind = type(mapped_triples).__name__
            raise TypeError(f"mapped_triples must be a torch.Tensor of shape (n, 3), got {kind}")
        filters = additional_filter_triples
        self.filter_triples = [filters] if isinstance(filters, torch.Tensor) else list(filters or [])
        self.triples = mapped_triples
        if subset is not None:
            check_positive_int(subset, "subset")
            self.triples = _sample(mapped_triples, subset, seed)
            self.filter_triples.append(mapped_triples)  # the unsampled triples are still known
        self.best_epoch: int | None = None
        self.best_metric: float | None = None
        self.best_results: RankBasedMetricResults | None = None
        self.history: list[StopperEvaluation] = []
        self.stopped = False
        self.num_bad_evaluations = 0
        self._best_state: dict[str, torch.Tensor] | None = None
        self._last_epoch: int | None = None

    def __repr__(self) -> str:
        return (
            f"EarlyStopper(metric={self.metric!r}, larger_is_better={self.larger_is_better}, "
            f"patience={self.patience}, frequency={self.frequency}, best_epoch={self.best_epoch}, "
            f"best_metric={self.best_metric}, evaluations={len(self.history)}, stopped={self.stopped})"
        )

    @property
    def remaining_patience(self) -> int:
        """Evaluations without improvement still allowed before stopping."""
        return self.patience - self.num_bad_evaluations

    # -- the decision -----------------------------------------------------------------------------------------
    def should_stop(self, epoch: int) -> bool:
        """Evaluate if ``epoch`` is a multiple of ``frequency``; True (best weights restored) when training should stop.

        Parameters
        ----------
        epoch : int
            The epoch just finished; must increase from call to call.
        """
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
            raise ValueError(f"epoch must be an int >= 1 (epochs are counted from 1, as in PyKEEN: in a loop over "
                             f"range(n), pass epoch + 1), got {epoch!r}")  # fmt: skip
        if self._last_epoch is not None and epoch <= self._last_epoch:
            raise ValueError(f"epoch must increase from call to call: got {epoch} after {self._last_epoch}")
        self._last_epoch = epoch
        if self.stopped:
            return True
        if epoch % self.frequency != 0:
            return False
        self.evaluate(epoch)
        if self.num_bad_evaluations >= self.patience:
            self.stopped = True
            logger.info(
                "stopping at epoch %d: no improvement of %s in %d evaluations; best %.6g at epoch %s",
                epoch, self.metric, self.num_bad_evaluations, self.best_metric, self.best_epoch,
            )  # fmt: skip
            if self.best_epoch is not None:
                self.restore_best_weights()
        return self.stopped

    def evaluate(self, epoch: int) -> StopperEvaluation:
        """Evaluate now, update the best value and weights, and record the evaluation in ``history``."""
        results = self.evaluator.evaluate(
            self.model, self.triples, additional_filter_triples=self.filter_triples, **self.evaluate_kwargs
        )
        value = float(results.get_metric(self.metric))
        improved = self.is_improvement(value)
        if improved:
            self._save_best_weights()  # first: a failed save leaves the previous best state untouched
            self.best_epoch, self.best_metric, self.best_results = epoch, value, results
            self.num_bad_evaluations = 0
        else:
            self.num_bad_evaluations += 1
        light = RankBasedMetricResults(data=results.data, ks=results.ks)
        evaluation = StopperEvaluation(epoch=epoch, value=value, improved=improved, results=light)
        self.history.append(evaluation)
        logger.info("epoch %d: %s = %.6g%s", epoch, self.metric, value, " (best)" if improved else "")
        return evaluation

    def is_improvement(self, value: float) -> bool:
        """Whether ``value`` beats the best value so far by the relative margin (see ``relative_delta``)."""
        if math.isnan(value):
            return False
        if self.best_metric is None:
            return True
        margin = self.relative_delta * abs(self.best_metric)
        if self.larger_is_better:
            return value > self.best_metric + margin
        return value < self.best_metric - margin

    # -- weights ----------------------------------------------------------------------------------------------
    def _save_best_weights(self) -> None:
        """Keep the model's weights as the best ones; with a checkpoint path, atomically: they are written to a
        temporary file in the same folder and renamed over the previous file only once complete, so an
        interrupted or failed save (disk full, killed job) leaves the previous best weights in place."""
        state = {name: tensor.detach().to("cpu", copy=True) for name, tensor in self.model.state_dict().items()}
        if self.checkpoint_path is None:
            self._best_state = state
            return
        replace_atomically(self.checkpoint_path, lambda handle: torch.save(state, handle), sync=True)

    def restore_best_weights(self) -> None:
        """Load the weights of the best evaluation into the model (bit for bit)."""
        if self.best_epoch is None:
            raise ValueError("there are no best weights yet: no evaluation has improved the metric")
        if self.checkpoint_path is not None:
            state = torch.load(self.checkpoint_path, map_location="cpu", weights_only=True)
        else:
            state = self._best_state
        self.model.load_state_dict(state)


# -- validation helpers -------------------------------------------------------------------------------------------
def _check_metric(metric: str, evaluator: Any) -> str:
    """The canonical ``side.rank_type.name`` of ``metric``; it must be reported by ``evaluator``."""
    parsed = parse_key(metric)
    lookup(parsed.name)  # KeyError with close matches for an unknown name
    ks = getattr(evaluator, "ks", (1, 3, 5, 10))
    keep_records = getattr(evaluator, "keep_records", True)
    reported = [key for key, _info, _k in reported_keys(ks, parsed.rank_type, keep_records)]
    if parsed.name not in reported:
        raise ValueError(
            f"metric {metric!r} ({format_key(parsed)}) is not reported by the evaluator "
            f"(ks={tuple(ks)}, keep_records={keep_records})"
        )
    return format_key(parsed)


def _direction(metric: str, larger_is_better: bool | None) -> bool:
    """The caller's direction, else the metric's :attr:`MetricInfo.increasing`."""
    if larger_is_better is not None:
        if not isinstance(larger_is_better, bool):
            raise TypeError(f"larger_is_better must be a bool or None, got {larger_is_better!r}")
        return larger_is_better
    info, _k = lookup(parse_key(metric).name)
    if info.increasing is None:
        raise ValueError(f"metric {metric!r} has no direction (it is not a quality measure); pass larger_is_better")
    return info.increasing


def _check_relative_delta(relative_delta: float) -> float:
    is_number = isinstance(relative_delta, int | float) and not isinstance(relative_delta, bool)
    if not is_number or not math.isfinite(relative_delta) or relative_delta < 0:
        raise ValueError(f"relative_delta must be a finite number >= 0, got {relative_delta!r}")
    return float(relative_delta)


def _sample(triples: torch.Tensor, size: int, seed: int) -> torch.Tensor:
    """A fixed sample of ``size`` rows (all rows when there are fewer), in their original order."""
    if size >= triples.shape[0]:
        return triples
    generator = torch.Generator().manual_seed(int(seed))
    chosen = torch.randperm(triples.shape[0], generator=generator, device="cpu")[:size].sort().values
    return triples[chosen.to(triples.device)]
