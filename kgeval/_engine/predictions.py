"""Filtered top-k predictions (the engine's second front door, :func:`top_k`): the k best candidates of each query
with the known triples removed, scored by the engine's scorers one (queries x candidate slice) tile at a time and
merged into a running top k, so no (queries x entities) matrix is ever held.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kgeval._engine.counting import slice_bounds
from kgeval._engine.filter_index import FilterIndex
from kgeval._engine.form_check import RANDOMNESS, FormChecks, caller_rng_restored
from kgeval._engine.precision import exact_arithmetic
from kgeval._engine.scorer_choice import make_scorer
from kgeval._engine.scoring import candidate_positions
from kgeval._engine.sizes import sizes_for
from kgeval._inputs import RequestedSizes, ResolvedModel
from kgeval._modes import evaluation_mode
from kgeval.typing import Target

__all__ = ["TopKOptions", "top_k"]


@dataclass(frozen=True)
class TopKOptions:
    """How the candidates are scored: the requested sizes, the fast path and its probe."""

    sizes: RequestedSizes = field(default_factory=RequestedSizes)
    fast_path: bool = True
    check_fast_path: bool = True


def top_k(
    model: ResolvedModel,
    queries: torch.Tensor,
    target: Target,
    k: int,
    num_entities: int,
    candidate_sets: Sequence[tuple[torch.Tensor, torch.Tensor | None]],
    known: Sequence[torch.Tensor],
    options: TopKOptions,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids (n, k), scores (n, k)) of the k best candidates of each of ``queries`` (n, 2), best first, ties by
    ascending id; -1 / NaN where fewer than k remain. ``target="relation"``: queries (h, t), candidates the
    relations (``num_entities`` then counts them).

    ``candidate_sets``: (query rows, candidate ids or None for every entity) covering every query once;
    ``known``: (m, 3) triples whose answers are left out. Runs in the model's eval mode, without autograd, in full
    float32 matmul precision."""
    device = queries.device
    side_index = FilterIndex(torch.cat(list(known))).side(target) if known else None
    checks = FormChecks(probe=options.check_fast_path)
    with caller_rng_restored(restore=False) as generators:  # given back where the model draws (see front.rank)
        try:
            with evaluation_mode(model.model), torch.inference_mode(), exact_arithmetic("exact"):
                parts = [
                    (rows, *_top_k_of_set(model, queries[rows], target, num_entities, ids, side_index, k, options,
                                          checks))
                    for rows, ids in candidate_sets
                ]  # fmt: skip
        finally:
            generators.restore = checks.found(RANDOMNESS)
    ids = torch.empty((queries.shape[0], k), dtype=torch.int64, device=device)
    scores = torch.empty((queries.shape[0], k), dtype=parts[0][2].dtype, device=device)
    for rows, set_ids, set_scores in parts:
        ids[rows], scores[rows] = set_ids, set_scores.to(scores.dtype)
    return ids, scores


