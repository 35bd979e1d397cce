"""Hits@k and MRR among N sampled candidates, estimated from full rank records with no re-scoring.

Protocols that rank each answer among N sampled candidates -- the answer and N - 1 negatives (GraIL's and ULTRA's
"hits@10_50") -- report a random number; a full evaluation's records give its expectation exactly. A task's record
says that ``g = optimistic - 1`` of its ``C - 1`` filtered non-answer candidates score above the answer and ``e =
pessimistic - optimistic`` tie with it (``C = num_candidates``). Draw ``n = min(N - 1, C - 1)`` distinct negatives
uniformly from the ``C - 1`` (all of them when there are fewer, as kgeval's sampled evaluator does): ``X``, the drawn
negatives above, and ``Y``, those tied, are multivariate-hypergeometric, and the sampled ranks are

- optimistic ``1 + X``; pessimistic ``1 + X + Y``;
- realistic, ``ties="mean"`` (METRICS.md's realistic rank, PyKEEN's; the ``mean`` tie convention of
  docs/conventions.md): ``1 + X + Y / 2``, so hits@k = ``P(1 + X + Y / 2 <= k)`` and RR = ``E[1 / (1 + X + Y / 2)]``
  -- the expectation of what :class:`kgeval.SampledRankBasedEvaluator` reports as realistic, and the full
  evaluation's realistic value when ``N >= C``;
- realistic, ``ties="expected-random"`` (the ``expected-random`` convention): the answer at a uniformly random
  position of its sampled tie block, hits@k = ``E[min(max(k - X, 0), Y + 1) / (Y + 1)]`` and RR = ``E[(H(1 + X + Y)
  - H(X)) / (Y + 1)]``.

``method="hypergeometric"`` (the default) computes these expectations exactly, per distinct (g, e, C), in float64
and log space: each probability from Loader's saddle-point form (R's ``dhyper``; no difference of large logarithms,
stable for C in the millions) and its neighbours' ratios, over the x and y that can give a hit and the windows
outside of which X, and Y given x, have probability below ``exp(-46)`` per side (Chernoff's bound): nothing of a
hit is left out and at most ~1e-19 of a reciprocal rank. A task costs about ``sd(X) sd(Y)`` entries, not ``N^2``
(FB15k-237-sized records with heavy ties: 40,000 tasks, C ~ 14,500, all three rank types, N = 1,000 in about 6 s,
N = 10,000 in about 25 s on one AMD EPYC core; docs/results.md).

``method="ultra"`` is ULTRA's estimator (``script/run.py`` ``test()``, github.com/DeepGraphLearning/ULTRA; NBFNet's
``hits@k_N`` is the same formula with ``num_samples = N + 1``), reproduced by its arithmetic: with the pessimistic
rank ``p`` and ``num_negative = C - 1``, ``fp = (p - 1) / num_negative`` and hits@k = ``Σ_{i<k} C(N-1, i) fp^i
(1 - fp)^(N-1-i)`` -- a binomial (sampling with replacement) approximation -- in float32, averaged in float32.

Names: a flat key is ``side.rank_type.name`` with the name ``hits_at_{k}_sampled_{N}`` or
``inverse_harmonic_mean_rank_sampled_{N}`` (kgeval's canonical names, see :mod:`kgeval.keys`), suffixed
``_expected_random`` for ``ties="expected-random"`` and ``_ultra`` for ULTRA's estimator (:func:`sampled_key`).
``num_samples`` N counts the answer: it is ``SampledRankBasedEvaluator(num_negatives=N - 1)``'s list. See
docs/conventions.md, "Hits@k among N sampled negatives".
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import torch

from kgeval._checks import check_ks, check_positive_int
from kgeval.records import RankRecords
from kgeval.typing import RANK_TYPES, SIDES, TARGETS, RankType, Side

__all__ = [
    "SAMPLED_METHODS",
    "TIE_RULES",
    "sampled_hits_at_k",
    "sampled_hits_at_k_per_task",
    "sampled_key",
    "sampled_metrics",
    "sampled_mrr",
    "sampled_reciprocal_rank_per_task",
]

Method = Literal["hypergeometric", "ultra"]
TieRule = Literal["mean", "expected-random"]
#: the estimators: kgeval's exact expectation, ULTRA's binomial formula
SAMPLED_METHODS: tuple[Method, ...] = ("hypergeometric", "ultra")
#: how a realistic sampled rank treats its tie block (docs/conventions.md, Tie conventions)
TIE_RULES: tuple[TieRule, ...] = ("mean", "expected-random")
#: ULTRA's binomial coefficient is a float quotient of factorials: (N - 1)! overflows a float beyond this N
ULTRA_MAX_SAMPLES = 171
#: float64 elements of one log-pmf block (8 MiB): tasks are processed in chunks of at most this many entries
BLOCK = 1 << 20


# -- public functions -------------------------------------------------------------------------------------------
def sampled_hits_at_k_per_task(
    records: RankRecords | Mapping[str, Any],
    k: int,
    num_samples: int,
    *,
    method: Method = "hypergeometric",
    rank_type: RankType | None = None,
    ties: TieRule = "mean",
) -> np.ndarray:
    """(n,) float64: each task's expected hits@k among ``num_samples`` sampled candidates (module docstring).

    Parameters
    ----------
    records : RankRecords
        Per-task records with ``num_candidates`` (or a mapping of their columns).
    k : int
        The cut-off, >= 1.
    num_samples : int
        N >= 2: the answer and N - 1 distinct negatives.
    method : {"hypergeometric", "ultra"}, default="hypergeometric"
    rank_type : {"optimistic", "pessimistic", "realistic"}, optional
        Default "realistic" for "hypergeometric"; "ultra" uses the pessimistic rank only.
    ties : {"mean", "expected-random"}, default="mean"
        The realistic rule (``rank_type="realistic"`` only).

    Returns
    -------
    ndarray of shape (n,), float64
        In [0, 1]; ULTRA's values are float32 numbers, NaN for a task with one candidate (0 / 0, as in ULTRA).
    """
    k = check_positive_int(k, "k")
    return _per_task(records, (k,), num_samples, method, rank_type, ties, reciprocal=False)[0][0]


def sampled_reciprocal_rank_per_task(
    records: RankRecords | Mapping[str, Any],
    num_samples: int,
    *,
    method: Method = "hypergeometric",
    rank_type: RankType | None = None,
    ties: TieRule = "mean",
) -> np.ndarray:
    """(n,) float64: each task's expected reciprocal rank among ``num_samples`` sampled candidates, in (0, 1].
    Parameters as :func:`sampled_hits_at_k_per_task`; ``method="ultra"`` is refused (ULTRA and NBFNet estimate
    no sampled MRR: their MRR is the full ranking's)."""
    reciprocal = _per_task(records, (), num_samples, method, rank_type, ties, reciprocal=True)[1]
    assert reciprocal is not None  # asked for
    return reciprocal


def sampled_hits_at_k(
    records: RankRecords | Mapping[str, Any],
    k: int,
    num_samples: int,
    *,
    method: Method = "hypergeometric",
    rank_type: RankType | None = None,
    ties: TieRule = "mean",
    side: Side = "both",
) -> float:
    """Hits@k among ``num_samples`` sampled candidates, averaged over the tasks of ``side`` ("both": head and tail
    tasks pooled). Parameters as :func:`sampled_hits_at_k_per_task`; ULTRA's mean is taken in float32, as ULTRA takes
    it.

    Raises
    ------
    ValueError
        For k < 1, N < 2, an unknown method / rank type / tie rule / side, a rank type or tie rule the method does
        not have, records without ``num_candidates``, or a side without tasks.

    Examples
    --------
    >>> records = RankRecords.from_columns({"head": [0], "relation": [0], "tail": [1], "side": [1],
    ...                                     "optimistic": [3], "pessimistic": [3], "num_candidates": [5]})
    >>> sampled_hits_at_k(records, 1, 2)  # one of 4 negatives drawn; 2 of them are above the answer
    0.5
    """
    k = check_positive_int(k, "k")
    return _means(records, (k,), num_samples, method, rank_type, ties, side, reciprocal=False)[0][0]


def sampled_mrr(
    records: RankRecords | Mapping[str, Any],
    num_samples: int,
    *,
    method: Method = "hypergeometric",
    rank_type: RankType | None = None,
    ties: TieRule = "mean",
    side: Side = "both",
) -> float:
    """MRR among ``num_samples`` sampled candidates: :func:`sampled_reciprocal_rank_per_task` averaged over the
    tasks of ``side``. Raises as :func:`sampled_hits_at_k`."""
    mrr = _means(records, (), num_samples, method, rank_type, ties, side, reciprocal=True)[1]
    assert mrr is not None  # asked for
    return mrr


def sampled_metrics(
    records: RankRecords | Mapping[str, Any],
    ks: Sequence[int],
    num_samples: int,
    *,
    method: Method = "hypergeometric",
    rank_types: Sequence[RankType] | None = None,
    ties: TieRule = "mean",
    sides: Sequence[Side] | None = None,
) -> dict[str, float]:
    """Every sampled hits@k (and, for "hypergeometric", the MRR) by flat key (:func:`sampled_key`), e.g.
    ``both.realistic.hits_at_10_sampled_50``, ``both.realistic.inverse_harmonic_mean_rank_sampled_50``,
    ``both.pessimistic.hits_at_10_sampled_50_ultra``.

    ``rank_types`` defaults to all three ("hypergeometric") or ("pessimistic",) ("ultra"); ``ties`` applies to the
    realistic ones. ``sides`` defaults to every side present and "both" (when head or tail tasks are present).
    """
    ks = check_ks(ks)
    if rank_types is None:
        types: tuple[RankType, ...] = RANK_TYPES if method == "hypergeometric" else ("pessimistic",)
    else:
        types = tuple(rank_types)
    checked = _checked_records(records)
    if sides is None:
        both: list[Side] = ["both"] if (checked.side < 2).any() else []
        sides = [*checked.sides(), *both]
    masks = {side: _side_mask(checked, side) for side in sides}
    out: dict[str, float] = {}
    for rank_type in types:
        rule = ties if rank_type == "realistic" else "mean"
        reciprocal = method == "hypergeometric"  # ULTRA has no sampled MRR
        hits, rr = _per_task(checked, ks, num_samples, method, rank_type, rule, reciprocal=reciprocal)
        for side, mask in masks.items():
            for k, value in zip(ks, hits, strict=True):
                key = sampled_key(side, rank_type, f"hits_at_{k}", num_samples, method=method, ties=rule)
                out[key] = _mean_of(value[mask], method)
            if rr is not None:
                key = sampled_key(side, rank_type, "inverse_harmonic_mean_rank", num_samples, method=method, ties=rule)
                out[key] = _mean_of(rr[mask], method)
    return out


def sampled_key(
    side: Side, rank_type: RankType, name: str, num_samples: int, *, method: Method = "hypergeometric",
    ties: TieRule = "mean",
) -> str:  # fmt: skip
    """The flat key of a sampled metric: ``side.rank_type.{name}_sampled_{N}`` plus ``_expected_random`` or
    ``_ultra``; ``name`` is kgeval's canonical name (``hits_at_10``, ``inverse_harmonic_mean_rank``).

    >>> sampled_key("both", "realistic", "hits_at_10", 50)
    'both.realistic.hits_at_10_sampled_50'
    """
    suffix = "_ultra" if method == "ultra" else "_expected_random" if ties == "expected-random" else ""
    return f"{side}.{rank_type}.{name}_sampled_{num_samples}{suffix}"


# -- validation -------------------------------------------------------------------------------------------------
def _checked_method(method: Any, rank_type: Any) -> tuple[Method, RankType]:
    if method not in SAMPLED_METHODS:
        raise ValueError(f"method must be one of {SAMPLED_METHODS}, got {method!r}")
    if rank_type is None:
        return method, "realistic" if method == "hypergeometric" else "pessimistic"
    if rank_type not in RANK_TYPES:
        raise ValueError(f"rank_type must be one of {RANK_TYPES}, got {rank_type!r}")
    if method == "ultra" and rank_type != "pessimistic":
        raise ValueError(
            f"ULTRA's estimator ranks pessimistically (its rank counts ties against the answer); got rank_type="
            f"{rank_type!r}: use rank_type='pessimistic' or method='hypergeometric'"
        )
    return method, rank_type


def _checked_records(records: Any) -> RankRecords:
    checked = RankRecords.from_columns(records, "sampled estimates' records")
    if checked.num_candidates is None:
        raise ValueError(
            "these rank records hold no num_candidates (a rank table without the column): a sampled estimate needs "
            "the number of candidates each answer was ranked among"
        )
    return checked


def _checked_samples(num_samples: Any) -> int:
    number = check_positive_int(num_samples, "num_samples")
    if number < 2:
        raise ValueError(f"num_samples must be at least 2 (the answer and one negative), got {num_samples!r}")
    return number


def _checked(
    records: Any, ks: tuple[int, ...], num_samples: Any, method: Any, rank_type: Any, ties: Any, reciprocal: bool
) -> tuple[RankRecords, int, Method, RankType, TieRule]:
    """Every argument checked (ks already positive ints)."""
    num_samples = _checked_samples(num_samples)
    method, rank_type = _checked_method(method, rank_type)
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {TIE_RULES}, got {ties!r}")
    if ties != "mean" and rank_type != "realistic":
        raise ValueError(f"ties={ties!r} is a rule for realistic ranks; rank_type={rank_type!r} has its own")
    if method == "ultra":
        if reciprocal:
            raise ValueError(
                "ULTRA and NBFNet estimate no MRR among sampled negatives (their MRR is the full ranking's): use "
                "method='hypergeometric'"
            )
        if num_samples > ULTRA_MAX_SAMPLES:
            raise ValueError(
                f"ULTRA's formula divides factorials as floats, which overflow for num_samples > {ULTRA_MAX_SAMPLES}; "
                f"got {num_samples}"
            )
        if max(ks) > num_samples:
            raise ValueError(
                f"ULTRA's formula sums k terms C(N-1, i), i < k, which fails for k > N: got k={max(ks)}, "
                f"num_samples={num_samples}"
            )
    return _checked_records(records), num_samples, method, rank_type, ties


# -- per task and means -----------------------------------------------------------------------------------------
def _per_task(
    records: Any, ks: tuple[int, ...], num_samples: Any, method: Any, rank_type: Any, ties: Any, *, reciprocal: bool
) -> tuple[list[np.ndarray], np.ndarray | None]:
    """Per-task values: one (n,) array of hits per k, and the reciprocal ranks (None for ULTRA)."""
    checked, num_samples, method, rank_type, ties = _checked(records, ks, num_samples, method, rank_type, ties,
                                                             reciprocal)  # fmt: skip
    assert checked.num_candidates is not None  # _checked_records
    if method == "ultra":
        return [_ultra(checked.pessimistic, checked.num_candidates, k, num_samples).double().numpy() for k in ks], None
    hits, rr = _hypergeometric(checked.optimistic, checked.pessimistic, checked.num_candidates, num_samples,
                               rank_type, ties, ks)  # fmt: skip
    return list(hits), rr


def _means(
    records: Any,
    ks: tuple[int, ...],
    num_samples: Any,
    method: Any,
    rank_type: Any,
    ties: Any,
    side: Any,
    *,
    reciprocal: bool,
) -> tuple[list[float], float | None]:
    """The means over the tasks of ``side`` of :func:`_per_task`'s arrays."""
    checked = _checked_records(records)
    chosen = checked.select(_side_mask(checked, side))
    hits, rr = _per_task(chosen, ks, num_samples, method, rank_type, ties, reciprocal=reciprocal)
    return [_mean_of(value, method) for value in hits], None if rr is None else _mean_of(rr, method)


def _side_mask(records: RankRecords, side: Any) -> np.ndarray:
    """(n,) bool: the tasks of ``side`` ("both": head and tail tasks); a ValueError for an unknown or absent side."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    mask = records.side < 2 if side == "both" else records.side == TARGETS.index(side)
    if not mask.any():
        held = ", ".join(records.sides()) or "none"
        raise ValueError(f"the records hold no {side} tasks (sides held: {held})")
    return mask


def _mean_of(values: np.ndarray, method: Method) -> float:
    """The mean of per-task values: float64, or float32 for ULTRA (as ULTRA takes it)."""
    if method == "ultra":
        return float(torch.from_numpy(values).float().mean())
    return float(values.mean())


# -- ULTRA's binomial formula -----------------------------------------------------------------------------------
def _ultra(pessimistic: np.ndarray, num_candidates: np.ndarray, k: int, num_samples: int) -> torch.Tensor:
    """(n,) float32: ULTRA's per-task hits@k among ``num_samples``, by its arithmetic: an int64 rank minus one as
    float32, divided by the int64 count of filtered negatives (float32 division); ``k`` float32 terms, each a Python
    float coefficient (a quotient of factorials) times ``fp ** i`` times ``(1 - fp) ** (N - 1 - i)``, summed in order
    from zero."""
    rank = torch.as_tensor(pessimistic, dtype=torch.int64)
    negatives = torch.as_tensor(num_candidates, dtype=torch.int64) - 1
    fp = (rank - 1).float() / negatives
    score = torch.zeros_like(fp)
    top = num_samples - 1
    for i in range(k):
        coefficient = math.factorial(top) / math.factorial(i) / math.factorial(top - i)
        score = score + coefficient * (fp**i) * ((1 - fp) ** (top - i))
    return score


# -- the exact hypergeometric expectation -----------------------------------------------------------------------
def _hypergeometric(
    optimistic: np.ndarray,
    pessimistic: np.ndarray,
    num_candidates: np.ndarray,
    num_samples: int,
    rank_type: RankType,
    ties: TieRule,
    ks: tuple[int, ...],
) -> tuple[np.ndarray, np.ndarray]:
    """((len(ks), n) expected hits, (n,) expected reciprocal rank) of each task, computed once per distinct task."""
    above = np.asarray(optimistic, dtype=np.int64) - 1
    tied = np.asarray(pessimistic, dtype=np.int64) - 1 - above
    negatives = np.asarray(num_candidates, dtype=np.int64) - 1
    if rank_type == "pessimistic":
        above, tied = above + tied, np.zeros_like(tied)
    elif rank_type == "optimistic":
        tied = np.zeros_like(tied)
    keys, inverse = np.unique(np.column_stack([above, tied, negatives]), axis=0, return_inverse=True)
    g, e, m = (np.ascontiguousarray(keys[:, i]) for i in range(3))
    n = np.minimum(num_samples - 1, m)
    hits, rr = _expectations(g, e, m, n, ks, ties)
    inverse = inverse.reshape(-1)
    return np.clip(hits, 0.0, 1.0)[:, inverse], np.clip(rr, 0.0, 1.0)[inverse]


def _expectations(
    g: np.ndarray, e: np.ndarray, m: np.ndarray, n: np.ndarray, ks: tuple[int, ...], ties: TieRule
) -> tuple[np.ndarray, np.ndarray]:
    """The rule's hits@k and reciprocal rank f(x, y) averaged over the multivariate hypergeometric pmf of (X, Y),
    the drawn negatives above and tied (no tie: y = 0): ``P(x, y) = P(X = x) P(Y = y | X = x)``, X ~
    Hypergeometric(m, g, n) and, given x, Y ~ Hypergeometric(m - g, e, n - x).

    Only the x and y that matter are visited: every x and y a hit may come from (x < k; y <= 2k - 2 for the mean
    rule), and the windows outside of which X, and Y given any x kept, have probability at most ``exp(-TAIL)`` per
    side (:func:`_window`), so what is left out is at most ~1e-19 of a reciprocal rank and nothing of a hit: below
    float64's resolution, and the cost of a task is its windows' product (about ``sd(X) sd(Y) TAIL``), not ``n^2``.
    Each segment of x (of y in a row x) starts from Loader's saddle-point pmf (:func:`_log_hypergeometric_pmf`)
    and goes on by the pmf's ratio of neighbours, summed in log space."""
    count = len(g)
    hits = np.zeros((len(ks), count))
    rr = np.zeros(count)
    if not count:
        return hits, rr
    largest_k = max(ks, default=0)
    x_low, x_high = _window(g, m, n)
    x_extra = np.minimum(largest_k, x_low)  # x = 0 .. extra - 1 before the window
    # Y | x has n - x draws: its window's upper end is largest at the smallest x kept, its lower end smallest at the
    # largest (the hypergeometric grows stochastically with its draws), so one window per task holds every row's
    smallest_x = np.where(x_extra > 0, 0, x_low)
    y_low = _window(e, m - g, n - x_high)[0]
    y_high = _window(e, m - g, n - smallest_x)[1]
    y_low = np.minimum(y_low, y_high)
    y_extra = np.minimum(max(2 * largest_k - 1, 0) if ties == "mean" else 0, y_low)
    population, above, tied, draws = (value.astype(np.float64) for value in (m, g, e, n))
    # the rows (task, x) and log P(X = x): two segments per task
    row_task, row_x, row_log = [], [], []
    for start, width in ((np.zeros_like(x_low), x_extra), (x_low, x_high - x_low + 1)):
        for tasks, values, logs in _segments(population, above, draws, start, width, np.arange(count)):
            row_task.append(tasks)
            row_x.append(values)
            row_log.append(logs)
    task_of, x, log_x = np.concatenate(row_task), np.concatenate(row_x), np.concatenate(row_log)
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, int(n.max()) + 2))])
    untied = e[task_of] == 0
    _add(hits, rr, task_of[untied], x[untied], np.zeros(int(untied.sum()), dtype=np.int64), log_x[untied], ks,
         ties, harmonic)  # fmt: skip
    rows = np.flatnonzero(~untied)
    if len(rows):
        t = task_of[rows]
        conditional = (population[t] - above[t], tied[t], draws[t] - x[rows])
        for start, width in ((np.zeros_like(t), y_extra[t]), (y_low[t], y_high[t] - y_low[t] + 1)):
            for chosen, values, logs in _segments(*conditional, start, width, np.arange(len(rows)), flat=False):
                row = rows[chosen]
                pmf = np.exp(logs + log_x[row][:, None])  # (rows, values): P(x, y), 0 outside the segment
                x_row = x[row][:, None]
                tasks = task_of[row]
                for i, k in enumerate(ks):
                    hits[i] += np.bincount(tasks, weights=(pmf * _hit(x_row, values, k, ties)).sum(axis=1),
                                           minlength=count)  # fmt: skip
                rr += np.bincount(tasks, weights=(pmf * _reciprocal(x_row, values, ties, harmonic)).sum(axis=1),
                                  minlength=count)  # fmt: skip
    certain = np.minimum(g + e, n)  # the largest pessimistic rank, less one: a hit for every k beyond it, exactly
    for i, k in enumerate(ks):
        hits[i, certain <= k - 1] = 1.0
    return hits, rr


