"""PyKEEN's ``ClassificationEvaluator`` on kgeval's exact, streaming all-pairs classification
(:mod:`kgeval.variants.classification.all_pairs`): the same 22 metric keys, results of PyKEEN's own
``ClassificationMetricResults`` class (``get_metric``, ``to_dict``, ``to_flat_dict``, ``to_df``), usable wherever
PyKEEN takes an evaluator (``pipeline(evaluator=ClassificationEvaluator)``), without holding a (queries x entities)
array in :meth:`ClassificationEvaluator.evaluate`. Re-exported by :mod:`kgeval.integrations.pykeen`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch
from pykeen.evaluation import Evaluator
from pykeen.evaluation.classification_evaluator import ClassificationMetricKey
from pykeen.evaluation.classification_evaluator import ClassificationMetricResults as PyKEENClassificationResults
from pykeen.metrics.classification import classification_metric_resolver

from kgeval.adapters.devices import model_device, same_device
from kgeval.adapters.inductive import check_mode, mode_view
from kgeval.typing import ENTITY_TARGETS, QUERY_COLUMNS, EntityTarget
from kgeval.variants.classification import AllPairsResults, classify_all_pairs, classify_scored_pairs

__all__ = ["ClassificationEvaluator", "ClassificationMetricResults"]


class ClassificationMetricResults(PyKEENClassificationResults):
    """PyKEEN's classification results (its keys ``side.metric``, side "head", "tail" or "both"), filled by kgeval;
    :attr:`all_pairs` holds kgeval's own results of the same pairs (metrics named for what they compute, the
    confusion counts, the tallies)."""

    all_pairs: AllPairsResults
    #: what :func:`kgeval.integrations.trackers.log_results` logs by default (PyKEEN's keys)
    headline_keys: tuple[str, ...] = (
        "both.area_under_the_receiver_operating_characteristic_curve",
        "both.average_precision_score",
    )

    @classmethod
    def of(cls, results: AllPairsResults) -> ClassificationMetricResults:
        """PyKEEN's 22 numbers of every side of ``results``."""
        data: dict[ClassificationMetricKey | str, float] = {
            ClassificationMetricKey(side=side, metric=key): value  # type: ignore[arg-type]
            for side, result in results.sides.items()
            for key, value in result.pykeen_metrics().items()
        }
        made = cls(data=data)
        made.all_pairs = results
        return made