def _top_k_of_set(
    model: ResolvedModel,
    queries: torch.Tensor,
    target: Target,
    num_entities: int,
    candidate_ids: torch.Tensor | None,
    side_index: Any,
    k: int,
    options: TopKOptions,
    checks: FormChecks,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids (n, k), scores (n, k)) of queries sharing one candidate set; -1 / NaN where fewer than k remain."""
    device = queries.device
    if candidate_ids is not None and candidate_ids.numel() == 0:
        shape = (queries.shape[0], k)
        return torch.full(shape, -1, device=device), torch.full(shape, torch.nan, device=device)
    scorer = make_scorer(model, target, num_entities, candidate_ids, fast_path=options.fast_path,
                         probe_queries=queries, checks=checks,
                         model_scores_only=True,  # the L2 GEMM ranks a transform of the scores
                         batch_size=options.sizes.batch_size, slice_size=options.sizes.slice_size)  # fmt: skip
    requested = options.sizes
    sizes = sizes_for(scorer, queries, requested.batch_size, requested.slice_size, requested.memory_budget,
                      owner=model.model)  # fmt: skip
    position_of = candidate_positions(candidate_ids, num_entities, device)
    bounds = slice_bounds(scorer.num_candidates, sizes.slice_size)
    parts = [
        _top_k_of_batch(scorer, queries[start : start + sizes.batch_size], k, bounds, side_index, position_of)
        for start in range(0, queries.shape[0], sizes.batch_size)
    ]
    positions = torch.cat([part[0] for part in parts])
    scores = torch.cat([part[1] for part in parts])
    if positions.shape[1] < k:  # fewer candidates than k in all: pad every row
        missing = k - positions.shape[1]
        positions = torch.nn.functional.pad(positions, (0, missing), value=-1)
        scores = torch.nn.functional.pad(scores, (0, missing), value=-torch.inf)
    found = positions >= 0
    ids = positions if candidate_ids is None else torch.where(found, candidate_ids[positions.clamp(min=0)], -1)
    return ids, torch.where(found, scores, torch.nan)


def _top_k_of_batch(
    scorer: Any,
    queries: torch.Tensor,
    k: int,
    bounds: Sequence[tuple[int, int]],
    side_index: Any,
    position_of: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions (b, k), scores (b, k)) of one batch of queries: every slice's tile is merged into a running top
    k, ordered by score (descending) then position (ascending); -1 / -inf pad rows with fewer candidates."""
    size = queries.shape[0]
    known_rows, known_positions = _known_pairs(queries, side_index, position_of)
    best_positions = torch.full((size, 0), -1, dtype=torch.int64, device=queries.device)
    best_scores: torch.Tensor | None = None
    scorer.begin(queries)
    for start, stop in bounds:
        scorer.start_slice(start, stop)
        tile = scorer.query_tile(0, size)
        removed = torch.zeros(tile.shape, dtype=torch.bool, device=tile.device)
        inside = (known_positions >= start) & (known_positions < stop)
        removed[known_rows[inside], known_positions[inside] - start] = True
        nan = torch.isnan(tile) & ~removed
        if bool(nan.any()):
            row = int(nan.any(dim=1).nonzero()[0, 0])
            raise ValueError(f"the model produced NaN scores for query row {row} = {queries[row].tolist()}")
        positions = torch.arange(start, stop, device=tile.device).expand(size, -1)
        if best_scores is None:
            best_scores = tile.new_empty((size, 0))
        candidates = torch.cat([best_positions, positions], dim=1)
        values = torch.cat([best_scores, tile], dim=1)
        valid = torch.cat([best_positions >= 0, ~removed], dim=1)
        best_positions, best_scores = _first_k(candidates, values, valid, k)
    assert best_scores is not None
    return best_positions, best_scores


def _first_k(
    positions: torch.Tensor, values: torch.Tensor, valid: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The first k entries of each row in the order: valid first, then score descending, then position ascending
    (three stable sorts, least significant key first); invalid entries come out as -1 / -inf."""
    values = values.masked_fill(~valid, -torch.inf)
    for key in ("position", "score", "validity"):
        if key == "position":
            order = torch.argsort(positions, dim=1, stable=True)
        elif key == "score":
            order = torch.argsort(values, dim=1, descending=True, stable=True)
        else:
            order = torch.argsort((~valid).to(torch.int8), dim=1, stable=True)
        positions, values, valid = positions.gather(1, order), values.gather(1, order), valid.gather(1, order)
    positions, values, valid = positions[:, :k], values[:, :k], valid[:, :k]
    return torch.where(valid, positions, -1), values


def _known_pairs(
    queries: torch.Tensor, side_index: Any, position_of: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(row, candidate position) of every known answer of the batch's queries (non-candidates dropped)."""
    empty = torch.zeros(0, dtype=torch.int64, device=queries.device)
    if side_index is None:
        return empty, empty
    rows, entities = side_index.known_pairs(queries[:, 0], queries[:, 1])
    if position_of is None:
        return rows, entities
    positions = position_of[entities]
    keep = positions >= 0
    return rows[keep], positions[keep]
