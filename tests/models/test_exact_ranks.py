"""The fast path of every built-in model ranks exactly like the model's own scores, ties included.

Integer-valued embeddings make every score an exact small integer (or the square root of one), so GEMMs,
distance expansions and the model's own score_t / score_h agree bit for bit and ties are everywhere. RotatE's
rotations are restricted to {1, i, -1, -i}, the unit complex numbers that are exact in floating point.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval._engine.gemm_scoring import GemmScorer, L1Scorer
from kgeval._engine.scorer_choice import make_scorer
from kgeval.models import RESCAL, ComplEx, DistMult, RotatE, TransE
from kgeval.models.base import QueryCandidateModule
from tests.helpers.graphs import random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

E, R = 11, 3
SIZES = [(None, None), (1, 1), (3, 4), (7, None), (None, 5)]


class ExactRotatE(RotatE):
    """RotatE whose relation phases are whole quarter turns, evaluated exactly."""

    def _rotations(self, relations: torch.Tensor) -> torch.Tensor:
        quarter = torch.round(self.relation_phases(relations) / (torch.pi / 2)).long() % 4
        real = torch.tensor([1.0, 0.0, -1.0, 0.0])[quarter]
        imaginary = torch.tensor([0.0, 1.0, 0.0, -1.0])[quarter]
        return torch.complex(real, imaginary)


FACTORIES = {
    "DistMult": lambda: DistMult(E, R, dim=3),
    "ComplEx": lambda: ComplEx(E, R, dim=2),
    "RESCAL": lambda: RESCAL(E, R, dim=2),
    "TransE-L1": lambda: TransE(E, R, dim=3, p=1),
    "TransE-L2": lambda: TransE(E, R, dim=3, p=2),
    "RotatE": lambda: ExactRotatE(E, R, dim=2),
}


def integer_model(name: str, seed: int) -> QueryCandidateModule:
    """The model with every parameter replaced by small integers (RotatE: phases multiples of pi / 2)."""
    model = FACTORIES[name]()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter_name, parameter in model.named_parameters():
            values = torch.randint(-2, 3, parameter.shape, generator=generator).float()
            parameter.copy_(values * (torch.pi / 2) if "phases" in parameter_name else values)
    return model


def score_table(model: QueryCandidateModule) -> torch.Tensor:
    """(E, R, E) table of the model's own score_hrt."""
    triples = torch.tensor(list(itertools.product(range(E), range(R), range(E))))
    with torch.no_grad():
        return model.score_hrt(triples).reshape(E, R, E)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", list(FACTORIES))
def test_fast_path_equals_own_scores_and_reference(name: str, seed: int) -> None:
    model = integer_model(name, seed)
    scorer = make_scorer(model, "tail", E, None)
    assert isinstance(scorer, L1Scorer if name == "TransE-L1" else GemmScorer)
    graph = random_graph(seed, E, R, num_triples=25, num_filter=30)
    table = score_table(model)
    assert len(torch.unique(table)) < table.numel() / 3  # many ties
    expected = reference_ranks(table, graph.triples, graph.filter_triples)
    for batch_size, slice_size in SIZES:
        evaluator = RankBasedEvaluator(batch_size=batch_size, slice_size=slice_size)
        fast = evaluator.evaluate(model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False)
        assert_same_ranks(fast.records, expected)
    own = RankBasedEvaluator(fast_path=False).evaluate(
        model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
    )
    assert_same_ranks(own.records, expected)


@pytest.mark.parametrize("name", ["TransE-L2", "DistMult", "TransE-L1"])
def test_fast_path_with_restricted_candidates(name: str) -> None:
    model = integer_model(name, 3)
    graph = random_graph(3, E, R, num_triples=25, num_filter=30)
    allowed = [0, 2, 3, 5, 7, 8, 10]
    keep = [i for i, (h, _, t) in enumerate(graph.triples.tolist()) if h in allowed and t in allowed]
    evaluator = RankBasedEvaluator(batch_size=4, slice_size=3)
    results = evaluator.evaluate(
        model,
        graph.triples,
        additional_filter_triples=graph.filter_triples,
        restrict_entities_to=allowed,
        drop_outside_restriction=True,
        use_tqdm=False,
    )  # fmt: skip
    known = [graph.triples, *graph.filter_triples]
    expected = reference_ranks(score_table(model), graph.triples[keep], known, restrict_entities_to=allowed)
    assert_same_ranks(results.records, expected, task_rows=keep)


def test_random_float_embeddings_rank_like_score_t() -> None:
    """Non-degenerate data: the L2 expansion orders candidates like the direct distance."""
    for name in FACTORIES:
        model = FACTORIES[name]()
        torch.manual_seed(0)
        graph = random_graph(0, E, R, num_triples=40, num_filter=20)
        fast = RankBasedEvaluator().evaluate(
            model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
        )
        own = RankBasedEvaluator(fast_path=False).evaluate(
            model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
        )
        for column in ("optimistic", "pessimistic", "num_candidates"):
            np.testing.assert_array_equal(fast.records[column], own.records[column], err_msg=name)
