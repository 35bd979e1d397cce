"""The warnings and errors of kgeval's own (anything else is a ValueError or TypeError naming the argument), and
:func:`warn_caller`, which attributes a warning to the user's line that called into kgeval."""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import warnings
from collections.abc import Iterator

__all__ = [
    "DistributedEvaluationError",
    "FastPathWarning",
    "IgnoredCandidatesWarning",
    "KnownNegativesWarning",
    "MemoryBudgetWarning",
    "ModelChangedWarning",
    "ModelInUseWarning",
    "NegativeShortfallWarning",
    "OptimisticThresholdWarning",
    "PrecisionWarning",
    "ResumeWarning",
    "ScoreStabilityWarning",
    "ThresholdFallbackWarning",
    "UndefinedMetricWarning",
    "UnreadFilesWarning",
    "UnseenLabelsWarning",
    "quieted",
    "warn_caller",
]

#: kgeval's folder: frames of files below it are kgeval's, not the caller's
_OWN_FOLDER = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: the file whose frames a ``with`` statement adds between kgeval's context managers and their caller
_CONTEXTLIB = os.path.abspath(contextlib.__file__)


def _own(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path.startswith(_OWN_FOLDER) or path == _CONTEXTLIB or "importlib" in filename


def _skipped_by_warnings(filename: str) -> bool:
    """The import system's own frames, which :func:`warnings.warn` passes over without counting them."""
    return "importlib" in filename and "_bootstrap" in filename


class UnreadFilesWarning(UserWarning):
    """A dataset folder holds files of the forms kgeval reads (the extensions of
    ``kgeval.datasets.reading.FILE_PATTERNS``) that it does not read -- hard negatives for triple classification,
    label lists, other splits --: each is named, with why."""


#: the warning categories kgeval's own code does not issue in the current context (thread or task): :func:`quieted`
_QUIETED: contextvars.ContextVar[tuple[type[Warning], ...]] = contextvars.ContextVar("kgeval_quieted", default=())


@contextlib.contextmanager
def quieted(*categories: type[Warning]) -> Iterator[None]:
    """For the block, in the current thread (or asyncio task) only, kgeval's own code does not issue warnings of
    ``categories`` (or of their subclasses): :func:`warn_caller` and the metrics' undefined-value warning check
    ``is_quieted`` and never call ``warnings.warn``.

    What ``warnings.catch_warnings()`` + ``simplefilter("ignore", ...)`` cannot do: those replace the process-wide
    ``warnings.filters`` (and ``showwarning``) for the block and put back what they saved when it ends, so a filter
    another thread adds meanwhile is dropped and another thread's ``catch_warnings(record=True)`` misses warnings or
    keeps recording after its block. Nothing process-wide changes here (a context variable; each thread starts
    with none quieted)."""
    token = _QUIETED.set((*_QUIETED.get(), *categories))
    try:
        yield
    finally:
        _QUIETED.reset(token)


def is_quieted(category: type[Warning]) -> bool:
    """Whether warnings of ``category`` are quieted in the current context (:func:`quieted`)."""
    quiet = _QUIETED.get()
    return bool(quiet) and issubclass(category, quiet)


def warn_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)``, attributed to the first frame outside kgeval (and outside contextlib,
    whose frames a ``with`` adds, and the import system, whose frames an import adds): the user's line, however
    deep in kgeval the warning arises. Not issued at all where ``category`` is :func:`kgeval.exceptions.quieted`."""
    if is_quieted(category):
        return
    level, frame = 1, sys._getframe(1)
    while frame is not None and _own(frame.f_code.co_filename):
        if not _skipped_by_warnings(frame.f_code.co_filename):
            level += 1
        frame = frame.f_back  # type: ignore[assignment]
    warnings.warn(message, category, stacklevel=level + 1)


class UndefinedMetricWarning(UserWarning):
    """A metric is undefined for the given ranks (no tasks, or a zero denominator); its value is NaN."""


class UnseenLabelsWarning(UserWarning):
    """Valid / test triples use entities or relations that never occur in the training triples."""


class FastPathWarning(UserWarning):
    """A model's query/candidate fast path was not used because it would not compute the scores of the model's own
    scoring methods (a subclass overrides one, or a one-off probe saw the two disagree): the model is scored through
    its own methods instead, with the ranks those give."""


class IgnoredCandidatesWarning(UserWarning):
    """A model's scoring method accepts candidate ids (``tails=`` / ``heads=``, or ``**kwargs``) but returned the
    scores of every entity when asked for a slice: kgeval ranks from those rows (exactly) and stops asking for
    slices, so the model's memory per call is a batch of whole rows, not bounded by ``slice_size``."""


