"""The filter index read as the evaluation reads it, for the tests of the index itself."""

from __future__ import annotations

import torch

from kgeval._engine.filter_index import FilterIndex


def excluded(index: FilterIndex, target: str, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The (row, entity) pairs of known answers, read as the evaluation reads them: each query's CSR run from
    ``SideIndex.lookup``, its entities from ``values``."""
    side = index.sides[target]
    starts, lengths = side.lookup(queries[:, 0], queries[:, 1])
    rows, entities = [], []
    for row, (start, length) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=True)):
        rows += [row] * length
        entities += side.values[start : start + length].tolist()
    return torch.tensor(rows, dtype=torch.long), torch.tensor(entities, dtype=torch.long)
