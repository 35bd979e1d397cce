"""Exact for model forms a training loop hands over as it has them (docs/models.md, "Contexts and model forms").

- a table under the hook-based ``torch.nn.utils.weight_norm`` / ``spectral_norm`` after an optimiser step (its
  ``weight`` attribute is stale until the next lookup runs the hook): kgeval's models and a PyKEEN model;
- a scorer that is not a torch module holding its network in a list, a dict or a nested plain object;
- a model ``prepare()``-d by ``accelerate.Accelerator(mixed_precision="bf16")`` (its ``forward`` patched with an
  autocast wrapper on the instance);
- a scoring method that writes a parameter through ``.data`` (no version counter sees it).

Every expectation is the brute-force reference over the model's own scores (``score_t`` / ``score_h``), computed
outside kgeval.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from kgeval.exceptions import FastPathWarning, ModelChangedWarning, PrecisionWarning
from kgeval.models import DistMult, TransE
from tests.helpers.graphs import random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.integrations.test_contexts import differing_ranks, evaluate, expected_ranks

E, R, DIM = 200, 4, 16
#: entities far from both ends of the id range: the fast path's probe reads the first and last 32 candidates only
MIDDLE = (40, 160)
GRAPH = random_graph(43, num_entities=E, num_relations=R, num_triples=300, num_filter=300)


def middle_triples(count: int = 64, seed: int = 1) -> torch.Tensor:
    """(count, 3) random triples whose head and tail lie in :data:`MIDDLE`: a training step on them moves only rows
    the probe never reads."""
    generator = torch.Generator().manual_seed(seed)
    entities = torch.randint(*MIDDLE, (count, 2), generator=generator)
    relations = torch.randint(0, R, (count,), generator=generator)
    return torch.stack([entities[:, 0], relations, entities[:, 1]], dim=1)


def one_sgd_step(model: torch.nn.Module, score: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """One SGD step in training mode maximising ``score`` of :func:`middle_triples`; the model is left in eval mode
    with whatever its hooks left in the attributes they compute."""
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer.zero_grad()
    (-score(middle_triples()).sum()).backward()
    optimizer.step()
    model.eval()


def evaluate_then_reference(model: Any, **options: Any) -> tuple[Any, dict[str, dict[str, Any]]]:
    """kgeval's results (evaluated first, while the hooked attribute is stale; no FastPathWarning, which would blame
    the model), then the brute-force reference over the model's own ``score_t`` / ``score_h`` (whose lookups run
    the hooks first)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        results = evaluate(model, GRAPH.triples, GRAPH.filter_triples, **options)
    return results, expected_ranks(model, GRAPH.triples, GRAPH.filter_triples, num_entities=E, num_relations=R)


# -- 1. hook-based weight_norm / spectral_norm --------------------------------------------------------------------

HOOKS = {
    "weight_norm": lambda table: torch.nn.utils.weight_norm(table, dim=0),
    "spectral_norm": lambda table: torch.nn.utils.spectral_norm(table),
}


@pytest.mark.parametrize("hook", sorted(HOOKS))
@pytest.mark.parametrize("model_class", [DistMult, TransE], ids=["DistMult", "TransE"])
def test_a_hook_based_norm_on_the_entity_table_is_read_fresh(model_class: type, hook: str) -> None:
    """After an optimiser step the hooked ``weight`` is stale until the next lookup; the model's own ``score_t``
    looks its query up first (the hook runs), the fast path used to read the candidates before any lookup. Before,
    of the 1,200 optimistic and pessimistic ranks here, DistMult had 318 wrong under weight_norm and 258 under
    spectral_norm, TransE 572 under weight_norm, in silence; TransE under spectral_norm got a FastPathWarning
    blaming the model."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch deprecates the hook-based APIs
        model = model_class(E, R, dim=DIM, seed=0)
        HOOKS[hook](model.entity_embeddings)
    one_sgd_step(model, model.score_hrt)
    stale = model.entity_embeddings.weight
    results, expected = evaluate_then_reference(model)
    assert differing_ranks(results.records, expected) == 0
    assert_same_ranks(results.records, expected)
    # the control: the attribute was stale (the reference's lookups recomputed it), so the case could fail
    assert not torch.equal(stale, model.entity_embeddings.weight)


@pytest.mark.pykeen
def test_a_pykeen_model_with_weight_norm_on_its_entity_table_is_read_fresh() -> None:
    """The drop-in reads PyKEEN's candidate table as ``Embedding(indices=None)`` does: ``_embeddings.weight``,
    stale after a step until a lookup. Ranked as PyKEEN's own ``score_t`` / ``score_h`` rank (before: 576 of 1,200
    ranks differed, in silence)."""
    pykeen_models = pytest.importorskip("pykeen.models")
    from pykeen.triples import CoreTriplesFactory

    factory = CoreTriplesFactory.create(GRAPH.filter_triples[0], num_entities=E, num_relations=R)
    model = pykeen_models.TransE(triples_factory=factory, embedding_dim=DIM, random_seed=0)
    table = model.entity_representations[0]._embeddings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.nn.utils.weight_norm(table, dim=0)
    one_sgd_step(model, model.score_hrt)
    stale = table.weight
    results, expected = evaluate_then_reference(model)
    assert_same_ranks(results.records, expected)
    assert not torch.equal(stale, table.weight)


# -- 2. a non-module scorer holding its network in containers -----------------------------------------------------


class DropoutNet(torch.nn.Module):
    """A DistMult-like scorer with Dropout(0.5) on its queries: in training mode its scores are random."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.entity = torch.nn.Parameter(torch.randn(E, DIM, generator=generator))
        self.relation = torch.nn.Parameter(torch.randn(R, DIM, generator=generator))
        self.dropout = torch.nn.Dropout(0.5)

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.entity[hr[:, 0]] * self.relation[hr[:, 1]]) @ self.entity.T

    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.relation[rt[:, 0]] * self.entity[rt[:, 1]]) @ self.entity.T


