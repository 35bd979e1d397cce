"""Two models evaluated on the same random tie-heavy graph, for the tests of analysis.stats and resampling.

Model B scores like model A plus integer noise, so the two are correlated (as two real models are) yet differ.
Expected values come from the brute-force reference on the same tables, never from kgeval's metric code.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from kgeval import RankBasedEvaluator, RankBasedMetricResults
from tests.helpers.graphs import TableModel, quantised_table, random_graph
from tests.helpers.reference import reference_ranks

NUM_ENTITIES, NUM_RELATIONS = 14, 3


def two_models(seed: int = 0, num_triples: int = 30, boost_b: float = 0.0) -> dict[str, Any]:
    """Graph, the two score tables, their kgeval results and their reference ranks.

    ``boost_b`` is added to model B's score of every evaluation triple (B ranks the true answers higher).
    """
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, NUM_ENTITIES, NUM_RELATIONS, num_triples, 40, duplicate_fraction=0.1)
    table_a = quantised_table(rng, NUM_ENTITIES, NUM_RELATIONS, levels=5)
    noise = torch.from_numpy(rng.integers(-2, 3, size=table_a.shape)).to(table_a.dtype)
    table_b = table_a + noise
    h, r, t = graph.triples.unbind(1)
    table_b[h, r, t] += boost_b
    evaluator = RankBasedEvaluator(ks=(1, 3, 10))
    results = [
        evaluator.evaluate(
            TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
        )
        for table in (table_a, table_b)
    ]
    ranks = [reference_ranks(table, graph.triples, graph.filter_triples) for table in (table_a, table_b)]
    return {"graph": graph, "tables": (table_a, table_b), "results": results, "ranks": ranks}


def with_metric(results: RankBasedMetricResults, key: tuple[str, str, str], value: float) -> RankBasedMetricResults:
    """The same results, also reporting ``key`` (for metrics registered by a test only)."""
    data = dict(results.data)
    data.setdefault(key, value)
    return RankBasedMetricResults(data=data, ks=results.ks, records=results.records)
