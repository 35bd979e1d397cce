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

``method="hypergeometric"`` (the default) computes these expectations exactly, per task, in float64 and log space
(stable for C in the millions: no ``lgamma`` of C, each probability a sum of ``n`` logarithms of ratios near 1), at
a cost of ``O(N)`` per distinct (g, e, C) -- ``O(N^2)`` with ties and realistic ranks.

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
    hits = np.zeros((len(ks), len(keys)))
    rr = np.zeros(len(keys))
    untied = e == 0
    if untied.any():
        hits[:, untied], rr[untied] = _untied(g[untied], m[untied], n[untied], ks)
    if (~untied).any():
        hits[:, ~untied], rr[~untied] = _tied(g[~untied], e[~untied], m[~untied], n[~untied], ks, ties)
    inverse = inverse.reshape(-1)
    return np.clip(hits, 0.0, 1.0)[:, inverse], np.clip(rr, 0.0, 1.0)[inverse]


def _untied(g: np.ndarray, m: np.ndarray, n: np.ndarray, ks: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Rank 1 + X with X ~ Hypergeometric(m, g, n): (P(X <= k - 1) per k, E[1 / (1 + X)])."""
    hits = np.zeros((len(ks), len(g)))
    rr = np.zeros(len(g))
    for rows, pmf in _pmf_blocks(m, g, n):
        x = np.arange(pmf.shape[1])
        cumulative = np.cumsum(pmf, axis=1)
        for i, k in enumerate(ks):
            hits[i, rows] = cumulative[:, min(k, pmf.shape[1]) - 1]
        rr[rows] = pmf @ (1.0 / (1.0 + x))
    certain = np.minimum(g, n)  # the largest X possible: a hit for every k beyond it, exactly
    for i, k in enumerate(ks):
        hits[i, certain <= k - 1] = 1.0
    return hits, rr


def _tied(
    g: np.ndarray, e: np.ndarray, m: np.ndarray, n: np.ndarray, ks: tuple[int, ...], ties: TieRule
) -> tuple[np.ndarray, np.ndarray]:
    """Realistic ranks of tasks with ties: the rule's value f(x, y) averaged over the multivariate hypergeometric
    pmf of (X, Y), the drawn negatives above and tied, entry by entry (x <= min(g, n), y <= min(e, n)), in blocks of
    tasks of about :data:`BLOCK` entries.

    ``P(x, y) = n! / (x! y! z!) · [g]_x [e]_y [b]_z / [m]_n`` (z = n - x - y, b = m - g - e), its logarithm from
    prefix sums of ``log((g - j) / m)``, ``log((e - j) / m)``, ``log((b - j) / m)`` and ``log1p(-j / m)``: ratios
    of at most 1, so no sum is a difference of large logarithms."""
    count = len(g)
    hits = np.zeros((len(ks), count))
    rr = np.zeros(count)
    across, down = np.minimum(g, n) + 1, np.minimum(e, n) + 1  # the values x and y can take
    entries = across * down
    log_factorial = _log_factorials(int(n.max()) + 1)
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, int(n.max()) + 2))])
    order = np.argsort(entries, kind="stable")
    start = 0
    while start < count:
        stop = start + max(1, int(np.searchsorted(np.cumsum(entries[order[start:]]), BLOCK, side="right")))
        tasks = order[start:stop]
        start = stop
        size = entries[tasks]
        owner = np.repeat(np.arange(len(tasks)), size)  # each entry's task, 0 .. len(tasks) - 1
        within = np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size, size)
        y = within % down[tasks][owner]
        x = within // down[tasks][owner]
        draws = n[tasks]
        z = draws[owner] - x - y
        valid = z >= 0
        z = np.where(valid, z, 0)
        population = m[tasks].astype(np.float64)[:, None]
        above = _prefix_log_ratios(g[tasks], population, int(across[tasks].max()) - 1)
        tied = _prefix_log_ratios(e[tasks], population, int(down[tasks].max()) - 1)
        below = _prefix_log_ratios(m[tasks] - g[tasks] - e[tasks], population, int(draws.max()))
        j = np.arange(int(draws.max()), dtype=np.float64)[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):  # j >= m is never drawn
            drawn = np.sum(np.where(j < draws[:, None], np.log1p(-j / population), 0.0), axis=1)  # log([m]_n / m^n)
        log_pmf = (log_factorial[draws][owner] - log_factorial[x] - log_factorial[y] - log_factorial[z]
                   + above[owner, x] + tied[owner, y] + below[owner, z] - drawn[owner])  # fmt: skip
        pmf = np.where(valid, np.exp(log_pmf), 0.0)
        for i, k in enumerate(ks):
            hits[i, tasks] = np.bincount(owner, weights=pmf * _hit(x, y, k, ties), minlength=len(tasks))
        rr[tasks] = np.bincount(owner, weights=pmf * _reciprocal(x, y, ties, harmonic), minlength=len(tasks))
    certain = np.minimum(g + e, n)  # the largest pessimistic rank, less one: a hit for every k beyond it, exactly
    for i, k in enumerate(ks):
        hits[i, certain <= k - 1] = 1.0
    return hits, rr


def _prefix_log_ratios(count: np.ndarray, population: np.ndarray, length: int) -> np.ndarray:
    """(b, length + 1): ``Σ_{j<t} log((count - j) / population)`` for t = 0 .. length, -inf once count - j <= 0;
    a ratio above 1/2 through ``log1p`` (accurate near 1)."""
    j = np.arange(length, dtype=np.float64)[None, :]
    left = count.astype(np.float64)[:, None] - j
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(
            left <= 0,
            -np.inf,
            np.where(2 * left > population, np.log1p((left - population) / population), np.log(left / population)),
        )
    return np.concatenate([np.zeros((len(count), 1)), np.cumsum(terms, axis=1)], axis=1)


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


def _pmf_blocks(
    population: np.ndarray, successes: np.ndarray, draws: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(rows, pmf (len(rows), w)): P(X = x), x = 0 .. w - 1, for X ~ Hypergeometric(population, successes, draws)
    per row (``draws <= population``), in blocks of rows; w - 1 = the block's largest ``min(successes, draws)``.

    With n = draws, K = successes, M = population, ``P(X = x) = C(n, x) · [K]_x / [M - n + x]_x · [M - K]_{n-x} /
    [M]_{n-x}`` ([a]_j the falling factorial). Both quotients are products of ratios: their logarithms are prefix
    sums over j of ``log((K - j) / (M - n + 1 + j))`` and ``log1p(-K / (M - j))``, so no term is a difference of
    large logarithms and the error stays a few ulps per factor, for M in the billions as for M = 3."""
    if not len(draws):
        return
    log_factorial = _log_factorials(int(draws.max()) + 1)
    largest = np.minimum(successes, draws)
    order = np.argsort(draws, kind="stable")  # rows of similar length share a block
    start = 0
    while start < len(order):
        lengths = draws[order[start : start + BLOCK]] + 1  # ascending: b rows cost b times the b-th length
        stop = start + max(1, int(np.count_nonzero(np.arange(1, len(lengths) + 1) * lengths <= BLOCK)))
        rows = order[start:stop]
        width = int(largest[rows].max()) + 1
        yield rows, _pmf(population[rows], successes[rows], draws[rows], width, log_factorial)
        start = stop


def _pmf(
    population: np.ndarray, successes: np.ndarray, draws: np.ndarray, width: int, log_factorial: np.ndarray
) -> np.ndarray:
    """(b, width) float64: the hypergeometric pmf of each row at x = 0 .. width - 1 (see :func:`_pmf_blocks`)."""
    m, big_k, n = (value.astype(np.float64)[:, None] for value in (population, successes, draws))
    length = int(draws.max())
    j = np.arange(max(width - 1, 0), dtype=np.float64)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        rising = np.where(j < big_k, np.log((big_k - j) / (m - n + 1 + j)), -np.inf)
        jj = np.arange(length, dtype=np.float64)[None, :]
        falling = np.where(jj < m - big_k, np.log1p(-big_k / (m - jj)), -np.inf)
    first = np.concatenate([np.zeros((len(m), 1)), np.cumsum(rising, axis=1)], axis=1)  # Σ_{j<x}, x < width
    second = np.concatenate([np.zeros((len(m), 1)), np.cumsum(falling, axis=1)], axis=1)  # Σ_{j<t}, t <= length
    x = np.arange(width)[None, :]
    rest = draws[:, None] - x  # n - x
    valid = rest >= 0
    rest = np.where(valid, rest, 0)
    log_pmf = (log_factorial[draws][:, None] - log_factorial[x] - log_factorial[rest] + first
               + np.take_along_axis(second, rest, axis=1))  # fmt: skip
    return np.where(valid, np.exp(log_pmf), 0.0)


def _log_factorials(size: int) -> np.ndarray:
    """log(i!) for i = 0 .. size - 1 (``math.lgamma``, accurate to an ulp)."""
    return np.array([math.lgamma(i + 1.0) for i in range(size)])
