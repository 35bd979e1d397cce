"""The package's vocabulary: the sides a metric is reported for, the sides a task ranks, and the rank types."""

from __future__ import annotations

from typing import Literal, get_args

#: a side of the reported metrics: head tasks, tail tasks, relation tasks, or head and tail tasks together
#: (PyKEEN's ``both``; relation prediction is kept apart from it)
Side = Literal["head", "tail", "relation", "both"]
#: what a ranking task predicts: (?, r, t) ranks heads, (h, r, ?) ranks tails, (h, ?, t) ranks relations
Target = Literal["head", "tail", "relation"]
#: the targets whose candidates are entities (link prediction proper)
EntityTarget = Literal["head", "tail"]
#: how ties with the true score are broken (METRICS.md, Rank types)
RankType = Literal["optimistic", "pessimistic", "realistic"]

SIDES: tuple[Side, ...] = get_args(Side)
TARGETS: tuple[Target, ...] = get_args(Target)
ENTITY_TARGETS: tuple[EntityTarget, ...] = get_args(EntityTarget)
RANK_TYPES: tuple[RankType, ...] = get_args(RankType)
DEFAULT_SIDE: Side = "both"
DEFAULT_RANK_TYPE: RankType = "realistic"
