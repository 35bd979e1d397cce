"""Random per-task rank records (the columns of RankBasedMetricResults.records) and popularity triples."""

from __future__ import annotations

import numpy as np

__all__ = ["random_popularity", "random_records"]


def random_records(seed: int, n: int = 60, num_entities: int = 12, num_relations: int = 5) -> dict[str, np.ndarray]:
    """Records of n triples (with repeats) whose head and tail tasks have random tie-heavy ranks, rows shuffled."""
    rng = np.random.default_rng(seed)
    triples = rng.integers(0, [num_entities, num_relations, num_entities], size=(n, 3))
    triples[n // 2 :] = triples[: n - n // 2] if seed % 2 else triples[n // 2 :]  # duplicates on odd seeds
    optimistic = rng.integers(1, 15, size=2 * n)
    pessimistic = optimistic + rng.integers(0, 4, size=2 * n)
    records = {
        "head": np.tile(triples[:, 0], 2),
        "relation": np.tile(triples[:, 1], 2),
        "tail": np.tile(triples[:, 2], 2),
        "side": np.repeat(np.array([0, 1], dtype=np.int8), n),
        "optimistic": optimistic,
        "pessimistic": pessimistic,
        "num_candidates": pessimistic + rng.integers(0, 5, size=2 * n),
        "task_index": np.tile(np.arange(n), 2),
    }
    order = rng.permutation(2 * n)
    return {name: column[order] for name, column in records.items()}


def random_popularity(seed: int, records: dict[str, np.ndarray], extra: int = 200) -> np.ndarray:
    """Reference triples covering every entity and relation of the records, plus random ones (skewed counts)."""
    rng = np.random.default_rng(seed + 1000)
    covering = np.column_stack([records["head"], records["relation"], records["tail"]])
    skewed = rng.zipf(1.6, size=(extra, 3)) - 1
    skewed[:, 1] %= records["relation"].max() + 1
    skewed[:, [0, 2]] %= max(records["head"].max(), records["tail"].max()) + 1
    return np.concatenate([covering, skewed])
