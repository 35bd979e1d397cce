"""Rank-based metrics from precomputed scores, a positive and K negatives per task (OGB's ``y_pred_pos`` (n,) and
``y_pred_neg`` (n, K)): each task ranks among its own K + 1 candidates (:func:`evaluate_scores`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from kgeval._checks import check_ks
from kgeval.accumulator import MetricAccumulator
from kgeval.results import RankBasedMetricResults
from kgeval.typing import ENTITY_TARGETS, EntityTarget

__all__ = [
    "evaluate_scores",
    "ranks_among",
    "ranks_in_full_rows",
]

#: negative scores compared per chunk of tasks (bounds the (tasks x K) comparison temporaries)
CHUNK_ELEMENTS = 2**22


def evaluate_scores(
    positive_scores: torch.Tensor,
    negative_scores: torch.Tensor,
    *,
    ks: Sequence[int] = (1, 3, 5, 10),
    target: EntityTarget = "tail",
    keep_records: bool = True,
) -> RankBasedMetricResults:
    """Every rank-based metric of tasks given by their scores.

    Parameters
    ----------
    positive_scores : FloatTensor of shape (n,)
        The true answer's score of each task.
    negative_scores : FloatTensor of shape (n, K), or a sequence of n FloatTensors of shape (K_i,)
        The scores of each task's K negative candidates (higher = more plausible; +-inf are ordinary values); a
        sequence gives each task its own number of negatives (TGB's temporal link prediction, where the negatives
        of a query are every entity not true at its time).
    ks : sequence of int, default=(1, 3, 5, 10)
    target : {"head", "tail"}, default="tail"
        The side the results report the tasks under (``both`` pools the same tasks).
    keep_records : bool, default=True

    Returns
    -------
    RankBasedMetricResults
        optimistic rank = 1 + #(negatives > positive), pessimistic = 1 + #(negatives >= positive),
        num_candidates = K + 1 (K_i + 1); records without triples (their ids are -1).

    Raises
    ------
    ValueError
        For shapes that do not match, no task, or a NaN score (naming the first task with one).

    Notes
    -----
    OGB's ``mrr_list`` / ``hits@k_list`` and TGB's ``Evaluator`` rank on the mean of the optimistic and pessimistic
    ranks: kgeval's realistic ranks, so ``realistic.mrr`` and ``realistic.hits_at_k`` are their numbers. The adjusted
    metrics use the null model of K + 1 candidates per task.
    """
    if target not in ENTITY_TARGETS:
        raise ValueError(f"target must be one of {ENTITY_TARGETS}, got {target!r}")
    if isinstance(negative_scores, torch.Tensor):
        positive, negative = _checked(positive_scores, negative_scores)
        optimistic, pessimistic = _fixed_ranks(positive, negative)
        num_candidates = torch.full_like(optimistic, negative.shape[1] + 1)
    else:
        positive, flat, lengths, owner = _checked_ragged(positive_scores, negative_scores)
        optimistic, pessimistic = _ragged_ranks(positive, flat, owner)
        num_candidates = lengths + 1
    accumulator = MetricAccumulator(ks=check_ks(ks), keep_records=keep_records)
    accumulator.update(
        optimistic, pessimistic, num_candidates, task_index=torch.arange(positive.shape[0], device=positive.device)
    )
    return RankBasedMetricResults.from_accumulators({target: accumulator}, accumulator.ks)


def _fixed_ranks(positive: torch.Tensor, negative: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(optimistic, pessimistic) (n,) of each positive (n,) among its row of negatives (n, K), in row chunks."""
    optimistic = torch.empty(positive.shape[0], dtype=torch.int64, device=positive.device)
    pessimistic = torch.empty_like(optimistic)
    step = max(1, CHUNK_ELEMENTS // max(1, negative.shape[1]))
    for start in range(0, positive.shape[0], step):
        rows = slice(start, start + step)
        optimistic[rows], pessimistic[rows] = ranks_among(positive[rows], negative[rows])
    return optimistic, pessimistic


def _ragged_ranks(positive: torch.Tensor, flat: torch.Tensor, owner: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(optimistic, pessimistic) (n,) of each positive (n,) among its own negatives: ``flat`` (sum K_i,) holds every
    task's negatives one after another, ``owner`` (sum K_i,) the task of each; counted per chunk of negatives."""
    above = torch.zeros(positive.shape[0], dtype=torch.int64, device=positive.device)
    tied_or_above = torch.zeros_like(above)
    for start in range(0, flat.shape[0], CHUNK_ELEMENTS):
        part, tasks = flat[start : start + CHUNK_ELEMENTS], owner[start : start + CHUNK_ELEMENTS]
        true = positive[tasks]
        above.index_add_(0, tasks, (part > true).long())
        tied_or_above.index_add_(0, tasks, (part >= true).long())
    return 1 + above, 1 + tied_or_above


def ranks_among(
    true: torch.Tensor, others: torch.Tensor, valid: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(optimistic, pessimistic) ranks (B,) of each true score (B,) among its row of other candidates' scores (B, K):
    1 + #{others > true} and 1 + #{others >= true}, counting only the ``valid`` (B, K) entries when given."""
    above, tied_or_above = others > true[:, None], others >= true[:, None]
    if valid is not None:
        above, tied_or_above = above & valid, tied_or_above & valid
    return 1 + above.sum(dim=1), 1 + tied_or_above.sum(dim=1)


def ranks_in_full_rows(true: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(optimistic, pessimistic, num_candidates) of each true score (B,) in its row of every candidate's score
    (B, C) that includes the true one itself, NaN marking a candidate that is not ranked (a filtered one):
    1 + #{scores > true}, #{scores >= true} (the true one counted once, as itself), #{scores not NaN}."""
    valid = ~torch.isnan(scores)
    optimistic, tied_or_above = ranks_among(true, scores, valid)
    return optimistic, tied_or_above - 1, valid.sum(dim=1)


def _checked(positive: Any, negative: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(n,) and (n, K) floating tensors on one device, n >= 1, no NaN; both widened (exactly) to one dtype."""
    for name, value, dims in (("positive_scores", positive, 1), ("negative_scores", negative, 2)):
        if not isinstance(value, torch.Tensor) or not value.dtype.is_floating_point or value.dim() != dims:
            got = f"{value.dtype} {tuple(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__
            raise ValueError(f"{name} must be a {dims}-d floating-point tensor, got {got}")
    if negative.shape[0] != positive.shape[0] or positive.shape[0] == 0:
        raise ValueError(
            f"negative_scores must have one row per positive score and there must be at least one: got shapes "
            f"{tuple(positive.shape)} and {tuple(negative.shape)}"
        )
    if negative.device != positive.device:
        raise ValueError(f"positive_scores are on {positive.device}, negative_scores on {negative.device}")
    bad = torch.isnan(positive) | torch.isnan(negative).any(dim=1)
    if bool(bad.any()):
        raise ValueError(f"task {int(bad.nonzero()[0, 0])} has a NaN score; {int(bad.sum())} task(s) affected")
    dtype = _common_dtype(positive.dtype, negative.dtype)
    return positive.to(dtype), negative.to(dtype)


def _common_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """The dtype all scores are compared in: their promotion, widened (exactly) to float32 at least."""
    dtype = dtypes[0]
    for other in dtypes[1:]:
        dtype = torch.promote_types(dtype, other)
    return dtype if dtype in (torch.float32, torch.float64) else torch.float32  # float16 / bfloat16 / float8


def _checked_ragged(positive: Any, negatives: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(positive (n,), every task's negatives one after another (sum K_i,), K_i (n,), the task of each negative
    (sum K_i,)) from a sequence of n 1-d floating tensors on the positives' device, no NaN; all widened (exactly)
    to one dtype."""
    if not isinstance(positive, torch.Tensor) or not positive.dtype.is_floating_point or positive.dim() != 1:
        got = f"{positive.dtype} {tuple(positive.shape)}" if isinstance(positive, torch.Tensor) else type(positive)
        raise ValueError(f"positive_scores must be a 1-d floating-point tensor, got {got}")
    if not isinstance(negatives, Sequence) or len(negatives) != positive.shape[0] or positive.shape[0] == 0:
        count = len(negatives) if isinstance(negatives, Sequence) else type(negatives).__name__
        raise ValueError(
            "negative_scores must be an (n, K) tensor or a sequence of one 1-d tensor per positive score, and there "
            f"must be at least one: got {positive.shape[0]} positive score(s) and {count} negative row(s)"
        )
    for task, row in enumerate(negatives):
        if not isinstance(row, torch.Tensor) or not row.dtype.is_floating_point or row.dim() != 1:
            raise ValueError(f"negative_scores[{task}] must be a 1-d floating-point tensor")
        if row.device != positive.device:
            raise ValueError(f"positive_scores are on {positive.device}, negative_scores[{task}] on {row.device}")
    dtype = _common_dtype(positive.dtype, *(row.dtype for row in negatives))
    lengths = torch.tensor([row.shape[0] for row in negatives], dtype=torch.int64, device=positive.device)
    flat = torch.cat([row.to(dtype) for row in negatives])
    owner = torch.repeat_interleave(torch.arange(positive.shape[0], device=positive.device), lengths)
    bad = torch.isnan(positive).long().index_add_(0, owner, torch.isnan(flat).long()) > 0
    if bool(bad.any()):
        raise ValueError(f"task {int(bad.nonzero()[0, 0])} has a NaN score; {int(bad.sum())} task(s) affected")
    return positive.to(dtype), flat, lengths, owner
