"""Scenarios of sharded candidate tables for the gloo runs of tests/support/distributed.py.

Each rank holds a contiguous, uneven shard of the entity table (:class:`ShardedForm`), never the whole table: its
``kgeval_query`` refuses queries whose entity it does not hold and ``kgeval_candidates`` returns its shard only.
The same scenario with ``rank=None`` is the single-process expectation: one model holding every entity.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch
from torch import distributed as dist

from kgeval import RankBasedEvaluator, RankBasedMetricResults, TypeConstraints
from kgeval._engine.kernels import COMPARE
from kgeval._engine.kernels.choice import KernelChooser
from kgeval._engine.loop import EngineState, LoopSettings
from tests.helpers.graphs import random_graph

NUM_ENTITIES, NUM_RELATIONS, DIM = 30, 4, 6

#: uneven shard boundaries per world size; 3 ranks include an empty shard when ``empty`` is asked for
BOUNDARIES = {1: [0, 30], 2: [0, 13, 30], 3: [0, 7, 19, 30]}
EMPTY_BOUNDARIES = [0, 11, 11, 30]


class ShardedForm(torch.nn.Module):
    """A query/candidate model holding the entity rows [start, stop) of a table and every relation row.

    ``similarity`` "dot": DistMult (query h * r, candidate t; for heads query r * t); "l2" / "l1": TransE-like
    (query h + r for tails, t - r for heads, ranked by -distance). Records every query batch it is asked for."""

    def __init__(self, entities: torch.Tensor, relations: torch.Tensor, start: int, stop: int, similarity: str):
        super().__init__()
        self.start, self.stop = start, stop
        self.entities = torch.nn.Parameter(entities[start:stop].clone(), requires_grad=False)
        self.relations = torch.nn.Parameter(relations.clone(), requires_grad=False)
        self.kgeval_similarity = similarity
        self.num_entities, self.num_relations = entities.shape[0], relations.shape[0]
        self.asked: list[torch.Tensor] = []

    def kgeval_candidate_shard(self, target: str) -> tuple[int, int]:
        return self.start, self.stop

    def _entity(self, ids: torch.Tensor) -> torch.Tensor:
        if bool(((ids < self.start) | (ids >= self.stop)).any()):
            raise AssertionError(f"asked for entities outside the shard [{self.start}, {self.stop})")
        return self.entities[ids - self.start]

    def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        self.asked.append(batch.clone())
        if target == "tail":
            entity, relation = self._entity(batch[:, 0]), self.relations[batch[:, 1]]
            return entity * relation if self.kgeval_similarity == "dot" else entity + relation
        relation, entity = self.relations[batch[:, 0]], self._entity(batch[:, 1])
        return entity * relation if self.kgeval_similarity == "dot" else entity - relation

    def kgeval_candidates(self, target: str) -> torch.Tensor:
        return self.entities


def embeddings(seed: int, quantised: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(entities (30, 6), relations (4, 6)): integers in {-1, 0, 1} (exact arithmetic, ties everywhere), or
    normal floats."""
    generator = np.random.default_rng(seed)
    shapes = ((NUM_ENTITIES, DIM), (NUM_RELATIONS, DIM))
    if quantised:
        return tuple(torch.from_numpy(generator.integers(-1, 2, shape).astype(np.float32)) for shape in shapes)  # type: ignore[return-value]
    return tuple(torch.from_numpy(generator.standard_normal(shape).astype(np.float32)) for shape in shapes)  # type: ignore[return-value]


def score_table(entities: torch.Tensor, relations: torch.Tensor, similarity: str) -> torch.Tensor:
    """The (E, R, E) scores of every triple, in float64 from the definitions (for the brute-force reference)."""
    e, r = entities.double(), relations.double()
    if similarity == "dot":
        return torch.einsum("hd,rd,td->hrt", e, r, e)
    difference = e[:, None, None, :] + r[None, :, None, :] - e[None, None, :, :]
    return -difference.norm(p=2 if similarity == "l2" else 1, dim=-1)


def model_for(rank: int | None, similarity: str = "dot", quantised: bool = True, empty: bool = False) -> ShardedForm:
    """This rank's shard of the scenario model (every entity for the single process)."""
    entities, relations = embeddings(7, quantised)
    if rank is None:
        return ShardedForm(entities, relations, 0, NUM_ENTITIES, similarity)
    world_size = dist.get_world_size()
    bounds = EMPTY_BOUNDARIES if empty and world_size == 3 else BOUNDARIES[world_size]
    return ShardedForm(entities, relations, bounds[rank], bounds[rank + 1], similarity)


def graph():
    """40 triples (some duplicated) over 30 entities with 60 filter triples overlapping their queries."""
    return random_graph(3, NUM_ENTITIES, NUM_RELATIONS, 40, 60, duplicate_fraction=0.2)


def _evaluate(rank: int | None, evaluator: RankBasedEvaluator, model: Any, **kwargs: Any) -> Any:
    data = graph()
    kwargs.setdefault("additional_filter_triples", data.filter_triples)
    return evaluator.evaluate(model, data.triples, use_tqdm=False, distributed=rank is not None, **kwargs)


