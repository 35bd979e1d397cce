"""Type constraints: per relation and side, the entities a task may rank its answer among (OpenKE's
``type_constrain``, OGB biokg's typed negatives). Each task keeps its own num_candidates, so the adjusted metrics
and the null model stay exact."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from kgeval.typing import EntityTarget

__all__ = ["TypeConstraints"]


@dataclass(frozen=True)
class TypeConstraints:
    """The allowed heads and tails of each relation; a relation without an entry is unconstrained on that side.

    Build with :meth:`from_mappings` (explicit sets) or :meth:`from_triples` (the entities seen as heads / tails of
    each relation, usually in the training triples), and pass to ``evaluate(..., type_constraints=...)``.

    Examples
    --------
    >>> constraints = TypeConstraints.from_mappings(tails={0: [1, 2]})
    >>> constraints.allowed(0, "tail").tolist(), constraints.allowed(0, "head")
    ([1, 2], None)
    """

    heads: Mapping[int, torch.Tensor] = field(default_factory=dict)  #: relation -> sorted unique LongTensor of ids
    tails: Mapping[int, torch.Tensor] = field(default_factory=dict)  #: relation -> sorted unique LongTensor of ids

    def __post_init__(self) -> None:
        """Any mapping of relation -> iterable of ids is kept as sorted unique CPU LongTensors, checked as
        :meth:`from_mappings` checks it (the constructor took lists before and failed later, in ``check``)."""
        object.__setattr__(self, "heads", _checked_mapping(self.heads, "heads"))
        object.__setattr__(self, "tails", _checked_mapping(self.tails, "tails"))

    @classmethod
    def from_mappings(
        cls,
        heads: Mapping[int, Iterable[int]] | None = None,
        tails: Mapping[int, Iterable[int]] | None = None,
    ) -> TypeConstraints:
        """Constraints from relation -> allowed head ids and relation -> allowed tail ids (any iterables of ints,
        or LongTensors); an empty set of allowed entities is an error. The same as the constructor."""
        return cls(heads=_checked_mapping(heads, "heads"), tails=_checked_mapping(tails, "tails"))

    @classmethod
    def from_triples(cls, triples: torch.Tensor) -> TypeConstraints:
        """The entities seen as heads and as tails of each relation in ``triples`` (LongTensor (m, 3))."""
        if not isinstance(triples, torch.Tensor) or triples.dim() != 2 or triples.shape[1] != 3:
            raise ValueError(f"triples must be a LongTensor of shape (m, 3), got {getattr(triples, 'shape', triples)}")
        triples = triples.long().cpu()
        heads, tails = {}, {}
        for relation in torch.unique(triples[:, 1]).tolist():
            rows = triples[triples[:, 1] == relation]
            heads[relation], tails[relation] = torch.unique(rows[:, 0]), torch.unique(rows[:, 2])
        return cls(heads=heads, tails=tails)

    def allowed(self, relation: int, target: EntityTarget) -> torch.Tensor | None:
        """The sorted entity ids a ``target`` task of ``relation`` ranks among; None when unconstrained."""
        return (self.heads if target == "head" else self.tails).get(int(relation))

    def check(self, num_entities: int) -> None:
        """Every id is a valid entity (ValueError naming the relation otherwise)."""
        for side, mapping in (("heads", self.heads), ("tails", self.tails)):
            for relation, ids in mapping.items():
                if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_entities):
                    raise ValueError(f"type_constraints {side}[{relation}] holds an id outside [0, {num_entities})")

    def candidate_groups(
        self, relations: torch.Tensor, target: EntityTarget, whitelist: torch.Tensor | None
    ) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """(task rows, candidate ids) of each candidate set of one side, for tasks of the given ``relations`` (n,):
        the tasks of each constrained relation with its allowed set (intersected with ``whitelist``), then the
        other tasks with ``whitelist`` (None: every entity)."""
        groups: list[tuple[torch.Tensor, torch.Tensor | None]] = []
        unconstrained = torch.ones(relations.shape[0], dtype=torch.bool, device=relations.device)
        for relation in torch.unique(relations).tolist():
            allowed = self.allowed(relation, target)
            if allowed is None:
                continue
            allowed = allowed.to(relations.device)
            if whitelist is not None:
                allowed = allowed[torch.isin(allowed, whitelist)]
            rows = (relations == relation).nonzero()[:, 0]
            unconstrained[rows] = False
            groups.append((rows, allowed))
        if bool(unconstrained.any()):
            groups.append((unconstrained.nonzero()[:, 0], whitelist))
        return groups

    def answers_inside(self, relations: torch.Tensor, answers: torch.Tensor, target: EntityTarget) -> torch.Tensor:
        """(n,) bool: whether each answer lies in its relation's allowed set on this side."""
        inside = torch.ones(relations.shape[0], dtype=torch.bool, device=relations.device)
        for relation in torch.unique(relations).tolist():
            allowed = self.allowed(relation, target)
            if allowed is not None:
                rows = relations == relation
                inside[rows] = torch.isin(answers[rows], allowed.to(relations.device))
        return inside

    def __repr__(self) -> str:
        return f"TypeConstraints({len(self.heads)} relations with head sets, {len(self.tails)} with tail sets)"


def _checked_mapping(mapping: Any, name: str) -> dict[int, torch.Tensor]:
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise TypeError(f"{name} must map relation ids to entity ids, got {type(mapping).__name__}")
    out = {}
    for relation, ids in mapping.items():
        values = torch.as_tensor(list(ids), device="cpu") if not isinstance(ids, torch.Tensor) else ids
        if values.numel() == 0:
            raise ValueError(f"{name}[{relation}] is empty: a constrained relation needs at least one candidate")
        if values.dtype.is_floating_point or values.dtype == torch.bool or values.dim() != 1:
            raise TypeError(f"{name}[{relation}] must be a sequence of integer entity ids")
        out[int(relation)] = torch.unique(values.long().cpu())
    return out
