"""Filtered top-k predictions: the k best candidates of each query with the known triples removed, scored by the
engine's scorers one (queries x candidate slice) tile at a time, so no (queries x entities) matrix is ever held."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from kgeval import _checks
from kgeval._engine import (
    SCORE_METHOD,
    FilterIndex,
    FormChecks,
    candidate_positions,
    choose_sizes,
    exact_matmul,
    make_scorer,
    model_device,
    slice_bounds,
    triple_function,
)
from kgeval._modes import evaluation_mode
from kgeval.adapters import scoring_view
from kgeval.adapters.wrappers import describe
from kgeval.constraints import TypeConstraints
from kgeval.typing import ENTITY_TARGETS, EntityTarget

__all__ = ["predict_top_k"]

#: the columns of a query, by target: (h, r) ranks tails, (r, t) ranks heads
_ENTITY_COLUMN = {"tail": 0, "head": 1}


def predict_top_k(
    model: Any,
    queries: torch.Tensor,
    *,
    k: int = 10,
    target: EntityTarget = "tail",
    filter_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
    restrict_entities_to: torch.Tensor | Iterable[int] | None = None,
    num_entities: int | None = None,
    batch_size: int | None = None,
    slice_size: int | None = None,
    fast_path: bool = True,
    type_constraints: TypeConstraints | None = None,
    check_fast_path: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The k highest-scoring candidates of each query, known triples removed.

    Parameters
    ----------
    model : object
        Anything :meth:`kgeval.RankBasedEvaluator.evaluate` scores (``score_t`` / ``score_h``, the query/candidate
        form, whole triples, or a PyKEEN / PyG / TorchKGE model); evaluated where it lives, in eval mode.
    queries : LongTensor of shape (n, 2)
        (head, relation) pairs for ``target="tail"``, (relation, tail) pairs for ``target="head"`` -- the layout of
        ``score_t`` / ``score_h``.
    k : int, default=10
    target : {"head", "tail"}, default="tail"
    filter_triples : LongTensor of shape (m, 3), or a sequence of them, optional
        Known (h, r, t) triples: a candidate completing a query into one of them is left out.
    restrict_entities_to : LongTensor, list or set of ids, optional
        Only these entities are candidates.
    num_entities : int, optional
        Default: the model's.
    batch_size, slice_size : int, optional
        Queries per batch and candidates per tile; chosen from the memory budget by default.
    fast_path : bool, default=True
        Use a model's query/candidate GEMM form when it has one ("dot" and "l1"; an "l2" model is scored through
        its own methods, since its GEMM form computes a transform of the scores), where it computes the model's
        own scores (as in :class:`kgeval.RankBasedEvaluator`: a subclass redefining its scoring method, or a form
        that disagrees with it on a one-off probe, is scored through its own method, with a FastPathWarning).
    type_constraints : kgeval.TypeConstraints, optional
        Each query's candidates are its relation's allowed entities on this side (intersected with
        ``restrict_entities_to``).
    check_fast_path : bool, default=True
        Probe the form against the model's own method first (see :class:`kgeval.RankBasedEvaluator`).

    Returns
    -------
    ids : LongTensor of shape (n, k)
        Entity ids, best first. Equal scores are ordered by ascending entity id, so the output is deterministic.
        A query with fewer than k candidates left is padded with -1.
    scores : FloatTensor of shape (n, k)
        The model's scores of those candidates (NaN where ``ids`` is -1). Same device as the model.

    Raises
    ------
    ValueError
        For bad queries, ids out of range, k < 1, or a NaN score among a query's remaining candidates.
    """
    if target not in ENTITY_TARGETS:
        raise ValueError(f"target must be one of {ENTITY_TARGETS}, got {target!r}")
    k = _checks.check_positive_int(k, "k")  # type: ignore[assignment]
    view = scoring_view(model)
    scores_triples = not callable(getattr(view, SCORE_METHOD[target], None)) and triple_function(view) is not None
    _checks.check_model(view, (target,), scores_triples, describe(model))
    num_entities = _checks.check_num_entities(view, num_entities, describe(model))
    num_relations = _checks.model_num_relations(view)
    device = model_device(view)
    queries = _checked_queries(queries, target, num_entities, num_relations).to(device)
    candidate_ids = None
    if restrict_entities_to is not None:
        ids = _checks.check_entity_ids(restrict_entities_to, "restrict_entities_to", num_entities)
        candidate_ids = ids.to(device)
    known = [t.to(device) for t in _checks.check_filter_triples(filter_triples, num_entities, num_relations)]
    side_index = FilterIndex(torch.cat(known)).sides[target] if known else None
    if type_constraints is not None:
        if not isinstance(type_constraints, TypeConstraints):
            raise TypeError(f"type_constraints must be a kgeval.TypeConstraints, got {type(type_constraints).__name__}")
        type_constraints.check(num_entities)
    options = (k, batch_size, slice_size, fast_path)
    checks = FormChecks(probe=bool(check_fast_path))
    with evaluation_mode(model), torch.inference_mode(), exact_matmul("exact"):
        parts = [
            (rows, *_predict(view, queries[rows], target, num_entities, group_ids, side_index, options, checks))
            for rows, group_ids in _candidate_sets(queries, target, candidate_ids, type_constraints)
        ]
    ids = torch.empty((queries.shape[0], k), dtype=torch.int64, device=device)
    scores = torch.empty((queries.shape[0], k), dtype=parts[0][2].dtype, device=device)
    for rows, group_ids, group_scores in parts:
        ids[rows], scores[rows] = group_ids, group_scores.to(scores.dtype)
    return ids, scores


