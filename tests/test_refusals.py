"""Refusals that tell the truth: kgeval refuses a model or a ``device`` argument only for what cannot be evaluated,
and with advice that can be followed.

- PyKEEN's ``device`` argument names the model's device when it names the device the model's tensors are on:
  ``"cpu:0"`` and ``torch.device("cpu", 0)`` are the CPU (``model.to("cpu:0")`` leaves a model on ``cpu``);
  another device is refused with advice that puts the model there.
- torch.func's ensembling recipe -- ``stack_module_state`` of the members, a copy of one of them on the meta device
  as the ``base`` that ``functional_call`` runs with the stacked weights -- holds meta-device parameters it never
  reads: it is evaluated, whatever the order its parts are registered in, and ranks as a brute force over its own
  scores. A model that reads a meta-device parameter, or holds nothing else, is still refused with the advice to
  load its weights.
"""

from __future__ import annotations

import copy
import types
from typing import Any

import pytest
import torch
from torch.func import functional_call, stack_module_state

from kgeval import RankBasedEvaluator
from kgeval.adapters.devices import model_device
from kgeval.models import DistMult
from tests.integrations.test_contexts import DIM, GRAPH, E, R, differing_ranks, expected_ranks, own_tables

LOAD_WEIGHTS = "the model is on the meta device: its parameters hold no values; load its weights first"


def evaluate(model: Any, **options: Any) -> Any:
    return RankBasedEvaluator().evaluate(model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples,
                                         use_tqdm=False, **options)  # fmt: skip


# -- device="cpu:0" ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["cpu:0", torch.device("cpu", 0), "cpu", torch.device("cpu")])
def test_cpu_with_index_0_is_the_cpu(device: Any) -> None:
    """A CPU model evaluated with ``device="cpu:0"`` (or ``torch.device("cpu", 0)``): the CPU, where
    ``model.to("cpu:0")`` leaves it, so the same results as without ``device``. (Before: refused with the advice
    to move the model with model.to("cpu:0"), after which it was refused again.)"""
    model = DistMult(E, R, dim=DIM, seed=2)
    assert next(model.to(device).parameters()).device == torch.device("cpu")  # where the refusal's advice puts it
    assert evaluate(model, device=device).to_flat_dict() == evaluate(model).to_flat_dict()


def test_a_model_naming_its_device_with_an_index_is_on_the_cpu() -> None:
    """A model (or a library's view) whose ``device`` attribute says ``"cpu:0"`` lives on the CPU: ``device="cpu"``
    is accepted, and kgeval names its device as tensors do."""
    model = DistMult(E, R, dim=DIM, seed=2)
    view = types.SimpleNamespace(device="cpu:0", score_t=model.score_t, score_h=model.score_h, num_entities=E)
    assert model_device(view) == torch.device("cpu")
    assert evaluate(view, device="cpu").to_flat_dict() == evaluate(model).to_flat_dict()


def test_another_device_is_refused_with_advice_that_can_be_followed() -> None:
    """A device the model is not on is refused, naming both and the two ways out (move the model; or pass no
    device), and following the advice -- ``model.to(device)`` -- puts the model on the device named."""
    from kgeval.adapters.devices import same_device  # new with the comparison; imported here so the rest runs before

    model = DistMult(E, R, dim=DIM, seed=2)
    message = "device='meta', but the model lives on 'cpu': .* model.to\\(device\\), or pass device=None"
    with pytest.raises(ValueError, match=message):
        evaluate(model, device="meta")
    assert same_device(model_device(copy.deepcopy(model).to("meta")), "meta")
    assert evaluate(model, device=None).to_flat_dict() == evaluate(model).to_flat_dict()


