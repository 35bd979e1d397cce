"""kgeval._engine.threads: an evaluation runs on the cores other processes leave idle, and gives the caller its
thread count back -- with the machine's load made up, so that no test depends on the machine that runs it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval import _machine as machine
from kgeval._engine import threads
from tests.helpers.graphs import TableModel, quantised_table, random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks


@pytest.fixture
def four_threads():
    """The caller's torch thread count set to 4 for the test, and its own count back after."""
    before = torch.get_num_threads()
    torch.set_num_threads(4)
    yield 4
    torch.set_num_threads(before)


@pytest.mark.parametrize(("others", "cores", "expected"), [
    (None, 4, 4),  # the load unknown (not Linux): the caller's count
    (0.0, 4, 4),  # idle cores
    (1.0, 4, 3), (2.4, 4, 2), (2.5, 4, 2), (2.6, 4, 1),  # a half-busy core still counts as idle
    (3.0, 4, 1), (9.0, 4, 1),  # at least one
    (0.0, 16, 4),  # never more than the caller asked for
])  # fmt: skip
def test_the_threads_are_the_idle_cores_never_more_than_asked(others, cores, expected) -> None:
    assert threads.evaluation_threads(4, others, cores) == expected


def test_the_callers_count_is_restored_after_the_block_and_after_an_error(four_threads) -> None:
    with threads.threads_for_the_machine(lambda: 3.0, lambda: 4) as chosen:
        assert chosen == torch.get_num_threads() == 1
    assert torch.get_num_threads() == 4
    with pytest.raises(RuntimeError, match="a failing model"), threads.threads_for_the_machine(lambda: 3.0, lambda: 4):
        raise RuntimeError("a failing model")
    assert torch.get_num_threads() == 4


class ThreadsSeen(TableModel):
    """Records torch's thread count at every scoring call; fails on request."""

    def __init__(self, table: torch.Tensor, fail: bool = False) -> None:
        super().__init__(table)
        self.seen: list[int] = []
        self.fail = fail

    def _record(self, method: str, batch: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.seen.append(torch.get_num_threads())
        if self.fail:
            raise RuntimeError("a failing model")
        return super()._record(method, batch, scores)


@pytest.mark.parametrize(("others", "expected"), [(0.0, 4), (1.0, 3), (5.0, 1), (None, 4)])
def test_an_evaluation_runs_on_the_idle_cores_and_restores_the_count(monkeypatch, four_threads, others, expected):
    monkeypatch.setattr(machine, "others_running", lambda: others)
    monkeypatch.setattr(machine, "usable_cores", lambda: 4)
    graph = random_graph(5, num_entities=20, num_relations=2, num_triples=30, num_filter=40)
    table = quantised_table(5, 20, 2, levels=3)
    model = ThreadsSeen(table)
    results = RankBasedEvaluator().evaluate(model, graph.triples, additional_filter_triples=graph.filter_triples,
                                            use_tqdm=False)  # fmt: skip
    assert model.seen and set(model.seen) == {expected}
    assert torch.get_num_threads() == 4
    assert_same_ranks(results.records, reference_ranks(table, graph.triples, graph.filter_triples))
    failing = ThreadsSeen(table, fail=True)
    with pytest.raises(RuntimeError, match="a failing model"):
        RankBasedEvaluator().evaluate(failing, graph.triples, use_tqdm=False)
    assert failing.seen == [expected]
    assert torch.get_num_threads() == 4


# -- the machine's load, from made-up /proc files -------------------------------------------------------------------
def test_procs_running_is_read_from_proc_stat(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 2 3 4\ncpu0 1 2 3 4\nctxt 99\nprocs_running 7\nprocs_blocked 0\n")
    assert machine.procs_running(stat) == 7
    stat.write_text("cpu  1 2 3 4\n")
    assert machine.procs_running(stat) is None
    assert machine.procs_running(tmp_path / "missing") is None


def test_own_running_threads_counts_state_r(tmp_path: Path) -> None:
    for tid, state, name in ((1, "R", "python"), (2, "S", "python"), (3, "R", "a (b) c"), (4, "D", "pt_main")):
        (tmp_path / str(tid)).mkdir()
        (tmp_path / str(tid) / "stat").write_text(f"{tid} ({name}) {state} 1 2 3\n")
    assert machine.own_running_threads(tmp_path) == 2
    assert machine.own_running_threads(tmp_path / "missing") == 1


def test_others_running_subtracts_this_process_and_takes_the_median(monkeypatch) -> None:
    totals = iter([5, 9, 6])
    monkeypatch.setattr(machine, "procs_running", lambda: next(totals))
    monkeypatch.setattr(machine, "own_running_threads", lambda: 2)
    monkeypatch.setattr(machine, "usable_cores", lambda: 2)
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 2)
    assert machine.others_running(samples=3, pause=0.0) == 4  # median of 3, 7, 4
    monkeypatch.setattr(machine, "procs_running", lambda: None)
    assert machine.others_running(samples=3, pause=0.0) is None
