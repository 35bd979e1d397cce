"""What a person reads: the headline block and the full table (kgeval._display), checked against get_metric."""

from __future__ import annotations

import pytest

from kgeval import RankBasedEvaluator
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from tests.helpers.graphs import TableModel, quantised_table, random_graph


@pytest.fixture(scope="module")
def umls():
    data = load_shipped_dataset("umls")
    model = DistMult(data.num_entities, data.num_relations, dim=16, seed=0)
    return RankBasedEvaluator(ks=(1, 3, 10)).evaluate(
        model, data.test, additional_filter_triples=[data.train, data.valid], use_tqdm=False
    )


@pytest.fixture(scope="module")
def ties():
    graph = random_graph(0, 8, 2, 10, 5)
    return RankBasedEvaluator(ks=(1, 3)).evaluate(TableModel(quantised_table(0, 8, 2)), graph.triples, use_tqdm=False)


def test_the_headline_holds_the_papers_numbers_in_80_columns(umls) -> None:
    lines = umls.summary().splitlines()
    assert lines[0] == "1,322 ranking tasks (661 head, 661 tail), realistic ranks"
    assert lines[1].split() == ["both", "head", "tail"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert list(rows) == ["MRR", "Hits@1", "Hits@3", "Hits@10", "MR"]
    for label, key in [("MRR", "mrr"), ("Hits@1", "hits@1"), ("Hits@10", "hits@10")]:
        assert rows[label] == [f"{umls.get_metric(f'{side}.{key}'):.4f}" for side in ("both", "head", "tail")]
    assert rows["MR"] == [f"{umls.get_metric(f'{side}.mr'):.2f}" for side in ("both", "head", "tail")]
    assert max(len(line) for line in str(umls).splitlines()) <= 80


def test_rank_type_columns_appear_only_with_ties(umls, ties) -> None:
    assert "optimistic" not in umls.summary()  # random float embeddings: no ties
    header = ties.summary().splitlines()[1].split()
    assert header == ["both", "head", "tail", "optimistic", "pessimistic"]
    mrr = ties.summary().splitlines()[2].split()
    assert mrr[4:] == [f"{ties.get_metric(f'both.{t}.mrr'):.4f}" for t in ("optimistic", "pessimistic")]
    assert max(len(line) for line in str(ties).splitlines()) <= 80


def test_the_full_table(umls, ties) -> None:
    text = umls.full_table()
    count = next(line for line in text.splitlines() if line.startswith("count"))
    assert count.split()[1:] == ["661", "661", "1,322"]  # integers as integers
    assert "-0.0000" not in text
    assert umls.table().shape == (len({key for _s, _r, key in umls.data}), 9)  # every side x rank type
    assert list(umls.table("auto").columns) == [("head", "realistic"), ("tail", "realistic"), ("both", "realistic")]
    assert ("both", "optimistic") in ties.table("auto").columns
    with pytest.raises(ValueError, match="rank_types must be"):
        umls.table("best")


def test_a_note_explains_equal_hits_at_k_and_only_then() -> None:
    from kgeval._display import all_or_nothing_note

    note = all_or_nothing_note("recurrency, static", 0.31, {1: 0.3012, 3: 0.3012, 10: 0.30122})
    assert note is not None and note.startswith("(recurrency, static: equal Hits@k -- ") and "below rank 10" in note
    both = all_or_nothing_note("model", 0.3012, {1: 0.3012, 10: 0.3012})
    assert both is not None and "equal MRR and Hits@k" in both
    rule = all_or_nothing_note("the rule-only baseline", 0.3012, {10: 0.30121})  # one k: MRR against it
    assert rule is not None and rule.startswith("(the rule-only baseline: equal MRR and Hits@10 -- ")
    assert all_or_nothing_note("the rule-only baseline", 0.25, {10: 0.30}) is None
    assert all_or_nothing_note("model", 0.31, {1: 0.25, 3: 0.33, 10: 0.41}) is None  # hits grow with k
    assert all_or_nothing_note("model", 0.0, {1: 0.0, 10: 0.0}) is None  # nothing found: nothing to explain
    assert all_or_nothing_note("model", float("nan"), {1: 0.2, 10: 0.2}) is None
    assert all_or_nothing_note("model", 0.2, {1: 0.2, 10: float("nan")}) is None


def test_a_note_explains_a_test_mrr_above_validation_and_only_then() -> None:
    from kgeval._display import filter_order_note

    note = filter_order_note(0.52, 0.55)
    assert note is not None and "no leak" in note and "also has the validation triples' answers filtered out" in note
    assert filter_order_note(0.55, 0.52) is None
    assert filter_order_note(0.55, 0.55) is None
