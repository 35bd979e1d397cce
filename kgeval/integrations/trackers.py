"""Log evaluation results to an experiment tracker through its own API: :func:`log_results` (optional extra
``trackers``).

One call logs a small, stable set of numbers (:data:`HEADLINE_KEYS`) or every number of
:meth:`~kgeval.RankBasedMetricResults.to_flat_dict` to

- a Weights & Biases run (``wandb.init()``'s ``Run``, or the ``wandb`` module for its current run): ``run.log``;
- MLflow: the ``mlflow`` module (its active run, started if none is: ``mlflow.log_metrics``), a run
  (``mlflow.start_run()``'s ``ActiveRun`` or any ``mlflow.entities.Run``), or an ``MlflowClient`` with ``run_id=``:
  ``MlflowClient.log_batch``;
- TensorBoard: ``torch.utils.tensorboard.SummaryWriter``, one ``add_scalar`` per number, then ``flush``;
- any Lightning logger (``lightning.pytorch.loggers.Logger`` -- ``CSVLogger``, ``TensorBoardLogger``,
  ``WandbLogger``, ``MLFlowLogger``, ... -- of ``lightning`` or ``pytorch_lightning``, and Fabric's loggers):
  ``log_metrics`` then ``save``, as Lightning's own trainer does.

The names are kgeval's flat keys (``both.realistic.inverse_harmonic_mean_rank``), after ``prefix`` if one is given
(``"validation/"``). Nothing here imports a tracker: a tracker object is recognised by its class, whose module is
already imported when such an object exists, so this module costs nothing where none is installed.
"""

from __future__ import annotations

import math
import posixpath
import re
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kgeval.keys import format_key

__all__ = ["HEADLINE_KEYS", "MLFLOW_NAME_PATTERN", "log_results", "select_values"]

#: The default selection of :func:`log_results`: MRR, Hits@1, Hits@3, Hits@10 and MR of realistic ranks for both
#: sides pooled, head and tail (and for relation prediction where it was evaluated), and the optimistic and
#: pessimistic MRR of both sides pooled (they differ from the realistic one where the model ties the true answer).
#: A key the results do not hold (a k not among the evaluator's ``ks``, a side not evaluated) is left out. This
#: tuple only ever grows, at its end.
HEADLINE_KEYS: tuple[str, ...] = (
    *(
        f"{side}.realistic.{name}"
        for side in ("both", "head", "tail")
        for name in ("inverse_harmonic_mean_rank", "hits_at_1", "hits_at_3", "hits_at_10", "arithmetic_mean_rank")
    ),
    "both.optimistic.inverse_harmonic_mean_rank",
    "both.pessimistic.inverse_harmonic_mean_rank",
    *(
        f"relation.realistic.{name}"
        for name in ("inverse_harmonic_mean_rank", "hits_at_1", "hits_at_3", "hits_at_10", "arithmetic_mean_rank")
    ),
)

#: The metric names MLflow accepts on every platform (``mlflow.utils.validation``: letters, digits, ``_``, ``-``,
#: ``.``, space and ``/``; ``:`` too except on Windows, so it is not counted on here). Every kgeval key matches;
#: a ``prefix`` must keep the names matching, or :func:`log_results` raises before logging anything.
MLFLOW_NAME_PATTERN = re.compile(r"[/\w.\- ]+")

_SUPPORTED = (
    "a wandb Run (or the wandb module), the mlflow module, an mlflow Run / ActiveRun, an MlflowClient with "
    "run_id=, a torch.utils.tensorboard.SummaryWriter, or a Lightning logger (lightning.pytorch.loggers.Logger)"
)