def sharded_both(rank: int | None) -> Any:
    """Filtered and raw from one pass, small batches and slices (several tiles per shard)."""
    evaluator = RankBasedEvaluator(ks=(1, 3, 10), filtered="both", batch_size=3, slice_size=4)
    return _evaluate(rank, evaluator, model_for(rank))


def sharded_raw(rank: int | None) -> Any:
    return _evaluate(rank, RankBasedEvaluator(filtered=False), model_for(rank))


def sharded_restricted(rank: int | None) -> Any:
    """A candidate whitelist that leaves some shards with few candidates."""
    whitelist = [0, 1, 2, 5, 8, 12, 13, 14, 20, 21, 25, 29]
    return _evaluate(rank, RankBasedEvaluator(ks=(1, 3), filtered="both"), model_for(rank),
                     restrict_entities_to=whitelist, drop_outside_restriction=True)  # fmt: skip


def constraints() -> TypeConstraints:
    """Relation 0's tails among 17 entities, relation 1's heads among 15 (spread over every shard)."""
    return TypeConstraints.from_mappings(
        tails={0: [*range(0, 30, 2), 1, 3]},
        heads={1: list(range(5, 20))},
    )


def sharded_constrained(rank: int | None) -> Any:
    evaluator = RankBasedEvaluator(ks=(1, 3), batch_size=4)
    return _evaluate(rank, evaluator, model_for(rank), type_constraints=constraints(), drop_outside_restriction=True)


def sharded_l2(rank: int | None) -> Any:
    return _evaluate(rank, RankBasedEvaluator(filtered="both"), model_for(rank, "l2"))


def sharded_l1(rank: int | None) -> Any:
    return _evaluate(rank, RankBasedEvaluator(filtered="both", slice_size=5), model_for(rank, "l1"))


def sharded_numba(rank: int | None) -> Any:
    """The one-pass numba kernel (reads repeated queries' rows in place), eager where numba is missing."""
    try:
        import numba  # noqa: F401

        kernel = "numba"
    except ImportError:  # pragma: no cover - numba is a test dependency
        kernel = "eager"
    evaluator = RankBasedEvaluator(filtered="both", kernel=kernel, batch_size=5, slice_size=7)
    return _evaluate(rank, evaluator, model_for(rank))


def sharded_masked(rank: int | None) -> Any:
    """The masked pair layout (what accelerators use: never synchronises), the tasks answered elsewhere included."""
    evaluator = RankBasedEvaluator(filtered="both", batch_size=4, slice_size=6)
    evaluator._state = EngineState(kernels=KernelChooser(COMPARE), settings=LoopSettings(layout="masked"))
    return _evaluate(rank, evaluator, model_for(rank))


def sharded_fused(rank: int | None) -> Any:
    """The fused Triton kernel (multiplies and counts without writing scores; under the interpreter on CPU), which
    picks the filtered pairs' scores itself; eager where triton is missing (then the scenario is sharded_both's)."""
    try:
        import triton  # noqa: F401

        kernel = "triton"
    except ImportError:  # pragma: no cover - the gpu extra
        kernel = "eager"
    return _evaluate(rank, RankBasedEvaluator(filtered="both", kernel=kernel, batch_size=5), model_for(rank))


def sharded_floats(rank: int | None) -> Any:
    """Normal (unquantised) embeddings: every rank compares against its owner's true score."""
    return _evaluate(rank, RankBasedEvaluator(filtered="both"), model_for(rank, quantised=False))


def sharded_on_cuda(rank: int | None) -> Any:
    """sharded_both with each rank's shard on its CUDA device (the single process on the CPU)."""
    if rank is None:
        return sharded_both(None)
    model = model_for(rank).to(torch.device("cuda", torch.cuda.current_device()))
    evaluator = RankBasedEvaluator(ks=(1, 3, 10), filtered="both", batch_size=3, slice_size=4)
    return _evaluate(rank, evaluator, model)


def sharded_empty_shard(rank: int | None) -> Any:
    """Rank 1 of 3 holds no entity: it ranks nothing of its own and counts no candidate, but takes part."""
    return _evaluate(rank, RankBasedEvaluator(filtered="both", batch_size=4), model_for(rank, empty=True))


def sharded_queries_asked(rank: int | None) -> Any:
    """(results, whether every query batch the rank's model was asked for holds only its own entities)."""
    model = model_for(rank)
    results = _evaluate(rank, RankBasedEvaluator(), model)
    asked = torch.cat(model.asked) if model.asked else torch.zeros(0, 2, dtype=torch.long)
    return results, asked.shape[0]


class GappedForm(ShardedForm):
    """Rank 1 declares a shard starting one entity late: the shards leave a gap."""

    def kgeval_candidate_shard(self, target: str) -> tuple[int, int]:
        shift = 1 if dist.is_initialized() and dist.get_rank() == 1 else 0
        return self.start + shift, self.stop


