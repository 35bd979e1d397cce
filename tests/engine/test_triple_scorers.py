"""Models that only score whole triples (score_hrt, forward(h, r, t), or a score_fn): the brute-force ranks, for
every batch and slice size, and never more than one (batch x slice) block of triples per call."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kgeval import RankBasedEvaluator
from kgeval.models import DistMult
from tests.helpers.graphs import graphs_and_tables
from tests.helpers.reference import reference_ranks
from tests.support.invariance import assert_ranks_match


class ScoreHRT:
    """Only PyKEEN's score_hrt: (n, 3) -> (n, 1); counts the triples of each call."""

    def __init__(self, table: torch.Tensor) -> None:
        self.table = table
        self.num_entities = table.shape[0]
        self.calls: list[int] = []

    def score_hrt(self, hrt: torch.Tensor) -> torch.Tensor:
        self.calls.append(hrt.shape[0])
        return self.table[hrt[:, 0], hrt[:, 1], hrt[:, 2]].unsqueeze(1)


class Forward(torch.nn.Module):
    """Only forward(head_index, rel_type, tail_index) -> (n,), as PyTorch Geometric's KGE models; PyG's num_nodes."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("table", table)
        self.num_nodes = table.shape[0]

    def forward(self, head_index: torch.Tensor, rel_type: torch.Tensor, tail_index: torch.Tensor) -> torch.Tensor:
        return self.table[head_index, rel_type, tail_index]


class Nothing:
    """No scoring method at all (TorchKGE's entity count): scored through evaluate(score_fn=...)."""

    def __init__(self, table: torch.Tensor) -> None:
        self.n_ent = table.shape[0]


@settings(max_examples=40, deadline=None)
@given(
    problem=graphs_and_tables(max_entities=9),
    kind=st.sampled_from(["score_hrt", "forward", "score_fn"]),
    batch_size=st.sampled_from([None, 1, 4]),
    slice_size=st.sampled_from([None, 1, 3]),
    filtered=st.sampled_from([True, False]),
)
def test_triple_scorers_rank_like_the_brute_force(problem, kind, batch_size, slice_size, filtered) -> None:
    graph, table = problem
    score_fn = None
    if kind == "score_hrt":
        model = ScoreHRT(table)
    elif kind == "forward":
        model = Forward(table)
    else:
        model = Nothing(table)

        def score_fn(h, r, t):
            return table[h, r, t]

    results = RankBasedEvaluator(batch_size=batch_size, slice_size=slice_size, filtered=filtered).evaluate(
        model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False, score_fn=score_fn
    )
    assert_ranks_match(results, reference_ranks(table, graph.triples, graph.filter_triples, filtered=filtered))


def test_no_call_holds_more_than_one_batch_by_slice_block() -> None:
    table = torch.randint(0, 3, (30, 2, 30)).float()
    triples = torch.stack([torch.randint(0, 30, (50,)), torch.randint(0, 2, (50,)), torch.randint(0, 30, (50,))], 1)
    model = ScoreHRT(table)
    RankBasedEvaluator(batch_size=4, slice_size=7).evaluate(model, triples, use_tqdm=False)
    assert model.calls and max(model.calls) <= 4 * 7


def test_same_ranks_as_the_score_t_path_of_a_model_with_both() -> None:
    """DistMult with integer embeddings (every score exact): score_hrt triple by triple = score_t / score_h."""
    model = DistMult(20, 3, dim=6, seed=0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randint(-2, 3, parameter.shape).float())
    triples = torch.stack([torch.randint(0, 20, (40,)), torch.randint(0, 3, (40,)), torch.randint(0, 20, (40,))], 1)
    rows = RankBasedEvaluator(fast_path=False).evaluate(model, triples, use_tqdm=False)
    by_triple = RankBasedEvaluator().evaluate(
        model, triples, use_tqdm=False, score_fn=lambda h, r, t: model.score_hrt(torch.stack([h, r, t], 1))
    )
    assert (rows.records["pessimistic"] > rows.records["optimistic"]).any()  # ties are there
    for column in ("optimistic", "pessimistic", "num_candidates", "task_index", "side"):
        assert (rows.records[column] == by_triple.records[column]).all()


def test_a_model_with_no_way_to_score() -> None:
    with pytest.raises(TypeError, match=r"Nothing has no score_h\(batch\).*score_fn"):
        RankBasedEvaluator().evaluate(Nothing(torch.zeros(4, 1, 4)), torch.tensor([[0, 0, 1]]), use_tqdm=False)
    with pytest.raises(TypeError, match="score_fn must be callable"):
        RankBasedEvaluator().evaluate(
            Nothing(torch.zeros(4, 1, 4)), torch.tensor([[0, 0, 1]]), use_tqdm=False, score_fn=3
        )


def test_a_score_fn_of_the_wrong_shape() -> None:
    with pytest.raises(ValueError, match=r"model.score_fn returned shape"):
        RankBasedEvaluator().evaluate(
            Nothing(torch.zeros(4, 1, 4)), torch.tensor([[0, 0, 1]]), use_tqdm=False,
            score_fn=lambda h, r, t: torch.zeros(len(h) + 1),
        )  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(problem=graphs_and_tables(min_entities=3, max_entities=9), data=st.data())
def test_triple_scorers_with_a_candidate_whitelist(problem, data) -> None:
    graph, table = problem
    allowed = sorted(data.draw(st.sets(st.integers(0, graph.num_entities - 1), min_size=1)))
    inside = [row for row in graph.triples.tolist() if row[0] in allowed and row[2] in allowed]
    if not inside:
        return
    triples = torch.tensor(inside)
    results = RankBasedEvaluator(batch_size=3, slice_size=2).evaluate(
        ScoreHRT(table), triples, additional_filter_triples=graph.filter_triples, restrict_entities_to=allowed,
        use_tqdm=False,
    )  # fmt: skip
    expected = reference_ranks(table, triples, graph.filter_triples, restrict_entities_to=allowed)
    assert_ranks_match(results, expected)
