"""The per-relation candidate table (kgeval.protocol.RelationTableModel, kgeval._engine.relation_tables): a
TransR-like model written by hand, with integer-valued embeddings and projections so that every score is exact in
float32 whatever the order of the sums and ties are many and real, ranked through its table and compared with a
brute force over its own score_t / score_h (tests/helpers/reference.py); the table is chosen, and refused with a
FastPathWarning where it cannot stand in for the model's own scores (a subclass redefining score_t, a table that
disagrees with them). A model may serve one target through the plain query/candidate form and another through its
table (``kgeval_table_targets``): each side gets its own, with the same checks.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval._engine.form_check import FormChecks
from kgeval._engine.gemm_scoring import GemmScorer
from kgeval._engine.relation_tables import RelationTableScorer
from kgeval._engine.scorer_choice import make_scorer
from kgeval._engine.scoring import FullRowScorer, SlicedScorer
from kgeval.exceptions import FastPathWarning, UndefinedMetricWarning
from kgeval.protocol import QueryCandidateModel, RelationTableModel
from tests.helpers.graphs import random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

E, R = 23, 4
GRAPH = random_graph(11, num_entities=E, num_relations=R, num_triples=70, num_filter=120)


class TableTransR(torch.nn.Module):
    """TransR-like: a query (h M_r + r for tails, t M_r - r for heads) against candidates e M_r, all integers.

    ``similarity`` "l1" / "l2" score -||h M_r + r - t M_r||_1 / -||...||^2; "dot" scores (h M_r * r) . (t M_r).
    With ``bias`` every entity has a bias, added to the score of both its slots (MuRE's b_h + b_t): the table
    carries it as a last column (``kgeval_candidate_bias``)."""

    def __init__(self, similarity: str = "l1", bias: bool = False, seed: int = 0, dims: tuple[int, int] = (4, 3)):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        entity_dim, relation_dim = dims
        self.entities = torch.nn.Parameter(torch.randint(-2, 3, (E, entity_dim), generator=generator).float())
        self.vectors = torch.nn.Parameter(torch.randint(-2, 3, (R, relation_dim), generator=generator).float())
        self.matrices = torch.nn.Parameter(torch.randint(-1, 2, (R, entity_dim, relation_dim),
                                                         generator=generator).float())  # fmt: skip
        self.biases = torch.nn.Parameter(torch.randint(-3, 4, (E,), generator=generator).float() * bias)
        self.kgeval_similarity = similarity
        self.kgeval_candidate_bias = bias
        self.num_entities, self.num_relations = E, R

    # -- the model's own scores: every (query, candidate) pair transformed, as its training computes them
    def _scores(self, entity: torch.Tensor, relation: torch.Tensor, target: str) -> torch.Tensor:
        matrices = self.matrices[relation]  # (B, e, d)
        query = torch.einsum("be,bed->bd", self.entities[entity], matrices)  # (B, d)
        candidates = torch.einsum("ne,bed->bnd", self.entities, matrices)  # (B, E, d)
        vector = self.vectors[relation].unsqueeze(1)
        if self.kgeval_similarity == "dot":
            scores = (query.unsqueeze(1) * vector * candidates).sum(-1)
        else:
            heads, tails = (query.unsqueeze(1), candidates) if target == "tail" else (candidates, query.unsqueeze(1))
            difference = heads + vector - tails
            scores = -(difference.abs().sum(-1) if self.kgeval_similarity == "l1" else difference.square().sum(-1))
        return scores + self.biases[entity].unsqueeze(1) + self.biases

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return self._scores(hr_batch[:, 0], hr_batch[:, 1], "tail")

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return self._scores(rt_batch[:, 1], rt_batch[:, 0], "head")

    # -- the per-relation candidate table
    def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        entity, relation = (batch[:, 0], batch[:, 1]) if target == "tail" else (batch[:, 1], batch[:, 0])
        projected = torch.einsum("be,bed->bd", self.entities[entity], self.matrices[relation])
        vector = self.vectors[relation]
        if self.kgeval_similarity == "dot":
            return projected * vector
        return projected + vector if target == "tail" else projected - vector

    def kgeval_relation_candidates(self, relation: int, target: str, entities: torch.Tensor) -> torch.Tensor:
        table = self.entities[entities] @ self.matrices[relation]
        if not self.kgeval_candidate_bias:
            return table
        return torch.cat([table, self.biases[entities].unsqueeze(1)], dim=1)


def own_table(model: torch.nn.Module) -> torch.Tensor:
    """(E, R, E): the model's own score of every triple from score_t, checked against score_h."""
    heads, relations = torch.meshgrid(torch.arange(E), torch.arange(R), indexing="ij")
    with torch.no_grad():
        table = model.score_t(torch.stack([heads.reshape(-1), relations.reshape(-1)], dim=1)).reshape(E, R, E)
        relations, tails = torch.meshgrid(torch.arange(R), torch.arange(E), indexing="ij")
        by_heads = model.score_h(torch.stack([relations.reshape(-1), tails.reshape(-1)], dim=1)).reshape(R, E, E)
    assert torch.equal(by_heads.permute(2, 0, 1), table)  # score_h is the same function
    return table


def evaluate(model, batch_size=None, slice_size=None, whitelist=None, **options):
    evaluator = RankBasedEvaluator(batch_size=batch_size, slice_size=slice_size, **options)
    triples = GRAPH.triples
    if whitelist is not None:
        allowed = torch.zeros(E, dtype=torch.bool)
        allowed[whitelist] = True
        triples = triples[allowed[triples[:, 0]] & allowed[triples[:, 2]]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        results = evaluator.evaluate(model, triples, additional_filter_triples=GRAPH.filter_triples,
                                     restrict_entities_to=whitelist, use_tqdm=False)  # fmt: skip
    return results, triples


FORMS = [("l1", False), ("l2", False), ("dot", False), ("l2", True), ("l1", True), ("dot", True)]
SIZES = [(1, 1), (3, 4), (5, None), (None, 7), (None, None)]


def test_the_test_model_declares_the_table_and_not_the_query_candidate_form() -> None:
    model = TableTransR()
    assert isinstance(model, RelationTableModel) and not isinstance(model, QueryCandidateModel)


@pytest.mark.parametrize(("similarity", "bias"), FORMS)
@pytest.mark.parametrize(("batch_size", "slice_size"), SIZES)
def test_ranks_through_the_table_equal_a_brute_force_over_the_own_scores(
    similarity: str, bias: bool, batch_size: int | None, slice_size: int | None
) -> None:
    model = TableTransR(similarity, bias, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        for target in ("tail", "head"):
            queries = GRAPH.triples[:, :2] if target == "tail" else GRAPH.triples[:, 1:]
            assert isinstance(make_scorer(model, target, E, None, probe_queries=queries), RelationTableScorer)
        results, triples = evaluate(model, batch_size, slice_size, filtered="both")
    table = own_table(model)
    assert_same_ranks(results.records, reference_ranks(table, triples, GRAPH.filter_triples))
    assert_same_ranks(results.raw.records, reference_ranks(table, triples, GRAPH.filter_triples, filtered=False))


@pytest.mark.parametrize(("similarity", "bias"), [("l1", False), ("l2", True), ("dot", False)])
@pytest.mark.parametrize(("batch_size", "slice_size"), [(3, 4), (None, None)])
def test_a_whitelist_ranks_exactly_through_the_table(
    similarity: str, bias: bool, batch_size: int | None, slice_size: int | None
) -> None:
    model = TableTransR(similarity, bias, seed=5)
    whitelist = torch.tensor([0, 2, 3, 5, 8, 9, 12, 13, 17, 20, 21, 22])
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        results, triples = evaluate(model, batch_size, slice_size, whitelist=whitelist)
    expected = reference_ranks(own_table(model), triples, GRAPH.filter_triples, restrict_entities_to=whitelist.tolist())
    assert_same_ranks(results.records, expected)


def test_the_device_path_ranks_exactly_through_the_table() -> None:
    model = TableTransR("l2", True, seed=7)
    evaluator = RankBasedEvaluator(kernel="eager")
    evaluator.device_path = True
    results = evaluator.evaluate(model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False)
    assert_same_ranks(results.records, reference_ranks(own_table(model), GRAPH.triples, GRAPH.filter_triples))


def test_tables_are_kept_within_the_budget_and_built_once_per_relation_and_slice() -> None:
    """A tile of rows out of relation order is scored by relation and put back in row order; each relation's table
    of a slice is asked for once while it fits the budget, and again once let go."""
    model = TableTransR("l1", seed=2)
    calls: list[int] = []
    ask = model.kgeval_relation_candidates

    def counted(relation, target, entities):
        calls.append(relation)
        return ask(relation, target, entities)

    model.kgeval_relation_candidates = counted  # type: ignore[method-assign]
    with torch.inference_mode():  # as the engine scores
        _scored_by_relation(model, calls)


def _scored_by_relation(model: TableTransR, calls: list[int]) -> None:
    scorer = RelationTableScorer(model, "tail", E, None)
    queries = torch.tensor([[0, 2], [1, 0], [2, 2], [3, 1], [4, 0]])
    own = model.score_t(queries)
    scorer.keep_budget = 10**6
    scorer.begin(queries)
    scorer.start_slice(5, 17)
    calls.clear()
    for start, stop in [(0, 3), (3, 5), (0, 5)]:
        assert torch.equal(scorer.query_tile(start, stop), own[start:stop, 5:17])
    assert sorted(calls) == [0, 1, 2]
    scorer.keep_budget = 12 * 3  # one table of 12 candidates of width 3
    scorer.begin(queries)
    scorer.start_slice(5, 17)
    calls.clear()
    for _ in range(2):
        assert torch.equal(scorer.query_tile(0, 5), own[:, 5:17])
    assert len(calls) == 6  # every tile asks for its three relations again: one table kept at a time


def test_a_relations_tail_tasks_meet_in_one_batch() -> None:
    """The tail side's tasks are planned by relation first (the scorer's query_order): with batches of 4 tasks, each
    relation's table of a slice is built for at most (its tasks / 4 + 2) batches, not for every batch."""
    model = TableTransR("l2", seed=3)
    calls: list[int] = []
    ask = model.kgeval_relation_candidates

    def counted(relation, target, entities):
        if target == "tail":
            calls.append(relation)
        return ask(relation, target, entities)

    model.kgeval_relation_candidates = counted  # type: ignore[method-assign]
    evaluator = RankBasedEvaluator(batch_size=4, slice_size=None)
    results = evaluator.evaluate(model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples,
                                 targets=("tail",), use_tqdm=False)  # fmt: skip
    assert_same_ranks(results.records, reference_ranks(own_table(model), GRAPH.triples, GRAPH.filter_triples),
                      sides=("tail",))  # fmt: skip
    per_relation = np.bincount(GRAPH.triples[:, 1].numpy())
    built = np.bincount(np.asarray(calls[1:], dtype=np.int64), minlength=len(per_relation))  # the first: the probe's
    assert (built[: len(per_relation)] <= per_relation // 4 + 2).all(), (built, per_relation)


def test_a_subclass_overriding_score_t_falls_back_with_a_warning() -> None:
    class Negated(TableTransR):
        def score_t(self, hr_batch):
            return -super().score_t(hr_batch)

        def score_h(self, rt_batch):
            return -super().score_h(rt_batch)

    model = Negated("l1", seed=4)
    with pytest.warns(FastPathWarning, match=r"Negated\.score_[th] overrides the scoring method"):
        results, triples = evaluate(model)
    assert_same_ranks(results.records, reference_ranks(own_table(model), triples, GRAPH.filter_triples))
    with pytest.warns(FastPathWarning):
        assert isinstance(make_scorer(model, "tail", E, None, checks=FormChecks()), FullRowScorer | SlicedScorer)


class Disagreeing(TableTransR):
    """Passes the class check, but its table transforms the candidates with the wrong relation's matrix."""

    def kgeval_relation_candidates(self, relation, target, entities):
        return super().kgeval_relation_candidates((relation + 1) % R, target, entities)


def test_a_table_that_disagrees_with_the_own_scores_falls_back() -> None:
    model = Disagreeing("l2", seed=6)
    with pytest.warns(FastPathWarning, match=r"fast path of Disagreeing disagrees with its own score_[th]") as caught:
        results, triples = evaluate(model)
    assert len(caught) == 2  # once per side
    assert_same_ranks(results.records, reference_ranks(own_table(model), triples, GRAPH.filter_triples))
    with pytest.warns(FastPathWarning):
        scorer = make_scorer(model, "tail", E, None, probe_queries=GRAPH.triples[:, :2])
    assert not isinstance(scorer, RelationTableScorer)


def test_without_the_fast_path_the_own_methods_score() -> None:
    model = TableTransR("l1")
    scorer = make_scorer(model, "tail", E, None, fast_path=False)
    assert isinstance(scorer, FullRowScorer | SlicedScorer)


def test_a_bias_table_is_not_used_where_the_scores_themselves_are_needed() -> None:
    """predict_top_k returns scores: a table whose tiles leave out the query's constant (a bias) or rank a transform
    of the distance ("l2") is not used there."""
    for similarity, bias in [("l2", False), ("l1", True)]:
        model = TableTransR(similarity, bias)
        scorer = make_scorer(model, "tail", E, None, model_scores_only=True)
        assert not isinstance(scorer, RelationTableScorer)
    scorer = make_scorer(TableTransR("l1"), "tail", E, None, model_scores_only=True)
    assert isinstance(scorer, RelationTableScorer) and scorer.model_scores


def test_a_malformed_similarity_is_refused() -> None:
    model = TableTransR("cosine")
    with pytest.raises(ValueError, match="kgeval_similarity must be one of"):
        make_scorer(model, "tail", E, None)


class TailFormHeadTable(torch.nn.Module):
    """ConvE-like: score(h, r, t) = g(h, r) . t + b_t with g(h, r) = relu(h M_r), all integers. Tails have the plain
    form ([g(h, r), 1] against [t, b_t]); heads a per-relation table ([t, b_t] against [g(h, r), 1]: g of the
    candidate and the relation only)."""

    kgeval_similarity = "dot"
    kgeval_targets = ("tail",)
    kgeval_table_targets: tuple[str, ...] | None = ("head",)

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.entities = torch.nn.Parameter(torch.randint(-2, 3, (E, 4), generator=generator).float())
        self.matrices = torch.nn.Parameter(torch.randint(-1, 2, (R, 4, 3), generator=generator).float())
        self.tails = torch.nn.Parameter(torch.randint(-1, 2, (E, 3), generator=generator).float())
        self.biases = torch.nn.Parameter(torch.randint(-2, 3, (E,), generator=generator).float())
        self.num_entities, self.num_relations = E, R

    def _network(self, entities: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.einsum("be,bed->bd", self.entities[entities], self.matrices[relations]))

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return self._network(hr_batch[:, 0], hr_batch[:, 1]) @ self.tails.T + self.biases

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        rows = []
        for relation, tail in rt_batch.tolist():  # the network of every candidate head, per query
            heads = self._network(torch.arange(E), torch.full((E,), relation))
            rows.append(heads @ self.tails[tail] + self.biases[tail])
        return torch.stack(rows)

    def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        if target == "tail":
            vectors = self._network(batch[:, 0], batch[:, 1])
            return torch.cat([vectors, torch.ones(len(batch), 1)], dim=1)
        return torch.cat([self.tails[batch[:, 1]], self.biases[batch[:, 1]].unsqueeze(1)], dim=1)

    def kgeval_candidates(self, target: str) -> torch.Tensor:
        return torch.cat([self.tails, self.biases.unsqueeze(1)], dim=1)

    def kgeval_relation_candidates(self, relation: int, target: str, entities: torch.Tensor) -> torch.Tensor:
        vectors = self._network(entities, torch.full_like(entities, relation))
        return torch.cat([vectors, torch.ones(len(entities), 1)], dim=1)


def _scorers(model: torch.nn.Module, **options) -> dict[str, object]:
    return {target: make_scorer(model, target, E, None, probe_queries=GRAPH.triples[:, :2] if target == "tail" else
                                GRAPH.triples[:, 1:], **options) for target in ("tail", "head")}  # fmt: skip


@pytest.mark.parametrize(("batch_size", "slice_size"), SIZES)
def test_tails_through_the_plain_form_and_heads_through_the_table(batch_size: int | None, slice_size: int | None
                                                                   ) -> None:  # fmt: skip
    model = TailFormHeadTable(seed=1)
    assert isinstance(model, RelationTableModel) and isinstance(model, QueryCandidateModel)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        scorers = _scorers(model)
        assert type(scorers["tail"]) is GemmScorer and type(scorers["head"]) is RelationTableScorer
        assert scorers["head"].model_scores  # the query's constant is a column of the query
        results, triples = evaluate(model, batch_size, slice_size, filtered="both")
    table = own_table(model)
    assert_same_ranks(results.records, reference_ranks(table, triples, GRAPH.filter_triples))
    assert_same_ranks(results.raw.records, reference_ranks(table, triples, GRAPH.filter_triples, filtered=False))


def test_a_model_with_both_forms_and_no_table_targets_keeps_the_table_unused() -> None:
    """Without ``kgeval_table_targets`` a model with the plain form is scored as before the split: its form where
    it serves the target, its own methods elsewhere (no warning: nothing was refused)."""

    class Undeclared(TailFormHeadTable):
        kgeval_table_targets = None

    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        scorers = _scorers(Undeclared(seed=2))
    assert type(scorers["tail"]) is GemmScorer and isinstance(scorers["head"], FullRowScorer | SlicedScorer)


def test_the_plain_form_wins_where_both_serve_a_target() -> None:
    class Both(TailFormHeadTable):
        kgeval_table_targets = ("head", "tail")

    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        scorers = _scorers(Both(seed=3))
    assert type(scorers["tail"]) is GemmScorer and type(scorers["head"]) is RelationTableScorer


def test_table_targets_narrow_a_table_only_model() -> None:
    class TailsOnly(TableTransR):
        kgeval_table_targets = ("tail",)

    scorers = _scorers(TailsOnly("l1", seed=4))
    assert type(scorers["tail"]) is RelationTableScorer and isinstance(scorers["head"], FullRowScorer | SlicedScorer)


def test_a_subclass_overriding_score_h_loses_the_head_table_only() -> None:
    """The class check of the head table is against score_h: redefined below the class declaring the forms, heads
    fall back with a FastPathWarning, tails keep the plain form, and the ranks are the own methods'."""

    class Negated(TailFormHeadTable):
        def score_h(self, rt_batch):
            return -super().score_h(rt_batch)

    model = Negated(seed=5)
    with pytest.warns(FastPathWarning, match=r"Negated\.score_h overrides the scoring method") as caught:
        scorers = _scorers(model)
    assert len(caught) == 1
    assert type(scorers["tail"]) is GemmScorer and isinstance(scorers["head"], FullRowScorer | SlicedScorer)
    with pytest.warns(FastPathWarning, match=r"Negated\.score_h"):
        results, triples = evaluate(model, 3, 4)
    tables = own_tables_by_side(model)
    expected = {side: reference_ranks(tables[side], triples, GRAPH.filter_triples)[side] for side in tables}
    assert_same_ranks(results.records, expected)


def own_tables_by_side(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A model whose score_h is not score_t's function: each side's (E, R, E) table from its own method."""
    heads, relations = torch.meshgrid(torch.arange(E), torch.arange(R), indexing="ij")
    with torch.no_grad():
        tails = model.score_t(torch.stack([heads.reshape(-1), relations.reshape(-1)], dim=1)).reshape(E, R, E)
        relations, tail_ids = torch.meshgrid(torch.arange(R), torch.arange(E), indexing="ij")
        by_heads = model.score_h(torch.stack([relations.reshape(-1), tail_ids.reshape(-1)], dim=1)).reshape(R, E, E)
    return {"tail": tails, "head": by_heads.permute(2, 0, 1)}