class MemoryBudgetWarning(UserWarning):
    """One query of a model scored through its own methods (one query against one candidate, where it takes candidate
    ids) needs more memory than the budget its batch size was derived from holds (kgeval._engine.sizes.measured_sizes):
    the evaluation runs one query at a time, beyond the budget."""


class PrecisionWarning(UserWarning):
    """An ambient setting that lowers the model's precision (an autocast region, TF32, denormals flushed, ...) could
    not be set aside for an evaluation with ``matmul_precision="exact"``: its scores, and so its ranks, are those of
    that setting (kgeval._engine.precision)."""


class ModelChangedWarning(UserWarning):
    """The model changed its own parameters or buffers while kgeval scored it (an in-place write bumped a tensor's
    version, or a tensor was replaced): its scores may depend on the order in which the tasks were scored, so its
    ranks may not be reproducible (kgeval._model_state)."""


class ModelInUseWarning(UserWarning):
    """Another thread used a model while kgeval evaluated it: told to that thread when it calls the model (or one of
    its submodules) during the evaluation -- its calls run in evaluation mode, dropout off and batch-norm statistics
    frozen --, and to the evaluation's caller when the other thread switched the model back to training mode meanwhile
    (kgeval._modes)."""


class DistributedEvaluationError(RuntimeError):
    """Raised on every other rank when distributed evaluation failed on some rank (which raises its own error)."""


class ResumeWarning(UserWarning):
    """A resumed evaluation found the model's plain attributes (numbers, strings) changed since its progress was
    saved: a setting would change the scores, a counter would not; kgeval cannot tell which, so it says so. Also: a
    resumed many-graph run (:func:`kgeval.many.evaluate_many`'s ``results_dir``) found a graph's saved result made
    with other inputs, or unreadable, and evaluates that graph again."""


class ScoreStabilityWarning(UserWarning):
    """A model's scores of a query are not a function of that query alone (kgeval._engine.form_check): scored twice,
    or in another batch, it gives other scores -- it draws random numbers or keeps state while it scores in eval
    mode, or its scores depend on the rest of the batch (dynamically quantized activations, batch norm in training
    mode) --, or a parametrized weight is read from a stale ``torch.nn.utils.parametrize.cached()`` cache. Its ranks
    are those of the scores it gave, which another run, batch size or task order would not reproduce."""


class KnownNegativesWarning(UserWarning):
    """Given negatives that are known triples (of a split of the dataset): they are false by their file's word only
    (triple classification, :mod:`kgeval.variants.classification`)."""


class ThresholdFallbackWarning(UserWarning):
    """A relation of the test triples got no threshold of its own from validation (absent, or one class only), in
    triple classification (:mod:`kgeval.variants.classification`)."""


class NegativeShortfallWarning(UserWarning):
    """Some positives got fewer drawn negatives than asked for (:func:`kgeval.variants.draw_negatives`): their
    relation's candidate set, less the known triples, is too small."""


class OptimisticThresholdWarning(UserWarning):
    """The ``"pykeen"`` convention of triple classification calls the P highest-scored test triples true, P taken
    from the test labels: the threshold is fitted on the evaluated labels, and the binarised metrics are optimistic
    (PyKEEN's own note)."""
