"""Random graphs, score-table models and hypothesis strategies for kgeval's tests.

Everything here is built to make evaluation hard to get right: scores are small integers so ties are
everywhere, tables may hold +inf / -inf (ordinary values per METRICS.md), evaluation triples repeat, and the
filter triples share most (h, r) and (r, t) keys with the evaluation triples so filtering changes many
ranks. Edge-case builders give tasks with a single candidate (C = 1) and graphs with one entity. Independent
of kgeval (no import).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

__all__ = [
    "FullScoreTableModel",
    "RandomGraph",
    "TableModel",
    "all_filtered_graph",
    "duplicated_triples_graph",
    "edge_cases",
    "entity_whitelists",
    "graphs_and_tables",
    "quantised_table",
    "random_graph",
    "ranks_and_candidates",
    "single_candidate_graph",
    "tiny_graphs",
]


def _rng(rng_or_seed: np.random.Generator | int | None) -> np.random.Generator:
    """A numpy Generator from a Generator (returned as is), a seed or None."""
    if isinstance(rng_or_seed, np.random.Generator):
        return rng_or_seed
    return np.random.default_rng(rng_or_seed)


def _long(rows: Any) -> torch.Tensor:
    """A LongTensor of shape (n, 3) from rows (an empty input gives shape (0, 3))."""
    array = np.asarray(rows, dtype=np.int64).reshape(-1, 3)
    return torch.from_numpy(array.copy())


@dataclass
class RandomGraph:
    """Evaluation triples plus known triples, on ``num_entities`` entities and ``num_relations`` relations."""

    num_entities: int
    num_relations: int
    #: LongTensor of shape (n, 3): the evaluation triples (h, r, t); may contain duplicates.
    triples: torch.Tensor
    #: list of LongTensor of shape (m_i, 3): additional known triples (e.g. [train, valid]); may be empty.
    filter_triples: list[torch.Tensor] = field(default_factory=list)

    def __post_init__(self) -> None:
        """Check shapes, dtypes and id ranges."""
        for name, tensor in [("triples", self.triples)] + [("filter_triples", t) for t in self.filter_triples]:
            if tensor.dtype != torch.long or tensor.ndim != 2 or tensor.shape[1] != 3:
                raise ValueError(
                    f"{name} must be a LongTensor of shape (n, 3), got {tensor.dtype} {tuple(tensor.shape)}"
                )
            if tensor.numel() and not (
                0 <= int(tensor[:, [0, 2]].min()) <= int(tensor[:, [0, 2]].max()) < self.num_entities
                and 0 <= int(tensor[:, 1].min()) <= int(tensor[:, 1].max()) < self.num_relations
            ):
                raise ValueError(f"{name} has ids outside E={self.num_entities}, R={self.num_relations}")

    def known_triples(self) -> set[tuple[int, int, int]]:
        """The filter set of METRICS.md: evaluation triples united with every filter tensor."""
        rows = [self.triples, *self.filter_triples]
        return {tuple(int(x) for x in row) for tensor in rows for row in tensor.tolist()}


def random_graph(
    rng_or_seed: np.random.Generator | int | None,
    num_entities: int,
    num_relations: int,
    num_triples: int,
    num_filter: int,
    duplicate_fraction: float = 0.1,
) -> RandomGraph:
    """A random graph whose filter triples overlap heavily with the evaluation keys.

    Parameters
    ----------
    rng_or_seed : numpy Generator, int or None
    num_entities, num_relations : int
        At least 1 each.
    num_triples : int
        Number of evaluation triples (rows of ``triples``), duplicates included.
    num_filter : int
        Total number of filter triples, split about 3:1 into two tensors (``[train, valid]``; valid may be
        empty). Each filter triple is, with equal probability: an evaluation (h, r) with a random tail, a
        random head with an evaluation (r, t), an exact copy of an evaluation triple, or uniformly random.
    duplicate_fraction : float in [0, 1), default=0.1
        About this fraction of the evaluation rows are copies of other evaluation rows (at least one row is
        unique).

    Returns
    -------
    graph : RandomGraph
    """
    if num_entities < 1 or num_relations < 1 or num_triples < 0 or num_filter < 0:
        raise ValueError(
            f"need num_entities, num_relations >= 1 and counts >= 0, got "
            f"{num_entities}, {num_relations}, {num_triples}, {num_filter}"
        )
    if not 0 <= duplicate_fraction < 1:
        raise ValueError(f"duplicate_fraction must be in [0, 1), got {duplicate_fraction}")
    rng = _rng(rng_or_seed)

    def uniform(size: int) -> np.ndarray:
        return np.stack(
            [
                rng.integers(0, num_entities, size),
                rng.integers(0, num_relations, size),
                rng.integers(0, num_entities, size),
            ],
            axis=1,
        ).reshape(-1, 3)

    num_duplicates = min(round(duplicate_fraction * num_triples), max(num_triples - 1, 0))
    unique = uniform(num_triples - num_duplicates)
    copies = unique[rng.integers(0, len(unique), num_duplicates)] if num_duplicates else unique[:0]
    triples = np.concatenate([unique, copies])[rng.permutation(num_triples)]

    filter_rows = uniform(num_filter)
    if num_triples:
        for row in filter_rows:
            kind = int(rng.integers(0, 4))
            source = triples[rng.integers(0, num_triples)]
            if kind == 0:  # shares the (h, r) key of an evaluation triple
                row[0], row[1] = source[0], source[1]
            elif kind == 1:  # shares the (r, t) key of an evaluation triple
                row[1], row[2] = source[1], source[2]
            elif kind == 2:  # the evaluation triple itself is also known
                row[:] = source
    split = (3 * num_filter + 3) // 4
    return RandomGraph(
        num_entities=num_entities,
        num_relations=num_relations,
        triples=_long(triples),
        filter_triples=[_long(filter_rows[:split]), _long(filter_rows[split:])],
    )


def quantised_table(
    rng: np.random.Generator | int | None,
    num_entities: int,
    num_relations: int,
    levels: int = 3,
    inf_fraction: float = 0.0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """A (E, R, E) score table of a few integer levels (ties everywhere), optionally with ±inf entries.

    Parameters
    ----------
    rng : numpy Generator, int or None
    num_entities, num_relations : int
    levels : int, default=3
        Scores are drawn uniformly from the ``levels`` integers
        ``-(levels // 2), ..., levels - 1 - levels // 2`` (negative scores occur when levels >= 2);
        levels = 1 gives an all-equal table.
    inf_fraction : float in [0, 1], default=0.0
        Each entry independently becomes +inf or -inf (equally likely) with this probability.
    dtype : torch float dtype, default=torch.float32
        Small integers and ±inf are exact in every float dtype.

    Returns
    -------
    table : FloatTensor of shape (E, R, E)
    """
    if levels < 1:
        raise ValueError(f"levels must be >= 1, got {levels}")
    if not 0 <= inf_fraction <= 1:
        raise ValueError(f"inf_fraction must be in [0, 1], got {inf_fraction}")
    generator = _rng(rng)
    shape = (num_entities, num_relations, num_entities)
    values = (generator.integers(0, levels, shape) - levels // 2).astype(np.float64)
    infinite = generator.random(shape) < inf_fraction
    signs = np.where(generator.random(shape) < 0.5, np.inf, -np.inf)
    values[infinite] = signs[infinite]
    return torch.from_numpy(values).to(dtype)


class TableModel(torch.nn.Module):
    """A KGE "model" scoring (h, r, t) as ``table[h, r, t]``, with PyKEEN's ``score_t`` / ``score_h``.

    Supports the optional candidate keyword (``tails=`` / ``heads=``). Counts its scoring calls in
    ``num_score_calls`` and records ``(method, batch_size, num_columns)`` per call in ``score_calls``.
    Holds one dummy parameter so ``next(model.parameters()).device`` works; the table is a buffer, so
    ``model.to(device)`` moves it.
    """

    #: whether score_t / score_h accept the tails= / heads= candidate keyword
    supports_candidates: bool = True

    def __init__(self, table: torch.Tensor) -> None:
        """Wrap a score table of shape (E, R, E) (copied)."""
        super().__init__()
        if table.ndim != 3 or table.shape[0] != table.shape[2]:
            raise ValueError(f"table must have shape (E, R, E), got {tuple(table.shape)}")
        self.register_buffer("table", table.detach().clone())
        self.dummy = torch.nn.Parameter(  # where the table is: the model's device is its parameters'
            torch.zeros(1, dtype=table.dtype if table.is_floating_point() else None, device=table.device)
        )
        self.num_entities: int = int(table.shape[0])
        self.num_relations: int = int(table.shape[1])
        self.num_score_calls: int = 0
        self.score_calls: list[tuple[str, int, int]] = []

    def _record(self, method: str, batch: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.num_score_calls += 1
        self.score_calls.append((method, int(scores.shape[0]), int(scores.shape[1])))
        return scores

    @staticmethod
    def _check_batch(batch: torch.Tensor, name: str) -> None:
        if batch.ndim != 2 or batch.shape[1] != 2 or batch.dtype != torch.long:
            raise ValueError(f"{name} must be a LongTensor of shape (B, 2), got {batch.dtype} {tuple(batch.shape)}")

    def _tail_scores(self, hr_batch: torch.Tensor, tails: torch.Tensor | None) -> torch.Tensor:
        self._check_batch(hr_batch, "hr_batch")
        scores = self.table[hr_batch[:, 0], hr_batch[:, 1], :]  # (B, E), a copy
        if tails is not None:
            scores = scores[:, tails.long().reshape(-1)]
        return self._record("score_t", hr_batch, scores)

    def _head_scores(self, rt_batch: torch.Tensor, heads: torch.Tensor | None) -> torch.Tensor:
        self._check_batch(rt_batch, "rt_batch")
        scores = self.table.permute(1, 2, 0)[rt_batch[:, 0], rt_batch[:, 1], :]  # (B, E): table[e, r, t]
        if heads is not None:
            scores = scores[:, heads.long().reshape(-1)]
        return self._record("score_h", rt_batch, scores)

    def _relation_scores(self, ht_batch: torch.Tensor, relations: torch.Tensor | None) -> torch.Tensor:
        self._check_batch(ht_batch, "ht_batch")
        scores = self.table[ht_batch[:, 0], :, ht_batch[:, 1]]  # (B, R): table[h, r, t]
        if relations is not None:
            scores = scores[:, relations.long().reshape(-1)]
        return self._record("score_r", ht_batch, scores)

    def score_t(self, hr_batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        """Scores of (h, r, e): shape (B, E), or (B, len(tails)) for the candidate ids ``tails``."""
        return self._tail_scores(hr_batch, tails)

    def score_h(self, rt_batch: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        """Scores of (e, r, t): shape (B, E), or (B, len(heads)) for the candidate ids ``heads``."""
        return self._head_scores(rt_batch, heads)

    def score_r(self, ht_batch: torch.Tensor, relations: torch.Tensor | None = None) -> torch.Tensor:
        """Scores of (h, r, t) for every relation r: shape (B, R), or (B, len(relations))."""
        return self._relation_scores(ht_batch, relations)

    def score_hrt(self, hrt_batch: torch.Tensor) -> torch.Tensor:
        """Scores of whole triples, shape (B, 1) (PyKEEN's signature; not counted in ``num_score_calls``)."""
        return self.table[hrt_batch[:, 0], hrt_batch[:, 1], hrt_batch[:, 2]].unsqueeze(1)


class FullScoreTableModel(TableModel):
    """A :class:`TableModel` whose ``score_t`` / ``score_h`` take no candidate keyword: full rows only."""

    supports_candidates = False

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """Scores of (h, r, e) for all e: shape (B, E)."""
        return self._tail_scores(hr_batch, None)

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """Scores of (e, r, t) for all e: shape (B, E)."""
        return self._head_scores(rt_batch, None)

    def score_r(self, ht_batch: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """Scores of (h, r, t) for all r: shape (B, R)."""
        return self._relation_scores(ht_batch, None)


# ----------------------------------------------------------------------------------------------- edge cases


def single_candidate_graph(seed: int = 0) -> tuple[RandomGraph, torch.Tensor]:
    """E = 5, R = 2; some tasks have C = 1 (every other candidate filtered), others keep all 5 candidates.

    - (0, 0, 1): tail task C = 1 (every (0, 0, e) is known); head task C = 5 (no other (e, 0, 1) known).
    - (2, 1, 3): head task C = 1 (every (e, 1, 3) is known); tail task C = 5.
    - (4, 0, 4): a self-loop; tail task C = 5, head task C = 4 (the known (0, 0, 4) is filtered).
    """
    filter_rows = [(0, 0, e) for e in range(5)] + [(e, 1, 3) for e in range(5)]
    graph = RandomGraph(5, 2, _long([(0, 0, 1), (2, 1, 3), (4, 0, 4)]), [_long(filter_rows), _long([])])
    return graph, quantised_table(seed, 5, 2, levels=2)


def all_filtered_graph(
    num_entities: int = 4, num_relations: int = 2, seed: int = 0
) -> tuple[RandomGraph, torch.Tensor]:
    """Every candidate of every task is filtered: C = 1 and every rank is 1; adjusted / z metrics are NaN."""
    rng = _rng(seed)
    triples = random_graph(rng, num_entities, num_relations, 4, 0, duplicate_fraction=0.0).triples.tolist()
    known = set()
    for h, r, t in triples:
        known.update((h, r, e) for e in range(num_entities))
        known.update((e, r, t) for e in range(num_entities))
    graph = RandomGraph(num_entities, num_relations, _long(triples), [_long(sorted(known))])
    return graph, quantised_table(rng, num_entities, num_relations, levels=3, inf_fraction=0.2)


def tiny_graphs() -> dict[str, tuple[RandomGraph, torch.Tensor]]:
    """Degenerate sizes: one entity (C = 1 everywhere) and two entities with a tie and with ±inf."""
    return {
        "one_entity": (RandomGraph(1, 1, _long([(0, 0, 0)]), []), torch.zeros(1, 1, 1)),
        "two_entities_tie": (
            RandomGraph(2, 1, _long([(0, 0, 1), (1, 0, 0)]), [_long([])]),
            torch.ones(2, 1, 2),
        ),
        "two_entities_inf": (
            RandomGraph(2, 1, _long([(0, 0, 1), (1, 0, 0), (0, 0, 0)]), [_long([(1, 0, 1)])]),
            torch.tensor([[[float("inf"), float("-inf")]], [[float("inf"), float("inf")]]]),
        ),
    }


def duplicated_triples_graph(seed: int = 0) -> tuple[RandomGraph, torch.Tensor]:
    """Every evaluation triple appears two or three times; ties and a few ±inf in the table."""
    rng = _rng(seed)
    base = random_graph(rng, 8, 2, 6, 10, duplicate_fraction=0.0)
    repeats = rng.integers(2, 4, len(base.triples))
    triples = base.triples.repeat_interleave(torch.from_numpy(repeats), dim=0)
    triples = triples[torch.from_numpy(rng.permutation(len(triples)))]
    graph = RandomGraph(8, 2, triples, base.filter_triples)
    return graph, quantised_table(rng, 8, 2, levels=3, inf_fraction=0.1)


def edge_cases() -> dict[str, tuple[RandomGraph, torch.Tensor]]:
    """All edge-case (graph, table) pairs by name, for ``pytest.mark.parametrize``."""
    cases = {
        "single_candidate": single_candidate_graph(),
        "all_filtered": all_filtered_graph(),
        "duplicated_triples": duplicated_triples_graph(),
        **tiny_graphs(),
    }
    graph, _ = duplicated_triples_graph(1)
    cases["all_plus_inf"] = (graph, torch.full((8, 2, 8), float("inf")))
    cases["all_equal"] = (graph, torch.zeros(8, 2, 8))
    return cases


# ----------------------------------------------------------------------------------------------- hypothesis


@st.composite
def graphs_and_tables(
    draw: st.DrawFn,
    min_entities: int = 1,
    max_entities: int = 12,
    max_relations: int = 3,
    max_triples: int = 20,
    max_filter: int = 30,
) -> tuple[RandomGraph, torch.Tensor]:
    """Strategy for (RandomGraph, table): E in [min_entities, max_entities], R in [1, max_relations].

    Tables are quantised to 1-4 levels (ties everywhere) and hold ±inf with probability 0, 0.1 or 0.3 per
    entry; evaluation triples repeat with fraction 0, 0.1 or 0.3; filter triples share the evaluation keys.
    """
    num_entities = draw(st.integers(min_entities, max_entities))
    num_relations = draw(st.integers(1, max_relations))
    num_triples = draw(st.integers(1, max_triples))
    num_filter = draw(st.integers(0, max_filter))
    duplicate_fraction = draw(st.sampled_from([0.0, 0.1, 0.3]))
    levels = draw(st.integers(1, 4))
    inf_fraction = draw(st.sampled_from([0.0, 0.0, 0.1, 0.3]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, num_entities, num_relations, num_triples, num_filter, duplicate_fraction)
    table = quantised_table(rng, num_entities, num_relations, levels=levels, inf_fraction=inf_fraction)
    return graph, table


@st.composite
def entity_whitelists(draw: st.DrawFn, num_entities: int) -> torch.Tensor:
    """Strategy for a non-empty whitelist: a LongTensor of distinct ids in [0, num_entities), unsorted."""
    ids = draw(st.lists(st.integers(0, num_entities - 1), min_size=1, max_size=num_entities, unique=True))
    return torch.tensor(ids, dtype=torch.long)


@st.composite
def ranks_and_candidates(
    draw: st.DrawFn, max_n: int = 30, max_candidates: int = 20, rank_type: str = "realistic"
) -> tuple[np.ndarray, np.ndarray]:
    """Strategy for consistent (ranks, num_candidates) of n in [1, max_n] tasks.

    Draws 1 <= optimistic <= pessimistic <= C per task and returns the ranks of ``rank_type``
    (float64 for realistic half-integers, else int64) with num_candidates as int64.
    """
    n = draw(st.integers(1, max_n))
    counts, ranks = [], []
    for _ in range(n):
        c = draw(st.integers(1, max_candidates))
        optimistic = draw(st.integers(1, c))
        pessimistic = draw(st.integers(optimistic, c))
        counts.append(c)
        ranks.append(
            {
                "optimistic": optimistic,
                "pessimistic": pessimistic,
                "realistic": (optimistic + pessimistic) / 2,
            }[rank_type]
        )
    dtype = np.float64 if rank_type == "realistic" else np.int64
    return np.asarray(ranks, dtype=dtype), np.asarray(counts, dtype=np.int64)
