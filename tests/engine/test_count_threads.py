"""How many threads count each GEMM block (kgeval._engine.kernels.count_threads): measured in the loop, kept per PyTorch
thread count; the counts never depend on it.

The choice's logic is tested with given timings (no clock): which choice each call gets while measuring, which is
kept, when it is measured again. The engine is tested with each choice forced: ranks equal to the brute-force
reference either way, and the calls were made with the forced number of threads.
"""

from __future__ import annotations

import pytest
import torch

from kgeval._engine.kernels import block_counting, count_threads
from kgeval._engine.kernels.count_threads import RUN, RUNS, CountThreads
from kgeval.models import DistMult
from tests.engine.test_block_counting import Spy, assert_reference, evaluate, integer_model, small_blocks  # noqa: F401
from tests.helpers.graphs import random_graph

pytest.importorskip("numba")


def measure(choice: CountThreads, available: int, seconds: dict[int, float], calls: int) -> list[int]:
    """Make ``calls`` calls, each timed at ``seconds[threads]`` for 1,000 scores; the threads of each call."""
    made = []
    for _ in range(calls):
        threads = choice.next(available)
        made.append(threads)
        choice.record(available, threads, seconds[threads], 1000)
    return made


def test_the_choices_alternate_in_runs_then_the_faster_is_kept() -> None:
    choice = CountThreads()
    made = measure(choice, 4, {4: 2.0, 1: 1.0}, 2 * RUN * RUNS)
    assert made == ([4] * RUN + [1] * RUN) * RUNS  # whole runs of each, in turn
    assert choice.chosen == {4: 1}
    assert measure(choice, 4, {4: 2.0, 1: 1.0}, 5) == [1] * 5  # kept: nothing more is timed
    assert len(choice.timings[4][1]) == (RUN - 1) * RUNS  # each run's first call untimed


def test_every_thread_is_kept_when_it_is_faster_or_as_fast() -> None:
    faster, tied = CountThreads(), CountThreads()
    measure(faster, 2, {2: 1.0, 1: 3.0}, 2 * RUN * RUNS)
    measure(tied, 2, {2: 1.0, 1: 1.0}, 2 * RUN * RUNS)
    assert faster.chosen == {2: 2} and tied.chosen == {2: 2}


def test_the_median_decides_not_one_slow_call() -> None:
    choice = CountThreads()
    for call in range(2 * RUN * RUNS):
        threads = choice.next(2)
        seconds = 1.0 if threads == 2 else 1.5
        if threads == 2 and call == 1:
            seconds = 1000.0  # a page fault, a neighbour's burst
        choice.record(2, threads, seconds, 1000)
    assert choice.chosen == {2: 2}


def test_another_torch_thread_count_is_measured_again_and_one_thread_never_is() -> None:
    choice = CountThreads()
    measure(choice, 2, {2: 2.0, 1: 1.0}, 2 * RUN * RUNS)
    assert choice.next(8) == 8 and 8 not in choice.chosen  # torch.set_num_threads(8): a new measurement
    measure(choice, 8, {8: 1.0, 1: 2.0}, 2 * RUN * RUNS)
    assert choice.chosen == {2: 1, 8: 8}
    assert measure(choice, 1, {1: 1.0}, 3) == [1, 1, 1] and 1 not in choice.timings


@pytest.fixture
def own_thread_count():
    """PyTorch's thread count given back after the test (which makes PyTorch report another)."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.usefixtures("own_thread_count")
@pytest.mark.parametrize("forced", ["every thread", "one thread"])
def test_the_counts_do_not_depend_on_the_choice(forced: str, small_blocks, monkeypatch) -> None:  # noqa: F811
    """With each choice kept, every batch is counted block by block with that many threads, and the ranks equal the
    brute-force reference."""
    import numba

    # two threads where numba may run two, whatever PyTorch's count in this process (one per xdist worker on 2 cores)
    available = max(1, min(numba.config.NUMBA_NUM_THREADS, 2))
    monkeypatch.setattr(torch, "get_num_threads", lambda: available)
    choice = CountThreads(chosen={available: available if forced == "every thread" else 1})
    monkeypatch.setattr(count_threads, "_CHOICE", choice)
    seen: list[int] = []
    original = block_counting.numba_threads

    def spy(threads: int):
        seen.append(threads)
        return original(threads)

    monkeypatch.setattr(block_counting, "numba_threads", spy)
    graph = random_graph(20, num_entities=70, num_relations=3, num_triples=60, num_filter=200)
    model = integer_model(DistMult(70, 3, dim=4), seed=21)
    counted = Spy(monkeypatch)
    results, triples = evaluate(model, graph, "both", 7)
    assert counted.results and all(counted.results)
    assert seen and set(seen) == {choice.chosen[available]}
    assert_reference(results, model, triples, graph, "both")