class ClassificationEvaluator(Evaluator):
    """kgeval's all-pairs classification as PyKEEN's ``ClassificationEvaluator``: every (query, entity) pair of the
    evaluated triples' queries an instance, the known triples (evaluated and ``additional_filter_triples``)
    positive, PyKEEN's 22 metrics under its keys -- equal to PyKEEN's numbers (docs/classification.md: its formulas
    are reproduced, quirks included) but exact and streaming: :meth:`evaluate` never holds a (queries x entities)
    array, where PyKEEN keeps every score row and a dense mask.

    The one line a PyKEEN user changes::

        from kgeval.integrations.pykeen import ClassificationEvaluator   # was: from pykeen.evaluation import ...

    Parameters
    ----------
    threshold : "top_p" or float, default="top_p"
        PyKEEN's binarisation: the P highest-scoring pairs called true (P from the evaluated labels: optimistic, as
        PyKEEN's own note says), or pairs called true at score >= a given value.
    validation_triples : LongTensor (v, 3), optional
        Fit the threshold on these triples' pairs instead (the lowest score maximising ``objective``; the same
        ``additional_filter_triples``); ``threshold`` is then ignored.
    objective : {"accuracy", "f1"}, default="accuracy"
    exclude_filter_triples : bool, default=False
        Leave the pairs of ``additional_filter_triples`` (in PyKEEN's pipeline: the training and validation triples)
        out of both classes; PyKEEN counts them as positives.
    batch_size, slice_size, mode
        PyKEEN's (``mode``: its inductive mode).
    clear_on_finalize : bool, default=True
        Forget the streamed rows once :meth:`finalize` has reported them.
    fast_path : bool, default=False
        Score through the model's query / candidate form (see
        :func:`~kgeval.variants.classification.all_pairs.classify_all_pairs`: off, every number equals PyKEEN's; on,
        exact ties across queries may split).
    """

    metric_result_cls = PyKEENClassificationResults

    def __init__(
        self,
        threshold: Any = "top_p",
        validation_triples: torch.Tensor | None = None,
        objective: str = "accuracy",
        exclude_filter_triples: bool = False,
        batch_size: int | None = None,
        slice_size: int | None = None,
        mode: Any = None,
        clear_on_finalize: bool = True,
        fast_path: bool = False,
    ) -> None:
        super().__init__(filtered=False, requires_positive_mask=True, batch_size=batch_size, slice_size=slice_size,
                         mode=mode)  # fmt: skip
        self.threshold = threshold
        self.validation_triples = validation_triples
        self.objective = objective
        self.exclude_filter_triples = bool(exclude_filter_triples)
        self.clear_on_finalize = bool(clear_on_finalize)
        self.fast_path = bool(fast_path)
        self.metrics = tuple(classification_metric_resolver.make(metric_cls)
                             for metric_cls in classification_metric_resolver.lookup_dict.values())  # fmt: skip
        self.all_scores: dict[str, dict[tuple[int, int], torch.Tensor]] = defaultdict(dict)
        self.all_positives: dict[str, dict[tuple[int, int], torch.Tensor]] = defaultdict(dict)

    def evaluate(  # type: ignore[override]
        self,
        model: Any,
        mapped_triples: torch.Tensor,
        batch_size: int | None = None,
        slice_size: int | None = None,
        device: Any = None,
        use_tqdm: bool = True,
        tqdm_kwargs: Any = None,
        restrict_entities_to: Any = None,
        restrict_relations_to: Any = None,
        do_time_consuming_checks: bool = True,
        additional_filter_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
        pre_filtered_triples: bool = True,
        targets: Sequence[EntityTarget] = ("head", "tail"),
        **kwargs: Any,
    ) -> ClassificationMetricResults:
        """The all-pairs classification of ``model`` on ``mapped_triples`` (PyKEEN's signature):
        ``additional_filter_triples`` are positives too (or left out, ``exclude_filter_triples``); ``targets`` the
        sides; ``batch_size`` / ``slice_size`` kgeval's sizes (None: chosen within the memory budget);
        ``restrict_relations_to`` keeps the evaluated triples of those relations. ``device`` must be the model's
        (kgeval never moves a model); ``restrict_entities_to`` is refused (every entity is a candidate);
        ``use_tqdm``, ``tqdm_kwargs``, ``do_time_consuming_checks`` and ``pre_filtered_triples`` are accepted."""
        mode = kwargs.pop("mode", self.mode)
        if kwargs:
            raise TypeError(f"evaluate() got unexpected keyword arguments {sorted(kwargs)}")
        if restrict_entities_to is not None:
            raise ValueError("restrict_entities_to is not supported by the all-pairs classification: every entity "
                             "is a candidate")  # fmt: skip
        del use_tqdm, tqdm_kwargs, do_time_consuming_checks, pre_filtered_triples  # accepted (docstring)
        if restrict_relations_to is not None:
            keep = torch.isin(mapped_triples[:, 1], torch.as_tensor(list(restrict_relations_to)).to(mapped_triples))
            mapped_triples = mapped_triples[keep]
        if isinstance(additional_filter_triples, torch.Tensor):
            additional_filter_triples = [additional_filter_triples]
        filters = list(additional_filter_triples or [])
        known, exclude = (None, filters) if self.exclude_filter_triples else (filters, None)
        if mode is not None:
            model = mode_view(model, check_mode(mode))
        if device is not None and not same_device(device, model_device(model)):
            raise ValueError(f"device={device!r} is not the model's device {model_device(model)} (kgeval never moves "
                             "a model)")  # fmt: skip
        results = classify_all_pairs(
            model, mapped_triples, known=known, exclude=exclude, validation=self.validation_triples,
            threshold="validation" if self.validation_triples is not None else self.threshold,
            objective=self.objective, targets=tuple(targets),  # type: ignore[arg-type]
            batch_size=batch_size or self.batch_size, slice_size=slice_size or self.slice_size,
            fast_path=self.fast_path,
        )  # fmt: skip
        return ClassificationMetricResults.of(results)

    def process_scores_(
        self,
        hrt_batch: torch.Tensor,
        target: str,
        scores: torch.Tensor,
        true_scores: torch.Tensor | None = None,
        dense_positive_mask: torch.Tensor | None = None,
    ) -> None:
        """Keep one batch of score rows and their positive masks, as PyKEEN's evaluator does (one row per distinct
        query, the last one kept): PyKEEN's evaluation loops hand over full rows, so this interface holds them (4
        bytes per score and 1 per label; :meth:`evaluate` streams instead). KeyError without the mask, as PyKEEN."""
        del true_scores
        if dense_positive_mask is None:
            raise KeyError("the classification evaluator needs the positive mask (dense_positive_mask)")
        if target not in ENTITY_TARGETS:
            raise ValueError(f"target must be 'head' or 'tail', got {target!r}")
        keys = hrt_batch[:, QUERY_COLUMNS[target]].tolist()
        rows, mask = scores.detach().float().cpu(), dense_positive_mask.detach().cpu().bool()
        for i, key in enumerate(keys):
            self.all_scores[target][(key[0], key[1])] = rows[i]
            self.all_positives[target][(key[0], key[1])] = mask[i]

    def clear(self) -> None:
        """Forget the streamed rows."""
        self.all_scores.clear()
        self.all_positives.clear()

    def finalize(self) -> ClassificationMetricResults:
        """PyKEEN's 22 metrics of the streamed rows per side and "both" (exact; ``threshold`` as in
        :meth:`evaluate`, a validation fit excepted). ValueError when nothing was streamed."""
        if not self.all_scores:
            raise ValueError("no scores to finalize: process_scores_ has not been called since the last clear()")
        pairs = {side: [(torch.stack(list(rows.values())), torch.stack(list(self.all_positives[side].values())))]
                 for side, rows in sorted(self.all_scores.items())}  # fmt: skip
        results = classify_scored_pairs(pairs, "top_p" if isinstance(self.threshold, str) else self.threshold)
        if self.clear_on_finalize:
            self.clear()
        return ClassificationMetricResults.of(results)
