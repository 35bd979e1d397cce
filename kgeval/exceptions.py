"""The warnings and errors of kgeval's own (anything else is a ValueError or TypeError naming the argument)."""

from __future__ import annotations

__all__ = [
    "DistributedEvaluationError",
    "FastPathWarning",
    "IgnoredCandidatesWarning",
    "ModelChangedWarning",
    "PrecisionWarning",
    "UndefinedMetricWarning",
    "UnseenLabelsWarning",
]


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


class PrecisionWarning(UserWarning):
    """An ambient setting that lowers the model's precision (an autocast region, TF32, denormals flushed, ...) could
    not be set aside for an evaluation with ``matmul_precision="exact"``: its scores, and so its ranks, are those of
    that setting (kgeval._engine.precision)."""


class ModelChangedWarning(UserWarning):
    """The model changed its own parameters or buffers while kgeval scored it (an in-place write bumped a tensor's
    version, or a tensor was replaced): its scores may depend on the order in which the tasks were scored, so its
    ranks may not be reproducible (kgeval._state_guard)."""


class DistributedEvaluationError(RuntimeError):
    """Raised on every other rank when distributed evaluation failed on some rank (which raises its own error)."""