def log_results(
    results: Any,
    tracker: Any,
    *,
    step: int | None = None,
    prefix: str = "",
    keys: str | Sequence[str] = "headline",
    run_id: str | None = None,
) -> dict[str, float]:
    """Log evaluation results to an experiment tracker through the tracker's own API.

    Parameters
    ----------
    results : RankBasedMetricResults, TripleClassificationResults, AllPairsResults or PyKEEN-facing results
        What an evaluation returned (any object with ``to_flat_dict()``; keys in another spelling than the flat one
        need ``resolve_key``, which ranking results have). A results class may name its own headline
        (``headline_keys``: triple classification's accuracy, F1, ROC-AUC and AP).
    tracker : object
        Where to log (the tracker's call in brackets):

        - a W&B run from ``wandb.init()`` (``run.log(values, step=step)``), or the ``wandb`` module itself, for
          ``wandb.run``;
        - the ``mlflow`` module (``mlflow.log_metrics(values, step=step)``: the active run, which MLflow starts if
          none is), an MLflow run (``mlflow.start_run()``'s ``ActiveRun``, an ``mlflow.entities.Run``), or an
          ``mlflow.MlflowClient`` together with ``run_id`` (``MlflowClient.log_batch``; a run is logged to through
          ``MlflowClient()``, the current tracking URI);
        - a ``torch.utils.tensorboard.SummaryWriter`` (``add_scalar(name, value, global_step=step)`` per number,
          then ``flush()``);
        - a Lightning logger, ``lightning.pytorch.loggers.Logger`` or Fabric's (``log_metrics(values, step)`` then
          ``save()``, as the Trainer does).
    step : int, optional
        The step (epoch, global step) the numbers belong to. None leaves it to the tracker: W&B's own step
        counter, MLflow's step 0, TensorBoard's default; a Lightning logger needs one (its CSVLogger would put every
        call on step 0). W&B ignores a step lower than the run's current one (it warns).
    prefix : str, default=""
        Put in front of every name as given, separator included: ``"validation/"`` logs
        ``validation/both.realistic.inverse_harmonic_mean_rank``.
    keys : "headline", "all" or sequence of str, default="headline"
        ``"headline"``: the keys of :data:`HEADLINE_KEYS` the results hold; ``"all"``: every key of
        ``results.to_flat_dict()`` (297 for a head + tail evaluation with the default ``ks``); or these keys, in
        any spelling ``results.get_metric`` accepts (``"mrr"``, ``"tail.best.hits@10"``), logged under their flat
        names (``both.realistic.inverse_harmonic_mean_rank``, ``tail.optimistic.hits_at_10``).
    run_id : str, optional
        The run to log to, with an ``MlflowClient`` tracker (required there, refused elsewhere).

    Returns
    -------
    dict of str to float
        What was logged: name (prefix included) -> value, in the order logged.

    Raises
    ------
    TypeError
        For a tracker of another kind, naming the supported ones; for a ``step`` that is not an int.
    ValueError
        For an unknown ``keys`` string, a negative ``step`` (or none, for a Lightning logger), a missing or
        unexpected ``run_id``, the ``wandb`` module without a current run, or (MLflow, Lightning's MLFlowLogger
        included) a ``prefix`` that makes a name MLflow refuses (:data:`MLFLOW_NAME_PATTERN`). Nothing is logged
        then.
    KeyError
        For a requested key that the results do not hold (with close matches).

    Notes
    -----
    Values that are NaN -- metrics undefined for these ranks, such as an adjusted Hits@k whose k reaches the number
    of candidates -- are skipped, not logged: trackers and their interfaces treat NaN differently, and an absent
    point means "undefined" the same way in all of them. kgeval's other values are finite floats. A selection
    left empty logs nothing (no empty W&B step).

    Examples
    --------
    >>> import wandb  # doctest: +SKIP
    >>> run = wandb.init(project="kge")  # doctest: +SKIP
    >>> log_results(results, run, step=epoch, prefix="validation/")  # doctest: +SKIP
    {'validation/both.realistic.inverse_harmonic_mean_rank': 0.61, ...}
    """
    if step is not None:
        if isinstance(step, bool | np.bool_) or not isinstance(step, int | np.integer):
            raise TypeError(f"step must be an int or None, got {type(step).__name__}")
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        step = int(step)
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
    log = _logger_for(tracker, run_id)
    if isinstance(log, _LightningLogger) and step is None:
        raise ValueError(
            "a Lightning logger needs step= (the epoch or global step): without one, Lightning's CSVLogger numbers a "
            "row by the rows it has not saved yet, and every call of log_results, which saves, would land on step 0"
        )
    values = {f"{prefix}{name}": value for name, value in select_values(results, keys).items()}
    if log is _log_mlflow_module or isinstance(log, _MlflowRunLogger) or _is_instance(tracker, *_LIGHTNING_MLFLOW):
        _check_mlflow_names(values)  # Lightning's MLFlowLogger would drop the refused characters without a word
    if values:
        log(values, step)
    return values