def _candidate_sets(
    queries: torch.Tensor, target: EntityTarget, whitelist: torch.Tensor | None, constraints: TypeConstraints | None
) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """(query rows, candidate ids) of each candidate set (see :meth:`TypeConstraints.candidate_groups`)."""
    if constraints is None:
        return [(torch.arange(queries.shape[0], device=queries.device), whitelist)]
    return constraints.candidate_groups(queries[:, 1 - _ENTITY_COLUMN[target]], target, whitelist)


def _predict(
    view: Any,
    queries: torch.Tensor,
    target: EntityTarget,
    num_entities: int,
    candidate_ids: torch.Tensor | None,
    side_index: Any,
    options: tuple[int, int | None, int | None, bool],
    checks: FormChecks,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids (n, k), scores (n, k)) of queries sharing one candidate set; -1 / NaN where fewer than k remain."""
    k, batch_size, slice_size, fast_path = options
    device = queries.device
    if candidate_ids is not None and candidate_ids.numel() == 0:
        shape = (queries.shape[0], k)
        return torch.full(shape, -1, device=device), torch.full(shape, torch.nan, device=device)
    scorer = make_scorer(view, target, num_entities, candidate_ids, fast_path=fast_path, probe_queries=queries,
                         checks=checks, model_scores_only=True)  # the L2 GEMM ranks a transform of the scores
    sizes = choose_sizes(scorer, queries.shape[0], device, batch_size, slice_size)
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


def _checked_queries(queries: Any, target: EntityTarget, num_entities: int, num_relations: int | None) -> torch.Tensor:
    """(n, 2) integer queries with the entity and relation ids in range (ValueError naming the first bad row)."""
    if not isinstance(queries, torch.Tensor) or queries.dtype.is_floating_point or queries.dtype == torch.bool:
        raise TypeError(f"queries must be an integer tensor, got {getattr(queries, 'dtype', type(queries).__name__)}")
    if queries.dim() != 2 or queries.shape[1] != 2 or queries.shape[0] == 0:
        raise ValueError(f"queries must have shape (n, 2) with n >= 1, got {tuple(queries.shape)}")
    queries = queries.long()
    entity, relation = queries[:, _ENTITY_COLUMN[target]], queries[:, 1 - _ENTITY_COLUMN[target]]
    bad = (entity < 0) | (entity >= num_entities) | (relation < 0)
    if num_relations is not None:
        bad |= relation >= num_relations
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(f"queries row {row} = {queries[row].tolist()} has an id out of range")
    return queries


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
