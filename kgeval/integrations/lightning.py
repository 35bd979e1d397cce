"""Link-prediction evaluation inside a Lightning ``Trainer``: :class:`KGEvalCallback` (optional extra ``lightning``).

The callback ranks given triples with a :class:`kgeval.RankBasedEvaluator` every ``every_n_epochs`` epochs of
``fit`` and logs the headline metrics through ``LightningModule.log`` under names ``EarlyStopping`` and
``ModelCheckpoint`` can monitor (``val/mrr``, ``val/hits_at_10``, ``val/head/mrr``, ...). No validation dataloader is
needed: without one the callback evaluates at the end of the training epoch, which Lightning runs before its
monitoring callbacks' hooks; with one it evaluates at the end of every validation of a due epoch (never in the
sanity check), before ``on_validation_end``. ``trainer.validate`` evaluates the same triples, ``trainer.test`` the
``test_triples`` (logged as ``test/...``).

Under DDP every rank runs the callback and ``evaluate`` with the same inputs: with an initialised process group of
more than one rank the tasks are sharded over the ranks (``kgeval._engine.distributed``) and every rank gets
the results of the whole evaluation, so every rank logs the same numbers (logged with ``sync_dist=True`` and a
max over the ranks, which returns the common value exactly).

Works with the ``lightning`` package (``lightning.pytorch``), or the standalone ``pytorch_lightning`` when
``lightning`` is not installed; the callback subclasses that package's ``Callback``, so use the same package's
``Trainer``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kgeval.adapters import scoring_view
from kgeval.adapters.wrappers import held_models_hint
from kgeval.evaluator import RankBasedEvaluator
from kgeval.results import RankBasedMetricResults
from kgeval.typing import RankType

try:
    import lightning.pytorch as pl
except ImportError:  # pragma: no cover - depends on which package is installed
    try:
        import pytorch_lightning as pl  # type: ignore[no-redef]
    except ImportError as error:
        raise ImportError("kgeval.integrations.lightning needs Lightning: pip install 'kgeval[lightning]'") from error

__all__ = ["KGEvalCallback", "LightningEvaluation"]

#: the scoring methods any of which makes an object a model kgeval can rank with
_SCORING_METHODS = ("score_t", "score_h", "score_hrt", "kgeval_query")


@dataclass(frozen=True)
class LightningEvaluation:
    """One evaluation run by a :class:`KGEvalCallback`."""

    stage: str  #: "fit", "validate" or "test"
    epoch: int  #: ``trainer.current_epoch`` when it ran (0-based, as Lightning counts)
    global_step: int  #: ``trainer.global_step`` when it ran
    logged: dict[str, float]  #: the values logged, by name
    results: RankBasedMetricResults  #: every metric


class KGEvalCallback(pl.Callback):
    """Evaluate link prediction during ``Trainer.fit`` (and ``validate`` / ``test``) and log the headline metrics.

    Parameters
    ----------
    triples : LongTensor of shape (n, 3)
        The triples ranked during ``fit`` and ``validate`` (the validation split).
    additional_filter_triples : LongTensor or sequence of them, optional
        Known triples filtered for ``triples`` besides themselves: train (+ valid) for validation, never test
        (:func:`kgeval.datasets.scenarios.filter_triples_for`).
    evaluator : RankBasedEvaluator, optional
        Default ``RankBasedEvaluator()`` (filtered, hits at 1, 3, 5, 10).
    every_n_epochs : int, default=1
        Evaluate in ``fit`` at the epochs whose 1-based number is a multiple of this.
    prefix : str, default="val"
        Logged names are ``{prefix}/{name}`` with the names of :meth:`RankBasedMetricResults.headline`
        (``mrr``, ``hits_at_k``, ``mr``, then per side ``head/mrr``, ...).
    metrics : sequence of str, optional
        Log only these: headline names (``"mrr"``, ``"hits@10"``, ``"tail/mrr"``) or any metric key kgeval reports
        (``"both.realistic.adjusted_arithmetic_mean_rank_index"``, logged under that key after the prefix).
        Default: the whole headline.
    rank_type : {"realistic", "optimistic", "pessimistic"}, default="realistic"
        The rank type of the headline names.
    prog_bar : bool, default=True
        Show ``{prefix}/mrr`` in Lightning's progress bar (when it is logged).
    test_triples : LongTensor of shape (m, 3), optional
        Ranked by ``trainer.test`` and logged under ``test_prefix``; without them the callback does nothing in test.
    test_filter_triples : LongTensor or sequence of them, optional
        Known triples filtered for ``test_triples`` (train + valid + test for the final report).
    test_prefix : str, default="test"
    model : str or callable, optional
        The model to rank: an attribute name of the LightningModule, or ``model(pl_module)``. Default: the
        LightningModule itself when it has a scoring method (``score_t``, ``score_h``, ``score_hrt``, a
        query/candidate form) or is a model of an integrated library (a dicee model is a LightningModule), else its
        ``model`` attribute.
    evaluate_kwargs : mapping, optional
        Further keyword arguments of ``evaluator.evaluate`` (``batch_size``, ``targets``, ``type_constraints``, ...).
        Default ``use_tqdm=False``; ``distributed`` defaults to evaluating over Lightning's process group.

    Attributes
    ----------
    history : list of LightningEvaluation
        Every evaluation of this callback, in order (results without per-task records unless the evaluator keeps
        them: it does by default).
    """

    def __init__(
        self,
        triples: torch.Tensor,
        *,
        additional_filter_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
        evaluator: RankBasedEvaluator | None = None,
        every_n_epochs: int = 1,
        prefix: str = "val",
        metrics: Sequence[str] | None = None,
        rank_type: RankType = "realistic",
        prog_bar: bool = True,
        test_triples: torch.Tensor | None = None,
        test_filter_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
        test_prefix: str = "test",
        model: str | Callable[[Any], Any] | None = None,
        evaluate_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if isinstance(every_n_epochs, bool) or not isinstance(every_n_epochs, int) or every_n_epochs < 1:
            raise ValueError(f"every_n_epochs must be a positive int, got {every_n_epochs!r}")
        if evaluator is not None and not isinstance(evaluator, RankBasedEvaluator):
            raise TypeError(f"evaluator must be a kgeval RankBasedEvaluator, got {type(evaluator).__name__}")
        if rank_type not in ("realistic", "optimistic", "pessimistic"):
            raise ValueError(f"rank_type must be 'realistic', 'optimistic' or 'pessimistic', got {rank_type!r}")
        if model is not None and not isinstance(model, str) and not callable(model):
            raise TypeError(f"model must be an attribute name, a callable or None, got {type(model).__name__}")
        self.triples = triples
        self.additional_filter_triples = additional_filter_triples
        self.evaluator = evaluator if evaluator is not None else RankBasedEvaluator()
        self.every_n_epochs = every_n_epochs
        self.prefix = prefix
        self.metrics = tuple(metrics) if metrics is not None else None
        self.rank_type: RankType = rank_type
        self.prog_bar = bool(prog_bar)
        self.test_triples = test_triples
        self.test_filter_triples = test_filter_triples
        self.test_prefix = test_prefix
        self.model = model
        self.evaluate_kwargs = {"use_tqdm": False, **dict(evaluate_kwargs or {})}
        self.history: list[LightningEvaluation] = []
        self._evaluated_epoch: int | None = None  # the fit epoch already evaluated (at a validation)

    def __repr__(self) -> str:
        return (
            f"KGEvalCallback(triples={tuple(self.triples.shape)}, every_n_epochs={self.every_n_epochs}, "
            f"prefix={self.prefix!r}, evaluator={self.evaluator!r})"
        )

    @property
    def state_key(self) -> str:
        """Lightning's key for this callback's state: one per prefix, so two callbacks (e.g. two splits) coexist."""
        return f"{type(self).__name__}[prefix={self.prefix}]"

    # -- Lightning hooks --------------------------------------------------------------------------------------
    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """Evaluate at every validation of a due ``fit`` epoch and at ``trainer.validate``, never in the sanity
        check."""
        if trainer.sanity_checking:
            return
        stage = _stage(trainer)
        if stage == "fit":
            if not self._due(trainer):
                return
            self._evaluated_epoch = trainer.current_epoch
        self._run(trainer, pl_module, stage, self.triples, self.additional_filter_triples, self.prefix)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """Evaluate a due epoch that ran no validation (no validation loop, or not at this epoch)."""
        if self._due(trainer) and self._evaluated_epoch != trainer.current_epoch:
            self._run(trainer, pl_module, "fit", self.triples, self.additional_filter_triples, self.prefix)

    def on_test_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """Rank ``test_triples`` (when given) at ``trainer.test``."""
        if self.test_triples is not None:
            self._run(trainer, pl_module, "test", self.test_triples, self.test_filter_triples, self.test_prefix)

    def state_dict(self) -> dict[str, Any]:
        """What a Lightning checkpoint keeps of this callback: the logged values of each evaluation."""
        return {"history": [(e.stage, e.epoch, e.global_step, e.logged) for e in self.history]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Nothing to restore: the history of a resumed run starts again (its results are not checkpointed)."""
        del state_dict

    # -- evaluation -------------------------------------------------------------------------------------------
    def _due(self, trainer: Any) -> bool:
        return (trainer.current_epoch + 1) % self.every_n_epochs == 0

    def _run(
        self,
        trainer: Any,
        pl_module: Any,
        stage: str,
        triples: torch.Tensor,
        filter_triples: torch.Tensor | Sequence[torch.Tensor] | None,
        prefix: str,
    ) -> None:
        model = self._model_of(pl_module)
        results = self.evaluator.evaluate(
            model, triples, additional_filter_triples=filter_triples, **self.evaluate_kwargs
        )
        logged = self._values(results, prefix)
        for name, value in logged.items():
            pl_module.log(
                name,
                value,
                on_step=False,
                on_epoch=True,
                prog_bar=self.prog_bar and name == f"{prefix}/mrr",
                # every rank holds the whole evaluation's results: the max over ranks of equal values is that
                # value, exactly (a mean of three could round), and Lightning sees a synchronised metric
                sync_dist=True,
                reduce_fx="max",
            )
        self.history.append(LightningEvaluation(stage, trainer.current_epoch, trainer.global_step, logged, results))

    def _values(self, results: RankBasedMetricResults, prefix: str) -> dict[str, float]:
        """The values to log, by name: the headline, or the requested names and keys."""
        headline = results.headline(prefix, rank_type=self.rank_type)
        if self.metrics is None:
            return headline
        values = {}
        for name in self.metrics:
            key = f"{prefix}/{name}"
            try:  # a headline name in either spelling (hits_at_10, or kgeval 0.1's hits@10)
                values[key] = headline[key]
            except KeyError:
                values[key] = results.get_metric(name)
        return values

    def _model_of(self, pl_module: Any) -> Any:
        if callable(self.model):
            return self.model(pl_module)
        if isinstance(self.model, str):
            if not hasattr(pl_module, self.model):
                raise AttributeError(
                    f"{type(pl_module).__name__} has no attribute {self.model!r} (KGEvalCallback's model=)"
                )
            return getattr(pl_module, self.model)
        if scoring_view(pl_module) is not pl_module:  # an integration's model (a dicee model is a LightningModule)
            return pl_module
        if any(callable(getattr(pl_module, name, None)) for name in _SCORING_METHODS):
            return pl_module
        inner = getattr(pl_module, "model", None)
        if inner is not None:
            return inner
        hint = held_models_hint(pl_module, _scores, "scoring methods")
        raise TypeError(
            f"{type(pl_module).__name__} has no scoring method ({', '.join(_SCORING_METHODS)}) and no 'model' "
            f"attribute: pass KGEvalCallback(model='attribute name') or model=lambda module: ...{hint}"
        )


def _scores(model: Any) -> bool:
    """Whether kgeval can rank ``model``: a model of an integrated library, or one with a scoring method."""
    try:
        return scoring_view(model) is not model or any(callable(getattr(model, n, None)) for n in _SCORING_METHODS)
    except TypeError:  # a library's model kgeval refuses
        return False


def _stage(trainer: Any) -> str:
    """'fit', 'validate' or 'test': the trainer's current function."""
    fn = trainer.state.fn
    return str(getattr(fn, "value", fn))
