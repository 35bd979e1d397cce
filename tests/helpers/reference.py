"""Brute-force reference for every number defined in ``/work/shared/METRICS.md``.

This module is the independent oracle the test suite compares kgeval against. It deliberately does **not**
import kgeval and is written for obviousness, not speed: explicit Python loops over dense score tables,
``statistics`` / ``math.fsum`` for the plain metrics, exact ``fractions.Fraction`` arithmetic for the
null-model moments of MR, MRR and hits@k, and exact enumeration of all rank combinations for tiny cases. It is
meant for graphs of at most ~60 entities and a few hundred triples.

Conventions (all from METRICS.md unless marked as a choice of this module)

- Sides are ``"head"``, ``"tail"`` and ``"both"`` (head and tail tasks pooled); rank types are
  ``"optimistic"``, ``"pessimistic"`` and ``"realistic"``.
- Metric names are the METRICS.md keys (``"inverse_harmonic_mean_rank"``, ``"hits_at_10"``,
  ``"adjusted_hits_at_3"``); the aliases of METRICS.md (``"mrr"``, ``"h@10"``, ``"zmr"``, ...) are accepted as
  input, case-insensitively. Result dictionaries always use the full keys, with k spelled out.
- Adjusted and z metrics are defined on realistic ranks; :func:`metrics_from_ranks` also reports them for
  optimistic and pessimistic ranks, as PyKEEN does: the same formula applied to those ranks, with the null
  model's moments from the num_candidates (which do not depend on the rank type).
- A zero denominator in an adjusted or z metric yields ``nan`` (no warning is emitted by the reference).
- Metrics of an empty rank set are ``nan``, except ``count`` which is 0.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import torch

__all__ = [
    "ADJUSTED_KEYS",
    "MAD_SCALE",
    "NULL_MODEL_KEYS",
    "PLAIN_KEYS",
    "RANK_TYPES",
    "SIDES",
    "adjusted_keys",
    "adjusted_metric",
    "canonical_key",
    "enumerated_null",
    "macro_average_metrics",
    "macro_average_reference",
    "metrics_from_ranks",
    "null_expectation",
    "null_variance",
    "per_relation_reference",
    "plain_keys",
    "plain_metric",
    "popularity_counts",
    "reference_metrics",
    "reference_per_relation_metrics",
    "reference_ranks",
    "sampled_null",
    "stratified_reference",
]

Side = Literal["head", "tail", "both"]
RankType = Literal["optimistic", "pessimistic", "realistic"]
MetricKey = tuple[str, str, str]

SIDES: tuple[str, ...] = ("head", "tail", "both")
RANK_TYPES: tuple[str, ...] = ("optimistic", "pessimistic", "realistic")

#: Normal-consistency constant of the median absolute deviation (METRICS.md, plain metrics).
MAD_SCALE = 0.6744897501960817

#: Plain metrics without a k; ``hits_at_k`` is added per k by :func:`plain_keys`.
PLAIN_KEYS: tuple[str, ...] = (
    "arithmetic_mean_rank",
    "inverse_arithmetic_mean_rank",
    "harmonic_mean_rank",
    "inverse_harmonic_mean_rank",
    "geometric_mean_rank",
    "inverse_geometric_mean_rank",
    "median_rank",
    "inverse_median_rank",
    "standard_deviation",
    "variance",
    "median_absolute_deviation",
    "count",
)

#: Adjusted and z metrics without a k; the ``adjusted_hits_at_k`` / ``z_hits_at_k`` family is added per k.
ADJUSTED_KEYS: tuple[str, ...] = (
    "adjusted_arithmetic_mean_rank",
    "adjusted_arithmetic_mean_rank_index",
    "adjusted_inverse_harmonic_mean_rank",
    "adjusted_geometric_mean_rank_index",
    "z_arithmetic_mean_rank",
    "z_inverse_harmonic_mean_rank",
    "z_geometric_mean_rank",
)

#: Metrics with null-model moments (METRICS.md, "Expectation and variance under the null model").
NULL_MODEL_KEYS: tuple[str, ...] = (
    "arithmetic_mean_rank",
    "inverse_harmonic_mean_rank",
    "hits_at_k",
    "geometric_mean_rank",
)

_ALIASES: dict[str, str] = {
    "mean_rank": "arithmetic_mean_rank",
    "mr": "arithmetic_mean_rank",
    "iamr": "inverse_arithmetic_mean_rank",
    "hmr": "harmonic_mean_rank",
    "mrr": "inverse_harmonic_mean_rank",
    "mean_reciprocal_rank": "inverse_harmonic_mean_rank",
    "gmr": "geometric_mean_rank",
    "igmr": "inverse_geometric_mean_rank",
    "std": "standard_deviation",
    "rank_std": "standard_deviation",
    "var": "variance",
    "rank_var": "variance",
    "mad": "median_absolute_deviation",
    "rank_mad": "median_absolute_deviation",
    "amr": "adjusted_arithmetic_mean_rank",
    "amri": "adjusted_arithmetic_mean_rank_index",
    "amrr": "adjusted_inverse_harmonic_mean_rank",
    "adjusted_mrr": "adjusted_inverse_harmonic_mean_rank",
    "agmri": "adjusted_geometric_mean_rank_index",
    "zmr": "z_arithmetic_mean_rank",
    "zmrr": "z_inverse_harmonic_mean_rank",
    "zgmr": "z_geometric_mean_rank",
}

#: k-parameterised families: any of these prefixes followed by an integer (or by "k" with ``k=`` given).
_K_FAMILIES: dict[str, tuple[str, ...]] = {
    "hits_at_k": ("hits_at_", "hits@", "h@"),
    "adjusted_hits_at_k": ("adjusted_hits_at_", "ah@"),
    "z_hits_at_k": ("z_hits_at_", "zh@"),
}


# ----------------------------------------------------------------------------------------------- keys


def _check_k(k: Any) -> int:
    """Return ``k`` as a Python int after checking it is a positive integer (bools rejected)."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


