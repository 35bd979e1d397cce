"""The ranking tasks of an evaluation: which columns of a triple each target asks with and answers, which triples
are ranked under entity and relation restrictions and type constraints, and each side's candidate sets.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kgeval.constraints import TypeConstraints
from kgeval.typing import ANSWER_COLUMN, QUERY_COLUMNS, Target

__all__ = ["ANSWER_COLUMN", "QUERY_COLUMNS", "candidate_groups", "tasks_inside_constraints", "tasks_inside_restriction"]


def tasks_inside_restriction(
    triples: torch.Tensor,
    candidate_ids: torch.Tensor | None,
    num_entities: int,
    drop: bool,
    relation_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """Indices of the triples to evaluate: those of the selected relations (all by default) whose head and
    tail are allowed candidates."""
    all_tasks = torch.arange(triples.shape[0], device=triples.device)
    selected = torch.isin(triples[:, 1], relation_ids) if relation_ids is not None else None
    if candidate_ids is None:
        return all_tasks if selected is None else all_tasks[selected]
    allowed = torch.zeros(num_entities, dtype=torch.bool, device=triples.device)
    allowed[candidate_ids] = True
    inside = allowed[triples[:, 0]] & allowed[triples[:, 2]]
    if selected is not None:
        inside |= ~selected  # the entity check concerns the selected triples only
    if not drop and not bool(inside.all()):
        row = int((~inside).nonzero()[0, 0])
        raise ValueError(
            f"mapped_triples row {row} = {triples[row].tolist()} has a head or tail outside "
            "restrict_entities_to; pass drop_outside_restriction=True to skip such triples"
        )
    return all_tasks[inside if selected is None else inside & selected]


def candidate_groups(
    triples: torch.Tensor, target: Target, candidate_ids: torch.Tensor | None, constraints: TypeConstraints | None
) -> list[tuple[torch.Tensor | None, torch.Tensor | None]]:
    """(task rows, candidate ids) of each candidate set of one side: every task with the whitelist ``candidate_ids``
    (rows None) without type constraints for this side, else :meth:`TypeConstraints.candidate_groups`; relations
    are ranked among them all (whitelists and constraints concern entities)."""
    if target == "relation":
        return [(None, None)]
    if constraints is None or not (constraints.heads if target == "head" else constraints.tails):
        return [(None, candidate_ids)]
    return constraints.candidate_groups(triples[:, 1], target, candidate_ids)  # type: ignore[return-value]


def tasks_inside_constraints(
    triples: torch.Tensor, task_index: torch.Tensor, constraints: TypeConstraints, targets: Sequence[Target], drop: bool
) -> torch.Tensor:
    """The tasks whose answers lie in their relation's allowed set on every evaluated side (ValueError naming the
    first other row unless ``drop``)."""
    selected = triples[task_index]
    inside = torch.ones(task_index.numel(), dtype=torch.bool, device=triples.device)
    for target in targets:
        if target != "relation":
            inside &= constraints.answers_inside(selected[:, 1], selected[:, ANSWER_COLUMN[target]], target)
    if not drop and not bool(inside.all()):
        row = int(task_index[(~inside).nonzero()[0, 0]])
        raise ValueError(
            f"mapped_triples row {row} = {triples[row].tolist()} has an answer outside its relation's "
            "type_constraints; pass drop_outside_restriction=True to skip such triples"
        )
    return task_index[inside]
