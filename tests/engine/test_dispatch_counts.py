"""What an evaluation costs the host, counted on CPU tensors (kgeval._engine.dispatch_count): the counter sees every
ATen operation and every data-dependent read, the device's path (``evaluator.device_path``) ranks exactly, and the
operations and sync ops of one evaluation stay within fixed bounds however many test triples it has, on the device's
path and on the CPU's. Counts are deterministic: these are not timed tests.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from benchmarks.dispatch import TransRTable
from kgeval import RankBasedEvaluator
from kgeval._engine.dispatch_count import DispatchCounter, format_table
from kgeval._engine.relation_tables import RelationTableScorer
from kgeval._engine.scorer_choice import make_scorer
from kgeval.datasets import load_dataset
from kgeval.models import DistMult
from tests.helpers.graphs import random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks


def test_the_counter_sees_every_operation_and_read() -> None:
    x = torch.arange(5.0)
    with DispatchCounter() as counter:
        _ = x.sum().item()  # sum, _local_scalar_dense
        _ = x[x > 2]  # gt, index with a boolean mask
        _ = torch.arange(3).repeat_interleave(torch.tensor([1, 0, 2]))  # size read from the repeats
        _ = torch.arange(3).repeat_interleave(torch.tensor([1, 0, 2]), output_size=3)  # size given: no read
        _ = x.tolist()  # no ATen operation on a CPU tensor, still a read
        _ = x.nonzero()
        _ = x + 1  # no read
    assert counter.sync_names == {"_local_scalar_dense": 1, "index": 1, "repeat_interleave": 1, "Tensor.tolist": 1,
                                  "nonzero": 1}  # fmt: skip
    assert counter.syncs == 5
    assert counter.op_names["repeat_interleave"] == 2 and counter.op_names["add"] == 1
    assert counter.functions == {"outside kgeval": counter.ops}  # this test is not kgeval's code


def test_operations_are_attributed_to_the_innermost_kgeval_function() -> None:
    from kgeval._engine.kernels import counts_from_code_sums

    with DispatchCounter() as counter:
        counts_from_code_sums(torch.tensor([1.0, -1.0]), torch.tensor([3.0, 1.0]))
    function = "_engine/kernels/__init__.py counts_from_code_sums"
    assert set(counter.functions) == {function, "outside kgeval"}
    assert counter.functions[function] == 6  # 2 long, add, sub, 2 floor_divide
    assert "counts_from_code_sums" in format_table(counter)


def integer_distmult(num_entities: int, num_relations: int, seed: int) -> DistMult:
    """A DistMult whose embeddings are small integers: every score is exact in float32 whatever the order of the
    products, so the GEMM's scores equal the model's own and ties are real ties."""
    model = DistMult(num_entities, num_relations, dim=6, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for table in (model.entity_embeddings.weight, model.relation_embeddings.weight):
            table.copy_(torch.randint(-2, 3, table.shape, generator=generator).float())
    return model


def score_table(model: DistMult, num_entities: int, num_relations: int) -> torch.Tensor:
    """(E, R, E): the model's own score of every triple."""
    heads, relations = torch.meshgrid(torch.arange(num_entities), torch.arange(num_relations), indexing="ij")
    queries = torch.stack([heads.reshape(-1), relations.reshape(-1)], dim=1)
    with torch.no_grad():
        return model.score_t(queries).reshape(num_entities, num_relations, num_entities)


@pytest.mark.parametrize("layout", [None, "sorted"])
@pytest.mark.parametrize("batch_size", [None, 5, 10**6])
@pytest.mark.parametrize("kernel", ["eager", "auto"])
def test_the_device_path_ranks_exactly(kernel: str, batch_size: int | None, layout: str | None) -> None:
    """In either pair layout; the sorted one with every repeated query made a query group (its known answers kept
    once, counted per tile with a fixed number of operations)."""
    graph = random_graph(4, num_entities=25, num_relations=3, num_triples=60, num_filter=120)
    model = integer_distmult(25, 3, seed=4)
    evaluator = RankBasedEvaluator(filtered="both", kernel=kernel, batch_size=batch_size)
    evaluator.device_path = True
    evaluator.pair_layout = layout  # type: ignore[assignment]
    evaluator._state.settings = dataclasses.replace(evaluator._state.settings, group_min_pairs=1)
    assert evaluator.device_path is True and evaluator.pair_layout == layout
    results = evaluator.evaluate(model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False)
    table = score_table(model, 25, 3)
    assert_same_ranks(results.records, reference_ranks(table, graph.triples, graph.filter_triples))
    assert_same_ranks(results.raw.records, reference_ranks(table, graph.triples, graph.filter_triples, filtered=False))


def test_the_device_path_is_a_checked_setting() -> None:
    evaluator = RankBasedEvaluator()
    assert evaluator.device_path is False
    with pytest.raises(TypeError, match="device_path must be True or False"):
        evaluator.device_path = "masked"  # type: ignore[assignment]
    assert evaluator.pair_layout is None
    with pytest.raises(ValueError, match="pair_layout must be None, 'sorted' or 'masked'"):
        evaluator.pair_layout = "dense"  # type: ignore[assignment]


