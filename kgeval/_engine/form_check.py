"""Whether a model's query/candidate form computes the model's own scores (the fast path optimises the model's
scores, never replaces them): the class check (:func:`method_below_form`) and a one-off probe of a few queries
against a few candidates (:func:`probe_disagreement`); :class:`FormChecks` holds one evaluation's verdicts and
warns once per model class and reason (:class:`kgeval.exceptions.FastPathWarning`).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from kgeval.exceptions import FastPathWarning
from kgeval.typing import Target

#: distinct queries the probe scores (the first of the evaluation's)
PROBE_QUERIES = 4
#: candidates per probe window; the probe reads the first and the last window of the candidates
PROBE_WINDOW = 32


def probe_disagreement(
    form_scorer: Any, own_scorer: Any, queries: torch.Tensor, method: str, limit: int | None = None
) -> str | None:
    """What the form gets wrong about the model's own scores, in words, or None when they agree.

    Scores the first ``limit`` (default :data:`PROBE_QUERIES`) of ``queries`` (a (B, 2) batch of the evaluation's
    queries) against the first and the last :data:`PROBE_WINDOW` candidates with both scorers. Only the order of
    scores matters (an "l2" form ranks a transform of the distance), so the check is on pairs of candidates of one
    query: the form says one scores above the other by more than its rounding bound
    (:meth:`GemmScorer.probe_scores`) while the model's own scores put it below by more than their rounding, or
    level with it; or one of the two gives NaN, the other not.
    """
    queries = queries[: PROBE_QUERIES if limit is None else limit]
    size = form_scorer.num_candidates
    windows = [(0, min(size, PROBE_WINDOW))]
    if size > PROBE_WINDOW:
        windows.append((size - PROBE_WINDOW, size))  # the last candidates (may overlap the first window)
    own_scorer.begin(queries)
    form_scorer.begin(queries)
    probes, dtype = [], torch.float32
    for start, stop in windows:
        own_scorer.start_slice(start, stop)
        tile = own_scorer.query_tile(0, queries.shape[0])
        dtype = tile.dtype
        form, bound = form_scorer.probe_scores(start, stop)
        probes.append(torch.stack([tile.detach().double(), form.detach().double(), bound.detach().double()]))
    # the probe's few scores are compared on the host, in numpy: every window's in one transfer
    read = torch.cat(probes, dim=2).cpu().numpy()
    offsets = np.cumsum([0, *(stop - start for start, stop in windows)])
    for (start, _stop), lo, hi in zip(windows, offsets[:-1], offsets[1:], strict=True):
        own, form, bound = read[0][:, lo:hi], read[1][:, lo:hi], read[2][:, lo:hi]
        nan_mismatch = np.isnan(form) != np.isnan(own)
        if nan_mismatch.any():
            row, column = (int(v) for v in np.argwhere(nan_mismatch)[0])
            return (f"for query {queries[row].tolist()} and candidate {_id(form_scorer, start + column)}, one of the "
                    f"fast path and {method} gives NaN and the other does not")  # fmt: skip
        lost = _cancellation_bits(form_scorer, form, bound)
        if lost is not None:
            row, bits = lost
            return (f"for query {queries[row].tolist()} its expansion 2 q.c - ||c||^2 loses about {bits:.0f} bits to "
                    f"cancellation (vectors far from the origin next to their distances; more than the "
                    f"{MAX_CANCELLATION_BITS} it may), so its ranks could differ from {method}'s")  # fmt: skip
        pair = _inverted_pair(form, bound, own, form_scorer.probe_dims, dtype)
        if pair is not None:
            row, first, second = pair
            return (f"for query {queries[row].tolist()} the fast path scores candidate "
                    f"{_id(form_scorer, start + first)} above {_id(form_scorer, start + second)}, while {method} "
                    f"gives them {own[row, first]:.6g} and {own[row, second]:.6g}")  # fmt: skip
    return None


#: bits an "l2" form's expansion 2 q.c - ||c||^2 may lose to cancellation next to computing ||q - c||^2 directly
#: (its rounding bound over the direct one's, at a query's median distance) before the fast path is refused: the
#: expansion's error grows with ||q||^2 + ||c||^2, the direct one with ||q - c||^2, so vectors far from the origin
#: next to their distances (embeddings offset by 1,000 with spreads of 0.1: 27 bits) rank otherwise than the model
MAX_CANCELLATION_BITS = 8


def _cancellation_bits(scorer: Any, form: np.ndarray, bound: np.ndarray) -> tuple[int, float] | None:
    """(row, bits) of the first probe query whose "l2" expansion loses more than :data:`MAX_CANCELLATION_BITS`
    bits: log2 of its largest rounding bound over the rounding bound of its median squared distance computed
    directly (``form`` is -||q - c||^2 in float64, ``bound`` the expansion's bound); None for other forms or when
    none does."""
    if getattr(scorer, "similarity", None) != "l2" or form.size == 0:
        return None
    info = torch.finfo(scorer.vector_dtype)
    scale, underflow = 2 * (scorer.probe_dims + 2) * info.eps, 2 * (scorer.probe_dims + 2) * info.tiny
    with np.errstate(invalid="ignore", divide="ignore"):
        direct = scale * np.nanmedian(np.abs(form), axis=1) + underflow  # the direct computation's bound
        bits = np.log2(np.nanmax(bound, axis=1) / direct)
    over = np.flatnonzero(bits > MAX_CANCELLATION_BITS)
    return (int(over[0]), float(bits[over[0]])) if over.size else None


def _inverted_pair(
    form: np.ndarray, bound: np.ndarray, own: np.ndarray, dims: int, own_dtype: torch.dtype
) -> tuple[int, int, int] | None:
    """(row, i, j) of a pair the form orders i above j beyond rounding while the model's scores order it j above i
    beyond their rounding, or level; None when there is none.

    form, bound, own : float64 arrays of shape (q, w): form scores, their rounding bound, the model's scores.
    dims : int
        The form's vector width (the model's rounding is taken as that of a sum of ``dims + 2`` terms).
    """
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, which compares False (no verdict on that pair)
        above = (form[:, :, None] - form[:, None, :]) > (bound[:, :, None] + bound[:, None, :])
        largest = np.where(np.isfinite(own), np.abs(own), 0.0).max(axis=1)
        tolerance = 2 * (dims + 2) * torch.finfo(own_dtype).eps * largest
        own_gap = own[:, :, None] - own[:, None, :]
        wrong = above & ((own_gap < -tolerance[:, None, None]) | (own_gap == 0))
    if not wrong.any():
        return None
    row, first, second = (int(v) for v in np.argwhere(wrong)[0])
    return row, first, second


def _id(scorer: Any, position: int) -> int:
    """The id of the candidate at ``position`` of the scorer's candidates."""
    return position if scorer.candidate_ids is None else int(scorer.candidate_ids[position])


