"""Scenarios of models whose parameters are sharded over the ranks (FSDP2's ``fully_shard``, FSDP1's
``FullyShardedDataParallel``, a bare DTensor parameter), for the gloo runs of tests/support/distributed.py.

Each scenario builds its model afresh (deterministic: every rank builds the same one), shards it over the world
group's CPU mesh and evaluates it as a training loop would hand it over. It returns the results, the kind of every
parameter after the evaluation (sharded again?) and the warnings seen; ``rank=None`` builds the same model
unsharded, for the expectation.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import distributed as dist

from kgeval import RankBasedEvaluator
from kgeval.models import DistMult
from tests.helpers.graphs import random_graph

E, R, DIM = 14, 3, 8
GRAPH = random_graph(11, num_entities=E, num_relations=R, num_triples=25, num_filter=30)


class MethodsOnly(torch.nn.Module):
    """A bilinear model scored through its own ``score_t`` / ``score_h`` only (no fast path)."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(3)
        self.entity = torch.nn.Parameter(torch.randn(E, DIM, generator=generator))
        self.relation = torch.nn.Parameter(torch.randn(R, DIM, generator=generator))
        self.num_entities = E

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        return (self.entity[hr[:, 0]] * self.relation[hr[:, 1]]) @ self.entity.T

    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        return (self.relation[rt[:, 0]] * self.entity[rt[:, 1]]) @ self.entity.T


class ForwardScorer(torch.nn.Module):
    """Scores whole triples through ``forward(h, r, t)`` (PyTorch Geometric's form), its tables in submodules that
    FSDP can shard one by one (each submodule's forward then gathers and reshards around every call)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.entity = torch.nn.Embedding(E, DIM)
        self.relation = torch.nn.Embedding(R, DIM)

    def forward(self, h: torch.Tensor, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return (self.entity(h) * self.relation(r) * self.entity(t)).sum(-1)


def build(kind: str) -> torch.nn.Module:
    """The unsharded model of a scenario: "distmult" (kgeval's, with its fast path), "methods" or "forward"."""
    return {"distmult": lambda: DistMult(E, R, dim=DIM, seed=5), "methods": MethodsOnly,
            "forward": ForwardScorer}[kind]()  # fmt: skip


def _mesh() -> Any:
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (dist.get_world_size(),))


def _evaluate(model: Any, distributed: bool) -> dict[str, Any]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        results = RankBasedEvaluator().evaluate(
            model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False,
            distributed=None if distributed else False, num_entities=E,
        )  # fmt: skip
    return {
        "results": results,
        "parameters": sorted((name, type(p).__name__) for name, p in model.named_parameters()),
        "warnings": [f"{w.category.__name__}: {w.message}" for w in seen],
    }


def fsdp2(kind: str, rank: int | None) -> dict[str, Any]:
    model = build(kind)
    if rank is not None:
        from torch.distributed.fsdp import fully_shard

        fully_shard(model, mesh=_mesh())
    return _evaluate(model, rank is not None)


def fsdp2_nested(kind: str, rank: int | None) -> dict[str, Any]:
    """A model with each embedding table sharded on its own and the whole model on top: kgeval's DistMult, or a
    model scored through ``forward`` (each table's forward then runs FSDP's hooks, a different number of times on
    each rank)."""
    model = build(kind)
    if rank is not None:
        from torch.distributed.fsdp import fully_shard

        mesh = _mesh()
        for child in model.children():
            fully_shard(child, mesh=mesh)
        fully_shard(model, mesh=mesh)
    return _evaluate(model, rank is not None)


def fsdp2_mixed_precision(rank: int | None) -> dict[str, Any]:
    """FSDP2 gathering bfloat16 copies of float32 parameters (MixedPrecisionPolicy): scored in bfloat16, and said."""
    model = build("methods")
    if rank is not None:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        fully_shard(model, mesh=_mesh(), mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
    return _evaluate(model, rank is not None)


def fsdp1_inner_module(rank: int | None) -> dict[str, Any]:
    """The module inside an FSDP1 wrapper, handed over without it: refused (its parameters are flat shards)."""
    model = build("methods")
    if rank is not None:
        from torch.distributed.fsdp import FullyShardedDataParallel

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = FullyShardedDataParallel(model, device_id=torch.device("cpu")).module
    return _evaluate(model, rank is not None)


def fsdp1(rank: int | None) -> dict[str, Any]:
    model = build("methods")
    if rank is not None:
        from torch.distributed.fsdp import FullyShardedDataParallel

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # world size 1: FSDP switches to NO_SHARD and says so
            model = FullyShardedDataParallel(model, device_id=torch.device("cpu"))
    return _evaluate(model, rank is not None)


def bare_dtensor(rank: int | None) -> dict[str, Any]:
    """A parameter turned into a DTensor by hand (tensor parallelism without FSDP): refused with the fix."""
    model = build("methods")
    if rank is not None:
        from torch.distributed.tensor import Shard, distribute_tensor

        model.entity = torch.nn.Parameter(distribute_tensor(model.entity.detach(), _mesh(), [Shard(0)]))
    return _evaluate(model, rank is not None)


SHARDED_PARAMETER_SCENARIOS = {
    "fsdp2_distmult": lambda rank: fsdp2("distmult", rank),
    "fsdp2_methods": lambda rank: fsdp2("methods", rank),
    "fsdp2_nested": lambda rank: fsdp2_nested("distmult", rank),
    "fsdp2_nested_forward": lambda rank: fsdp2_nested("forward", rank),
    "fsdp2_mixed_precision": fsdp2_mixed_precision,
    "fsdp1_methods": fsdp1,
    "fsdp1_inner_module": fsdp1_inner_module,
    "bare_dtensor": bare_dtensor,
}