def _counted(
    device_path: bool, num_triples: int | None, layout: str | None = None, model: torch.nn.Module | None = None
) -> DispatchCounter:
    """The second of two evaluations by one evaluator (as a training loop calls it) of UMLS's first
    ``num_triples`` test triples (None: all 661), a seeded DistMult (or ``model``), filtered by train + valid, one
    batch per side."""
    data = load_dataset("umls")
    model = DistMult(data.num_entities, data.num_relations, dim=32, seed=0) if model is None else model
    test = data.test if num_triples is None else data.test[:num_triples]
    evaluator = RankBasedEvaluator(kernel="eager", batch_size=10**6, slice_size=data.num_entities)
    evaluator.device_path = device_path
    evaluator.pair_layout = layout  # type: ignore[assignment]

    def evaluate() -> None:
        evaluator.evaluate(model, test, additional_filter_triples=[data.train, data.valid], use_tqdm=False)

    evaluate()
    with DispatchCounter() as counter:
        evaluate()
    return counter


#: (ops, sync ops) one evaluation may cost: the device's path in its masked layout and in the sorted one (every read
#: there is a host-device synchronisation), and the CPU's (one more read per tile: the sign kernel's exactness check
#: of its true scores). All include the model's change watch (a content checksum of each parameter at the start and
#: the end: about 30 ops and one read) and the fast path's stability probe (a few queries scored twice and in other
#: batch compositions, kgeval._engine.form_check.probe_instability: about 40 ops and one read per side; 942 ops and
#: 10 reads on the device's path before it). The CPU's path is held to what it costs on UMLS today: its cache-sized
#: tiles cost a fixed number of ops each, so its ops grow with the tiles (FB15k-237: ~17,000), by design
BOUNDS = {"device-path": (1100, 12), "device-path-sorted": (1100, 12), "cpu-path": (1150, 14)}
PATHS = {"device-path": (True, None), "device-path-sorted": (True, "sorted"), "cpu-path": (False, None)}


@pytest.mark.parametrize("path", list(PATHS))
def test_the_host_cost_of_an_evaluation_does_not_grow_with_its_tasks(path: str) -> None:
    """Ops and sync ops are bounded per side and batch -- not per relation, query group, filter group or metric:
    100 test triples and all 661 cost the same, within the bounds (a per-group or per-metric read put back in the
    engine or the accumulator fails here)."""
    device_path, layout = PATHS[path]
    few, many = _counted(device_path, 100, layout), _counted(device_path, None, layout)
    max_ops, max_syncs = BOUNDS[path]
    for counter in (few, many):
        assert counter.ops <= max_ops and counter.syncs <= max_syncs, format_table(counter, rows=40)
    assert many.ops <= 1.1 * few.ops, (format_table(few, rows=40), format_table(many, rows=40))
    assert many.syncs == few.syncs, (dict(few.sync_sites), dict(many.sync_sites))


#: (fixed ops, ops per relation of the test triples (both sides together), sync ops) of one evaluation of a
#: relation-table model (benchmarks/dispatch.py's TransRTable, kgeval._engine.relation_tables) on each path: on
#: UMLS ~1,370 fixed and ~22 per relation (per side and relation of the one tile: its table built -- the model's
#: gather and GEMM, the "l2" norms --, its rows' GEMM and norms subtracted, the rows gathered and put back); the
#: probe of the table against the model's own methods and the table scorer's one read per batch (each distinct
#: query's relation, to group a tile's rows) are the sync ops beyond DistMult's. The same model through its own
#: score_t / score_h (fast_path=False) costs 965 ops and 10 sync ops on the device's path, but transforms every
#: candidate once per query instead of once per relation
TABLE_BOUNDS = {"device-path": (1450, 25, 16), "device-path-sorted": (1450, 25, 16), "cpu-path": (1450, 25, 20)}


@pytest.mark.parametrize("path", list(PATHS))
def test_a_relation_table_costs_ops_per_relation_not_per_query(path: str) -> None:
    """The table scorer's ops grow with the relations of a tile (a loop step per relation present), not with its
    queries; its sync ops are a fixed number per evaluation."""
    data = load_dataset("umls")
    model = TransRTable(data.num_entities, data.num_relations, dim=16, relation_dim=8, seed=0)
    assert isinstance(make_scorer(model, "tail", data.num_entities, None), RelationTableScorer)
    device_path, layout = PATHS[path]
    fixed, per_relation, max_syncs = TABLE_BOUNDS[path]
    counters = {}
    for num_triples in (20, 100, None):
        counter = _counted(device_path, num_triples, layout, model)
        test = data.test if num_triples is None else data.test[:num_triples]
        relations = len(set(test[:, 1].tolist()))
        assert counter.ops <= fixed + per_relation * relations, format_table(counter, rows=40)
        assert counter.syncs <= max_syncs, format_table(counter, rows=40)
        counters[num_triples] = counter
    assert counters[20].syncs == counters[None].syncs, (dict(counters[20].sync_sites), dict(counters[None].sync_sites))
