"""The field's tie and filter conventions, named, and the number each gives from kgeval's rank records.

Published link-prediction numbers break ties between the true answer and other candidates in different ways
(first / last / a random position among equals, the position a sort happens to give, a mean rank, a rounded mean
rank), and filter the other known answers in different ways (raw, filtered, time-aware). kgeval keeps, per ranking
task, the optimistic rank o = 1 + #(candidates scoring strictly above the true answer) and the pessimistic rank
p = 1 + #(other candidates scoring at least as high): every convention that depends only on the tie block
{o, ..., p} is a computation from (o, p), and :func:`convention_metrics` makes it.

>>> from kgeval.conventions import CONVENTIONS, convention_metrics
>>> sorted(CONVENTIONS)
['argsort', 'expected-random', 'first', 'last', 'mean', 'rounded-mean']
>>> import pandas as pd
>>> frame = pd.DataFrame({"head": [0, 1], "relation": [0, 0], "tail": [1, 0], "side": ["head", "tail"],
...                       "optimistic": [1, 2], "pessimistic": [4, 2]})
>>> convention_metrics(frame, "expected-random", ks=(1,))
{'mrr': 0.5104166666666666, 'mr': 2.25, 'hits@1': 0.125}

The argsort convention (ties in candidate-id order, the order a stable sort leaves them in) depends on which
candidates tie, not only on how many: it needs the scores (:func:`index_order_ranks`), never the records. The
filter conventions are evaluator options (:data:`FILTER_CONVENTIONS`). docs/conventions.md has the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from kgeval._checks import check_ks, integer_column
from kgeval.records import RankRecords, rank_records
from kgeval.typing import TARGETS, RankType

__all__ = [
    "CONVENTIONS",
    "FILTER_CONVENTIONS",
    "Convention",
    "convention_metrics",
    "expected_random_metrics",
    "get_convention",
    "index_order_ranks",
    "rank_metrics",
]

ConventionSide = Literal["head", "tail", "both"]
_SIDES: tuple[str, ...] = ("head", "tail", "both")
#: widths of a tie block up to which E[1/k] is summed term by term (wider blocks use a digamma difference)
_DIRECT_SUM_WIDTH = 64


@dataclass(frozen=True)
class Convention:
    """One convention of the field: what it does, who uses it, and how kgeval gives its number."""

    name: str  #: the key in :data:`CONVENTIONS` / :data:`FILTER_CONVENTIONS`
    description: str  #: what the convention does, in terms of the tie block {optimistic, ..., pessimistic}
    used_by: str  #: libraries / papers known to use it (verified in their source where named, "e.g." otherwise)
    kgeval: str  #: how kgeval reproduces it: a rank type, a computation, or an evaluator option
    kind: Literal["ties", "filter"] = "ties"
    rank_type: RankType | None = None  #: the kgeval rank type that is exactly this convention, if one is
    from_records: bool = True  #: computable from the per-task rank records (False: needs the scores)
    aliases: tuple[str, ...] = ()  #: other names it goes by (matched case-insensitively, "_" = "-")


#: the tie conventions, by name; :func:`convention_metrics` computes every one with ``from_records``
CONVENTIONS: dict[str, Convention] = {
    convention.name: convention
    for convention in (
        Convention(
            name="first",
            description="the true answer is placed first among the candidates with its score (best rank, "
            "competition / 'min' ranking): rank = optimistic",
            used_by="LibKGE tie_handling.type='best_rank'; AmpliGraph ranking_strategy='best'; scipy rankdata "
            "method='min' (on negated scores); e.g. evaluation code that counts only strictly better candidates "
            "(Sun et al. 2020's TOP, which overstates models that give many candidates one score)",
            kgeval="rank type optimistic (key 'optimistic.mrr' / 'best.mrr')",
            rank_type="optimistic",
            aliases=("optimistic", "best", "best-rank", "top", "min"),
        ),
        Convention(
            name="last",
            description="the true answer is placed last among the candidates with its score (worst rank): "
            "rank = pessimistic",
            used_by="TorchKGE get_rank ((scores >= true).sum()); KBC (facebookresearch/kbc) get_ranking; DGL-KE "
            "(sum(neg >= pos) + 1); LibKGE tie_handling.type='worst_rank'; AmpliGraph 2 ranking_strategy='worst' "
            "(its default); scipy rankdata method='max' (on negated scores); Sun et al. 2020's BOTTOM",
            kgeval="rank type pessimistic (key 'pessimistic.mrr' / 'worst.mrr')",
            rank_type="pessimistic",
            aliases=("pessimistic", "worst", "worst-rank", "bottom", "max"),
        ),
        Convention(
            name="mean",
            description="the mean of the tie block's positions, (optimistic + pessimistic) / 2 (fractional / "
            "'average' ranking, scipy.stats.rankdata(method='average')); MRR is the mean of 1 / mean rank, and "
            "hits@k counts a half-integer rank k + 0.5 as a miss",
            used_by="PyKEEN realistic rank (its default); OGB linkproppred Evaluator (0.5 * (optimistic + "
            "pessimistic) + 1); TGB",
            kgeval="rank type realistic (kgeval's default: 'mrr', 'hits@10')",
            rank_type="realistic",
            aliases=("realistic", "average", "avg", "mean-rank", "fractional"),
        ),
        Convention(
            name="expected-random",
            description="the expectation over a uniformly random order of the tied candidates: the true answer's "
            "position k is uniform on {optimistic, ..., pessimistic}, so E[1/k] = (H(p) - H(o - 1)) / (p - o + 1), "
            "E[hits@k] = the fraction of those positions <= k, E[rank] = realistic; the limit of Monte-Carlo "
            "random tie-breaking (Sun et al. 2020's RANDOM), not the reciprocal of the mean rank",
            used_by="e.g. evaluation code that shuffles candidates before a sort, averaged over seeds",
            kgeval="convention_metrics(results, 'expected-random'); MR equals the realistic MR",
            aliases=("random", "expected", "random-expectation"),
        ),
        Convention(
            name="rounded-mean",
            description="the mean rank rounded up: optimistic + floor(num_ties / 2) with num_ties = pessimistic - "
            "optimistic + 1 the candidates tied with the true answer, itself included; equals "
            "ceil((optimistic + pessimistic) / 2)",
            used_by="LibKGE tie_handling.type='rounded_mean_rank' (its default), which detects ties with "
            "torch.isclose(rtol=1e-4, atol=1e-5), kgeval with exact equality",
            kgeval="convention_metrics(results, 'rounded-mean')",
            aliases=("rounded-mean-rank", "libkge", "ceil-mean"),
        ),
        Convention(
            name="argsort",
            description="the position a stable descending sort of the scores gives: ties in candidate-id order "
            "(scipy rankdata method='ordinal' on negated scores); between optimistic and pessimistic, and not "
            "computable from them (it depends on which candidates tie); an unstable sort (torch.argsort's "
            "default) leaves the tie order to the implementation",
            used_by="RotatE's KnowledgeGraphEmbedding (torch.argsort(score, descending=True), not stable); "
            "e.g. code that ranks by np.argsort",
            kgeval="index_order_ranks(scores, true_index, filtered) then rank_metrics(ranks); bounded by the "
            "optimistic and pessimistic numbers",
            from_records=False,
            aliases=("index-order", "stable-argsort", "ordinal", "sort"),
        ),
    )
}

#: the filter conventions: evaluator options, not computations on records
FILTER_CONVENTIONS: dict[str, Convention] = {
    convention.name: convention
    for convention in (
        Convention(
            name="raw",
            description="every candidate counts, other true answers included",
            used_by="Bordes et al. 2013's 'raw' setting; LibKGE's unsuffixed metrics",
            kgeval="RankBasedEvaluator(filtered=False), or filtered='both' for results.raw beside the filtered",
            kind="filter",
        ),
        Convention(
            name="filtered",
            description="candidates e != true answer whose triple is known (evaluation triples plus the "
            "additional filter triples, usually train and valid, and test when evaluating test) are removed",
            used_by="Bordes et al. 2013's 'filtered' setting, the field's default (PyKEEN, LibKGE's _filtered / "
            "_filtered_with_test, TorchKGE, KBC)",
            kgeval="RankBasedEvaluator(filtered=True) (the default) with additional_filter_triples=[train, valid]",
            kind="filter",
        ),
        Convention(
            name="time-aware",
            description="temporal KGs: a candidate is removed only if its quadruple is known at the query's time",
            used_by="e.g. temporal KG forecasting papers (time-aware filtered MRR)",
            kgeval="TemporalRankBasedEvaluator(filtered='time-aware'); 'static' and 'raw' for the other two, 'all' "
            "for the three from one pass",
            kind="filter",
        ),
        Convention(
            name="static",
            description="temporal KGs: a candidate is removed if its triple is known at any time (flatters)",
            used_by="e.g. earlier temporal KG completion papers that reuse a static filter",
            kgeval="TemporalRankBasedEvaluator(filtered='static')",
            kind="filter",
        ),
    )
}


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def get_convention(convention: str | Convention) -> Convention:
    """The :class:`Convention` of a name or alias (case-insensitive, ``_`` read as ``-``), or ``convention`` itself.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones) or a filter convention (an evaluator option).
    """
    if isinstance(convention, Convention):
        return convention
    if not isinstance(convention, str):
        raise TypeError(f"convention must be a name or a Convention, got {type(convention).__name__}")
    key = _normalise(convention)
    for known in CONVENTIONS.values():
        if key == known.name or key in known.aliases:
            return known
    if key in FILTER_CONVENTIONS:
        raise ValueError(
            f"{convention!r} is a filter convention, an option of the evaluation, not a computation on its ranks: "
            f"{FILTER_CONVENTIONS[key].kgeval}"
        )
    aliases = ", ".join(f"{alias} = {known.name}" for known in CONVENTIONS.values() for alias in known.aliases)
    raise ValueError(
        f"unknown tie convention {convention!r}; known: {', '.join(CONVENTIONS)} (aliases: {aliases}); filter "
        f"conventions ({', '.join(FILTER_CONVENTIONS)}) are evaluator options"
    )


# -- metrics ---------------------------------------------------------------------------------------------------
def rank_metrics(ranks: Any, ks: Sequence[int] = (1, 3, 10)) -> dict[str, float]:
    """MRR (mean of 1 / rank), MR (mean rank) and hits@k (fraction of ranks <= k) of one rank per task.

    Parameters
    ----------
    ranks : array-like or tensor of shape (n,)
        1-based ranks (any real values >= 1, e.g. half-integer mean ranks).
    ks : sequence of int, default=(1, 3, 10)

    Returns
    -------
    dict with keys ``"mrr"``, ``"mr"`` and ``"hits@k"`` for each k.
    """
    ks = check_ks(ks)
    values = _as_numpy(ranks).astype(np.float64).reshape(-1)
    if values.size == 0:
        raise ValueError("no ranks: metrics need at least one ranking task")
    if not np.all(values >= 1):  # NaN fails too
        raise ValueError(f"ranks must be >= 1, got {values[~(values >= 1)][0]!r}")
    metrics = {"mrr": float(np.mean(1.0 / values)), "mr": float(np.mean(values))}
    metrics.update({f"hits@{k}": float(np.mean(values <= k)) for k in ks})
    return metrics


def _harmonic_difference(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """H(high) - H(low - 1) = sum of 1/j for j = low..high, float64, for int64 1 <= low <= high.

    Blocks of up to ``_DIRECT_SUM_WIDTH`` terms are summed term by term (exact to rounding); wider ones as
    psi(high + 1) - psi(low) (:func:`_digamma_difference`), to a relative error of a few units in the last place
    wherever the block lies: a difference of two digammas would lose digits far out (at rank 5e8, psi is ~20 and the
    difference ~1e-7: 2.6e-9 relative error; 7e-6 at rank 1e12).
    """
    width = high - low + 1
    out = np.zeros(len(low), dtype=np.float64)
    narrow = width <= _DIRECT_SUM_WIDTH
    if narrow.any():
        start, count = low[narrow].astype(np.float64), width[narrow]
        for offset in range(int(count.max())):
            term = np.where(offset < count, 1.0 / (start + offset), 0.0)
            out[narrow] += term
    wide = ~narrow
    if wide.any():
        out[wide] = _digamma_difference(low[wide], high[wide] + 1)
    return out


#: below this argument the digamma is shifted up by its recurrence psi(x + 1) = psi(x) + 1/x before its series
_DIGAMMA_SERIES_FROM = 16


def _digamma_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """psi(b) - psi(a) for int64 1 <= a < b with b >= :data:`_DIGAMMA_SERIES_FROM`, float64, without cancellation.

    psi(a) = psi(a') - sum of 1/j for j = a..a'-1 with a' = max(a, 16); then, with both arguments >= 16, the
    asymptotic series psi(x) = ln x - 1/(2x) - S(x) gives psi(b) - psi(a') = log1p((b - a') / a') +
    (b - a') / (2 a' b) - (S(b) - S(a')): the integer difference b - a' is exact, so no term subtracts two close
    numbers (S is below 4e-4 and shrinks as 1/x^2). S's truncation error (its next term, 691 / (32760 x^12)) is
    below 1e-16 at x >= 16.
    """
    shifted = np.maximum(a, _DIGAMMA_SERIES_FROM)
    head = np.zeros(len(a), dtype=np.float64)
    for j in range(1, _DIGAMMA_SERIES_FROM):  # the at most 15 terms 1/a .. 1/(a' - 1)
        head += np.where((a <= j) & (j < shifted), 1.0 / j, 0.0)
    gap = (b - shifted).astype(np.float64)  # exact: int64 difference, < 2**53
    low_f, high_f = shifted.astype(np.float64), b.astype(np.float64)
    series = _digamma_series(high_f) - _digamma_series(low_f)
    return head + np.log1p(gap / low_f) + gap / (2.0 * low_f * high_f) - series


def _digamma_series(x: np.ndarray) -> np.ndarray:
    """S(x) = 1/(12 x^2) - 1/(120 x^4) + 1/(252 x^6) - 1/(240 x^8) + 1/(132 x^10), with psi(x) ~ ln x - 1/(2x) - S(x)
    for large x."""
    inv2 = 1.0 / (x * x)
    return inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 / 132))))


def expected_random_metrics(optimistic: Any, pessimistic: Any, ks: Sequence[int] = (1, 3, 10)) -> dict[str, float]:
    """MRR, MR and hits@k in expectation over uniformly random tie-breaking, from each task's tie block.

    The true answer's position k is uniform on {o, ..., p} (o = optimistic, p = pessimistic rank), so per task
    E[1/k] = (H(p) - H(o - 1)) / (p - o + 1), E[k] = (o + p) / 2 and P(k <= K) = clip(K - o + 1, 0, p - o + 1) /
    (p - o + 1); the metrics are their means over tasks.
    """
    ks = check_ks(ks)
    low, high = (
        integer_column(_as_numpy(ranks).reshape(-1), name, "expected_random_metrics", 1)
        for ranks, name in ((optimistic, "optimistic"), (pessimistic, "pessimistic"))
    )
    if low.shape != high.shape or low.size == 0:
        raise ValueError(f"need as many optimistic as pessimistic ranks, at least one, got {low.size}, {high.size}")
    if not (np.all(low >= 1) and np.all(high >= low)):
        raise ValueError("ranks must satisfy 1 <= optimistic <= pessimistic")
    width = (high - low + 1).astype(np.float64)
    reciprocal = _harmonic_difference(low, high) / width
    metrics = {"mrr": float(np.mean(reciprocal)), "mr": float(np.mean((low + high) / 2.0))}
    for k in ks:
        hits = np.clip(k - low + 1, 0, high - low + 1).astype(np.float64) / width
        metrics[f"hits@{k}"] = float(np.mean(hits))
    return metrics


def _side_records(results: Any, side: str) -> RankRecords:
    records = results if isinstance(results, RankRecords) else rank_records(results)
    if side not in _SIDES:
        raise ValueError(f"side must be one of {list(_SIDES)}, got {side!r}")
    if side == "both":
        chosen = records.select(np.isin(records.side, [TARGETS.index("head"), TARGETS.index("tail")]))
    else:
        chosen = records.of_side(side)  # type: ignore[arg-type]
    if len(chosen) == 0:
        raise ValueError(f"the records hold no {side if side != 'both' else 'head or tail'} ranking task")
    return chosen


def convention_metrics(
    results: Any,
    convention: str | Convention,
    ks: Sequence[int] = (1, 3, 10),
    *,
    side: ConventionSide = "both",
) -> dict[str, float]:
    """The MRR, MR and hits@k a tie convention gives, computed from kgeval's per-task rank records.

    Parameters
    ----------
    results : RankBasedMetricResults, rank DataFrame (``results.ranks_df()``, a rank file) or RankRecords
        Results must keep their records (``RankBasedEvaluator(keep_records=True)``, the default).
    convention : str or Convention
        A name or alias of :data:`CONVENTIONS`: "first", "last", "mean", "expected-random", "rounded-mean".
    ks : sequence of int, default=(1, 3, 10)
    side : {"head", "tail", "both"}, default="both"
        "both" pools the head and tail tasks (a micro-average, as every convention's library does).

    Returns
    -------
    dict with keys ``"mrr"``, ``"mr"``, ``"hits@k"`` for each k.

    Raises
    ------
    ValueError
        For an unknown convention (listing the known ones), a filter convention, or "argsort", which needs the
        scores (:func:`index_order_ranks`).
    """
    chosen = get_convention(convention)
    if not chosen.from_records:
        raise ValueError(
            f"the {chosen.name!r} convention breaks ties by candidate id, which the rank records do not keep (they "
            "count the candidates above and tied with the true answer, not which ones): compute it from the scores "
            "with kgeval.conventions.index_order_ranks(scores, true_index, filtered) and rank_metrics(ranks); its "
            "numbers lie between the 'first' (optimistic) and 'last' (pessimistic) ones"
        )
    records = _side_records(results, side)
    low, high = records.optimistic.astype(np.int64), records.pessimistic.astype(np.int64)
    if chosen.rank_type is not None:
        return rank_metrics(records.ranks(chosen.rank_type), ks)
    if chosen.name == "expected-random":
        return expected_random_metrics(low, high, ks)
    if chosen.name == "rounded-mean":
        return rank_metrics(low + (high - low + 1) // 2, ks)
    raise ValueError(f"convention {chosen.name!r} has no computation from rank records")


# -- the argsort convention, from scores -------------------------------------------------------------------------
def index_order_ranks(scores: Any, true_index: Any, filtered: Any = None) -> np.ndarray:
    """1-based ranks under a stable descending sort of each row: ties with the true answer in candidate-id order.

    rank = 1 + #(kept candidates scoring above the true answer) + #(kept candidates with a lower id and the same
    score); what ``np.argsort(-scores, kind="stable")`` or ``torch.sort(scores, descending=True, stable=True)``
    gives. Not computable from rank records (which candidates tie matters, not only how many).

    Parameters
    ----------
    scores : array-like or tensor of shape (n, C)
        Higher = more plausible; NaN is an error.
    true_index : array-like or tensor of int, shape (n,)
        The column of each row's true answer.
    filtered : array-like or tensor of bool, shape (n, C), optional
        Candidates to remove (the filtered setting); a row's true answer is never removed.

    Returns
    -------
    int64 ndarray of shape (n,)
    """
    values = _as_numpy(scores).astype(np.float64, copy=False)
    if values.ndim != 2:
        raise ValueError(f"scores must have shape (n, C), got {values.shape}")
    target = integer_column(_as_numpy(true_index).reshape(-1), "true_index", "index_order_ranks", 0)
    n, num = values.shape
    if len(target) != n or (n and not (0 <= target.min() <= target.max() < num)):
        raise ValueError(f"true_index must hold one column in [0, {num}) per row of scores ({n} rows)")
    if np.isnan(values).any():
        row = int(np.flatnonzero(np.isnan(values).any(axis=1))[0])
        raise ValueError(f"scores row {row} holds NaN: a rank is undefined")
    keep = np.ones_like(values, dtype=bool)
    if filtered is not None:
        mask = _as_numpy(filtered).astype(bool)
        if mask.shape != values.shape:
            raise ValueError(f"filtered must have the shape of scores {values.shape}, got {mask.shape}")
        keep = ~mask
    rows = np.arange(n)
    keep[rows, target] = True
    true_scores = values[rows, target][:, None]
    lower_id = np.arange(num)[None, :] < target[:, None]
    before = keep & ((values > true_scores) | ((values == true_scores) & lower_id))
    return 1 + before.sum(axis=1).astype(np.int64)


def _as_numpy(value: Any) -> np.ndarray:
    """A tensor (bfloat16 widened to float32, exactly: NumPy has no bfloat16), a pandas object or an array-like as
    an ndarray."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return (value.float() if value.dtype == torch.bfloat16 else value).numpy()
    if isinstance(value, pd.DataFrame | pd.Series):
        return value.to_numpy()
    return np.asarray(value)