def canonical_key(name: str, k: int | None = None) -> tuple[str, int | None]:
    """Resolve a metric name or alias to ``(canonical_name, k)``.

    Parameters
    ----------
    name : str
        A METRICS.md key or alias, case-insensitive: ``"mrr"``, ``"hits_at_10"``, ``"h@10"``,
        ``"hits_at_k"`` (then ``k`` is required), ``"ah@3"``, ``"zmr"``, ...
    k : int, default=None
        The k of a k-parameterised metric when ``name`` does not carry it.

    Returns
    -------
    canonical_name : str
        A member of :data:`PLAIN_KEYS` / :data:`ADJUSTED_KEYS`, or one of ``"hits_at_k"``,
        ``"adjusted_hits_at_k"``, ``"z_hits_at_k"``.
    k : int or None
        The k for the k-parameterised families, else None.

    Examples
    --------
    >>> canonical_key("H@10")
    ('hits_at_k', 10)
    >>> canonical_key("mrr")
    ('inverse_harmonic_mean_rank', None)
    """
    lowered = name.strip().lower()
    for family, prefixes in _K_FAMILIES.items():
        for prefix in prefixes:
            if not lowered.startswith(prefix):
                continue
            suffix = lowered[len(prefix) :]
            if suffix == "k":
                if k is None:
                    raise ValueError(f"metric {name!r} needs k")
                return family, _check_k(k)
            if re.fullmatch(r"[0-9]+", suffix):
                parsed = _check_k(int(suffix))
                if k is not None and _check_k(k) != parsed:
                    raise ValueError(f"metric {name!r} carries k={parsed} but k={k} was given")
                return family, parsed
    resolved = _ALIASES.get(lowered, lowered)
    if resolved not in PLAIN_KEYS and resolved not in ADJUSTED_KEYS:
        raise ValueError(f"unknown metric {name!r}")
    if k is not None:
        raise ValueError(f"metric {name!r} takes no k, got k={k}")
    return resolved, None


def plain_keys(ks: Iterable[int] = (1, 3, 5, 10)) -> tuple[str, ...]:
    """All plain metric keys, with ``hits_at_{k}`` for each k in ``ks`` first."""
    return tuple(f"hits_at_{_check_k(k)}" for k in ks) + PLAIN_KEYS


def adjusted_keys(ks: Iterable[int] = (1, 3, 5, 10)) -> tuple[str, ...]:
    """All adjusted and z metric keys, with ``adjusted_hits_at_{k}`` and ``z_hits_at_{k}`` for each k."""
    ks = [_check_k(k) for k in ks]
    return ADJUSTED_KEYS + tuple(f"adjusted_hits_at_{k}" for k in ks) + tuple(f"z_hits_at_{k}" for k in ks)


# ----------------------------------------------------------------------------------------------- inputs


def _rows(triples: Any, what: str = "triples") -> list[tuple[int, int, int]]:
    """Convert a (n, 3) tensor / array / nested list of ids into a list of int 3-tuples."""
    if isinstance(triples, torch.Tensor):
        triples = triples.detach().cpu().numpy()
    array = np.asarray(triples)
    if array.size == 0:
        return []
    if array.ndim != 2 or array.shape[1] != 3:
        raise ValueError(f"{what} must have shape (n, 3), got {tuple(array.shape)}")
    return [(int(h), int(r), int(t)) for h, r, t in array.tolist()]


def _filter_rows(filter_triples: Any) -> list[tuple[int, int, int]]:
    """Rows of ``None``, one (m, 3) tensor, or a sequence of (m, 3) tensors."""
    if filter_triples is None:
        return []
    if isinstance(filter_triples, torch.Tensor | np.ndarray):
        return _rows(filter_triples, "filter_triples")
    rows: list[tuple[int, int, int]] = []
    for part in filter_triples:
        rows.extend(_rows(part, "filter_triples"))
    return rows