def select_values(results: Any, keys: str | Sequence[str] = "headline") -> dict[str, float]:
    """The numbers :func:`log_results` logs, by flat key (no prefix): the ``keys`` selection of
    ``results.to_flat_dict()`` without NaN values, as floats.

    Examples
    --------
    >>> select_values(results, ["mrr", "tail.hits@10"])  # doctest: +SKIP
    {'both.realistic.inverse_harmonic_mean_rank': 0.61, 'tail.realistic.hits_at_10': 0.93}
    """
    to_flat_dict = getattr(results, "to_flat_dict", None)
    if not callable(to_flat_dict):
        raise TypeError(f"results must be kgeval evaluation results, got {type(results).__name__}")
    flat: dict[str, float] = to_flat_dict()
    if isinstance(keys, str):
        if keys == "all":
            chosen = list(flat)
        elif keys == "headline":  # a results class may name its own (triple classification's)
            chosen = [key for key in getattr(results, "headline_keys", HEADLINE_KEYS) if key in flat]
        else:
            raise ValueError(f"keys must be 'headline', 'all' or a sequence of metric keys, got {keys!r}")
    elif isinstance(keys, Sequence) and all(isinstance(key, str) for key in keys):
        chosen = [key if key in flat else _flat_name(results, key) for key in keys]
        missing = [key for key in chosen if key not in flat]
        if missing:
            raise KeyError(f"not among the results' keys: {missing}")
    else:
        raise TypeError(f"keys must be 'headline', 'all' or a sequence of str, got {keys!r}")
    values = {key: float(flat[key]) for key in dict.fromkeys(chosen)}
    return {key: value for key, value in values.items() if not math.isnan(value)}


def _flat_name(results: Any, key: str) -> str:
    """The flat name of a key in another spelling (results that resolve keys: ranking's); else the key itself,
    which the caller then reports missing."""
    resolve_key = getattr(results, "resolve_key", None)
    return format_key(resolve_key(key)) if callable(resolve_key) else key


# -- recognising a tracker -------------------------------------------------------------------------------------
def _class_from(module_name: str, class_name: str) -> type | None:
    """A class from a module only if that module is already imported (an instance of it exists only then)."""
    module = sys.modules.get(module_name)
    found = getattr(module, class_name, None) if module is not None else None
    return found if isinstance(found, type) else None


def _is_instance(tracker: Any, *places: tuple[str, str]) -> bool:
    classes = tuple(cls for cls in (_class_from(module, name) for module, name in places) if cls is not None)
    return bool(classes) and isinstance(tracker, classes)


