"""Type-constrained candidates against a brute-force loop: each task ranks its answer among its relation's allowed
entities on its side (intersected with restrict_entities_to), known triples filtered, with its own
num_candidates."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator, TypeConstraints
from kgeval.models import DistMult
from tests.helpers.graphs import FullScoreTableModel, TableModel, quantised_table, random_graph

MODELS = {"sliced": TableModel, "full_rows": FullScoreTableModel}


def reference(table, triples, known, constraints, filtered=True, whitelist=None):
    """{(task row, side code): (optimistic, pessimistic, num_candidates)} by Python loops over METRICS.md's rule."""
    num_entities = table.shape[0]
    known = {tuple(row) for part in known for row in part.tolist()}
    out = {}
    for row, (h, r, t) in enumerate(triples.tolist()):
        for code, side in enumerate(("head", "tail")):
            allowed = constraints.get(side, {}).get(r)
            candidates = set(range(num_entities)) if allowed is None else set(allowed)
            if whitelist is not None:
                candidates &= set(whitelist)
            true = h if side == "head" else t
            true_score = float(table[h, r, t])
            greater = equal = others = 0
            for e in candidates - {true}:
                triple = (e, r, t) if side == "head" else (h, r, e)
                if filtered and triple in known:
                    continue
                score = float(table[triple])
                others += 1
                greater += score > true_score
                equal += score == true_score
            out[row, code] = (1 + greater, 1 + greater + equal, 1 + others)
    return out


def observed(results):
    records = results.records
    return {
        (int(i), int(s)): (int(o), int(p), int(c))
        for i, s, o, p, c in zip(
            records.task_index, records.side, records.optimistic, records.pessimistic, records.num_candidates,
            strict=True,
        )
    }  # fmt: skip


def random_constraints(rng, num_entities, num_relations, triples):
    """Random allowed sets holding every evaluated answer, for some relations and sides."""
    constraints = {"head": {}, "tail": {}}
    for side, column in (("head", 0), ("tail", 2)):
        for r in range(num_relations):
            if rng.random() < 0.3:
                continue  # unconstrained
            answers = set(triples[triples[:, 1] == r][:, column].tolist())
            extra = set(rng.choice(num_entities, size=int(rng.integers(0, num_entities)), replace=False).tolist())
            constraints[side][r] = sorted(answers | extra) or [0]
    return constraints


@pytest.mark.parametrize("model_kind", list(MODELS))
@pytest.mark.parametrize("seed", range(4))
def test_ranks_match_brute_force(seed: int, model_kind: str) -> None:
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, num_entities=16, num_relations=4, num_triples=30, num_filter=50)
    table = quantised_table(rng, 16, 4, levels=3, inf_fraction=0.1)
    sets = random_constraints(rng, 16, 4, graph.triples)
    constraints = TypeConstraints.from_mappings(heads=sets["head"], tails=sets["tail"])
    known = [graph.triples, *graph.filter_triples]
    for filtered in (True, False):
        expected = reference(table, graph.triples, known, sets, filtered)
        for batch_size, slice_size in [(None, None), (1, 1), (5, 3), (64, 7)]:
            results = RankBasedEvaluator(filtered=filtered, batch_size=batch_size, slice_size=slice_size).evaluate(
                MODELS[model_kind](table), graph.triples, additional_filter_triples=graph.filter_triples,
                type_constraints=constraints, use_tqdm=False,
            )  # fmt: skip
            assert observed(results) == expected


