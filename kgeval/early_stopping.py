"""EarlyStopper: from any training loop, evaluate the validation triples every ``frequency`` epochs, keep the best
weights (in the metric's own direction), and after ``patience`` evaluations without improvement restore them and
stop.

The best weights are every tensor scoring may read that kgeval can find (``_restorable_tensors``): the
``state_dict`` of the model -- or of each torch module a scorer that is not a module holds
(``kgeval._modes.held_modules``) -- and the tensors outside it: non-persistent buffers, and plain tensor
attributes of the model, of its submodules and of a non-module scorer itself. A model holding none is refused when
the stopper is made, not after an epoch of training; a restored model that does not score as the best one did (it
holds state kgeval cannot see) is warned about.
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
from kgeval._modes import evaluation_mode, held_modules
from kgeval.adapters.devices import random_state_kept
from kgeval.exceptions import warn_caller
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
    model : torch.nn.Module or scorer
        The model being trained, a torch module or any scorer ``evaluator.evaluate`` takes; at every improvement
        each tensor it scores with that kgeval can find is copied (to the CPU, or to ``checkpoint_path``), and
        copied back on stopping (see Notes). A model in which kgeval finds no tensor at all (a plain object whose
        network is behind a closure or a bound method) is refused here: its best weights could not be restored.
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

    Raises
    ------
    TypeError
        For a model in which kgeval finds no tensor to save.

    Notes
    -----
    What is saved at each improvement and restored:

    - a torch module: its ``state_dict`` (parameters, persistent buffers, extra state), its non-persistent buffers
      and the plain tensors held in the ``__dict__`` of the module or of any submodule (``self.table =
      torch.randn(...)``, a cache refreshed after each step);
    - a scorer that is not a torch module: the same for each torch module it holds (in its attributes, the lists,
      tuples and dicts it holds and nested plain objects: ``kgeval._modes.held_modules``), and the tensors
      among its own attributes.

    Tensors are restored in place (``copy_``, bit for bit), so an optimizer and any other reference keep pointing
    at the model's tensors; one whose shape, dtype or device changed since (or an attribute that is no longer a
    tensor) is set back as an attribute. Not saved: the optimizer's state, numbers and other non-tensor attributes,
    tensors in lists or dicts, state behind closures. To catch those, the scores of the first two validation
    triples' tail queries (``model.score_t``, eval mode, no autograd) are kept at every improvement and compared
    after a restore: a restored model that scores otherwise -- it holds state kgeval did not save, or scores at
    random in eval mode -- is warned about (a ``UserWarning``). Scorers without ``score_t`` (a wrapper such as
    ``DataParallel``, a triple scorer), temporal quadruples, and scorers whose probe fails are restored without
    this check. Every tensor found is copied at each improvement: a large tensor attribute that never changes
    (a graph held for message passing) is copied too.

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
        _check_restorable(model)
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
        self._best_state: dict[str, Any] | None = None
        #: the entries of the best state that are no state_dict's (path -> the tensor's device when saved)
        self._best_loose: dict[str, torch.device] = {}
        #: the scores of a few queries of the best model (:meth:`_probe`), checked after a restore
        self._best_probe: torch.Tensor | None = None
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
            self._best_probe = self._probe()
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
        """Keep the model's weights as the best ones (see the class's Notes); with a checkpoint path, atomically:
        they are written to a temporary file in the same folder and renamed over the previous file only once
        complete, so an interrupted or failed save (disk full, killed job) leaves the previous best weights in
        place. The file holds one flat dict: the ``state_dict`` entries (of a module; prefixed by where a non-module
        scorer holds each module) and the tensors outside them by their attribute paths."""
        state: dict[str, Any] = {}
        for prefix, module in held_modules(self.model):
            for name, value in module.state_dict().items():
                state[prefix + name] = _cpu_copy(value)
        loose: dict[str, torch.device] = {}
        copies: dict[int, torch.Tensor] = {}  # an aliased tensor is copied once
        for path, (_owner, _attribute, tensor) in _loose_tensors(self.model).items():
            if id(tensor) not in copies:
                copies[id(tensor)] = _cpu_copy(tensor)
            state[path], loose[path] = copies[id(tensor)], tensor.device
        if self.checkpoint_path is None:
            self._best_state = state
        else:
            replace_atomically(self.checkpoint_path, lambda handle: torch.save(state, handle), sync=True)
        self._best_loose = loose  # only once saved: it says which entries of the saved state are loose

    def restore_best_weights(self) -> None:
        """Load the weights of the best evaluation back into the model (bit for bit, see the class's Notes); warn
        when the restored model does not score the probe queries as the best one did."""
        if self.best_epoch is None:
            raise ValueError("there are no best weights yet: no evaluation has improved the metric")
        if self.checkpoint_path is not None:
            state = torch.load(self.checkpoint_path, map_location="cpu", weights_only=True)
        else:
            state = self._best_state
        assert state is not None  # saved with the best epoch
        for prefix, module in held_modules(self.model):
            part = {key[len(prefix) :]: value for key, value in state.items()
                    if key.startswith(prefix) and key not in self._best_loose}  # fmt: skip
            module.load_state_dict(part)
        owners = _owners(self.model)
        for path, device in self._best_loose.items():
            owner_path, _, attribute = path.rpartition(".")
            if owner_path in owners:
                _put_back(owners[owner_path], attribute, state[path], device)
        self._check_restored()

    # -- the check of a restore --------------------------------------------------------------------------------
    def _probe(self) -> torch.Tensor | None:
        """The scores of the tail queries of the first :data:`PROBE_QUERIES` validation triples (of the subset),
        as float64 on the CPU (``model.score_t`` in eval mode, under ``torch.inference_mode``, the random number
        generators kept); None for a model without ``score_t``, temporal quadruples, or a call that fails (the
        model's evaluation may take another route)."""
        score_t = getattr(self.model, "score_t", None)
        if not callable(score_t) or self.triples.ndim != 2 or self.triples.shape[1] != 3 or not len(self.triples):
            return None
        device = _device(self.model)
        mode = self.evaluate_kwargs.get("mode")
        kwargs = {"mode": mode} if mode is not None else {}
        try:
            hr_batch = self.triples[:PROBE_QUERIES, :2].to(device)
            with random_state_kept(device), evaluation_mode(self.model), torch.inference_mode():
                scores = score_t(hr_batch, **kwargs)
        except Exception as error:  # the check is optional; the evaluation reports real failures
            logger.debug("no probe of the restored model: score_t failed (%r)", error)
            return None
        if not isinstance(scores, torch.Tensor) or scores.is_complex():
            return None
        return scores.detach().to("cpu", torch.float64, copy=True)

    def _check_restored(self) -> None:
        """A UserWarning when the restored model scores the probe queries otherwise than the best one did."""
        if self._best_probe is None:
            return
        now = self._probe()
        if now is None or _same_scores(self._best_probe, now):
            return
        if now.shape != self._best_probe.shape:
            difference = f"scores of shape {tuple(now.shape)}, then {tuple(self._best_probe.shape)}"
        else:
            differ = ~torch.isclose(now, self._best_probe, rtol=PROBE_RTOL, atol=PROBE_ATOL, equal_nan=True)
            largest = (now - self._best_probe).abs()[differ].max().item()
            difference = f"{int(differ.sum())} of {now.numel()} probe scores differ, by up to {largest:.3g}"
        warn_caller(
            f"kgeval: EarlyStopper restored the best weights of {type(self.model).__name__} (epoch "
            f"{self.best_epoch}, {self.metric} {self.best_metric:.6g}), but the restored model does not score as it "
            f"did then ({difference}, scoring the tail queries of the first {PROBE_QUERIES} validation triples): it "
            "holds state kgeval did not save (a tensor in a list or dict, a number, state behind a closure), or its "
            "scores are random in eval mode, so best_metric does not describe it. Keep what scoring reads in "
            "parameters, buffers or tensor attributes, or save and restore that state yourself",
            UserWarning,
        )


#: validation triples whose tail queries are scored to check a restore (a signature of the best model)
PROBE_QUERIES = 2
#: the tolerance within which probe scores count as equal (float rounding: a restore is bit for bit, a
#: nondeterministic kernel may still round differently)
PROBE_RTOL, PROBE_ATOL = 1e-5, 1e-6


def _same_scores(before: torch.Tensor, after: torch.Tensor) -> bool:
    return before.shape == after.shape and torch.allclose(
        after, before, rtol=PROBE_RTOL, atol=PROBE_ATOL, equal_nan=True
    )


# -- what is saved -------------------------------------------------------------------------------------------------
def _cpu_copy(value: Any) -> Any:
    return value.detach().to("cpu", copy=True) if isinstance(value, torch.Tensor) else value


def _owners(model: Any) -> dict[str, Any]:
    """path -> object, of every object whose tensors are saved: each held module and its submodules (by their
    paths, prefixed where a non-module scorer holds them), and a non-module scorer itself (``""``)."""
    owners: dict[str, Any] = {} if isinstance(model, torch.nn.Module) else {"": model}
    for prefix, module in held_modules(model):
        for name, submodule in module.named_modules():
            owners.setdefault(f"{prefix}{name}".rstrip("."), submodule)
    return owners


def _loose_tensors(model: Any) -> dict[str, tuple[Any, str, torch.Tensor]]:
    """path -> (owner, attribute, tensor) of the tensors scoring may read that no ``state_dict`` holds: the
    non-persistent buffers of the held modules and their submodules, and the plain tensors in the ``__dict__`` of
    those modules and of a non-module scorer itself."""
    found: dict[str, tuple[Any, str, torch.Tensor]] = {}
    for owner_path, owner in _owners(model).items():
        items = list(vars(owner).items()) if isinstance(getattr(owner, "__dict__", None), dict) else []
        if isinstance(owner, torch.nn.Module):
            items += [(name, buffer) for name, buffer in owner._buffers.items()
                      if name in owner._non_persistent_buffers_set]  # fmt: skip
        for attribute, value in items:
            if isinstance(value, torch.Tensor):
                path = f"{owner_path}.{attribute}" if owner_path else attribute
                found[path] = (owner, attribute, value)
    return found


def _check_restorable(model: Any) -> None:
    """TypeError when kgeval finds no tensor in ``model`` to save: its best weights could not be restored."""
    modules = held_modules(model)
    if any(True for _, module in modules for _ in (*module.parameters(), *module.buffers())):
        return
    if _loose_tensors(model) or any(module.state_dict() for _, module in modules):  # packed state, say
        return
    name = type(model).__name__
    where = ("it has no parameter, buffer or tensor attribute" if isinstance(model, torch.nn.Module) else
             "it is not a torch module, and holds no torch module or tensor in its attributes or in the lists, "
             "tuples, dicts, sets, closures, bound methods and plain objects they hold (its network may be "
             "looked up at each call in a global container, say)")  # fmt: skip
    raise TypeError(
        f"EarlyStopper cannot keep the best weights of {name}: {where}, so kgeval finds nothing to save and could "
        "not restore the best epoch's model after training changed it. Pass the torch module that holds the "
        "weights, or a scorer that holds its modules or tensors in attributes"
    )


def _device(model: Any) -> torch.device:
    """The device of the model's first tensor (the CPU for a model without one)."""
    for _, module in held_modules(model):
        for tensor in (*module.parameters(), *module.buffers()):
            return tensor.device
    for _owner, _attribute, tensor in _loose_tensors(model).values():
        return tensor.device
    return torch.device("cpu")


def _put_back(owner: Any, attribute: str, saved: torch.Tensor, device: torch.device) -> None:
    """Copy ``saved`` into the owner's tensor in place (bit for bit: optimizers and references keep pointing at
    it); set the attribute to a copy on ``device`` where there is no tensor of the same shape, dtype and device
    to copy into (or one that cannot be written outside inference mode)."""
    if isinstance(owner, torch.nn.Module) and attribute in owner._buffers:
        current = owner._buffers[attribute]
    else:
        current = vars(owner).get(attribute)
    if (
        isinstance(current, torch.Tensor)
        and (current.shape, current.dtype, current.device, current.layout)
        == (saved.shape, saved.dtype, device, torch.strided)
        and not current.is_inference()
    ):
        with torch.no_grad():
            current.copy_(saved)
    else:
        setattr(owner, attribute, saved.to(device, copy=True))


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
