"""The package's vocabulary: the sides a metric is reported for, the sides a task ranks (and the columns of a triple
each asks with and answers), the rank types, and the choices an evaluator offers (counting kernel, matmul
precision)."""

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
#: how score tiles are counted: "auto", "eager" (sign on CPU, compare elsewhere), "numba" (CPU) or "triton"
KernelChoice = Literal["auto", "eager", "numba", "triton"]
#: "exact": full float32 matmuls inside evaluate; "inherit": whatever the process set (faster, approximate)
MatmulPrecision = Literal["exact", "inherit"]
#: inductive link prediction: the graph whose entities are the candidates (PyKEEN's modes; docs/inductive.md)
InductiveMode = Literal["training", "validation", "testing"]

SIDES: tuple[Side, ...] = get_args(Side)
TARGETS: tuple[Target, ...] = get_args(Target)
ENTITY_TARGETS: tuple[EntityTarget, ...] = get_args(EntityTarget)
RANK_TYPES: tuple[RankType, ...] = get_args(RankType)
KERNEL_CHOICES: tuple[KernelChoice, ...] = get_args(KernelChoice)
MATMUL_PRECISIONS: tuple[MatmulPrecision, ...] = get_args(MatmulPrecision)
INDUCTIVE_MODES: tuple[InductiveMode, ...] = get_args(InductiveMode)
DEFAULT_SIDE: Side = "both"
#: the columns of a (head, relation, tail) triple a task of each target is asked with (the layouts of score_t /
#: score_h / score_r batches)
QUERY_COLUMNS: dict[Target, list[int]] = {"tail": [0, 1], "head": [1, 2], "relation": [0, 2]}
#: the column of its answer
ANSWER_COLUMN: dict[Target, int] = {"tail": 2, "head": 0, "relation": 1}
DEFAULT_RANK_TYPE: RankType = "realistic"

__all__ = [
    "ANSWER_COLUMN",
    "DEFAULT_RANK_TYPE",
    "DEFAULT_SIDE",
    "ENTITY_TARGETS",
    "INDUCTIVE_MODES",
    "KERNEL_CHOICES",
    "MATMUL_PRECISIONS",
    "QUERY_COLUMNS",
    "RANK_TYPES",
    "SIDES",
    "TARGETS",
    "EntityTarget",
    "InductiveMode",
    "KernelChoice",
    "MatmulPrecision",
    "RankType",
    "Side",
    "Target",
]
