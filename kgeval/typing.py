"""The package's vocabulary: the sides a metric is reported for, the sides a task ranks, and the rank types."""

from __future__ import annotations

from typing import Literal, get_args

#: a side of the reported metrics: the head tasks, the tail tasks, or both together (PyKEEN's ``both``)
Side = Literal["head", "tail", "both"]
#: the side a ranking task predicts: (?, r, t) ranks heads, (h, r, ?) ranks tails
Target = Literal["head", "tail"]
#: how ties with the true score are broken (METRICS.md, Rank types)
RankType = Literal["optimistic", "pessimistic", "realistic"]

SIDES: tuple[Side, ...] = get_args(Side)
TARGETS: tuple[Target, ...] = get_args(Target)
RANK_TYPES: tuple[RankType, ...] = get_args(RankType)
DEFAULT_SIDE: Side = "both"
DEFAULT_RANK_TYPE: RankType = "realistic"
