"""Whether a model's query/candidate form computes the model's own scores (the fast path optimises the model's
scores, never replaces them): the class check (:func:`method_below_form`) and a one-off probe of a few queries
against a few candidates (:func:`probe_disagreement`); :class:`FormChecks` holds one evaluation's verdicts and
warns once per model class and reason (:class:`kgeval.exceptions.FastPathWarning`).

Whether a model's scores are a function of the query at all (:class:`kgeval.exceptions.ScoreStabilityWarning`):
:func:`probe_instability` scores a few queries twice in one batch, in a second call of that batch and in other
batch compositions, through whatever scorer the model gets; :func:`stale_parametrizations` finds parametrized
weights read from a stale ``torch.nn.utils.parametrize.cached()`` cache. :func:`caller_rng_restored` gives the
caller back the random number generators' states an evaluation found.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.nn.utils import parametrize

from kgeval._modes import held_modules
from kgeval.exceptions import FastPathWarning, ScoreStabilityWarning, warn_caller
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


#: distinct queries of a side the stability probe compares (the side's first), scored twice in one batch
STABILITY_QUERIES = 2
#: other distinct queries (the side's next) that join them in the probe's second batch composition
STABILITY_COMPANIONS = 2
#: two rows of one query agree when each finite score differs by at most this fraction of the larger row's largest
#: finite |score| (or :data:`STABILITY_ULPS` of the scores' dtype, when that is more): far above the rounding a GEMM
#: blocked otherwise for another batch size gives a float32 model's row (kgeval's own models at batch sizes 1 to
#: 512 on CPU: below 1e-6), far below what dynamically quantized activations (8 bits: about 1e-2) or batch norm do
STABILITY_TOLERANCE = 1e-5
#: the tolerance's floor in units of the scores' dtype's epsilon (half precision rounds each score to ~1e-3)
STABILITY_ULPS = 16
#: the causes :func:`probe_instability` and :func:`stale_parametrizations` name
RANDOMNESS = "randomness or state in eval mode"
BATCH_DEPENDENCE = "batch dependence"
STALE_CACHE = "a stale parametrize cache"


@dataclass(frozen=True)
class Instability:
    """What the stability probe saw: ``cause`` (:data:`RANDOMNESS` or :data:`BATCH_DEPENDENCE`) and ``detail``, the
    two scores of one query and candidate, in words."""

    cause: str
    detail: str


def probe_instability(
    scorer: Any, queries: torch.Tensor, max_rows: int | None = None, max_candidates: int | None = None
) -> Instability | None:
    """Whether the scores ``scorer`` gives are a function of the query alone, or None when nothing says otherwise.

    ``queries`` (B, 2) are the side's queries; ``scorer`` is the side's scorer, whatever it is (the model's own
    score_t / score_h / score_r per slice or for whole rows, whole triples, a ``score_fn``, a GEMM form). Two of
    them q (:func:`_probe_positions`: the first and the last, spread through the side to differ) are scored
    against the first :data:`PROBE_WINDOW` candidates (a query/candidate form: its query vectors, the only part
    of its scores a batch computes):

    1. twice in one batch, [q, q]: two rows of one query that differ -> :data:`RANDOMNESS` (noise, sampling);
    2. the same batch again, in a second call: a row that differs from the first call's -> :data:`RANDOMNESS`
       (per-call noise, a counter, a cache the model fills differently);
    3. with :data:`STABILITY_COMPANIONS` other queries c, all in reverse order, [reversed(q + c)], and 4. the
       first query alone, a batch of 1: a row that differs from call 1's -> :data:`BATCH_DEPENDENCE` (statistics
       of the batch: dynamically quantized activations, batch norm in training mode).

    ``max_rows`` and ``max_candidates`` (the evaluation's requested batch and slice sizes; None: no limit) bound
    every call: with ``max_rows`` of 2 or 3 one query is probed ([q, q], then among ``max_rows`` queries), with 1
    it is scored alone in two calls (the evaluation scores every query alone: no batch to depend on).

    Rows differ where one is NaN or infinite and the other not, or where finite scores differ by more than
    :data:`STABILITY_TOLERANCE` of the rows' largest finite |score| (:func:`_first_difference`). At most four calls
    of at most four queries against at most :data:`PROBE_WINDOW` candidates (a whole-row scorer scores whole rows),
    read to the host in one transfer and compared there. The first call is the model's first of the side: what it
    raises propagates (the evaluation's own first call would raise it), except an out-of-memory error, after which
    the probe runs again on half as many rows. A later call that raises skips its comparison (a batch of 1 with
    batch norm in training mode raises: the evaluation's own calls say what fails, where they do).
    """
    rows_cap = 2 * STABILITY_QUERIES if max_rows is None else max(1, min(max_rows, 2 * STABILITY_QUERIES))
    stop = min(scorer.num_candidates, PROBE_WINDOW, max_candidates or PROBE_WINDOW)
    count = max(1, min(STABILITY_QUERIES, rows_cap // 2))
    positions = _probe_positions(queries.shape[0], max(count, min(count + STABILITY_COMPANIONS, rows_cap)))
    if stop <= 0 or not positions:
        return None
    chosen = queries[positions]  # (k, 2): the probed queries, then their companions
    count = min(count, len(positions))
    probe = chosen[:count]
    copies = 2 if rows_cap >= 2 else 1
    twice = probe.repeat(copies, 1)
    try:
        first = _probe_rows(scorer, twice, stop, raises=True)
    except torch.OutOfMemoryError:  # as the evaluation's batches are: halved and tried again, down to one query
        return None if twice.shape[0] == 1 else probe_instability(scorer, queries, twice.shape[0] // 2, stop)
    assert first is not None  # raises=True: the error, or the rows
    calls: list[tuple[torch.Tensor | None, str]] = [(first, "")]
    calls.append((_probe_rows(scorer, twice, stop), "again"))
    if len(positions) > count:
        calls.append((_probe_rows(scorer, chosen.flip(0), stop), f"among other queries (a batch of {len(positions)})"))
    if count > 1:  # alone, one query's batch statistics are those of [q, q]
        calls.append((_probe_rows(scorer, probe[:1], stop), "alone (a batch of 1)"))
    # every call's rows in one transfer, compared on the host
    read = torch.cat([rows for rows, _how in calls if rows is not None]).to("cpu", torch.float64).numpy()
    offsets, offset = [], 0
    for rows, _how in calls:
        offsets.append(None if rows is None else offset)
        offset += 0 if rows is None else rows.shape[0]
    dtype = first.dtype
    pairs: list[tuple[int, int, int, str, str]] = []  #: (row, row, probed query, cause, how)
    if copies == 2:
        pairs += [(row, count + row, row, RANDOMNESS, "twice in one batch") for row in range(count)]
    if offsets[1] is not None:
        pairs += [(row, offsets[1] + row, row % count, RANDOMNESS, "in two calls of one batch")
                  for row in range(twice.shape[0])]  # fmt: skip
    both = f"in a batch of {twice.shape[0]} (the probe's {count} queries twice) and "
    for (rows, how), start in zip(calls[2:], offsets[2:], strict=True):
        if start is not None:
            last = rows.shape[0] - 1 if rows is not None else 0
            places = [last - row for row in range(count)] if how.startswith("among") else [0]
            pairs += [(row, start + place, row, BATCH_DEPENDENCE, both + how) for row, place in enumerate(places)]
    found = _first_difference(read, pairs, dtype)
    if found is None:
        return None
    (_row, _other, query, cause, how), column, values = found
    return Instability(cause, _detail(scorer, probe[query], column, values, how))


def _probe_positions(size: int, count: int) -> list[int]:
    """``count`` distinct positions among ``size`` queries, spread to hold distinct queries where the first ones
    repeat (sorted tasks share their query): the first, the last, the middle, a quarter in (fewer when there are
    fewer). No read of the queries: no host-device synchronisation."""
    positions: list[int] = []
    for position in (0, size - 1, size // 2, size // 4, 3 * size // 4):
        if 0 <= position < size and position not in positions and len(positions) < count:
            positions.append(position)
    return positions


def _probe_rows(scorer: Any, batch: torch.Tensor, stop: int, raises: bool = False) -> torch.Tensor | None:
    """The scores (len(batch), stop) of ``batch`` against candidate positions [0, stop), in one call of
    ``scorer``, detached, on the scorer's device, in their own dtype (copied: a scorer may reuse its tile); None
    when the call raises (``raises``: it raises). A query/candidate form's are its query vectors
    (len(batch), d), as the model computes them for the batch (``kgeval_query``): its candidate vectors are read
    once, not per batch, and no score tile is written (the block-counting kernels count theirs in cache)."""
    try:
        if hasattr(scorer, "_query_matrix"):
            return scorer._query_matrix(batch).detach().clone()
        scorer.begin(batch)
        scorer.start_slice(0, stop)
        return scorer.query_tile(0, batch.shape[0]).detach().clone()
    except Exception:  # the evaluation's own calls raise what they raise, where they do
        if raises:
            raise
        return None


def _first_difference(
    read: np.ndarray, pairs: list[tuple[int, int, int, str, str]], dtype: torch.dtype
) -> tuple[tuple[int, int, int, str, str], int, tuple[float, float]] | None:
    """The first of ``pairs`` (row, other row, ...) of ``read`` (the probe's rows, float64) whose two rows differ
    beyond rounding, with the first column where they do and the two values; None where every pair agrees.

    Two rows of one query differ where one is NaN or infinite and the other not (or infinite of the other sign),
    or where finite values differ by more than ``max(STABILITY_TOLERANCE, STABILITY_ULPS * eps(dtype))`` times
    the larger of the two rows' largest finite |value|."""
    if not pairs:
        return None
    first, second = read[[pair[0] for pair in pairs]], read[[pair[1] for pair in pairs]]
    finite = np.isfinite(first) & np.isfinite(second)
    magnitude = np.where(finite, np.maximum(np.abs(first), np.abs(second)), 0.0).max(axis=1, initial=0.0)
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
    tolerance = max(STABILITY_TOLERANCE, STABILITY_ULPS * eps) * magnitude
    with np.errstate(invalid="ignore"):  # inf - inf
        close = finite & (np.abs(first - second) <= tolerance[:, None])
    same = (first == second) | (np.isnan(first) & np.isnan(second))
    differ = ~(same | close)
    if not differ.any():
        return None
    pair, column = (int(v) for v in np.argwhere(differ)[0])
    return pairs[pair], column, (float(first[pair, column]), float(second[pair, column]))


def _detail(scorer: Any, query: torch.Tensor, column: int, values: tuple[float, float], how: str) -> str:
    """The values of one query that differ, in words: its scores of a candidate, or (a query/candidate form) a
    component of its query vector."""
    what = (f"component {column} of its query vector (kgeval_query)" if hasattr(scorer, "_query_matrix")
            else f"candidate {_id(scorer, column)} the scores")  # fmt: skip
    return f"query {query.tolist()} scored {how} gives {what} {values[0]:.9g} and {values[1]:.9g}"


def stability_message(name: str, method: str, instability: Instability) -> str:
    """The :class:`~kgeval.exceptions.ScoreStabilityWarning` of ``instability`` for the model ``name`` scored
    through ``method``: the cause, what was seen, and what to do."""
    seen = f"{instability.detail} (through {method})"
    if instability.cause == RANDOMNESS:
        return (f"kgeval: the scores of {name} are not a function of the query ({RANDOMNESS}): {seen}. It draws random "
                "numbers or keeps state while it scores in eval mode (noise or sampling it adds itself, dropout "
                "called with training=True, a counter or cache it updates), so its ranks change from run to run and "
                "with the order of the tasks. Make its scoring deterministic in eval mode (e.g. noise only when "
                "self.training); kgeval gives the caller's random number generators back as it found them")  # fmt: skip
    return (f"kgeval: the scores of {name} depend on the other queries of the batch ({BATCH_DEPENDENCE}): {seen}. "
            "Statistics of the batch enter its scores -- dynamically quantized activations "
            "(torch.ao.quantization.quantize_dynamic: the activation scale is the batch's), batch norm in training "
            "mode (code that calls .train() or F.batch_norm(training=True) while scoring), anything that normalises "
            "over the batch --, so its ranks depend on batch_size and on the order of the tasks. Evaluate a float "
            "(unquantized) copy, or keep every normalisation layer in eval mode while it scores")  # fmt: skip


def stale_parametrizations(model: Any) -> list[str]:
    """The parametrized tensors (``"encoder.weight"``) of the modules ``model`` holds
    (:func:`kgeval._modes.held_modules`) that read a stale value from ``torch.nn.utils.parametrize``'s cache.

    Inside ``parametrize.cached()`` a parametrized tensor is computed at its first read and the cached value is
    read from then on, whatever happens to the weights it was computed from: a model trained inside the context
    is scored with the weights of the cache's first read. A tensor is stale when the cache holds a value for it
    (``parametrize._cache``, keyed by (id(module), name)) that differs from its parametrization of the current
    weights (another shape, dtype or device, or any other value). Empty, at no cost, when no ``cached()`` context
    is active; an entry the cache does not hold yet is filled from the current weights by the evaluation, so it is
    not stale. Each tensor that has an entry is computed once more.
    """
    cache = getattr(parametrize, "_cache", None)
    if not getattr(parametrize, "_cache_enabled", 0) or not cache:
        return []
    stale = []
    for prefix, held in held_modules(model):
        for path, module in held.named_modules():
            if not parametrize.is_parametrized(module):
                continue
            for name, parametrization in module.parametrizations.items():
                cached = cache.get((id(module), name))
                if cached is None:
                    continue
                current = parametrization()
                if (cached.shape != current.shape or cached.dtype != current.dtype or cached.device != current.device
                        or not torch.equal(cached, current)):  # fmt: skip
                    stale.append(f"{prefix}{path}.{name}" if path else f"{prefix}{name}")
    return stale


def stale_cache_message(name: str, tensors: list[str]) -> str:
    """The :class:`~kgeval.exceptions.ScoreStabilityWarning` of :func:`stale_parametrizations`' ``tensors``."""
    listed = ", ".join(tensors[:5]) + (f" and {len(tensors) - 5} more" if len(tensors) > 5 else "")
    return (f"kgeval: {name} is scored with {STALE_CACHE}: inside torch.nn.utils.parametrize.cached(), {listed} "
            "is read from the cache, which holds another value than its computation from the current weights now "
            "(the weights changed since the cache was filled, or it was filled in another precision, under "
            "autocast say), so its scores and ranks are those of the cached value. "
            "Evaluate outside parametrize.cached(), or leave and re-enter it after the weights change")  # fmt: skip


@dataclass
class CallerGenerators:
    """What :func:`caller_rng_restored` does on exit: give the generators back (``restore``) or leave them."""

    restore: bool = True


@contextmanager
def caller_rng_restored(restore: bool = True) -> Iterator[CallerGenerators]:
    """Give the caller back the random number generators' states found on entry, on exit however it exits -- when
    the yielded :class:`CallerGenerators`' ``restore`` is still (or was set) True then.

    Saved and restored: torch's CPU generator (:func:`torch.get_rng_state`), every CUDA device's default generator
    when CUDA is initialised on entry (:func:`torch.cuda.get_rng_state_all`), Python's :mod:`random` and numpy's
    global generator. CUDA initialised inside the context is put back in the state of its initialisation (each
    device generator reseeded with its initial seed, offset 0), which is where the caller's first draw would have
    found it. A model that draws random numbers while it is evaluated (noise in eval mode) so leaves the caller's
    random streams where they were.

    The generators are process-wide: a restore also undoes the draws another thread made meanwhile (a trainer
    training beside a background evaluation would repeat its dropout masks). So the evaluation's front door enters
    with ``restore=False`` and asks for the restore only where its stability probe found the model drawing random
    numbers (:data:`RANDOMNESS`); the identity probe, a few milliseconds of scoring, restores always.
    """
    decision = CallerGenerators(restore)
    cpu = torch.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    python = random.getstate()
    numpy = np.random.get_state()  # noqa: NPY002 -- the legacy global generator is the caller's to keep
    try:
        yield decision
    finally:
        if decision.restore:
            torch.set_rng_state(cpu)
            if cuda is not None:
                torch.cuda.set_rng_state_all(cuda)
            elif torch.cuda.is_initialized():
                for generator in torch.cuda.default_generators:
                    generator.manual_seed(generator.initial_seed())
            random.setstate(python)
            np.random.set_state(numpy)  # noqa: NPY002


class FormChecks:
    """One evaluation's checks of the models' query/candidate forms: each target probed once, each warning given
    once; and of the stability of their scores (:func:`probe_instability`, :func:`stale_parametrizations`): each
    target probed once, each cause warned once.

    Parameters
    ----------
    probe : bool, default=True
        Run the agreement probe (the class check always runs).
    """

    def __init__(self, probe: bool = True) -> None:
        self.probe = probe
        self._verdicts: dict[tuple[int, Target], str | None] = {}
        self._warned: set[str] = set()
        self._stability_probed: set[tuple[int, Target]] = set()
        self._caches_checked: set[int] = set()
        self._causes_warned: set[str] = set()

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

    def first_stability_probe(self, model: Any, target: Target) -> bool:
        """Whether the stability probe of ``model`` on ``target`` is yet to run in this evaluation (then it is
        counted as run)."""
        key = (id(model), target)
        first = key not in self._stability_probed
        self._stability_probed.add(key)
        return first

    def first_cache_check(self, model: Any) -> bool:
        """Whether ``model``'s parametrize cache is yet to be checked in this evaluation (then it is counted as
        checked)."""
        first = id(model) not in self._caches_checked
        self._caches_checked.add(id(model))
        return first

    def found(self, cause: str) -> bool:
        """Whether this evaluation's stability probe found ``cause`` (e.g. :data:`RANDOMNESS`), warned or not."""
        return cause in self._causes_warned

    def warn_stability(self, cause: str, message: str) -> None:
        """Warn ``message`` (a ScoreStabilityWarning, attributed to the caller's line), once per evaluation and
        ``cause``."""
        if cause not in self._causes_warned:
            self._causes_warned.add(cause)
            warn_caller(message, ScoreStabilityWarning)


def model_name(view: Any) -> str:
    """The class name of the user's model behind ``view`` (an integration's view holds it as ``model``)."""
    if hasattr(view, "kgeval_form_refused") and hasattr(view, "model"):
        return type(view.model).__name__
    return type(view).__name__
