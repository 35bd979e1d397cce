"""An evaluation called again with the same triples checks and hashes none of them (kgeval._memo), and still sees
every change made through torch: a write in place, a new tensor, an inference tensor.

Ranks are compared with the brute-force reference over the filter as it is at each call, so a stale check or a
stale filter index would show as a wrong rank.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from kgeval import RankBasedEvaluator, _checks
from kgeval._engine import filter_index
from kgeval._memo import TensorMemo
from tests.helpers.graphs import TableModel, quantised_table, random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

E, R = 15, 3
GRAPH = random_graph(70, num_entities=E, num_relations=R, num_triples=30, num_filter=80)
TABLE = quantised_table(71, E, R, levels=4)
KNOWN = torch.cat(GRAPH.filter_triples)


class Calls:
    """Counts the checks and digests of triples that the evaluations make."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.checks = self.digests = 0
        check, digest = _checks._check_id_ranges, filter_index._tensor_digest

        def counted_check(*args):
            self.checks += 1
            return check(*args)

        def counted_digest(*args):
            self.digests += 1
            return digest(*args)

        monkeypatch.setattr(_checks, "_check_id_ranges", counted_check)
        monkeypatch.setattr(filter_index, "_tensor_digest", counted_digest)

    def take(self) -> tuple[int, int]:
        taken = (self.checks, self.digests)
        self.checks = self.digests = 0
        return taken


def evaluate(evaluator: RankBasedEvaluator, triples: torch.Tensor, filters: list[torch.Tensor]):
    return evaluator.evaluate(TableModel(TABLE), triples, additional_filter_triples=filters, use_tqdm=False)


def expected(triples: torch.Tensor, filters: list[torch.Tensor]):
    return reference_ranks(TABLE, triples, [f.clone() for f in filters])


def test_a_second_evaluation_checks_and_hashes_no_triples(monkeypatch) -> None:
    calls = Calls(monkeypatch)
    triples, filters = GRAPH.triples.clone(), [KNOWN[:40].clone(), KNOWN[40:].clone()]
    evaluator = RankBasedEvaluator()
    first = evaluate(evaluator, triples, filters)
    assert calls.take() == (3, 3)  # the evaluated triples and both filter tensors
    second = evaluate(evaluator, triples, filters)
    assert calls.take() == (0, 0)
    assert_same_ranks(first.records, expected(triples, filters))
    assert_same_ranks(second.records, expected(triples, filters))


def test_a_write_in_place_is_seen_at_the_next_evaluation(monkeypatch) -> None:
    calls = Calls(monkeypatch)
    triples, known = GRAPH.triples.clone(), KNOWN.clone()
    evaluator = RankBasedEvaluator()
    evaluate(evaluator, triples, [known])
    calls.take()
    known[:10] = triples[:10].flip(1)  # other known triples: another filter
    assert_same_ranks(evaluate(evaluator, triples, [known]).records, expected(triples, [known]))
    assert calls.take() == (1, 1)  # the changed tensor only
    known[0, 0] = E  # an id out of range, written in place: the check runs again and names it
    with pytest.raises(ValueError, match=r"additional_filter_triples\[0\] row 0 = .* has an id out of range"):
        evaluate(evaluator, triples, [known])


def test_a_new_tensor_with_the_same_content_is_hashed_and_finds_the_same_index(monkeypatch) -> None:
    calls = Calls(monkeypatch)
    evaluator = RankBasedEvaluator()
    evaluate(evaluator, GRAPH.triples, [KNOWN])
    cache = evaluator._state.filter_indices
    misses = cache.misses
    results = evaluate(evaluator, GRAPH.triples.clone(), [KNOWN.clone()])
    assert calls.take()[1] == 2 + 2  # both evaluations hashed their (new) tensors
    assert cache.misses == misses  # equal content: the index built by the first is used
    assert_same_ranks(results.records, expected(GRAPH.triples, [KNOWN]))


def test_inference_tensors_and_other_dtypes_are_checked_every_time(monkeypatch) -> None:
    calls = Calls(monkeypatch)
    with torch.inference_mode():
        known = KNOWN.clone()  # an inference tensor: no version counter to trust
    narrow = GRAPH.triples.int()  # widened to int64 at each call: a new tensor each time
    evaluator = RankBasedEvaluator()
    for _ in range(2):
        assert_same_ranks(evaluate(evaluator, narrow, [known]).records, expected(GRAPH.triples, [known]))
        assert calls.take() == (2, 2)


def test_the_memo_holds_no_tensor_alive() -> None:
    memo = TensorMemo()
    tensor = torch.arange(6).reshape(2, 3)
    assert memo.get_or_compute(tensor, "key", lambda: "fact") == "fact"
    assert memo.get_or_compute(tensor, "key", lambda: "again") == "fact"
    reference = weakref.ref(tensor)
    del tensor
    gc.collect()
    assert reference() is None
    replacement = torch.arange(6).reshape(2, 3)  # may take the dead tensor's id: a new fact all the same
    assert memo.get_or_compute(replacement, "key", lambda: "new") == "new"


def test_a_computation_that_raises_records_nothing() -> None:
    memo = TensorMemo()
    tensor = torch.zeros(3)

    def fails() -> str:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        memo.get_or_compute(tensor, "key", fails)
    assert memo.get_or_compute(tensor, "key", lambda: "good") == "good"