def _add(hits: np.ndarray, rr: np.ndarray, tasks: np.ndarray, x: np.ndarray, y: np.ndarray, log_pmf: np.ndarray,
         ks: tuple[int, ...], ties: TieRule, harmonic: np.ndarray) -> None:  # fmt: skip
    """Add each entry's probability times its hit and reciprocal rank to its task's sums."""
    if not len(tasks):
        return
    pmf = np.exp(log_pmf)
    for i, k in enumerate(ks):
        hits[i] += np.bincount(tasks, weights=pmf * _hit(x, y, k, ties), minlength=hits.shape[1])
    rr += np.bincount(tasks, weights=pmf * _reciprocal(x, y, ties, harmonic), minlength=len(rr))


def _segments(
    population: np.ndarray, successes: np.ndarray, draws: np.ndarray, start: np.ndarray, width: np.ndarray,
    rows: np.ndarray, *, flat: bool = True,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:  # fmt: skip
    """(row, value, log pmf) of every value ``start .. start + width - 1`` of each row's hypergeometric, in blocks
    of rows of similar width (about :data:`BLOCK` cells each): the first value in the support from Loader's form,
    the next ones by the ratio ``P(v) / P(v - 1) = (K - v + 1)(n - v + 1) / (v (M - K - n + v))`` accumulated in
    log space; values outside the support (probability 0) are left out. ``flat=False``: (rows, values, log pmf) of
    each block as (b,) and (b, w) arrays instead, the log pmf -inf outside each row's segment."""
    keep = width > 0
    rows, start, width = rows[keep], start[keep], width[keep]
    order = np.argsort(width, kind="stable")
    begin = 0
    while begin < len(order):
        stop = begin + max(1, int(np.count_nonzero(np.arange(1, len(order) - begin + 1) * width[order[begin:]]
                                                   <= BLOCK)))  # fmt: skip
        chosen = order[begin:stop]
        begin = stop
        row, first, span = rows[chosen], start[chosen], width[chosen]
        size = int(span.max())
        big_m, big_k, big_n = population[row][:, None], successes[row][:, None], draws[row][:, None]
        low = np.maximum(0.0, big_n - (big_m - big_k))  # the support's first value
        anchor = np.maximum(first[:, None].astype(np.float64), low)
        value = first[:, None] + np.arange(size)[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.log((big_k - value + 1) / value) + np.log((big_n - value + 1) / (big_m - big_k - big_n + value))
        step = np.where(value > anchor, step, 0.0)
        log_pmf = np.cumsum(step, axis=1) + _log_hypergeometric_pmf(anchor, big_m, big_k, big_n)
        inside = (value >= anchor) & (np.arange(size)[None, :] < span[:, None]) & (log_pmf > -np.inf)  # not NaN
        if not flat:
            yield row, value, np.where(inside, log_pmf, -np.inf)
            continue
        where = np.nonzero(inside)
        yield row[where[0]], value[where], log_pmf[where]


def _kept(index: np.ndarray, extra: np.ndarray, low: np.ndarray) -> np.ndarray:
    """The value at ``index`` of the list 0 .. extra - 1, low, low + 1, ... (``extra <= low``)."""
    return np.where(index < extra, index, low + index - extra)


#: the windows' tails: each side of X's and of Y's window leaves out a probability of at most exp(-TAIL)
TAIL = 46.0


def _window(successes: np.ndarray, population: np.ndarray, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) int64: the values of X ~ Hypergeometric(population, successes, draws) kept, with P(X < low) and
    P(X > high) each at most ``exp(-TAIL)``: Chernoff's bound ``P(X >= q n) <= exp(-n D(q || p))`` (q > p = K / M;
    likewise below p), which holds for draws without replacement as for the binomial (Hoeffding 1963, section 6),
    its q found by bisection; the support's ends where the bound leaves nothing out."""
    top = np.minimum(successes, draws)
    bottom = np.maximum(0, draws - (population - successes))
    low, high = bottom.copy(), top.copy()
    n = draws.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(population > 0, successes / np.maximum(population, 1), 0.0)
        inside = (n > 0) & (p > 0) & (p < 1)
        upper = inside & (-n * np.log(np.where(inside, p, 0.5)) > TAIL)
        lower = inside & (-n * np.log1p(-np.where(inside, p, 0.5)) > TAIL)
    for chosen, above in ((upper, True), (lower, False)):
        if not chosen.any():
            continue
        share, size = p[chosen], n[chosen]
        near, far = share.copy(), np.ones_like(share) if above else np.zeros_like(share)  # D(near) < TAIL <= D(far)
        for _ in range(64):
            middle = (near + far) / 2
            enough = size * _divergence(middle, share) >= TAIL
            far, near = np.where(enough, middle, far), np.where(enough, near, middle)
        if above:  # P(X > high) <= P(X >= far n)
            high[chosen] = np.minimum(top[chosen], np.ceil(far * size * (1 + 1e-12) + 1e-9).astype(np.int64))
        else:  # P(X < low) <= P(X <= far n)
            low[chosen] = np.maximum(bottom[chosen], np.floor(far * size * (1 - 1e-12) - 1e-9).astype(np.int64))
    return np.minimum(low, top), np.maximum(high, bottom)


def _divergence(q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """D(q || p), the Kullback-Leibler divergence of Bernoulli(q) from Bernoulli(p), for 0 < q < 1."""
    return q * np.log(q / p) + (1 - q) * np.log((1 - q) / (1 - p))


def _log_hypergeometric_pmf(x: np.ndarray, population: np.ndarray, successes: np.ndarray,
                            draws: np.ndarray) -> np.ndarray:  # fmt: skip
    """log P(X = x), X ~ Hypergeometric(population, successes, draws), float64 arrays of integers; -inf outside
    the support. Loader's form (R's ``dhyper``): with p = draws / population, the product of two binomial pmfs
    over a third, each by its saddle-point expansion (:func:`_log_binomial_pmf`), accurate to a few ulps relative
    whatever the population (no difference of large logarithms)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        empty = population <= 0
        size = np.where(empty, 1.0, population)
        p = np.where(empty, 0.0, draws / size)
        q = np.where(empty, 1.0, (size - draws) / size)
        others = population - successes
        value = (_log_binomial_pmf(x, successes, p, q) + _log_binomial_pmf(draws - x, others, p, q)
                 - _log_binomial_pmf(draws, population, p, q))  # fmt: skip
    inside = (x >= 0) & (x <= successes) & (draws - x >= 0) & (draws - x <= others)
    return np.where(inside, value, -np.inf)


def _log_binomial_pmf(x: np.ndarray, size: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """log P(B = x), B ~ Binomial(size, p), q = 1 - p given apart; Loader's ``dbinom_raw`` (2000): Stirling's
    error terms and the deviance ``bd0``, so no term is a difference of large logarithms."""
    out = np.full(np.shape(x), -np.inf)
    generic = (x > 0) & (x < size) & (p > 0) & (q > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        # the ends: x = 0 or x = size (and p or q zero)
        zero = (x == 0) & (size == 0)
        out[zero] = 0.0
        for end, chance, other in (((x == 0) & (size > 0), q, p), ((x == size) & (size > 0), p, q)):
            # all fail (chance = q) or all succeed (chance = p): size log(chance), through bd0 where chance is near 1
            n, c, o = size[end], chance[end], other[end]
            out[end] = np.where(c == 0, -np.inf, np.where(o < 0.1, -_bd0(n, n * c) - n * o, n * np.log(c)))
        xs, n, ps, qs = x[generic], size[generic], p[generic], q[generic]
        rest = n - xs
        lc = _stirlerr(n) - _stirlerr(xs) - _stirlerr(rest) - _bd0(xs, n * ps) - _bd0(rest, n * qs)
        lf = math.log(2 * math.pi) + np.log(xs) + np.log1p(-xs / n)
        out[generic] = lc - 0.5 * lf
    return out


#: log(n!) - ((n + 1/2) log n - n + log(2 pi) / 2) for n = 0 .. 15 (n = 0 is never read), to 25 digits (mpmath)
_STIRLERR = np.array([0.0, 0.08106146679532725821967026, 0.04134069595540929409382208, 0.02767792568499833914878929,
                      0.02079067210376509311152277, 0.01664469118982119216319487, 0.01387612882307074799874573,
                      0.01189670994589177009505572, 0.01041126526197209649747857, 0.009255462182712732917728637,
                      0.008330563433362871256469319, 0.007573675487951840794972024, 0.006942840107209529865664153,
                      0.006408994188004207068439631, 0.005951370112758847735624416,
                      0.00555473355196280137103869])  # fmt: skip


def _stirlerr(n: np.ndarray) -> np.ndarray:
    """The error of Stirling's formula for log(n!), n >= 1 integers: the table to 15, beyond it the asymptotic
    series to n^-9 (its next term is below 1e-16 relative for n > 15)."""
    small = n <= 15
    square = n * n
    series = (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680 - 1 / 1188 / square) / square) / square) / square) / n
    return np.where(small, _STIRLERR[np.where(small, n, 0).astype(np.int64)], series)


def _bd0(x: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """The deviance term ``x log(x / mean) + mean - x`` without cancellation (Loader): a series in
    v = (x - mean) / (x + mean) where |v| < 0.1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = x * np.log(x / mean) + mean - x
    near = np.abs(x - mean) < 0.1 * (x + mean)
    if near.any():
        a, b = x[near], mean[near]
        v = (a - b) / (a + b)
        total = (a - b) * v
        term = 2 * a * v
        square = v * v
        for j in range(1, 40):  # |v| < 0.1: each term a hundredth of the last
            term = term * square
            step = term / (2 * j + 1)
            total = total + step
            if not np.any(np.abs(step) > 1e-17 * np.abs(total)):
                break
        out[near] = total
    return out


def _hit(x: np.ndarray, y: np.ndarray, k: int, ties: TieRule) -> np.ndarray:
    """Hits@k of an answer with x drawn negatives above and y tied, under the realistic rule."""
    if ties == "mean":
        return (2 + 2 * x + y <= 2 * k).astype(np.float64)  # 1 + x + y / 2 <= k
    return np.clip(k - x, 0, y + 1) / (y + 1.0)  # the share of the block's positions 1 + x ... 1 + x + y within k


def _reciprocal(x: np.ndarray, y: np.ndarray, ties: TieRule, harmonic: np.ndarray) -> np.ndarray:
    """The reciprocal rank of an answer with x drawn negatives above and y tied, under the realistic rule."""
    if ties == "mean":
        return 2.0 / (2 + 2 * x + y)
    top = np.minimum(x + y + 1, len(harmonic) - 1)  # x + y > n has probability 0: any index will do
    return (harmonic[top] - harmonic[x]) / (y + 1.0)  # the mean of 1 / position over the block
