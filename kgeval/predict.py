"""Filtered top-k predictions: the k best candidates of each query with the known triples removed, scored by the
engine's scorers one (queries x candidate slice) tile at a time, so no (queries x entities) matrix is ever held."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from kgeval import _checks
from kgeval._engine import TopKOptions, top_k
from kgeval._inputs import RequestedSizes, check_model_inputs, check_type_constraints, check_whitelist
from kgeval.constraints import TypeConstraints
from kgeval.typing import TARGETS, EntityTarget, Target

__all__ = ["predict_top_k"]

#: the columns of a query, by target: (h, r) ranks tails, (r, t) ranks heads
_ENTITY_COLUMN = {"tail": 0, "head": 1}


def predict_top_k(
    model: Any,
    queries: torch.Tensor,
    *,
    k: int = 10,
    target: Target = "tail",
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
        (head, relation) pairs for ``target="tail"``, (relation, tail) pairs for ``target="head"``, (head, tail)
        pairs for ``target="relation"`` -- the layout of ``score_t`` / ``score_h`` / ``score_r``.
    k : int, default=10
    target : {"head", "tail", "relation"}, default="tail"
        ``"relation"``: the k best relations of each (head, tail) pair (the model must declare
        ``num_relations``); ``restrict_entities_to`` and ``type_constraints`` do not apply there.
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
        Entity ids (relation ids for ``target="relation"``), best first. Equal scores are ordered by ascending
        id, so the output is deterministic.
        A query with fewer than k candidates left is padded with -1.
    scores : FloatTensor of shape (n, k)
        The model's scores of those candidates (NaN where ``ids`` is -1). Same device as the model.

    Raises
    ------
    ValueError
        For bad queries, ids out of range, k < 1, or a NaN score among a query's remaining candidates.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
    k = _checks.check_positive_int(k, "k")
    checked = check_model_inputs(model, (target,), num_entities)
    resolved, num_entities, num_relations = checked.model, checked.num_entities, checked.num_relations
    device = resolved.device
    if target == "relation":
        if restrict_entities_to is not None or type_constraints is not None:
            raise ValueError("restrict_entities_to / type_constraints restrict entity candidates; with "
                             "target='relation' the candidates are the relations")  # fmt: skip
        return _top_relations(resolved, queries, k, num_entities, num_relations, filter_triples, batch_size,
                              slice_size, fast_path, check_fast_path)  # fmt: skip
    queries = _checked_queries(queries, target, num_entities, num_relations).to(device)
    candidate_ids = check_whitelist(restrict_entities_to, num_entities, device)
    known = [t.to(device) for t in _checks.check_filter_triples(filter_triples, num_entities, num_relations)]
    check_type_constraints(type_constraints, num_entities)
    assert target != "relation"
    sizes = RequestedSizes(_checks.check_positive_int(batch_size, "batch_size", allow_none=True),
                           _checks.check_positive_int(slice_size, "slice_size", allow_none=True))  # fmt: skip
    options = TopKOptions(sizes, bool(fast_path), bool(check_fast_path))
    sets = _candidate_sets(queries, target, candidate_ids, type_constraints)
    return top_k(resolved, queries, target, k, num_entities, sets, known, options)


def _top_relations(resolved: Any, queries: Any, k: int, num_entities: int, num_relations: int | None,
                   filter_triples: Any, batch_size: Any, slice_size: Any, fast_path: Any,
                   check_fast_path: Any) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """The k best relations of each (head, tail) pair, known triples removed."""
    assert num_relations is not None  # check_model_inputs requires it for the relation target
    pairs = _checked_pairs(queries, num_entities).to(resolved.device)
    known = [t.to(resolved.device) for t in _checks.check_filter_triples(filter_triples, num_entities, num_relations)]
    sizes = RequestedSizes(_checks.check_positive_int(batch_size, "batch_size", allow_none=True),
                           _checks.check_positive_int(slice_size, "slice_size", allow_none=True))  # fmt: skip
    options = TopKOptions(sizes, bool(fast_path), bool(check_fast_path))
    every = [(torch.arange(pairs.shape[0], device=pairs.device), None)]
    return top_k(resolved, pairs, "relation", k, num_relations, every, known, options)


def _integer_pairs(queries: Any) -> torch.Tensor:
    """``queries`` as an (n, 2) int64 tensor, n >= 1 (TypeError / ValueError otherwise)."""
    if not isinstance(queries, torch.Tensor) or queries.dtype.is_floating_point or queries.dtype == torch.bool:
        raise TypeError(f"queries must be an integer tensor, got {getattr(queries, 'dtype', type(queries).__name__)}")
    if queries.dim() != 2 or queries.shape[1] != 2 or queries.shape[0] == 0:
        raise ValueError(f"queries must have shape (n, 2) with n >= 1, got {tuple(queries.shape)}")
    return queries.long()


def _checked_pairs(queries: Any, num_entities: int) -> torch.Tensor:
    """(n, 2) integer (head, tail) pairs with ids in range (ValueError naming the first bad row)."""
    queries = _integer_pairs(queries)
    bad = ((queries < 0) | (queries >= num_entities)).any(dim=1)
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(f"queries row {row} = {queries[row].tolist()} has an entity id out of range")
    return queries


def _candidate_sets(
    queries: torch.Tensor, target: EntityTarget, whitelist: torch.Tensor | None, constraints: TypeConstraints | None
) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """(query rows, candidate ids) of each candidate set (see :meth:`TypeConstraints.candidate_groups`)."""
    if constraints is None:
        return [(torch.arange(queries.shape[0], device=queries.device), whitelist)]
    return constraints.candidate_groups(queries[:, 1 - _ENTITY_COLUMN[target]], target, whitelist)


def _checked_queries(queries: Any, target: EntityTarget, num_entities: int, num_relations: int | None) -> torch.Tensor:
    """(n, 2) integer queries with the entity and relation ids in range (ValueError naming the first bad row)."""
    queries = _integer_pairs(queries)
    entity, relation = queries[:, _ENTITY_COLUMN[target]], queries[:, 1 - _ENTITY_COLUMN[target]]
    bad = (entity < 0) | (entity >= num_entities) | (relation < 0)
    if num_relations is not None:
        bad |= relation >= num_relations
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(f"queries row {row} = {queries[row].tolist()} has an id out of range")
    return queries