def test_devices_are_compared_as_tensors_name_them() -> None:
    """The CPU has no index; an accelerator named without one is the current one of its type where that is known
    here, and as ``device`` it matches every index of its type (kgeval never moves the model); different types or
    indices are different devices."""
    from kgeval.adapters.devices import canonical_device, same_device

    assert canonical_device("cpu:0") == canonical_device(torch.device("cpu", 3)) == torch.device("cpu")
    assert same_device("cpu:0", "cpu") and same_device(torch.device("cpu", 1), "cpu")
    assert not same_device("cpu", "meta")
    assert not same_device("cuda:0", "cuda:1")
    assert not same_device("cuda:0", "cpu")
    if torch.cuda.is_available():
        current = torch.cuda.current_device()
        assert canonical_device("cuda") == torch.device("cuda", current)
        assert same_device("cuda", f"cuda:{current + 1}") and not same_device(f"cuda:{current}", f"cuda:{current + 1}")
    else:
        assert canonical_device("cuda") == torch.device("cuda") and same_device("cuda", "cuda:1")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_model_and_the_cpu() -> None:
    """A model on the current CUDA device: ``"cuda"`` and ``"cuda:<current>"`` are its device; ``"cpu:0"`` is
    refused, and after the advice (``model.to("cpu:0")``) accepted."""
    model = DistMult(E, R, dim=DIM, seed=2).to("cuda")
    current = torch.cuda.current_device()
    plain = evaluate(model).to_flat_dict()
    assert evaluate(model, device="cuda").to_flat_dict() == plain
    assert evaluate(model, device=f"cuda:{current}").to_flat_dict() == plain
    with pytest.raises(ValueError, match="device='cpu:0' \\(that is 'cpu'\\), but the model lives on 'cuda:"):
        evaluate(model, device="cpu:0")
    model.to("cpu:0")
    assert evaluate(model, device="cpu:0").to_flat_dict() == evaluate(model).to_flat_dict()


# -- torch.func's ensembling recipe ----------------------------------------------------------------------------------