def _logger_for(tracker: Any, run_id: str | None) -> Any:
    """The function that logs (values, step) to ``tracker``; TypeError naming the supported trackers otherwise."""
    client = _is_instance(tracker, ("mlflow.tracking.client", "MlflowClient"))
    if run_id is not None and not client:
        raise ValueError("run_id is for an MlflowClient tracker only")
    if client:
        if not isinstance(run_id, str) or not run_id:
            raise ValueError("an MlflowClient tracker needs run_id= (the run to log to)")
        return _MlflowRunLogger(tracker, run_id)
    wandb: Any = sys.modules.get("wandb")
    if wandb is not None and tracker is wandb:
        if tracker.run is None:
            raise ValueError("the wandb module has no current run: call wandb.init() first, or pass its run")
        return _WandbLogger(tracker.run)
    if _is_instance(tracker, ("wandb.sdk.wandb_run", "Run")):
        return _WandbLogger(tracker)
    mlflow: Any = sys.modules.get("mlflow")
    if mlflow is not None and tracker is mlflow:
        return _log_mlflow_module
    if _is_instance(tracker, ("mlflow.entities.run", "Run")):
        from mlflow.tracking import MlflowClient  # imported already: mlflow imports it with its entities

        return _MlflowRunLogger(MlflowClient(), tracker.info.run_id)
    if _is_instance(tracker, ("torch.utils.tensorboard.writer", "SummaryWriter")):
        return _SummaryWriterLogger(tracker)
    if _is_instance(
        tracker,
        ("lightning.fabric.loggers.logger", "Logger"),
        ("lightning_fabric.loggers.logger", "Logger"),
    ):
        return _LightningLogger(tracker)
    raise TypeError(f"cannot log to a {type(tracker).__module__}.{type(tracker).__qualname__}: expected {_SUPPORTED}")


#: Lightning's MLflow loggers (which delete the characters MLflow refuses from a name instead of failing)
_LIGHTNING_MLFLOW = (("lightning.pytorch.loggers.mlflow", "MLFlowLogger"), ("pytorch_lightning.loggers.mlflow",
                                                                            "MLFlowLogger"))  # fmt: skip


def _check_mlflow_names(values: Mapping[str, float]) -> None:
    refused = [name for name in values if not MLFLOW_NAME_PATTERN.fullmatch(name) or _not_a_plain_path(name)]
    if refused:
        raise ValueError(
            f"MLflow refuses these metric names: {refused[:3]}{' ...' if len(refused) > 3 else ''}; kgeval's keys "
            "are valid MLflow names, so change the prefix: MLflow allows letters, digits, '_', '-', '.', ' ' and "
            "'/', and a name that is a normalised relative path ('val/', not '/val' or 'val//')"
        )


def _not_a_plain_path(name: str) -> bool:
    """MLflow also refuses a name that a POSIX path normalisation would change (``//``, ``./``, a leading ``/``)."""
    normal = posixpath.normpath(name)
    return normal != name or normal == "." or normal.startswith("..") or normal.startswith("/")


# -- the trackers' calls ---------------------------------------------------------------------------------------
class _WandbLogger:
    def __init__(self, run: Any) -> None:
        self.run = run

    def __call__(self, values: dict[str, float], step: int | None) -> None:
        self.run.log(values, step=step)


def _log_mlflow_module(values: dict[str, float], step: int | None) -> None:
    sys.modules["mlflow"].log_metrics(values, step=step)


class _MlflowRunLogger:
    def __init__(self, client: Any, run_id: str) -> None:
        self.client = client
        self.run_id = run_id

    def __call__(self, values: dict[str, float], step: int | None) -> None:
        from mlflow.entities import Metric

        timestamp = int(time.time() * 1000)
        metrics = [Metric(name, value, timestamp, step or 0) for name, value in values.items()]
        self.client.log_batch(self.run_id, metrics=metrics)


class _SummaryWriterLogger:
    def __init__(self, writer: Any) -> None:
        self.writer = writer

    def __call__(self, values: dict[str, float], step: int | None) -> None:
        for name, value in values.items():
            self.writer.add_scalar(name, value, global_step=step)
        self.writer.flush()


class _LightningLogger:
    def __init__(self, logger: Any) -> None:
        self.logger = logger

    def __call__(self, values: dict[str, float], step: int | None) -> None:
        self.logger.log_metrics(dict(values), step)
        self.logger.save()
