"""Relation prediction: ``targets`` with "relation" ranks the true relation of (h, ?, t) among all relations, filtered
by the known (h, r', t), through score_r (sliced or full rows) or whole triples; reported as the side "relation",
apart from "both" (head and tail). Expected ranks come from the brute-force loop of tests/helpers/reference.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval.models import RESCAL, ComplEx, DistMult, RotatE, TransE
from tests.helpers.graphs import FullScoreTableModel, TableModel, quantised_table, random_graph
from tests.helpers.reference import plain_metric, reference_ranks, reference_relation_ranks

GRAPH = random_graph(3, num_entities=9, num_relations=7, num_triples=40, num_filter=60, duplicate_fraction=0.1)
TABLE = quantised_table(3, 9, 7, levels=3, inf_fraction=0.1)


class TriplesOnly(torch.nn.Module):
    """Scores whole triples only (score_hrt): relations are ranked through the triple scorer."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.inner = TableModel(table)
        self.num_entities, self.num_relations = self.inner.num_entities, self.inner.num_relations

    def score_hrt(self, hrt: torch.Tensor) -> torch.Tensor:
        return self.inner.score_hrt(hrt)


MODELS = {"sliced": TableModel, "full_rows": FullScoreTableModel, "triples": TriplesOnly}


def relation_records(results):
    records = results.records.of_side("relation")
    order = np.argsort(records.task_index, kind="stable")
    return {name: np.asarray(records[name])[order] for name in ("optimistic", "pessimistic", "num_candidates")}


@pytest.mark.parametrize("kind", list(MODELS))
@pytest.mark.parametrize("filtered", [True, False])
@pytest.mark.parametrize(("batch_size", "slice_size"), [(None, None), (1, 2), (3, 5)])
def test_ranks_equal_the_reference(kind, filtered, batch_size, slice_size) -> None:
    evaluator = RankBasedEvaluator(filtered=filtered, batch_size=batch_size, slice_size=slice_size)
    results = evaluator.evaluate(
        MODELS[kind](TABLE), GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, targets=("relation",),
        use_tqdm=False,
    )  # fmt: skip
    expected = reference_relation_ranks(TABLE, GRAPH.triples, GRAPH.filter_triples, filtered=filtered)
    got = relation_records(results)
    for name in ("optimistic", "pessimistic", "num_candidates"):
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    assert results.targets == ("relation",)
    assert math.isclose(results.get_metric("relation.realistic.mrr"),
                        plain_metric("mrr", expected["realistic"]), rel_tol=1e-12)  # fmt: skip
    assert results.get_metric("mrr") == results.get_metric("relation.realistic.mrr")  # relation-only: the default


def test_relation_is_kept_apart_from_both() -> None:
    """With all three targets, head / tail / both are exactly those of a link-prediction evaluation."""
    model = TableModel(TABLE)
    known = GRAPH.filter_triples
    every = RankBasedEvaluator().evaluate(model, GRAPH.triples, additional_filter_triples=known,
                                          targets=("head", "tail", "relation"), use_tqdm=False)  # fmt: skip
    links = RankBasedEvaluator().evaluate(model, GRAPH.triples, additional_filter_triples=known, use_tqdm=False)
    for key, value in links.to_flat_dict().items():
        assert every.to_flat_dict()[key] == value or (math.isnan(value) and math.isnan(every.to_flat_dict()[key]))
    n = GRAPH.triples.shape[0]
    assert every.get_metric("both.count") == 2 * n
    assert every.get_metric("relation.count") == n
    assert every.targets == ("head", "tail", "relation")
    expected_links = reference_ranks(TABLE, GRAPH.triples, known)
    assert math.isclose(every.get_metric("mrr"), plain_metric("mrr", expected_links["both"]["realistic"]),
                        rel_tol=1e-12)  # fmt: skip
    assert "relation" in str(every)
    assert set(every.records.to_frame()["side"]) == {0, 1, 2}


def test_filtered_both_gives_raw_relation_ranks_too() -> None:
    results = RankBasedEvaluator(filtered="both").evaluate(
        TableModel(TABLE), GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, targets=["relation"],
        use_tqdm=False,
    )  # fmt: skip
    raw = reference_relation_ranks(TABLE, GRAPH.triples, filtered=False)
    np.testing.assert_array_equal(relation_records(results.raw)["pessimistic"], raw["pessimistic"])