def _values(values: Any) -> list[float]:
    """A 1-D sequence / array / tensor of numbers as a list of Python floats."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    return [float(v) for v in np.asarray(values, dtype=np.float64).reshape(-1).tolist()]


def _candidate_counts(num_candidates: Any) -> list[int]:
    """num_candidates as a list of Python ints >= 1."""
    if isinstance(num_candidates, torch.Tensor):
        num_candidates = num_candidates.detach().cpu().numpy()
    counts = []
    for c in np.asarray(num_candidates).reshape(-1).tolist():
        if c != int(c) or c < 1:
            raise ValueError(f"num_candidates must be integers >= 1, got {c!r}")
        counts.append(int(c))
    return counts


def _score_table(table: Any) -> list[list[list[float]]]:
    """The (E, R, E) score table as nested lists of Python floats (exact for every float dtype)."""
    if isinstance(table, torch.Tensor):
        table = table.detach().cpu()
        if table.dtype in (torch.float16, torch.bfloat16):
            table = table.double()  # exact widening; numpy has no bfloat16
        table = table.numpy()
    array = np.asarray(table)
    if array.ndim != 3 or array.shape[0] != array.shape[2]:
        raise ValueError(f"table must have shape (E, R, E), got {tuple(array.shape)}")
    return array.astype(np.float64).tolist()


# ----------------------------------------------------------------------------------------------- ranks


def _rank_one_task(
    scores: Sequence[float],
    true: int,
    others: Sequence[int],
    side: str,
    triple: tuple[int, int, int],
) -> tuple[int, int, float, int]:
    """(optimistic, pessimistic, realistic, num_candidates) of one task, straight from METRICS.md.

    ``scores[e]`` is the score of entity e, ``true`` the true answer, ``others`` the remaining candidates
    other than the true answer (already restricted and filtered).
    """
    s_true = scores[true]
    if math.isnan(s_true):
        raise ValueError(f"NaN score of the true answer of {side} task for triple {triple}")
    for e in others:
        if math.isnan(scores[e]):
            raise ValueError(f"NaN score of candidate {e} of {side} task for triple {triple}")
    optimistic = 1 + sum(1 for e in others if scores[e] > s_true)
    pessimistic = 1 + sum(1 for e in others if scores[e] >= s_true)
    realistic = (optimistic + pessimistic) / 2
    num_candidates = 1 + len(others)
    return optimistic, pessimistic, realistic, num_candidates


def reference_ranks(
    table: Any,
    triples: Any,
    filter_triples: Any = (),
    filtered: bool = True,
    restrict_entities_to: Any = None,
) -> dict[str, dict[str, np.ndarray]]:
    """Ranks and candidate counts of every head and tail task, by explicit loops (METRICS.md "Ranking tasks").

    Parameters
    ----------
    table : FloatTensor or ndarray of shape (E, R, E)
        ``table[h, r, t]`` is the score of (h, r, t); higher is more plausible. NaN scores of the true answer
        or of a remaining candidate raise ``ValueError``.
    triples : LongTensor of shape (n, 3)
        The evaluation triples (duplicates allowed); they are always part of the filter set.
    filter_triples : None, LongTensor of shape (m, 3), or sequence of them, default=()
        Additional known triples (train, valid, ...).
    filtered : bool, default=True
        False gives raw ranks (nothing is removed from the candidates).
    restrict_entities_to : sequence of int, default=None
        Candidate whitelist. The true answer is always ranked and counted in C, even when it is not in the
        whitelist (choice of this module: METRICS.md says the true answer is never removed).

    Returns
    -------
    ranks : dict
        ``ranks[side][field]`` for side in ``"head"``, ``"tail"``, ``"both"`` and field in ``"optimistic"``
        (int64 array of shape (n,)), ``"pessimistic"`` (int64), ``"realistic"`` (float64) and
        ``"num_candidates"`` (int64). Head and tail arrays follow the order of ``triples``; ``"both"`` is the
        head array followed by the tail array (shape (2n,)).
    """
    scores = _score_table(table)
    num_entities = len(scores)
    rows = _rows(triples)
    known: set[tuple[int, int, int]] = set()
    if filtered:
        known = set(rows) | set(_filter_rows(filter_triples))
    if restrict_entities_to is None:
        universe = list(range(num_entities))
    else:
        universe = sorted({int(e) for e in _values(restrict_entities_to)})
    for e in universe:
        if not 0 <= e < num_entities:
            raise ValueError(f"restrict_entities_to contains {e}, outside [0, {num_entities})")
    for h, r, t in rows:
        if not (0 <= h < num_entities and 0 <= t < num_entities and 0 <= r < len(scores[0])):
            raise ValueError(f"triple {(h, r, t)} has an id outside the score table")

    fields = ("optimistic", "pessimistic", "realistic", "num_candidates")
    collected: dict[str, dict[str, list[float]]] = {side: {f: [] for f in fields} for side in ("head", "tail")}
    for h, r, t in rows:
        # tail task: score (h, r, e); candidate e != t is removed when (h, r, e) is known
        tail_scores = [scores[h][r][e] for e in range(num_entities)]
        tail_others = [e for e in universe if e != t and (h, r, e) not in known]
        tail_result = _rank_one_task(tail_scores, t, tail_others, "tail", (h, r, t))
        # head task: score (e, r, t); candidate e != h is removed when (e, r, t) is known
        head_scores = [scores[e][r][t] for e in range(num_entities)]
        head_others = [e for e in universe if e != h and (e, r, t) not in known]
        head_result = _rank_one_task(head_scores, h, head_others, "head", (h, r, t))
        for side, result in (("tail", tail_result), ("head", head_result)):
            for field_name, value in zip(fields, result, strict=True):
                collected[side][field_name].append(value)

    dtypes = {
        "optimistic": np.int64,
        "pessimistic": np.int64,
        "realistic": np.float64,
        "num_candidates": np.int64,
    }
    out: dict[str, dict[str, np.ndarray]] = {
        side: {f: np.asarray(collected[side][f], dtype=dtypes[f]) for f in fields} for side in ("head", "tail")
    }
    out["both"] = {f: np.concatenate([out["head"][f], out["tail"][f]]) for f in fields}
    return out


def reference_relation_ranks(
    table: Any, triples: Any, filter_triples: Any = (), filtered: bool = True
) -> dict[str, np.ndarray]:
    """Ranks of the true relation of every triple among all relations, by explicit loops (relation prediction).

    The task (h, ?, t) scores ``table[h, r', t]`` for every relation r'; with ``filtered`` a candidate r' != r is
    removed when (h, r', t) is known (an evaluation triple or a filter triple). Returns ``optimistic``,
    ``pessimistic``, ``realistic`` and ``num_candidates`` arrays in the order of ``triples``.
    """
    scores = _score_table(table)
    num_relations = len(scores[0])
    rows = _rows(triples)
    known: set[tuple[int, int, int]] = set(rows) | set(_filter_rows(filter_triples)) if filtered else set()
    fields = ("optimistic", "pessimistic", "realistic", "num_candidates")
    collected: dict[str, list[float]] = {f: [] for f in fields}
    for h, r, t in rows:
        relation_scores = [scores[h][q][t] for q in range(num_relations)]
        others = [q for q in range(num_relations) if q != r and (h, q, t) not in known]
        for field_name, value in zip(fields, _rank_one_task(relation_scores, r, others, "relation", (h, r, t)),
                                     strict=True):  # fmt: skip
            collected[field_name].append(value)
    dtypes = {"optimistic": np.int64, "pessimistic": np.int64, "realistic": np.float64, "num_candidates": np.int64}
    return {f: np.asarray(collected[f], dtype=dtypes[f]) for f in fields}


# --------------------------------------------------------------------------------------------- plain metrics


def plain_metric(name: str, ranks: Any, num_candidates: Any = None, k: int | None = None) -> float:
    """One plain metric of METRICS.md on a set of ranks, by the textbook formula.

    Parameters
    ----------
    name : str
        A plain metric key or alias (``"hits_at_10"``, ``"hits_at_k"`` with ``k``, ``"mrr"``,
        ``"median_rank"``, ``"count"``, ...).
    ranks : array-like of shape (n,)
        Ranks (integers, or half-integers for realistic ranks).
    num_candidates : array-like of shape (n,), default=None
        Unused by plain metrics; accepted so every metric shares one signature.
    k : int, default=None
        The k of ``hits_at_k`` when the name does not carry it.

    Returns
    -------
    value : float
        ``nan`` for an empty rank set, except ``count`` (0.0).
    """
    key, k = canonical_key(name, k)
    if key != "hits_at_k" and key not in PLAIN_KEYS:
        raise ValueError(f"{name!r} is not a plain metric")
    r = _values(ranks)
    n = len(r)
    if key == "count":
        return float(n)
    if n == 0:
        return math.nan
    if key == "hits_at_k":
        return sum(1 for x in r if x <= k) / n
    if key == "arithmetic_mean_rank":
        return math.fsum(r) / n
    if key == "inverse_arithmetic_mean_rank":
        return n / math.fsum(r)
    if key == "harmonic_mean_rank":
        return n / math.fsum(1 / x for x in r)
    if key == "inverse_harmonic_mean_rank":
        return math.fsum(1 / x for x in r) / n
    if key == "geometric_mean_rank":
        return math.exp(math.fsum(math.log(x) for x in r) / n)
    if key == "inverse_geometric_mean_rank":
        return 1 / math.exp(math.fsum(math.log(x) for x in r) / n)
    if key == "median_rank":
        return float(statistics.median(r))
    if key == "inverse_median_rank":
        return 1 / statistics.median(r)
    if key == "standard_deviation":
        return float(statistics.pstdev(r))
    if key == "variance":
        return float(statistics.pvariance(r))
    if key == "median_absolute_deviation":
        middle = statistics.median(r)
        return float(statistics.median([abs(x - middle) for x in r])) / MAD_SCALE
    raise AssertionError(f"unhandled plain metric {key}")  # pragma: no cover


# ----------------------------------------------------------------------------------------------- null model


@functools.cache
def _harmonic(c: int, p: int = 1) -> Fraction:
    """H_p(c) = sum_{j=1..c} j^(-p), exactly."""
    return sum((Fraction(1, j**p) for j in range(1, c + 1)), Fraction(0))


def _power_moment_log(c: int, a: float) -> float:
    """log E[r^a] for r ~ U{1..c}: log((1/c) sum_j j^a)."""
    return math.log(math.fsum(j**a for j in range(1, c + 1)) / c)


def _null_moments(key: str, counts: Sequence[int], k: int | None) -> tuple[Fraction | float, Fraction | float]:
    """(E[M], Var[M]) under the null model by the closed forms of METRICS.md.

    Exact ``Fraction`` for MR, MRR and hits@k; float (log space) for GMR. ``nan`` for n = 0.
    """
    n = len(counts)
    if n == 0:
        return math.nan, math.nan
    if key == "arithmetic_mean_rank":
        mean = sum((Fraction(c + 1, 2) for c in counts), Fraction(0)) / n
        var = sum((Fraction(c * c - 1, 12) for c in counts), Fraction(0)) / n**2
        return mean, var
    if key == "inverse_harmonic_mean_rank":
        mean = sum((_harmonic(c) / c for c in counts), Fraction(0)) / n
        var = sum(((c * _harmonic(c, 2) - _harmonic(c) ** 2) / c**2 for c in counts), Fraction(0)) / n**2
        return mean, var
    if key == "hits_at_k":
        assert k is not None
        probabilities = [min(Fraction(k, c), Fraction(1)) for c in counts]
        mean = sum(probabilities, Fraction(0)) / n
        var = sum((p * (1 - p) for p in probabilities), Fraction(0)) / n**2
        return mean, var
    if key == "geometric_mean_rank":
        # E[GMR] = prod_i E[r_i^(1/n)];  Var = prod_i E[r_i^(2/n)] - E[GMR]^2
        #        = E[GMR]^2 * (exp(sum_i log E[r_i^(2/n)] - 2 log E[r_i^(1/n)]) - 1)   (no cancellation)
        log_first = [_power_moment_log(c, 1 / n) for c in counts]
        log_second = [_power_moment_log(c, 2 / n) for c in counts]
        mean = math.exp(math.fsum(log_first))
        excess = math.fsum(s - 2 * f for s, f in zip(log_second, log_first, strict=True))
        return mean, mean * mean * math.expm1(excess)
    raise ValueError(f"no null-model moments for {key!r}; supported: {NULL_MODEL_KEYS}")


def null_expectation(metric: str, num_candidates: Any, k: int | None = None) -> float:
    """E[M] under the null model r_i ~ U{1..C_i} (METRICS.md closed forms).

    Parameters
    ----------
    metric : str
        ``"arithmetic_mean_rank"`` / ``"mr"``, ``"inverse_harmonic_mean_rank"`` / ``"mrr"``,
        ``"hits_at_k"`` (with ``k``) / ``"hits_at_10"``, ``"geometric_mean_rank"`` / ``"gmr"``.
    num_candidates : array-like of int, shape (n,)
        Each task's own C_i >= 1.
    k : int, default=None
        k of hits@k when the name does not carry it.

    Returns
    -------
    expectation : float
        ``nan`` when n = 0.
    """
    key, k = canonical_key(metric, k)
    return float(_null_moments(key, _candidate_counts(num_candidates), k)[0])


def null_variance(metric: str, num_candidates: Any, k: int | None = None) -> float:
    """Var[M] under the null model (METRICS.md closed forms); same arguments as :func:`null_expectation`."""
    key, k = canonical_key(metric, k)
    return float(_null_moments(key, _candidate_counts(num_candidates), k)[1])


def enumerated_null(
    metric: str, num_candidates: Any, k: int | None = None, max_combinations: int = 1_000_000
) -> tuple[float, float]:
    """(E[M], Var[M]) under the null model by exact enumeration of every rank combination.

    Each combination (r_1, ..., r_n) in {1..C_1} x ... x {1..C_n} has probability 1 / prod C_i; M is computed
    with :func:`plain_metric`. Works for every plain metric, e.g. the median. Only for tiny cases.

    Returns
    -------
    expectation, variance : float
        Population variance over the (equally likely) combinations.
    """
    key, k = canonical_key(metric, k)
    counts = _candidate_counts(num_candidates)
    if not counts:
        return math.nan, math.nan
    if math.prod(counts) > max_combinations:
        raise ValueError(f"{math.prod(counts)} rank combinations exceed max_combinations={max_combinations}")
    values = [
        plain_metric(key, combination, k=k) for combination in itertools.product(*(range(1, c + 1) for c in counts))
    ]
    mean = math.fsum(values) / len(values)
    var = math.fsum((v - mean) ** 2 for v in values) / len(values)
    return mean, var


def sampled_null(
    metric: str,
    num_candidates: Any,
    k: int | None = None,
    num_samples: int = 20_000,
    rng: np.random.Generator | int | None = 0,
) -> np.ndarray:
    """Monte-Carlo draws of M under the null model, shape (num_samples,); for simulation checks.

    Supported: MR, MRR, hits@k, GMR (vectorised numpy, not via :func:`plain_metric`).
    """
    key, k = canonical_key(metric, k)
    counts = np.asarray(_candidate_counts(num_candidates), dtype=np.int64)
    generator = np.random.default_rng(rng)
    ranks = generator.integers(1, counts + 1, size=(num_samples, len(counts))).astype(np.float64)
    if key == "arithmetic_mean_rank":
        return ranks.mean(axis=1)
    if key == "inverse_harmonic_mean_rank":
        return (1 / ranks).mean(axis=1)
    if key == "hits_at_k":
        return (ranks <= k).mean(axis=1)
    if key == "geometric_mean_rank":
        return np.exp(np.log(ranks).mean(axis=1))
    raise ValueError(f"sampled_null does not support {metric!r}")


# ----------------------------------------------------------------------------------------------- adjusted


def _ratio(numerator: float, denominator: float | Fraction) -> float:
    """numerator / denominator, ``nan`` when the denominator is exactly 0."""
    if denominator == 0:
        return math.nan
    return float(numerator) / float(denominator)


def adjusted_metric(key: str, ranks: Any, num_candidates: Any, k: int | None = None) -> float:
    """An adjusted or z metric of METRICS.md ("Adjusted metrics") on realistic ranks.

    Parameters
    ----------
    key : str
        ``amr``, ``amri``, ``amrr``, ``agmri``, ``adjusted_hits_at_k`` (with ``k``) /
        ``adjusted_hits_at_10`` / ``ah@10``, ``zmr``, ``zmrr``, ``zgmr``, ``z_hits_at_k`` / ``zh@10``, or the
        full keys.
    ranks : array-like of shape (n,)
        Realistic ranks (any ranks work; METRICS.md defines these metrics on realistic ranks).
    num_candidates : array-like of int, shape (n,)
        Each task's C_i.
    k : int, default=None
        k of the hits family when the key does not carry it.

    Returns
    -------
    value : float
        ``nan`` when the denominator is 0 (e.g. every C_i = 1, or k >= every C_i for the hits family) and
        when n = 0.
    """
    name, k = canonical_key(key, k)
    r = _values(ranks)
    counts = _candidate_counts(num_candidates)
    if len(r) != len(counts):
        raise ValueError(f"ranks and num_candidates differ in length: {len(r)} != {len(counts)}")
    if not r:
        return math.nan
    base = {
        "adjusted_arithmetic_mean_rank": "arithmetic_mean_rank",
        "adjusted_arithmetic_mean_rank_index": "arithmetic_mean_rank",
        "z_arithmetic_mean_rank": "arithmetic_mean_rank",
        "adjusted_inverse_harmonic_mean_rank": "inverse_harmonic_mean_rank",
        "z_inverse_harmonic_mean_rank": "inverse_harmonic_mean_rank",
        "adjusted_geometric_mean_rank_index": "geometric_mean_rank",
        "z_geometric_mean_rank": "geometric_mean_rank",
        "adjusted_hits_at_k": "hits_at_k",
        "z_hits_at_k": "hits_at_k",
    }.get(name)
    if base is None:
        raise ValueError(f"{key!r} is not an adjusted or z metric")
    value = plain_metric(base, r, k=k)
    expectation, variance = _null_moments(base, counts, k)
    deviation = value - float(expectation)
    if name == "adjusted_arithmetic_mean_rank":
        return _ratio(value, expectation)  # MR / E[MR]
    if name.startswith("z_"):
        spread = math.sqrt(variance) if variance > 0 else 0.0
        signed = -deviation if base in ("arithmetic_mean_rank", "geometric_mean_rank") else deviation
        return _ratio(signed, spread)
    # adjusted index: (M - E[M]) / (1 - E[M]), for MR, MRR, GMR and hits@k alike
    return _ratio(deviation, 1 - expectation)


# ----------------------------------------------------------------------------------------------- all metrics


def metrics_from_ranks(
    ranks: Mapping[str, Mapping[str, np.ndarray]],
    ks: Iterable[int] = (1, 3, 5, 10),
    targets: Sequence[str] = ("head", "tail"),
) -> dict[MetricKey, float]:
    """Every metric for every side and rank type, from the output of :func:`reference_ranks`.

    Parameters
    ----------
    ranks : dict
        As returned by :func:`reference_ranks` (only the ``"head"`` and ``"tail"`` entries are read).
    ks : iterable of int, default=(1, 3, 5, 10)
    targets : sequence of {"head", "tail"}, default=("head", "tail")
        The sides that were ranked; ``"both"`` pools exactly these.

    Returns
    -------
    metrics : dict
        ``(side, rank_type, key) -> float`` for side in ``targets`` + ``("both",)``, every rank type and every
        key of :func:`plain_keys` and of :func:`adjusted_keys`.
    """
    ks = [_check_k(k) for k in ks]
    targets = list(targets)
    if not targets or any(t not in ("head", "tail") for t in targets):
        raise ValueError(f"targets must be a non-empty subset of ('head', 'tail'), got {targets}")
    out: dict[MetricKey, float] = {}
    for side in [*targets, "both"]:
        parts = targets if side == "both" else [side]
        counts = np.concatenate([np.asarray(ranks[p]["num_candidates"]) for p in parts])
        for rank_type in RANK_TYPES:
            values = np.concatenate([np.asarray(ranks[p][rank_type]) for p in parts])
            for key in plain_keys(ks):
                out[side, rank_type, key] = plain_metric(key, values, counts)
            for key in adjusted_keys(ks):
                out[side, rank_type, key] = adjusted_metric(key, values, counts)
    return out


def reference_metrics(
    table: Any,
    triples: Any,
    filter_triples: Any = (),
    ks: Iterable[int] = (1, 3, 5, 10),
    filtered: bool = True,
    restrict_entities_to: Any = None,
    targets: Sequence[str] = ("head", "tail"),
) -> dict[MetricKey, float]:
    """:func:`reference_ranks` followed by :func:`metrics_from_ranks`.

    Returns
    -------
    metrics : dict
        ``(side, rank_type, key) -> float``, e.g. ``metrics["both", "realistic", "hits_at_10"]``,
        ``metrics["tail", "optimistic", "arithmetic_mean_rank"]``,
        ``metrics["head", "realistic", "z_hits_at_3"]``.
    """
    ranks = reference_ranks(table, triples, filter_triples, filtered, restrict_entities_to)
    return metrics_from_ranks(ranks, ks, targets)


# ----------------------------------------------------------------------------------------------- per relation


def per_relation_reference(
    triples: Any,
    per_task_values_head: Any,
    per_task_values_tail: Any,
    side: Side = "both",
    reduce: Callable[[list[float]], float] | None = None,
) -> dict[int, float]:
    """A metric per relation, over that relation's tasks of one side (METRICS.md "Macro averaging").

    Parameters
    ----------
    triples : LongTensor of shape (n, 3)
    per_task_values_head, per_task_values_tail : array-like of shape (n,)
        Per-triple values of the head / tail task (e.g. ``[rank <= k]`` or ``1 / rank``, or the ranks
        themselves with a ``reduce`` such as ``lambda v: plain_metric("median_rank", v)``). The unused side
        may be None.
    side : {"head", "tail", "both"}, default="both"
        ``"both"`` pools the head and tail values of the relation's triples.
    reduce : callable, default=None
        Maps the list of the relation's values to the metric; default the arithmetic mean.

    Returns
    -------
    per_relation : dict
        relation id -> value, for every relation present in ``triples`` (keys sorted ascending).
    """
    rows = _rows(triples)
    head = _values(per_task_values_head) if side in ("head", "both") else None
    tail = _values(per_task_values_tail) if side in ("tail", "both") else None
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    for values in (head, tail):
        if values is not None and len(values) != len(rows):
            raise ValueError(f"got {len(values)} per-task values for {len(rows)} triples")
    groups: dict[int, list[float]] = defaultdict(list)
    for i, (_, r, _) in enumerate(rows):
        if head is not None:
            groups[r].append(head[i])
        if tail is not None:
            groups[r].append(tail[i])
    reducer = reduce if reduce is not None else (lambda v: math.fsum(v) / len(v))
    return {r: float(reducer(groups[r])) for r in sorted(groups)}


def reference_per_relation_metrics(
    table: Any,
    triples: Any,
    filter_triples: Any = (),
    ks: Iterable[int] = (1, 3, 5, 10),
    filtered: bool = True,
    restrict_entities_to: Any = None,
    targets: Sequence[str] = ("head", "tail"),
) -> dict[int, dict[MetricKey, float]]:
    """Every metric of :func:`reference_metrics`, computed on the tasks of each relation separately.

    Ranks are computed once on all ``triples`` (so filtering uses every evaluation triple), then grouped.

    Returns
    -------
    per_relation : dict
        relation id -> ``{(side, rank_type, key): float}``, for relations present in ``triples``.
    """
    rows = _rows(triples)
    ranks = reference_ranks(table, triples, filter_triples, filtered, restrict_entities_to)
    out: dict[int, dict[MetricKey, float]] = {}
    for relation in sorted({r for _, r, _ in rows}):
        index = np.asarray([i for i, (_, r, _) in enumerate(rows) if r == relation], dtype=np.int64)
        subset = {side: {f: a[index] for f, a in ranks[side].items()} for side in ("head", "tail")}
        out[relation] = metrics_from_ranks(subset, ks, targets)
    return out


def macro_average_reference(per_relation: Mapping[int, float]) -> float:
    """Unweighted mean of a per-relation value over the relations given (``nan`` if none)."""
    values = [float(v) for v in per_relation.values()]
    return math.fsum(values) / len(values) if values else math.nan


def macro_average_metrics(per_relation: Mapping[int, Mapping[MetricKey, float]]) -> dict[MetricKey, float]:
    """Macro average of each key of :func:`reference_per_relation_metrics` (a NaN relation propagates)."""
    keys = next(iter(per_relation.values())).keys() if per_relation else ()
    return {key: macro_average_reference({r: m[key] for r, m in per_relation.items()}) for key in keys}


# ----------------------------------------------------------------------------------------------- stratified


def popularity_counts(popularity_triples: Any) -> tuple[Counter[int], Counter[int]]:
    """(entity counts, relation counts): N(e) = #occurrences as subject + #as object; N(r) = #as relation.

    ``popularity_triples`` is one (m, 3) tensor or a sequence of them (concatenated; duplicates count).
    """
    entities: Counter[int] = Counter()
    relations: Counter[int] = Counter()
    for h, r, t in _filter_rows(popularity_triples):
        entities[h] += 1
        entities[t] += 1
        relations[r] += 1
    return entities, relations


def stratified_reference(
    triples: Any,
    head_values: Any,
    tail_values: Any,
    popularity_triples: Any,
    beta_e: float,
    beta_r: float,
    min_count: float | None = None,
) -> float:
    """Popularity-stratified metric of METRICS.md (Mohamed et al., UAI 2020).

    strat(h, r, t) = (w(t) m_t + w(h) m_h) / (w(h) + w(t)); strat_r = mean over the triples of relation r;
    result = sum_r w(r) strat_r / sum_r w(r), with w(x) = N(x)^(-beta).

    Parameters
    ----------
    triples : LongTensor of shape (n, 3)
        The evaluation triples (duplicates count as separate triples).
    head_values, tail_values : array-like of shape (n,)
        m_h and m_t per triple, e.g. ``[rank <= k]`` or ``1 / rank``.
    popularity_triples : LongTensor of shape (m, 3) or sequence of them
        The reference set N(x) is counted on (see :func:`popularity_counts`).
    beta_e, beta_r : float in [-1, 1]
    min_count : float, default=None
        Floor count: N(x) is replaced by ``max(N(x), min_count)``. Without it, an entity or relation of
        ``triples`` absent from the reference set raises ``ValueError``.

    Returns
    -------
    value : float
        ``nan`` when ``triples`` is empty.
    """
    for name, beta in (("beta_e", beta_e), ("beta_r", beta_r)):
        if not -1 <= beta <= 1:
            raise ValueError(f"{name} must be in [-1, 1], got {beta}")
    if min_count is not None and not min_count > 0:
        raise ValueError(f"min_count must be positive, got {min_count}")
    rows = _rows(triples)
    m_h, m_t = _values(head_values), _values(tail_values)
    if not len(m_h) == len(m_t) == len(rows):
        raise ValueError(f"got {len(m_h)} head and {len(m_t)} tail values for {len(rows)} triples")
    if not rows:
        return math.nan
    entity_counts, relation_counts = popularity_counts(popularity_triples)

    def weight(counts: Counter[int], item: int, beta: float, kind: str) -> float:
        count = counts.get(item, 0)
        if min_count is not None:
            count = max(count, min_count)
        if count == 0:
            raise ValueError(f"{kind} {item} does not occur in the popularity triples and no min_count was given")
        return float(count) ** (-beta)

    per_relation: dict[int, list[float]] = defaultdict(list)
    for (h, r, t), value_h, value_t in zip(rows, m_h, m_t, strict=True):
        w_h = weight(entity_counts, h, beta_e, "entity")
        w_t = weight(entity_counts, t, beta_e, "entity")
        per_relation[r].append((w_t * value_t + w_h * value_h) / (w_h + w_t))
    strat_r = {r: math.fsum(v) / len(v) for r, v in per_relation.items()}
    w_r = {r: weight(relation_counts, r, beta_r, "relation") for r in strat_r}
    return math.fsum(w_r[r] * strat_r[r] for r in strat_r) / math.fsum(w_r.values())