def sharded_gap(rank: int | None) -> Any:
    base = model_for(rank)
    model = GappedForm(*embeddings(7), base.start, base.stop, "dot")
    return _evaluate(rank, RankBasedEvaluator(), model)


class UndeclaredForm(ShardedForm):
    """A form without the shard method, with its own whole-triple scores: the whole table, an ordinary model."""

    kgeval_candidate_shard = None  # type: ignore[assignment]

    def score_hrt(self, hrt: torch.Tensor) -> torch.Tensor:
        return (self.entities[hrt[:, 0]] * self.relations[hrt[:, 1]] * self.entities[hrt[:, 2]]).sum(dim=1)


def sharded_on_some_ranks(rank: int | None) -> Any:
    """Rank 1 evaluates an ordinary model holding the whole table while the others hold shards: every rank raises
    the ranks' disagreement before any of them gathers shards (no rank waits in a collective the others skip)."""
    entities, relations = embeddings(7)
    model = UndeclaredForm(entities, relations, 0, NUM_ENTITIES, "dot") if rank == 1 else model_for(rank)
    return _evaluate(rank, RankBasedEvaluator(), model)


class FailingForm(ShardedForm):
    """kgeval_query raises on rank 1 (a model defect on one machine)."""

    def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        if dist.get_rank() == 1:
            raise RuntimeError("simulated failure of kgeval_query")
        return super().kgeval_query(batch, target)


def sharded_failure(rank: int | None) -> Any:
    base = model_for(rank)
    model = FailingForm(*embeddings(7), base.start, base.stop, "dot")
    return _evaluate(rank, RankBasedEvaluator(), model)


def sharded_nan(rank: int | None) -> Any:
    """Entity 20's vector holds a NaN (on the last shard): every rank reports the NaN scores."""
    model = model_for(rank)
    if model.start <= 20 < model.stop:
        with torch.no_grad():
            model.entities[20 - model.start, 0] = float("nan")
    return _evaluate(rank, RankBasedEvaluator(), model)


def sharded_refused(rank: int | None) -> Any:
    """What a sharded table cannot be evaluated with, each refused on every rank: {option: outcome}."""
    model = model_for(rank)
    options = {
        "progress_path": {"progress_path": "unused-progress.pt"},
        "relation": {"targets": ("head", "tail", "relation")},
        "score_fn": {"score_fn": lambda h, r, t: torch.zeros(h.shape[0])},
    }
    outcomes = {}
    for name, kwargs in options.items():
        try:
            _evaluate(rank, RankBasedEvaluator(), model, **kwargs)
            outcomes[name] = "accepted"
        except Exception as error:
            outcomes[name] = f"{type(error).__name__}: {error}"
    try:
        _evaluate(rank, RankBasedEvaluator(fast_path=False), model)
        outcomes["fast_path=False"] = "accepted"
    except Exception as error:
        outcomes["fast_path=False"] = f"{type(error).__name__}: {error}"
    return outcomes


def _all_filters(rank: int | None, model: Any) -> tuple[Any, Any]:
    """filtered="all" through the engine at relation stride 2 -- the coarse filter compares relations 0-1 and 2-3
    as one, as the temporal static filter compares a relation's times (kgeval.TemporalRankBasedEvaluator's one
    pass) -- small batches and slices: (the exact filter's results with .raw, the coarse filter's results)."""
    import kgeval.evaluator as evaluator_module

    captured: dict[str, Any] = {}
    original = evaluator_module.rank

    def rank_all(prepare: Any, options: Any, run: Any, state: Any) -> Any:
        sides = original(prepare, dataclasses.replace(options, filtered="all", filter_relation_stride=2), run, state)
        captured.update(sides)
        return sides

    evaluator_module.rank = rank_all
    try:
        exact = _evaluate(rank, RankBasedEvaluator(ks=(1, 3, 10), batch_size=3, slice_size=4), model)
    finally:
        evaluator_module.rank = original
    raw, coarse = (RankBasedMetricResults.from_accumulators({t: getattr(side, name) for t, side in captured.items()},
                                                            exact.ks) for name in ("raw", "coarse"))  # fmt: skip
    return dataclasses.replace(exact, raw=raw), coarse


def sharded_all(rank: int | None) -> Any:
    """filtered="all" (exact, raw and coarse filters from one pass) over a sharded candidate table."""
    return _all_filters(rank, model_for(rank))


def tasks_shared_all(rank: int | None) -> Any:
    """filtered="all" with the whole table on every rank: the tasks shared out, every accumulator merged."""
    return _all_filters(rank, model_for(None))


SHARDED_SCENARIOS = {
    fn.__name__: fn
    for fn in (
        sharded_both,
        sharded_raw,
        sharded_restricted,
        sharded_constrained,
        sharded_l2,
        sharded_l1,
        sharded_numba,
        sharded_masked,
        sharded_fused,
        sharded_floats,
        sharded_empty_shard,
        sharded_on_cuda,
        sharded_queries_asked,
        sharded_gap,
        sharded_on_some_ranks,
        sharded_failure,
        sharded_nan,
        sharded_refused,
        sharded_all,
        tasks_shared_all,
    )
}
