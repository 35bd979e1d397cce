"""The filter index is found again by the content of the known triples (kgeval._engine.filter_index.
content_fingerprint): an evaluation called again with the same triples builds no index and copies nothing, and any
change of content -- however it was written -- is seen at the next call.

Ranks are compared with the brute-force reference over the filter as it is at each call, so a stale index would
show as a wrong rank. Writes that bypass torch's version counter (through numpy, through another view of the
storage, a swapped ``.data``) are the ones a cache keyed by identity would have missed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval._engine import filter_index
from kgeval._engine.filter_index import content_fingerprint
from tests.helpers.graphs import TableModel, quantised_table, random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

E, R = 15, 3
GRAPH = random_graph(70, num_entities=E, num_relations=R, num_triples=30, num_filter=80)
TABLE = quantised_table(71, E, R, levels=4)
KNOWN = torch.cat(GRAPH.filter_triples)


class Builds:
    """Counts the filter indices built."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = filter_index.FilterIndex.__init__

        def counted(index, *args, **kwargs):
            self.count += 1
            original(index, *args, **kwargs)

        monkeypatch.setattr(filter_index.FilterIndex, "__init__", counted)


def evaluate(evaluator: RankBasedEvaluator, known: torch.Tensor):
    return evaluator.evaluate(TableModel(TABLE), GRAPH.triples, additional_filter_triples=[known], use_tqdm=False)


def test_a_second_evaluation_with_the_same_triples_builds_no_index(monkeypatch) -> None:
    builds = Builds(monkeypatch)
    evaluator, known = RankBasedEvaluator(), KNOWN.clone()
    expected = reference_ranks(TABLE, GRAPH.triples, [known.clone()])
    assert_same_ranks(evaluate(evaluator, known).records, expected)
    assert builds.count == 1
    assert_same_ranks(evaluate(evaluator, known).records, expected)
    assert_same_ranks(evaluate(evaluator, known.clone()).records, expected)  # another tensor, the same content
    assert builds.count == 1


def _in_place(known: torch.Tensor) -> None:
    known[:10] = GRAPH.triples[:10].flip(1)


def _through_numpy(known: torch.Tensor) -> None:
    known.numpy()[:10] = GRAPH.triples[:10].flip(1).numpy()  # no version bump


def _through_the_storage(known: torch.Tensor) -> None:
    alias = torch.empty(0, dtype=known.dtype).set_(known.untyped_storage(), 0, known.shape, known.stride())
    with torch.no_grad():
        alias.data[:10] = GRAPH.triples[:10].flip(1)  # another tensor's .data: the known tensor's version stays


def _swapped_data(known: torch.Tensor) -> None:
    replacement = known.clone()
    replacement[:10] = GRAPH.triples[:10].flip(1)
    known.data = replacement


@pytest.mark.parametrize("write", [_in_place, _through_numpy, _through_the_storage, _swapped_data],
                         ids=["in place", "through numpy", "through another view", "swapped .data"])  # fmt: skip
def test_every_kind_of_write_is_seen_at_the_next_evaluation(write: Callable[[torch.Tensor], None]) -> None:
    evaluator, known = RankBasedEvaluator(), KNOWN.clone()
    evaluate(evaluator, known)
    version = known._version
    write(known)
    assert not torch.equal(known, KNOWN)
    assert_same_ranks(evaluate(evaluator, known).records, reference_ranks(TABLE, GRAPH.triples, [known.clone()]))
    if write is not _in_place:
        assert known._version == version  # a write a cache keyed by the version counter would have missed


def test_an_id_written_out_of_range_is_named_at_the_next_evaluation() -> None:
    evaluator, known = RankBasedEvaluator(), KNOWN.clone()
    evaluate(evaluator, known)
    known.numpy()[3, 2] = E
    with pytest.raises(ValueError, match=r"additional_filter_triples\[0\] row 3 = .* has an id out of range"):
        evaluate(evaluator, known)


def test_the_fingerprint_tells_contents_apart_and_only_contents() -> None:
    base = torch.arange(3 * 2_000_003).reshape(-1, 3) % 1000  # more than one chunk of weights
    same = content_fingerprint([base]) == content_fingerprint([base.clone()])
    assert same and content_fingerprint([base]) == content_fingerprint([base.T.contiguous().T])  # not the layout
    changes = {
        "one id": lambda t: t.index_put_((torch.tensor([1_999_999]), torch.tensor([1])), torch.tensor(7)),
        "two rows swapped": lambda t: t.copy_(t[torch.tensor([1, 0, *range(2, len(t))])]),
        "two chunks' values swapped": lambda t: t.view(-1).index_put_(
            (torch.tensor([5, 1_048_581]),), t.view(-1)[[1_048_581, 5]]
        ),
    }
    for name, change in changes.items():
        changed = base.clone()
        change(changed)
        assert not torch.equal(changed, base), name
        assert content_fingerprint([changed]) != content_fingerprint([base]), name
    assert content_fingerprint([base[:-1]]) != content_fingerprint([base])  # shape
    assert content_fingerprint([base, base]) != content_fingerprint([base])
