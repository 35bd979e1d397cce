"""Exact for model forms a training loop hands over as it has them (docs/models.md, "Contexts and model forms").

- a scoring method that writes a parameter through ``.data`` (no version counter sees it).

Every expectation is the brute-force reference over the model's own scores (``score_t`` / ``score_h``), computed
outside kgeval.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from kgeval.exceptions import ModelChangedWarning
from kgeval.models import DistMult, TransE
from tests.helpers.graphs import random_graph
from tests.integrations.test_contexts import evaluate

E, R, DIM = 200, 4, 16
GRAPH = random_graph(43, num_entities=E, num_relations=R, num_triples=300, num_filter=300)


# -- 4. writes through .data -------------------------------------------------------------------------------------


class RenormalisesRows(TransE):
    """TransE whose ``score_t`` renormalises the rows it looks up through ``.data`` (a training-time constraint
    left in the scoring method): no version counter sees the write."""

    def score_t(self, hr_batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        rows = hr_batch[:, 0]
        table = self.entity_embeddings.weight
        table.data[rows] = torch.nn.functional.normalize(table.data[rows], dim=-1)
        return super().score_t(hr_batch, tails)


def test_a_write_through_data_while_scoring_is_reported() -> None:
    """``param.data[rows] = ...`` bumps no version counter; the content checksum sees it."""
    model = RenormalisesRows(E, R, dim=DIM, seed=0)
    with pytest.warns(ModelChangedWarning, match=r"RenormalisesRows changed its own state.*entity_embeddings\.weight"):
        evaluate(model, GRAPH.triples, GRAPH.filter_triples, fast_path=False)


def test_a_write_through_data_mul_is_reported() -> None:
    """``param.data.mul_(...)``: also invisible to the version counter."""

    class Scales(DistMult):
        def score_t(self, hr_batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
            self.relation_embeddings.weight.data.mul_(1.0 + 2.0**-20)
            return super().score_t(hr_batch, tails)

    with pytest.warns(ModelChangedWarning, match=r"relation_embeddings\.weight"):
        evaluate(Scales(E, R, dim=DIM, seed=0), GRAPH.triples, GRAPH.filter_triples, fast_path=False)


class WithBuffers(torch.nn.Module):
    """A model with parameters of several dtypes and shapes and buffers its scoring never changes (a BatchNorm's
    statistics in eval mode, an int64 counter, a bool mask, a 0-d scale)."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.entity = torch.nn.Parameter(torch.randn(E, DIM, generator=generator))
        self.relation = torch.nn.Parameter(torch.randn(R, DIM, generator=generator, dtype=torch.float64))
        self.norm = torch.nn.BatchNorm1d(DIM)
        self.register_buffer("mask", torch.rand(DIM, generator=generator) > 0.5)
        self.register_buffer("scale", torch.tensor(2.0))
        self.num_entities = E

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        query = self.norm(self.entity[hr[:, 0]] * self.relation[hr[:, 1]].float()) * self.mask * self.scale
        return query @ self.entity.T

    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        query = self.norm(self.relation[rt[:, 0]].float() * self.entity[rt[:, 1]]) * self.mask * self.scale
        return query @ self.entity.T


@pytest.mark.parametrize("fast_path", [True, False])
def test_an_unchanged_model_is_not_reported(fast_path: bool) -> None:
    """No false positive: kgeval's own models (fast path and methods) and a model with buffers that do not change,
    evaluated twice."""
    for model in (DistMult(E, R, dim=DIM, seed=0), TransE(E, R, dim=DIM, seed=0), WithBuffers().train()):
        with warnings.catch_warnings():
            warnings.simplefilter("error", ModelChangedWarning)
            evaluate(model, GRAPH.triples, GRAPH.filter_triples, fast_path=fast_path)
            evaluate(model, GRAPH.triples, GRAPH.filter_triples, fast_path=fast_path)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("elementwise", [False, True], ids=["cpu-mv", "elementwise"])
def test_the_checksum_sees_every_one_element_change(
    dtype: torch.dtype, elementwise: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The smallest change of any one element (one ulp, one unit, a flipped bool) changes the checksum; an equal
    copy does not. ``elementwise``: the products formed per block, as on devices without an integer
    matrix-vector product."""
    from kgeval import _model_state

    if elementwise:
        monkeypatch.setattr(_model_state, "_row_sums", lambda block, weights: (block * weights).sum(dim=1))
    generator = torch.Generator().manual_seed(0)
    table = (torch.randn(37, 5, generator=generator) * 100).to(dtype)
    before = _model_state.content_checksum(table)
    assert before is not None
    assert bool(_model_state.content_checksum(table.clone()) == before)
    for row, column in [(0, 0), (17, 3), (36, 4)]:
        changed = table.clone()
        if dtype.is_floating_point:
            changed[row, column] = torch.nextafter(changed[row, column], torch.tensor(1e9, dtype=dtype))
        elif dtype == torch.bool:
            changed[row, column] = ~changed[row, column]
        else:
            changed[row, column] += 1
        assert bool(_model_state.content_checksum(changed) != before)
