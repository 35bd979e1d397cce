"""Sufficient statistics of a set of ranks: :class:`RankSummary` (additive sums, and the per-task ranks when kept)
is what every metric function reads; :func:`rank_statistics` makes the sums for the accumulator and for
``summarize`` alike.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from kgeval.exceptions import UndefinedMetricWarning, is_quieted

__all__ = [
    "RankSummary",
    "nan_equal",
    "rank_statistics",
    "safe_ratio",
]


def rank_statistics(ranks: torch.Tensor, ks: Sequence[int]) -> dict[str, torch.Tensor]:
    """Per-batch sufficient statistics of ranks, all additive.

    Parameters
    ----------
    ranks : FloatTensor of shape (n,)
        1-based ranks (half-integers for realistic ranks), float64.
    ks : sequence of int
        The k of hits@k.

    Returns
    -------
    dict with ``count`` (int64 scalar), ``sum_rank``, ``sum_reciprocal_rank``, ``sum_log_rank`` (float64
    scalars) and ``hits`` (int64 tensor of shape (len(ks),): number of ranks <= k).
    """
    k_tensor = torch.as_tensor(list(ks), dtype=torch.float64, device=ranks.device)
    return {"count": torch.tensor(ranks.numel(), dtype=torch.int64, device=ranks.device),
            **rank_sums(ranks, k_tensor)}  # fmt: skip


def rank_sums(ranks: torch.Tensor, k_tensor: torch.Tensor) -> dict[str, torch.Tensor]:
    """:func:`rank_statistics` without ``count``, the ks given as a float64 tensor (K,) on the ranks' device --
    for a caller summing several rank types of one batch, which makes both once."""
    ranks = ranks.to(torch.float64)
    return {
        "sum_rank": ranks.sum(),
        "sum_reciprocal_rank": ranks.reciprocal().sum(),
        "sum_log_rank": ranks.log().sum(),
        "hits": (ranks.unsqueeze(1) <= k_tensor.unsqueeze(0)).sum(dim=0),
    }


@dataclass(frozen=True)
class RankSummary:
    """Everything the metrics of one (side, rank type) need, on the CPU.

    ``sums`` holds the additive statistics of :func:`rank_statistics` (plus the null-model sums of
    :mod:`kgeval.metrics.null_model` when present) as Python numbers / numpy arrays; ``ks`` names the entries of
    ``sums["hits"]``. ``ranks`` and ``num_candidates`` are the per-task records, or None when not kept.
    """

    ks: tuple[int, ...]
    sums: Mapping[str, float | np.ndarray]
    ranks: np.ndarray | None = None  #: float64, shape (n,)
    num_candidates: np.ndarray | None = None  #: int64, shape (n,)

    @property
    def count(self) -> int:
        """Number of ranking tasks n."""
        return int(self.sums["count"])

    def hits(self, k: int) -> int:
        """Number of ranks <= k (from the sums when k was tracked, else from the records)."""
        if k in self.ks:
            return int(np.asarray(self.sums["hits"])[self.ks.index(k)])
        return int(np.count_nonzero(self.require_ranks(f"hits_at_{k}") <= k))

    def require_ranks(self, metric: str) -> np.ndarray:
        """The per-task ranks; a clear error when the accumulator did not keep records."""
        if self.ranks is None:
            raise ValueError(f"{metric} needs the per-task rank records, which were not kept (keep_records=False)")
        return self.ranks

    def require_num_candidates(self, metric: str) -> np.ndarray:
        """The per-task num_candidates; a clear error when the accumulator did not keep records."""
        if self.num_candidates is None:
            raise ValueError(
                f"{metric} needs the per-task num_candidates records, which were not kept (keep_records=False)"
            )
        return self.num_candidates


def safe_ratio(numerator: float, denominator: float, metric: str) -> float:
    """numerator / denominator, or NaN with an :class:`UndefinedMetricWarning` when the denominator is 0 or NaN (none
    where :func:`kgeval.exceptions.quieted` quiets it: no process-wide filter is touched)."""
    if denominator == 0 or np.isnan(denominator) or np.isnan(numerator):
        if not is_quieted(UndefinedMetricWarning):
            warnings.warn(
                f"{metric} is undefined here (zero denominator); reporting NaN", UndefinedMetricWarning, stacklevel=3
            )
        return float("nan")
    return float(numerator / denominator)


def nan_equal(a: float, b: float) -> bool:
    """a == b, with NaN equal to NaN (for comparing reported numbers, where NaN means undefined)."""
    return a == b or (math.isnan(a) and math.isnan(b))
