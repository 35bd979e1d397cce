"""Concurrent evaluations of one model from several threads: every score call sees eval mode, the model ends in the
mode it started in, and each thread gets the single-threaded results."""

from __future__ import annotations

import threading
import time

import torch

from kgeval import RankBasedEvaluator
from tests.helpers.graphs import TableModel, quantised_table, random_graph
from tests.support.invariance import assert_results_equal


class SlowRecordingModel(TableModel):
    """Records ``self.training`` at every score call and sleeps a little, so evaluations overlap."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__(table)
        self.modes_seen: list[bool] = []

    def score_t(self, hr_batch, tails=None):
        self.modes_seen.append(self.training)
        time.sleep(0.002)
        return super().score_t(hr_batch, tails)

    def score_h(self, rt_batch, heads=None):
        self.modes_seen.append(self.training)
        time.sleep(0.002)
        return super().score_h(rt_batch, heads)


def test_concurrent_evaluations_of_one_model_never_see_training_mode() -> None:
    graph = random_graph(0, num_entities=10, num_relations=2, num_triples=20, num_filter=10)
    model = SlowRecordingModel(quantised_table(0, 10, 2))
    evaluator = RankBasedEvaluator(batch_size=2, slice_size=3)

    def run():
        return evaluator.evaluate(model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False)

    expected = run()
    model.modes_seen.clear()
    model.train()
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(run())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(results) == 4
    assert model.training is True  # restored to the mode it started in
    assert model.modes_seen and not any(model.modes_seen)  # no score call ran in training mode
    for result in results:
        assert_results_equal(result, expected)