class Parts:
    """A plain object holding a network deeper down."""

    def __init__(self, net: DropoutNet) -> None:
        self.inner = {"net": net}


class HoldsInContainer:
    """A scorer that is not a torch module; ``where`` says how it holds its network."""

    def __init__(self, where: str) -> None:
        self.net = DropoutNet().train()
        self.num_entities = E
        holders: dict[str, Any] = {
            "list": [self.net],
            "dict": {"encoder": self.net},
            "nested": Parts(self.net),
        }
        self.holder = holders[where]
        del self.net  # reachable only through the container

    @property
    def network(self) -> DropoutNet:
        holder = self.holder
        if isinstance(holder, list):
            return holder[0]
        if isinstance(holder, dict):
            return holder["encoder"]
        return holder.inner["net"]

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        return self.network.score_t(hr)

    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        return self.network.score_h(rt)


@pytest.mark.parametrize("where", ["list", "dict", "nested"])
def test_a_scorer_holding_its_network_in_a_container_is_scored_in_eval_mode(where: str) -> None:
    """Only modules held directly in the scorer's attributes were put in eval mode: with Dropout(0.5) left on, 291
    of 300 head ranks differed here, and two evaluations gave two MRRs. Now: the eval-mode brute force, twice the
    same, every flag restored after."""
    scorer = HoldsInContainer(where)
    net = scorer.network
    first = evaluate(scorer, GRAPH.triples, GRAPH.filter_triples)
    second = evaluate(scorer, GRAPH.triples, GRAPH.filter_triples)
    assert all(module.training for module in net.modules())
    net.eval()
    expected = expected_ranks(net, GRAPH.triples, GRAPH.filter_triples, num_entities=E, num_relations=R)
    assert_same_ranks(first.records, expected)
    assert_same_ranks(second.records, expected)


def test_a_frozen_submodule_of_a_network_in_a_container_stays_frozen() -> None:
    """Every flag comes back as it was: the network in training mode, its frozen dropout in eval mode."""
    scorer = HoldsInContainer("nested")
    scorer.network.dropout.eval()
    modes = [module.training for module in scorer.network.modules()]
    evaluate(scorer, GRAPH.triples, GRAPH.filter_triples)
    assert [module.training for module in scorer.network.modules()] == modes == [True, False]


#: where Hidden's network lives: a global dict its lambdas look up by name (kgeval follows closures and module-level
#: networks, not the items of a global container)
HIDDEN_NETS: dict[str, Any] = {}


def test_a_non_module_scorer_with_its_own_eval_and_no_module_found_is_warned() -> None:
    """An object offering ``eval()`` / ``train()`` whose network kgeval cannot reach (here: looked up in a global
    dict at each call; a closure is followed now) is warned about: kgeval never calls the object's own ``eval`` (it
    may be the user's own routine)."""
    HIDDEN_NETS["net"] = net = DropoutNet().eval()

    class Hidden:
        num_entities = E

        def __init__(self) -> None:
            self.score_t = lambda hr: HIDDEN_NETS["net"].score_t(hr)
            self.score_h = lambda rt: HIDDEN_NETS["net"].score_h(rt)
            self.calls: list[Any] = []

        def eval(self) -> None:
            self.calls.append("eval")

        def train(self, mode: bool = True) -> None:
            self.calls.append(mode)

    hidden = Hidden()
    with pytest.warns(UserWarning, match=r"Hidden is not a torch module and holds none kgeval can find.*eval\(\)"):
        results = evaluate(hidden, GRAPH.triples, GRAPH.filter_triples)
    assert hidden.calls == []
    assert_same_ranks(
        results.records, expected_ranks(net, GRAPH.triples, GRAPH.filter_triples, num_entities=E, num_relations=R)
    )


