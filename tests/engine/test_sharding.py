"""Sharded candidate tables (kgeval._engine.sharding): 2 and 3 gloo ranks, each holding an uneven shard of the
entity table, return the results of one process holding it whole -- and the brute-force reference ranks.

The scenarios live in tests/support/sharded.py; each world size runs them all once (a module fixture).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import distributed as dist

from kgeval import RankBasedEvaluator
from kgeval._engine.filter_index import FilterIndex
from kgeval._engine.sharding import declared_shard, filtered_candidates, gather_shards
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks
from tests.helpers.temporal_reference import temporal_reference_ranks
from tests.support.distributed import SCENARIOS, assert_same_results, ok_values, run_scenarios
from tests.support.sharded import (
    NUM_ENTITIES,
    SHARDED_SCENARIOS,
    ShardedForm,
    embeddings,
    graph,
    model_for,
    score_table,
)

pytestmark = [pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available"),
              pytest.mark.slow]  # process groups of 2 and 3 ranks  # fmt: skip

AGREEING = [
    "sharded_both",
    "sharded_raw",
    "sharded_restricted",
    "sharded_constrained",
    "sharded_l2",
    "sharded_l1",
    "sharded_numba",
    "sharded_masked",
    "sharded_fused",
    "sharded_floats",
    "sharded_empty_shard",
]


#: scenarios that need a GPU
CUDA_ONLY = ["sharded_on_cuda"]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[dict]]:
    names = [name for name in SHARDED_SCENARIOS if name not in CUDA_ONLY]
    return {
        2: run_scenarios(2, names, tmp_path_factory.mktemp("two_ranks")),
        3: run_scenarios(3, names, tmp_path_factory.mktemp("three_ranks")),
    }


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("name", AGREEING)
def test_every_rank_returns_the_single_process_results(outcomes, world_size: int, name: str) -> None:
    expected = SCENARIOS[name](None)
    for got in ok_values(outcomes[world_size], name):
        assert_same_results(got, expected)
        if expected.raw is not None:
            assert_same_results(got.raw, expected.raw)


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("name", ["sharded_all", "tasks_shared_all"])
def test_all_filters_from_one_pass_equal_the_single_process_and_the_reference(outcomes, world_size, name) -> None:
    """filtered="all" at relation stride 2 (the temporal evaluator's one pass, on triples): the exact, raw and
    coarse results of every rank are the single process's, and the brute-force reference's -- the triples read as
    quadruples (h, r // 2, t, r % 2), whose static filter is the coarse filter and time-aware filter the exact one."""
    expected_exact, expected_coarse = SCENARIOS[name](None)
    data = graph()
    table = score_table(*embeddings(7), "dot")  # (E, 4, E)
    as_times = table.reshape(NUM_ENTITIES, 2, 2, NUM_ENTITIES).permute(0, 1, 3, 2)

    def quadruples(triples: torch.Tensor) -> torch.Tensor:
        return torch.stack([triples[:, 0], triples[:, 1] // 2, triples[:, 2], triples[:, 1] % 2], dim=1)

    evaluated, known = quadruples(data.triples), [quadruples(part) for part in data.filter_triples]
    for exact, coarse in ok_values(outcomes[world_size], name):
        for got, want, setting in ((exact, expected_exact, "time-aware"), (exact.raw, expected_exact.raw, "raw"),
                                   (coarse, expected_coarse, "static")):  # fmt: skip
            assert_same_results(got, want)
            assert_same_ranks(got.records, temporal_reference_ranks(as_times, as_times, evaluated, known, setting))


def _assert_reference(got, reference) -> None:
    for code, side in enumerate(("head", "tail")):
        rows = got.records["side"] == code
        for field in ("optimistic", "pessimistic", "num_candidates"):
            np.testing.assert_array_equal(got.records[field][rows], reference[side][field], err_msg=f"{side} {field}")


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize(
    ("name", "similarity"),
    [("sharded_both", "dot"), ("sharded_numba", "dot"), ("sharded_masked", "dot"), ("sharded_fused", "dot"),
     ("sharded_empty_shard", "dot"), ("sharded_l2", "l2"), ("sharded_l1", "l1")],
)  # fmt: skip
def test_sharded_ranks_equal_the_brute_force_reference(outcomes, world_size: int, name: str, similarity: str) -> None:
    """Filtered and raw ranks from the scores' definitions in float64 (the embeddings are small integers)."""
    data = graph()
    table = score_table(*embeddings(7), similarity)
    filtered = reference_ranks(table, data.triples, data.filter_triples)
    raw = reference_ranks(table, data.triples, filtered=False)
    for got in ok_values(outcomes[world_size], name):
        _assert_reference(got, filtered)
        _assert_reference(got.raw, raw)


@pytest.mark.parametrize("world_size", [2, 3])
def test_restricted_sharded_ranks_equal_the_reference(outcomes, world_size: int) -> None:
    data = graph()
    whitelist = [0, 1, 2, 5, 8, 12, 13, 14, 20, 21, 25, 29]
    inside = torch.isin(data.triples[:, 0], torch.tensor(whitelist)) & torch.isin(
        data.triples[:, 2], torch.tensor(whitelist)
    )
    table = score_table(*embeddings(7), "dot")
    reference = reference_ranks(table, data.triples[inside], data.filter_triples, restrict_entities_to=whitelist)
    for got in ok_values(outcomes[world_size], "sharded_restricted"):
        _assert_reference(got, reference)


@pytest.mark.parametrize("world_size", [2, 3])
def test_each_query_vector_is_computed_once_by_its_owner(outcomes, world_size: int) -> None:
    """The model refuses queries outside its shard (the scenario would fail); over all ranks, each distinct query
    of each side was asked for exactly once."""
    triples = graph().triples
    distinct = torch.unique(triples[:, [0, 1]], dim=0).shape[0] + torch.unique(triples[:, [1, 2]], dim=0).shape[0]
    asked = [count for _results, count in ok_values(outcomes[world_size], "sharded_queries_asked")]
    assert sum(asked) == distinct


@pytest.mark.parametrize("world_size", [2, 3])
def test_failures_raise_on_every_rank(outcomes, world_size: int) -> None:
    """A gap between shards, shards declared on some ranks only, a failing model on one rank and NaN scores: every
    rank raises, none hangs."""
    per_rank = outcomes[world_size]
    for rank, outcome in enumerate(per_rank):
        assert outcome["sharded_gap"][:2] == ("error", "ValueError")
        assert "must tile the entities [0, 30)" in outcome["sharded_gap"][2]
        assert outcome["sharded_on_some_ranks"][:2] == ("error", "ValueError"), outcome["sharded_on_some_ranks"]
        assert "candidate_shards" in outcome["sharded_on_some_ranks"][2]
        expected = "RuntimeError" if rank == 1 else "DistributedEvaluationError"
        assert outcome["sharded_failure"][:2] == ("error", expected), outcome["sharded_failure"]
        assert outcome["sharded_nan"][:2] == ("error", "ValueError")
        assert "NaN scores" in outcome["sharded_nan"][2]


@pytest.mark.parametrize("world_size", [2, 3])
def test_what_a_sharded_table_cannot_do_is_refused(outcomes, world_size: int) -> None:
    for refused in ok_values(outcomes[world_size], "sharded_refused"):
        assert "progress_path is not supported" in refused["progress_path"]
        assert "query/candidate form only" in refused["score_fn"]
        assert "query/candidate form only" in refused["fast_path=False"]
        assert refused["relation"] != "accepted"


def test_a_partial_shard_needs_a_process_group() -> None:
    entities, relations = embeddings(7)
    model = ShardedForm(entities, relations, 0, 10, "dot")
    data = graph()
    with pytest.raises(ValueError, match="holds only the entities"):
        RankBasedEvaluator().evaluate(model, data.triples, use_tqdm=False)


def test_a_whole_table_shard_is_an_ordinary_model() -> None:
    """A model declaring every entity as its shard, in one process: the brute-force ranks."""
    data = graph()
    results = RankBasedEvaluator().evaluate(
        model_for(None), data.triples, additional_filter_triples=data.filter_triples, use_tqdm=False
    )
    _assert_reference(results, reference_ranks(score_table(*embeddings(7), "dot"), data.triples, data.filter_triples))


@pytest.mark.parametrize(
    ("declared", "error"),
    [((0, 31), ValueError), ((5, 4), ValueError), ((-1, 3), ValueError), ((0.0, 3), TypeError), ((1,), TypeError),
     ((True, 3), TypeError)],
)  # fmt: skip
def test_declared_shards_are_checked(declared, error) -> None:
    class Declares:
        def kgeval_candidate_shard(self, target):
            return declared

    with pytest.raises(error):
        declared_shard(Declares(), "tail", NUM_ENTITIES)


def test_shards_without_a_group() -> None:
    assert gather_shards({"head": (0, 30), "tail": (0, 30)}, 30, None) == {}
    with pytest.raises(ValueError, match="process group"):
        gather_shards({"head": (0, 12)}, 30, None)


@pytest.mark.parametrize("seed", range(4))
def test_filtered_candidates_count_the_known_candidates(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Per task: the known answers of its query among the candidates, minus its own (loops), in small chunks."""
    monkeypatch.setattr("kgeval._engine.sharding.PAIR_CHUNK", 3)
    rng = np.random.default_rng(seed)
    data = graph()
    known = torch.cat([data.triples, *data.filter_triples])
    side = FilterIndex(known).side("tail")
    whitelist = torch.from_numpy(rng.choice(NUM_ENTITIES, 17, replace=False))
    position_of = torch.full((NUM_ENTITIES,), -1)
    position_of[whitelist] = torch.arange(17)
    triples = data.triples[torch.isin(data.triples[:, 2], whitelist)]
    got = filtered_candidates(side, triples[:, :2], position_of[triples[:, 2]], position_of)
    known_set = {tuple(t) for t in known.tolist()}
    allowed = set(whitelist.tolist())
    expected = [sum((h, r, e) in known_set for e in allowed) - 1 for h, r, _t in triples.tolist()]
    assert got.tolist() == expected
    everything = filtered_candidates(side, data.triples[:, :2], data.triples[:, 2], None)
    assert everything.tolist() == [
        sum((h, r, e) in known_set for e in range(NUM_ENTITIES)) - 1 for h, r, _t in data.triples.tolist()
    ]


@pytest.mark.cuda
@pytest.mark.parametrize("backend", ["nccl", "gloo"])
def test_shards_on_cuda_return_the_single_process_results(tmp_path, backend: str) -> None:
    """NCCL: one GPU per rank (needs 2); gloo: both ranks' shards on the one GPU there is."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    if backend == "nccl" and (torch.cuda.device_count() < 2 or not dist.is_nccl_available()):
        pytest.skip("NCCL needs two CUDA devices")
    per_rank = run_scenarios(2, ["sharded_on_cuda", "sharded_both"], tmp_path, backend=backend)
    expected = SCENARIOS["sharded_both"](None)
    for name in ("sharded_on_cuda", "sharded_both"):
        for got in ok_values(per_rank, name):
            assert_same_results(got, expected)
            assert_same_results(got.raw, expected.raw)