class Member(torch.nn.Module):
    """A DistMult-like member: ``forward(batch, side)`` scores every tail of (h, r) rows, or every head of (r, t)."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.entity = torch.nn.Parameter(torch.randn(E, DIM, generator=generator))
        self.relation = torch.nn.Parameter(torch.randn(R, DIM, generator=generator))
        self.register_buffer("scale", torch.tensor(1.0 + seed / 10))

    def forward(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        first, second = (self.entity, self.relation) if side == "tail" else (self.relation, self.entity)
        return (first[batch[:, 0]] * second[batch[:, 1]]) @ self.entity.T * self.scale


class Ensemble(torch.nn.Module):
    """torch.func's recipe as a module: the members' stacked weights and a meta-device ``base`` that
    ``functional_call`` runs with them; the score of an ensemble is the mean of its members' scores (``vmap`` over
    the stacked weights, or a loop over them). ``order``: what is registered first (the base, or the weights), or
    ``"plain dict"``: the stacked weights kept in a plain dict attribute (the base's meta parameters the only
    parameters registered)."""

    def __init__(self, members: list[Member], order: str, vectorised: bool) -> None:
        super().__init__()
        params, buffers = stack_module_state(members)  # type: ignore[arg-type]
        if order == "base first":
            self.base = copy.deepcopy(members[0]).to("meta")
        if order == "plain dict":
            self.stacked_params = {name: value.detach() for name, value in params.items()}
        else:
            self.stacked_params = torch.nn.ParameterDict(
                {name: torch.nn.Parameter(value.detach()) for name, value in params.items()}
            )
        self.stacked_buffers = buffers
        if order != "base first":
            self.base = copy.deepcopy(members[0]).to("meta")
        self.size, self.vectorised, self.num_entities = len(members), vectorised, E

    def _scores(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        params, buffers = dict(self.stacked_params.items()), self.stacked_buffers

        def member(p: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> torch.Tensor:
            return functional_call(self.base, (p, b), (batch, side))

        if self.vectorised:
            return torch.vmap(member)(params, buffers).mean(dim=0)
        scores = [member({n: v[i] for n, v in params.items()}, {n: v[i] for n, v in buffers.items()})
                  for i in range(self.size)]  # fmt: skip
        return torch.stack(scores).mean(dim=0)

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return self._scores(hr_batch, "tail")

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return self._scores(rt_batch, "head")


@pytest.mark.parametrize("order", ["base first", "weights first", "plain dict"])
@pytest.mark.parametrize("vectorised", [True, False], ids=["vmap", "loop"])
@pytest.mark.parametrize("training", [True, False], ids=["training mode", "eval mode"])
def test_torch_func_ensembles_rank_as_their_own_scores(order: str, vectorised: bool, training: bool) -> None:
    """The recipe is evaluated, in whatever order its parts are registered and in either mode, and every rank is
    the brute-force rank over the ensemble's own scores (the mean of its members'). (Before: "base first" and
    "plain dict" refused with "load its weights first", "weights first" evaluated.)"""
    members = [Member(1), Member(2)]
    ensemble = Ensemble(members, order, vectorised).train(training)
    tails, _heads = own_tables(ensemble)
    members_mean = torch.stack([own_tables(member_as_scorer(member))[0] for member in members]).mean(dim=0)
    torch.testing.assert_close(tails, members_mean)  # the ensemble's scores are its members' mean
    assert model_device(ensemble) == torch.device("cpu")
    results = evaluate(ensemble)
    assert differing_ranks(results.records, expected_ranks(ensemble, GRAPH.triples, GRAPH.filter_triples)) == 0
    assert ensemble.training == training


def member_as_scorer(member: Member) -> Any:
    return types.SimpleNamespace(score_t=lambda hr: member(hr, "tail"), score_h=lambda rt: member(rt, "head"))


def test_a_model_with_only_meta_tensors_is_refused() -> None:
    """A model built on the meta device, and the recipe whose stacked weights are on the meta device too: nothing
    holds values, so both are refused with the advice to load the weights."""
    with torch.device("meta"):
        model = DistMult(E, R, dim=DIM)
    with pytest.raises(ValueError, match=LOAD_WEIGHTS):
        evaluate(model)
    for training in (True, False):
        ensemble = Ensemble([Member(1).to("meta"), Member(2).to("meta")], "weights first", vectorised=True)
        with pytest.raises(ValueError, match=LOAD_WEIGHTS):
            evaluate(ensemble.train(training))


class PartlyLoaded(torch.nn.Module):
    """Real tables registered first, and the entity table its scores read still on the meta device (weights not
    loaded): a CPU-by-meta matmul gives CPU scores of uninitialised memory."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(3)
        self.query = torch.nn.Parameter(torch.randn(E, DIM, generator=generator))
        self.relation = torch.nn.Parameter(torch.randn(R, DIM, generator=generator))
        self.entity = torch.nn.Parameter(torch.empty(E, DIM, device="meta"))
        self.num_entities = E

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return (self.query[hr_batch[:, 0]] * self.relation[hr_batch[:, 1]]) @ self.entity.T

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return (self.relation[rt_batch[:, 0]] * self.query[rt_batch[:, 1]]) @ self.entity.T


def test_a_model_that_reads_a_meta_parameter_is_refused() -> None:
    """A module in evaluation mode whose scores read a meta-device parameter is refused with the advice to load
    its weights, though its first parameter holds values. (Before: evaluated, ranking uninitialised memory.)"""
    with pytest.raises(ValueError, match=LOAD_WEIGHTS):
        evaluate(PartlyLoaded().eval())


def test_a_probe_leaves_the_random_state_and_modes_as_they_were() -> None:
    """The probe of a model holding meta tensors restores the caller's random number generator and changes no
    module's mode."""
    ensemble = Ensemble([Member(1), Member(2)], "base first", vectorised=True).eval()
    before = torch.random.get_rng_state()
    assert model_device(ensemble) == torch.device("cpu")
    assert torch.equal(torch.random.get_rng_state(), before)
    assert not any(module.training for module in ensemble.modules())