def test_intersection_with_the_whitelist_and_the_gemm_path() -> None:
    rng = np.random.default_rng(7)
    model = DistMult(14, 3, dim=6, seed=0)
    with torch.no_grad():  # integer embeddings: exact scores, many ties, GEMM and score_t agree
        for parameter in model.parameters():
            parameter.copy_(torch.randint(-2, 3, parameter.shape, generator=torch.Generator().manual_seed(2)))
        table = torch.einsum("hd,rd,td->hrt", *(p for p in (model.entity_embeddings.weight,
                             model.relation_embeddings.weight, model.entity_embeddings.weight)))  # fmt: skip
    graph = random_graph(rng, num_entities=14, num_relations=3, num_triples=25, num_filter=30)
    answers = set(graph.triples[:, [0, 2]].reshape(-1).tolist())
    whitelist = sorted(set(rng.choice(14, size=10, replace=False).tolist()) | answers)
    sets = random_constraints(rng, 14, 3, graph.triples)
    constraints = TypeConstraints.from_mappings(heads=sets["head"], tails=sets["tail"])
    results = RankBasedEvaluator(slice_size=4).evaluate(
        model, graph.triples, additional_filter_triples=graph.filter_triples, type_constraints=constraints,
        restrict_entities_to=whitelist, use_tqdm=False,
    )  # fmt: skip
    assert observed(results) == reference(table, graph.triples, [graph.triples, *graph.filter_triples], sets,
                                          whitelist=whitelist)  # fmt: skip


def test_from_triples_collects_the_seen_heads_and_tails() -> None:
    train = torch.tensor([[0, 0, 1], [2, 0, 1], [2, 0, 3], [4, 1, 0]])
    constraints = TypeConstraints.from_triples(train)
    assert constraints.allowed(0, "head").tolist() == [0, 2]
    assert constraints.allowed(0, "tail").tolist() == [1, 3]
    assert constraints.allowed(1, "tail").tolist() == [0]
    assert constraints.allowed(5, "tail") is None  # a relation absent from the triples is unconstrained


def test_answer_outside_its_set_is_an_error_unless_dropped() -> None:
    table = quantised_table(0, 6, 1)
    triples = torch.tensor([[0, 0, 1], [0, 0, 5]])
    constraints = TypeConstraints.from_mappings(tails={0: [1, 2, 3]})
    evaluator = RankBasedEvaluator()
    with pytest.raises(ValueError, match=r"mapped_triples row 1 = \[0, 0, 5\] has an answer outside"):
        evaluator.evaluate(TableModel(table), triples, type_constraints=constraints, use_tqdm=False)
    results = evaluator.evaluate(
        TableModel(table), triples, type_constraints=constraints, drop_outside_restriction=True, use_tqdm=False
    )
    assert results.records.task_index.tolist() == [0, 0]
    assert results.records.num_candidates.tolist() == [6, 3]  # head side unconstrained, tail side {1, 2, 3}


def test_the_constructor_takes_plain_lists_as_from_mappings_does() -> None:
    """TypeConstraints(heads={r: [ids]}) is from_mappings' object (it failed with an AttributeError in check)."""
    direct = TypeConstraints(heads={0: [3, 1, 1]}, tails={2: (5, 0)})
    assert direct.allowed(0, "head").tolist() == [1, 3] and direct.allowed(2, "tail").tolist() == [0, 5]
    assert direct.allowed(0, "tail") is None
    direct.check(6)
    with pytest.raises(ValueError, match=r"id outside \[0, 4\)"):
        direct.check(4)
    with pytest.raises(ValueError, match=r"heads\[1\] is empty"):
        TypeConstraints(heads={1: []})
    with pytest.raises(TypeError, match="heads must map relation ids"):
        TypeConstraints(heads=[1, 2])  # type: ignore[arg-type]


def test_bad_constraints_are_refused() -> None:
    with pytest.raises(ValueError, match=r"tails\[0\] is empty"):
        TypeConstraints.from_mappings(tails={0: []})
    with pytest.raises(TypeError, match="integer entity ids"):
        TypeConstraints.from_mappings(heads={0: [0.5]})
    with pytest.raises(ValueError, match=r"type_constraints tails\[0\] holds an id outside \[0, 6\)"):
        RankBasedEvaluator().evaluate(
            TableModel(quantised_table(0, 6, 1)), torch.tensor([[0, 0, 1]]),
            type_constraints=TypeConstraints.from_mappings(tails={0: [1, 9]}), use_tqdm=False,
        )  # fmt: skip
    with pytest.raises(TypeError, match="type_constraints must be a kgeval.TypeConstraints"):
        RankBasedEvaluator().evaluate(
            TableModel(quantised_table(0, 6, 1)), torch.tensor([[0, 0, 1]]), type_constraints={0: [1]}, use_tqdm=False
        )