class FormChecks:
    """One evaluation's checks of the models' query/candidate forms: each target probed once, each warning given
    once.

    Parameters
    ----------
    probe : bool, default=True
        Run the agreement probe (the class check always runs).
    """

    def __init__(self, probe: bool = True) -> None:
        self.probe = probe
        self._verdicts: dict[tuple[int, Target], str | None] = {}
        self._warned: set[str] = set()

    def verdict(self, model: Any, target: Target) -> tuple[bool, str | None]:
        """(known, problem): whether the probe of ``model`` (the object passed to evaluate, alive throughout the
        evaluation) on ``target`` has run in this evaluation, and what it found."""
        key = (id(model), target)
        return key in self._verdicts, self._verdicts.get(key)

    def record(self, model: Any, target: Target, problem: str | None) -> None:
        self._verdicts[(id(model), target)] = problem

    def warn(self, message: str) -> None:
        """Warn ``message`` (a FastPathWarning), once per evaluation."""
        if message not in self._warned:
            self._warned.add(message)
            warnings.warn(message, FastPathWarning, stacklevel=4)


def model_name(view: Any) -> str:
    """The class name of the user's model behind ``view`` (an integration's view holds it as ``model``)."""
    if hasattr(view, "kgeval_form_refused") and hasattr(view, "model"):
        return type(view.model).__name__
    return type(view).__name__
