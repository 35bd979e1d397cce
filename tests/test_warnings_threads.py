"""An evaluation in a background thread leaves the main thread's warning filters and recorders alone.

kgeval used ``warnings.catch_warnings()`` + ``simplefilter("ignore", UndefinedMetricWarning)`` around the null-model
table (every evaluation), the weighted null model (macro metrics) and the check of a results document against its
records: ``catch_warnings`` swaps the process-wide ``warnings.filters`` and ``showwarning`` for the block and puts
back what it saved, so a filter the main thread added meanwhile was dropped and the main thread's own
``catch_warnings(record=True)`` missed warnings. Now those warnings are never issued in that thread's context
(:func:`kgeval.exceptions.quieted`), and nothing process-wide changes."""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from kgeval import RankBasedEvaluator
from kgeval.exceptions import UndefinedMetricWarning, is_quieted, quieted
from kgeval.metrics.registry import null_model_table, summarize
from kgeval.metrics.weighted import WeightedRanks, weighted_null_model
from kgeval.results import RankBasedMetricResults
from tests.helpers.graphs import random_graph

GRAPH = random_graph(3, num_entities=12, num_relations=2, num_triples=10, num_filter=10)
#: how long the main thread races the background evaluations
SECONDS = 3.0


def evaluate() -> RankBasedMetricResults:
    from kgeval.models import DistMult

    model = DistMult(12, 2, dim=4, seed=0)
    return RankBasedEvaluator().evaluate(
        model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False
    )


def kgeval_paths() -> list[Callable[[], object]]:
    """Each evaluation-path call that quieted UndefinedMetricWarning with catch_warnings: an evaluation (its
    null-model table), the null-model table of no ranks, the weighted null model of no ranks, and reading a results
    document with records (checked against them)."""
    document = evaluate().to_json()
    empty = summarize([], [], ks=(1, 10))

    weighted = WeightedRanks(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0), (1, 10))
    return [
        evaluate,
        lambda: null_model_table(empty, (1, 10)),
        lambda: weighted_null_model(weighted),
        lambda: RankBasedMetricResults.from_json(document),
    ]


@pytest.fixture
def background() -> Iterator[threading.Event]:
    """A thread running :func:`kgeval_paths` in a loop until the test ends; the filters restored after."""
    saved = warnings.filters[:]
    calls = kgeval_paths()
    stop, errors = threading.Event(), []

    def loop() -> None:
        try:
            while not stop.is_set():
                for call in calls:
                    call()
        except BaseException as error:  # re-raised in the main thread
            errors.append(error)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join(timeout=60)
        warnings.filters[:] = saved
        warnings._filters_mutated()  # type: ignore[attr-defined]
    assert not errors, errors


def test_no_filter_the_main_thread_adds_is_lost(background: threading.Event) -> None:
    """Filters added while evaluations run in another thread are all there afterwards (before: some were dropped
    whenever a background ``catch_warnings`` block ended after they were added)."""
    added = []
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        marker = f"kgeval-thread-test-{len(added)}"
        warnings.filterwarnings("ignore", message=marker)
        added.append(marker)
        time.sleep(0.0005)
    background.set()
    time.sleep(0.2)
    present = {entry[1].pattern for entry in warnings.filters if entry[1] is not None}
    lost = [marker for marker in added if marker not in present]
    assert not lost, f"{len(lost)} of {len(added)} filters lost"


def test_no_warning_the_main_thread_records_is_missed(background: threading.Event) -> None:
    """``catch_warnings(record=True)`` in the main thread records each of its own warnings (before: some missed
    while a background ``catch_warnings`` block swapped the process's ``showwarning``)."""
    missed = tries = 0
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        message = f"kgeval-record-test-{tries}"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            time.sleep(0.0005)
            warnings.warn(message, UserWarning, stacklevel=1)
        tries += 1
        missed += not any(str(warning.message) == message for warning in caught)
    assert missed == 0, f"{missed} of {tries} warnings missed"


def test_quieted_is_per_thread_and_nested() -> None:
    """:func:`quieted` covers the block in its own thread only; nested blocks add categories and give them back."""
    seen: list[bool] = []
    with quieted(UndefinedMetricWarning):
        assert is_quieted(UndefinedMetricWarning) and not is_quieted(UserWarning)
        thread = threading.Thread(target=lambda: seen.append(is_quieted(UndefinedMetricWarning)))
        thread.start()
        thread.join()
        with quieted(DeprecationWarning):
            assert is_quieted(DeprecationWarning) and is_quieted(UndefinedMetricWarning)
        assert not is_quieted(DeprecationWarning)
    assert seen == [False] and not is_quieted(UndefinedMetricWarning)


def test_an_undefined_metric_still_warns_outside_the_quieted_blocks() -> None:
    """The metric's own value still warns once (only the second warning, from its null model, is not issued)."""
    from kgeval.metrics.plain import arithmetic_mean_rank

    with pytest.warns(UndefinedMetricWarning, match="undefined here"):
        arithmetic_mean_rank(summarize([], [], ks=(1,)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UndefinedMetricWarning)
        null_model_table(summarize([], [], ks=(1,)), (1,))