@pytest.mark.parametrize("model_class", [DistMult, ComplEx, RESCAL, TransE])
def test_built_in_models_score_relations_like_their_triples(model_class) -> None:
    """score_r of the built-in models (their relation GEMM form), with integer embeddings (exact scores): ranks equal
    the reference over the model's own score_hrt, and score_r equals score_hrt entry by entry."""
    model = model_class(9, 7, dim=4, seed=0)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for embedding in (model.entity_embeddings, model.relation_embeddings):
            embedding.weight.copy_(torch.randint(-1, 2, embedding.weight.shape, generator=generator).float())
    h, r, t = torch.meshgrid(torch.arange(9), torch.arange(7), torch.arange(9), indexing="ij")
    with torch.no_grad():
        table = model.score_hrt(torch.stack([h.reshape(-1), r.reshape(-1), t.reshape(-1)], dim=1)).reshape(9, 7, 9)
        pairs = torch.stack([h[:, 0, :].reshape(-1), t[:, 0, :].reshape(-1)], dim=1)
        # equal up to the last bit (TransE: cdist's square root against vector_norm's); the ranks below are exact,
        # since squared distances of integer vectors are integers and distinct integers have well-separated roots
        torch.testing.assert_close(model.score_r(pairs), table.permute(0, 2, 1).reshape(-1, 7), rtol=1e-6, atol=0)
        chosen = model.score_r(pairs[:3], relations=torch.tensor([6, 0]))
        assert torch.equal(chosen, model.score_r(pairs[:3])[:, [6, 0]])
    results = RankBasedEvaluator(batch_size=4).evaluate(
        model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, targets=("relation",), use_tqdm=False
    )
    expected = reference_relation_ranks(table, GRAPH.triples, GRAPH.filter_triples)
    np.testing.assert_array_equal(relation_records(results)["pessimistic"], expected["pessimistic"])


def test_a_model_without_a_relation_count_is_refused() -> None:
    class NoCount(TableModel):
        def __init__(self, table):
            super().__init__(table)
            del self.num_relations

    with pytest.raises(ValueError, match="^ranking relations .* needs the model's number of relations"):
        RankBasedEvaluator().evaluate(NoCount(TABLE), GRAPH.triples, targets=("relation",), use_tqdm=False)


def test_a_model_without_score_r_or_triples_is_refused() -> None:
    class LinksOnly:
        num_entities, num_relations = 9, 7

        def score_t(self, batch):
            return torch.zeros(batch.shape[0], 9)

        score_h = score_t

    with pytest.raises(TypeError, match=r"^LinksOnly has no score_r\(batch\) to rank relations"):
        RankBasedEvaluator().evaluate(LinksOnly(), GRAPH.triples, targets=("relation",), use_tqdm=False)


def test_relations_take_the_gemm_fast_path_where_the_model_has_one() -> None:
    from kgeval._engine.gemm_scoring import GemmScorer
    from kgeval._engine.scorer_choice import make_scorer
    from kgeval._engine.scoring import SlicedScorer

    assert type(make_scorer(DistMult(9, 7, dim=4), "relation", 7, None)) is GemmScorer
    assert type(make_scorer(RotatE(9, 7, dim=4), "relation", 7, None)) is SlicedScorer  # score_r: expanded triples
    assert type(make_scorer(DistMult(9, 7, dim=4), "relation", 7, None, fast_path=False)) is SlicedScorer


def test_rotate_relations_without_a_fast_path_equal_the_reference_of_its_score_r() -> None:
    model = RotatE(9, 7, dim=3, seed=2)
    heads, tails = torch.meshgrid(torch.arange(9), torch.arange(9), indexing="ij")
    with torch.no_grad():
        table = model.score_r(torch.stack([heads.reshape(-1), tails.reshape(-1)], dim=1)).reshape(9, 9, 7)
    results = RankBasedEvaluator(batch_size=5).evaluate(
        model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, targets=("relation",), use_tqdm=False
    )
    expected = reference_relation_ranks(table.permute(0, 2, 1), GRAPH.triples, GRAPH.filter_triples)
    np.testing.assert_array_equal(relation_records(results)["optimistic"], expected["optimistic"])
