"""Each ranking task's ROC-AUC, from its rank record at no extra cost (:func:`query_auc`).

A ranking task is a binary classification of its candidates: the answer is the one positive, the other filtered
candidates are the ``C - 1`` negatives. Its ROC-AUC -- the probability that the answer scores above a random
negative, ties counting half (Mann-Whitney) -- follows from the record alone: ``optimistic - 1`` negatives score
above the answer and ``pessimistic - optimistic`` tie with it, so

    AUC = (negatives below + ties / 2) / (C - 1) = 1 - (realistic - 1) / (C - 1),

with ``realistic = (optimistic + pessimistic) / 2``. The optimistic rank counts the ties as won (``1 - (optimistic -
1) / (C - 1)``), the pessimistic one as lost. This holds for every task of a filtered or raw evaluation whose records
hold ``num_candidates`` (the filtered count: the candidates the answer was ranked among); a task with one candidate
(``C = 1``) has no negative and no AUC (NaN). The mean over tasks is the macro average of per-query AUCs that
graph-learning papers report beside Hits@k; it is not the ROC-AUC of all (query, candidate) pairs pooled
(PyKEEN's classification protocol), which weighs queries by their number of candidates and compares scores across
queries.
"""

from __future__ import annotations

import numpy as np

from kgeval.records import RankRecords, ranks_of_type
from kgeval.typing import RANK_TYPES, TARGETS, RankType

__all__ = ["mean_query_auc", "query_auc"]


def query_auc(records: RankRecords, rank_type: RankType = "realistic") -> np.ndarray:
    """(n,) float64: each task's ROC-AUC of its answer against its other candidates (see the module docstring),
    ``1 - (rank - 1) / (num_candidates - 1)`` with the ``rank_type``'s rank: "realistic" counts ties half (the
    Mann-Whitney AUC), "optimistic" as won, "pessimistic" as lost. NaN for a task with one candidate.

    Raises
    ------
    ValueError
        When the records hold no ``num_candidates`` (a rank table written without it), or for another rank type.
    """
    if rank_type not in RANK_TYPES:
        raise ValueError(f"rank_type must be one of {RANK_TYPES}, got {rank_type!r}")
    if records.num_candidates is None:
        raise ValueError(
            "these rank records hold no num_candidates (a rank table without the column): a task's AUC needs the "
            "number of candidates its answer was ranked among"
        )
    rank = np.asarray(ranks_of_type(rank_type, records.optimistic, records.pessimistic), dtype=np.float64)
    negatives = records.num_candidates.astype(np.float64) - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        auc = 1.0 - (rank - 1.0) / negatives
    return np.where(negatives > 0, auc, np.nan)


def mean_query_auc(records: RankRecords, rank_type: RankType = "realistic") -> dict[str, float]:
    """The mean of :func:`query_auc` over the tasks of each side present (``"head"``, ``"tail"``, ``"relation"``)
    and over the head and tail tasks together (``"both"``), tasks with one candidate left out; NaN for a side whose
    tasks all have one candidate."""
    auc = query_auc(records, rank_type)
    sides: dict[str, np.ndarray] = {name: records.side == code for code, name in enumerate(TARGETS)
                                    if (records.side == code).any()}  # fmt: skip
    sides["both"] = records.side < 2
    means: dict[str, float] = {}
    for name, mask in sides.items():
        values = auc[mask & ~np.isnan(auc)]
        means[name] = float(values.mean()) if values.size else float("nan")
    return means