# -- 3. accelerate's mixed precision -----------------------------------------------------------------------------


class TripleNet(torch.nn.Module):
    """A DistMult-like model scored through ``forward(h, r, t)`` only (no scoring methods, no fast path); its
    product is a batched matmul, which autocast runs in its lower precision."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.entity = torch.nn.Parameter(torch.randn(E, DIM, generator=generator))
        self.relation = torch.nn.Parameter(torch.randn(R, DIM, generator=generator))
        self.num_entities = E

    def forward(self, h: torch.Tensor, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        query, candidate = torch.broadcast_tensors(self.entity[h] * self.relation[r], self.entity[t])
        return (query.unsqueeze(-2) @ candidate.unsqueeze(-1)).reshape(query.shape[:-1])

    def score_all(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        """Brute force: (B, E) float32 scores of (h, r, e) (target "tail") or (e, r, t) ("head"), the original
        forward's arithmetic."""
        entities = torch.arange(E)
        rows = []
        for first, second in batch.tolist():
            h, r, t = (first, second, entities) if target == "tail" else (entities, first, second)
            rows.append(TripleNet.forward(self, torch.as_tensor(h), torch.as_tensor(r), torch.as_tensor(t)))
        return torch.stack(rows)


@pytest.mark.skipif(importlib.util.find_spec("accelerate") is None, reason="needs accelerate")
def test_a_model_prepared_by_accelerate_in_bf16_is_scored_in_float32() -> None:
    """``Accelerator(mixed_precision="bf16").prepare(model)`` replaces ``model.forward`` on the instance with an
    autocast wrapper (the original kept as ``model._original_forward``). kgeval scores through the original, as
    ``accelerate.unwrap_model`` does: the ranks of the float32 scores. Before, 164 of 1,200 ranks differed here, in
    silence; the wrapper is put back after."""
    from accelerate import Accelerator

    model = TripleNet()
    prepared = Accelerator(mixed_precision="bf16", cpu=True).prepare(model)
    assert prepared is model and "_original_forward" in model.__dict__
    patched = model.__dict__["forward"]
    entities, relations = torch.arange(E), torch.arange(R)

    class Reference:
        num_entities = E

        def score_t(self, hr: torch.Tensor) -> torch.Tensor:
            return model.score_all(hr, "tail")

        def score_h(self, rt: torch.Tensor) -> torch.Tensor:
            return model.score_all(rt, "head")

    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        results = evaluate(model, GRAPH.triples, GRAPH.filter_triples)
    expected = expected_ranks(Reference(), GRAPH.triples, GRAPH.filter_triples, num_entities=E, num_relations=R)
    assert_same_ranks(results.records, expected)
    assert model.__dict__["forward"] is patched
    # the control: the patched forward does compute in bfloat16 (its scores are not the float32 ones)
    h, r, t = torch.cartesian_prod(entities, relations, entities).unbind(1)
    with torch.no_grad():
        assert not torch.equal(model(h, r, t), TripleNet.forward(model, h, r, t))


def test_a_forward_replaced_beside_original_forward_without_leading_back_is_warned() -> None:
    """A ``forward`` on the instance beside accelerate's ``_original_forward`` that does not lead back to it through
    ``__wrapped__``: kgeval cannot tell what it computes, scores through it, and says so (PrecisionWarning); the
    replacement stays in place."""
    model = TripleNet()
    model._original_forward = model.forward

    def halved(h: torch.Tensor, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return TripleNet.forward(model, h, r, t).float()

    model.forward = halved  # type: ignore[method-assign]
    with pytest.warns(PrecisionWarning, match=r"forward of TripleNet was replaced.*accelerate\.unwrap_model\(model\)"):
        evaluate(model, GRAPH.triples, GRAPH.filter_triples)
    assert model.__dict__["forward"] is halved


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


@pytest.mark.parametrize("shape", [(0,), (0, 4), (3, 0), (2, 0, 5)])
def test_the_checksum_of_an_empty_tensor_is_defined(shape: tuple[int, ...]) -> None:
    """A parameter or buffer with no element (an empty relation table, a (0, d) buffer) has a checksum -- the
    same each time -- instead of failing the evaluation (its (0, -1) reshape is ambiguous)."""
    from kgeval import _model_state

    first = _model_state.content_checksum(torch.empty(shape))
    assert first is not None and int(first) == int(_model_state.content_checksum(torch.empty(shape)))  # type: ignore[arg-type]


def test_a_model_holding_an_empty_buffer_is_evaluated() -> None:
    """Evaluating a model with a (0, d) buffer goes through (it raised RuntimeError in the content checksum)."""
    model = DistMult(E, R, dim=DIM, seed=0)
    model.register_buffer("nothing", torch.zeros(0, DIM))
    evaluate(model, GRAPH.triples, GRAPH.filter_triples, fast_path=True)
