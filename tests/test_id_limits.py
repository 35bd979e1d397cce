"""Ids near the int64 limits: relation ids >= 2**31 must rank exactly like the same problem with small ids.

The filter index and the batch planner used to pack two ids into one int64 as ``(first << 32) | second``: with a
relation id >= 2**31 keys turned negative (filter lookups missed), with >= 2**32 distinct queries collided.
Every test here relabels the relations of a tie-heavy random problem to huge ids and compares with the brute-force
reference on the original ids.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kgeval import RankBasedEvaluator
from kgeval._engine.filter_index import FilterIndex, pack_pairs
from tests.helpers.graphs import TableModel, graphs_and_tables
from tests.helpers.reference import reference_ranks
from tests.support.filtering import excluded
from tests.support.invariance import assert_ranks_match

INT64_MAX = 2**63 - 1
HUGE_RELATION_IDS = [2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1, 2**32, 2**32 + 1, 2**40, 2**62, INT64_MAX - 1, INT64_MAX]


class RelabeledModel(TableModel):
    """A :class:`TableModel` whose relation r is known by the id ``relation_ids[r]`` (sorted, huge)."""

    def __init__(self, table: torch.Tensor, relation_ids: torch.Tensor) -> None:
        super().__init__(table)
        del self.num_relations  # no range to check huge ids against
        self.relation_ids = relation_ids

    def _small(self, batch: torch.Tensor, column: int) -> torch.Tensor:
        small = batch.clone()
        small[:, column] = torch.searchsorted(self.relation_ids, batch[:, column].contiguous())
        assert bool((self.relation_ids[small[:, column]] == batch[:, column]).all())
        return small

    def score_t(self, hr_batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        return self._tail_scores(self._small(hr_batch, 1), tails)

    def score_h(self, rt_batch: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        return self._head_scores(self._small(rt_batch, 0), heads)


def relabel(triples: torch.Tensor, relation_ids: torch.Tensor) -> torch.Tensor:
    out = triples.clone()
    out[:, 1] = relation_ids[triples[:, 1]]
    return out


@settings(max_examples=60, deadline=None)
@given(
    problem=graphs_and_tables(max_relations=4),
    chosen=st.lists(st.sampled_from(HUGE_RELATION_IDS), min_size=4, max_size=4, unique=True),
    batch_size=st.sampled_from([None, 1, 3]),
    slice_size=st.sampled_from([None, 1, 4]),
)
def test_huge_relation_ids_rank_like_small_ones(problem, chosen, batch_size, slice_size) -> None:
    graph, table = problem
    relation_ids = torch.tensor(sorted(chosen), dtype=torch.int64)[: graph.num_relations]
    model = RelabeledModel(table, relation_ids)
    results = RankBasedEvaluator(batch_size=batch_size, slice_size=slice_size).evaluate(
        model,
        relabel(graph.triples, relation_ids),
        additional_filter_triples=[relabel(t, relation_ids) for t in graph.filter_triples],
        use_tqdm=False,
    )
    assert_ranks_match(results, reference_ranks(table, graph.triples, graph.filter_triples))


def test_the_reported_reproduction() -> None:
    """score(h, r, t) = (7h + 3 (r mod 11) + 5t) mod 11 over 11 entities, triples [[3, 2**31, 2], [1, 1, 5]]:
    the head task of the first triple was ranked (7, 8, 12) instead of (7, 7, 11)."""

    class Modular:
        num_entities = 11

        def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
            e = torch.arange(11)
            return ((7 * hr_batch[:, :1] + 3 * (hr_batch[:, 1:] % 11) + 5 * e) % 11).float()

        def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
            e = torch.arange(11)
            return ((7 * e + 3 * (rt_batch[:, :1] % 11) + 5 * rt_batch[:, 1:]) % 11).float()

    triples = torch.tensor([[3, 2**31, 2], [1, 1, 5]])
    results = RankBasedEvaluator().evaluate(Modular(), triples, use_tqdm=False)
    head = results.records["side"] == 0
    first = head & (results.records["task_index"] == 0)
    # by METRICS.md: score* = (21 + 3*(2**31 % 11) + 10) % 11; every other head e is a candidate (nothing else
    # is known with this relation and tail), and the scores 7e + c mod 11 are distinct for distinct e
    c = (3 * (2**31 % 11) + 5 * 2) % 11
    scores = [(7 * e + c) % 11 for e in range(11)]
    above = sum(score > scores[3] for e, score in enumerate(scores) if e != 3)
    assert results.records["optimistic"][first].tolist() == [1 + above]
    assert results.records["pessimistic"][first].tolist() == [1 + above]
    assert results.records["num_candidates"][first].tolist() == [11]


def test_pack_pairs_is_injective_and_ordered_at_the_limits() -> None:
    values = torch.tensor([0, 1, 2**31 - 1, 2**31, 2**32, 2**32 + 1, INT64_MAX - 1, INT64_MAX])
    first, second = torch.cartesian_prod(values, values).unbind(dim=1)
    keys = pack_pairs(first, second)
    assert keys.unique().numel() == keys.numel()
    assert torch.equal(keys.argsort(), torch.arange(keys.numel()))  # lexicographic order kept
    small = torch.tensor([3, 0, 2]), torch.tensor([1, 5, 0])
    assert pack_pairs(*small).tolist() == [3 * 6 + 1, 5, 2 * 6]  # mixed radix when it fits


def test_filter_lookups_at_the_limits() -> None:
    known = torch.tensor([[0, INT64_MAX, 5], [0, 2**32, 6], [0, 0, 7], [INT64_MAX // 2, 2**31, 1]])
    index = FilterIndex(known)
    rows, entities = excluded(index, "tail", torch.tensor([[0, INT64_MAX], [0, 2**32], [0, 2**31], [1, 0]]))
    assert list(zip(rows.tolist(), entities.tolist(), strict=True)) == [(0, 5), (1, 6)]
    rows, entities = excluded(index, "head", torch.tensor([[2**31, 1], [INT64_MAX, 5], [INT64_MAX, 6]]))
    assert list(zip(rows.tolist(), entities.tolist(), strict=True)) == [(0, INT64_MAX // 2), (1, 0)]


def test_relation_ids_are_checked_against_the_models_num_relations() -> None:
    table = torch.zeros(4, 2, 4)
    model = TableModel(table)
    with pytest.raises(ValueError, match=r"mapped_triples row 1 = \[0, 2, 1\] has an id out of range"):
        RankBasedEvaluator().evaluate(model, torch.tensor([[0, 1, 1], [0, 2, 1]]), use_tqdm=False)
    with pytest.raises(ValueError, match=r"additional_filter_triples\[0\] row 0"):
        RankBasedEvaluator().evaluate(
            model, torch.tensor([[0, 1, 1]]), additional_filter_triples=torch.tensor([[0, 5, 1]]), use_tqdm=False
        )
    assert np.isfinite(RankBasedEvaluator().evaluate(model, torch.tensor([[0, 1, 1]]), use_tqdm=False)["mr"])
