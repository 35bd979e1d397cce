"""The filter index read as the evaluation reads it, for the tests of the index itself."""

from __future__ import annotations

import torch

from kgeval._engine.filter_index import FilterIndex


def excluded(index: FilterIndex, target: str, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The (row, entity) pairs of known answers, read as evaluation, predict_top_k and the sampler read them:
    ``SideIndex.known_pairs`` (each query's CSR run looked up, then expanded)."""
    return index.sides[target].known_pairs(queries[:, 0], queries[:, 1])
