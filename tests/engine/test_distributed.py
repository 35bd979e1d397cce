"""Tests of _engine.distributed: 2 and 3 gloo processes on CPU return the single-process results, or fail together.

The multi-process runs happen once per world size (module fixtures, a second or so each); each test reads the
outcome of one named scenario of tests/helpers/distributed.py on every rank.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from torch import distributed as dist

from kgeval import RankBasedEvaluator
from kgeval._engine.distributed import checksum, fingerprint, resolve_group, shard
from tests.helpers.graphs import TableModel
from tests.helpers.reference import reference_ranks
from tests.support.distributed import SCENARIOS, assert_same_results, ok_values, run_scenarios, tie_heavy_case

pytestmark = [pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available"),
              pytest.mark.slow]  # process groups of several ranks  # fmt: skip

TWO_RANKS = [
    "ties",
    "sums_only",
    "restricted_tail",
    "gemm",
    "relations",
    "opt_out",
    "ddp_transe",
    "ddp_pykeen_inverse",
    "observe_fails_on_one_rank",
    "models_differ",
    "rank_zero_alone",
    "after_alone",
]
THREE_RANKS = [
    "ties",
    "few_triples",
    "disagree",
    "invalid_on_one_rank",
    "nan_in_one_share",
    "interrupted_on_one_rank",
    "after_errors",
    "subgroup",
    "uneven_gather",
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[dict]]:
    return {
        2: run_scenarios(2, TWO_RANKS, tmp_path_factory.mktemp("two_ranks")),
        3: run_scenarios(3, THREE_RANKS, tmp_path_factory.mktemp("three_ranks")),
    }


@pytest.mark.parametrize(
    ("world_size", "name"),
    [(2, name) for name in TWO_RANKS if name not in ("observe_fails_on_one_rank", "rank_zero_alone", "models_differ")]
    + [(3, "ties"), (3, "few_triples"), (3, "after_errors")],
)
def test_every_rank_returns_the_single_process_results(outcomes, world_size: int, name: str) -> None:
    if name == "ddp_pykeen_inverse":
        pytest.importorskip("pykeen")
    expected = SCENARIOS[name](None)
    for got in ok_values(outcomes[world_size], name):
        assert_same_results(got, expected)


@pytest.mark.parametrize("world_size", [2, 3])
def test_distributed_ranks_equal_the_brute_force_reference(outcomes, world_size: int) -> None:
    graph, table = tie_heavy_case()
    reference = reference_ranks(table, graph.triples, graph.filter_triples)
    for got in ok_values(outcomes[world_size], "ties"):
        for code, side in enumerate(("head", "tail")):
            mine = got.records["side"] == code
            np.testing.assert_array_equal(got.records["task_index"][mine], np.arange(len(graph.triples)))
            for column in ("optimistic", "pessimistic", "num_candidates"):
                np.testing.assert_array_equal(got.records[column][mine], reference[side][column])


def test_sums_only_results_have_no_records(outcomes) -> None:
    for got in ok_values(outcomes[2], "sums_only"):
        assert got.records is None
        assert got.get_metric("count") == 22


def test_disagreeing_inputs_raise_the_same_error_on_every_rank(outcomes) -> None:
    pattern = (
        r"the ranks disagree on the evaluation inputs \['mapped_triples'\] \(expected identical inputs on every "
        r"rank; mapped_triples \(shape, checksum\) differs: rank 0: \(\(11, 3\), \d+\), rank 1: \(\(11, 3\), \d+\), "
        r"rank 2: \(\(11, 3\), \d+\)\); every rank must call evaluate with the same triples, filter triples and "
        r"options"
    )
    messages = set()
    for outcome in outcomes[3]:
        status, kind, message = outcome["disagree"]
        assert (status, kind) == ("error", "ValueError")
        assert re.fullmatch(pattern, message), message
        messages.add(message)
    assert len(messages) == 1


def test_invalid_input_on_one_rank_raises_on_every_rank(outcomes) -> None:
    own = "mapped_triples row 0 = [99, 0, 1] has an id out of range (entities in [0, 12), relations in [0, 3))"
    assert outcomes[3][2]["invalid_on_one_rank"] == ("error", "ValueError", own)
    for rank in (0, 1):
        assert outcomes[3][rank]["invalid_on_one_rank"] == (
            "error",
            "DistributedEvaluationError",
            f"distributed evaluation failed on another rank (rank 2: ValueError: {own})",
        )
    with pytest.raises(ValueError, match=re.escape(own)):
        SCENARIOS["invalid_on_one_rank"](None)


def test_nan_scores_in_one_share_raise_on_every_rank(outcomes) -> None:
    own = (
        "the model produced NaN scores for the head task of triple [2, 1, 3] (row 2 of mapped_triples); "
        "1 head task(s) affected"
    )
    assert outcomes[3][1]["nan_in_one_share"] == ("error", "ValueError", own)
    for rank in (0, 2):
        assert outcomes[3][rank]["nan_in_one_share"] == (
            "error",
            "DistributedEvaluationError",
            f"distributed evaluation failed on another rank (rank 1: ValueError: {own})",
        )
    with pytest.raises(ValueError, match=re.escape(own)):
        SCENARIOS["nan_in_one_share"](None)


def test_process_group_selects_a_subgroup(outcomes) -> None:
    expected = SCENARIOS["subgroup"](None)["alone"]
    for outcome in ok_values(outcomes[3], "subgroup"):
        assert_same_results(outcome["alone"], expected)
    outside = ok_values(outcomes[3], "subgroup")[2]["in_group"]
    assert outside == ("error", "ValueError", "this process (global rank 2) is not a member of process_group")


def test_all_gather_uneven_exchanges_sizes_pads_and_trims(outcomes) -> None:
    expected = SCENARIOS["uneven_gather"](None)
    for got in ok_values(outcomes[3], "uneven_gather"):
        assert [tuple(part.shape) for part in got] == [(0, 2), (2, 2), (4, 2)]
        for part, want in zip(got, expected, strict=True):
            assert torch.equal(part, want)


# -- single process: no group -------------------------------------------------------------------------------


@pytest.mark.parametrize("distributed", [None, False])
def test_without_a_process_group_evaluation_is_local(distributed) -> None:
    assert resolve_group(distributed) is None


NO_GROUP = (
    "distributed evaluation needs an initialised torch.distributed process group "
    "(call torch.distributed.init_process_group first), got none"
)


def test_distributed_true_without_a_process_group_raises() -> None:
    graph, table = tie_heavy_case()
    with pytest.raises(ValueError, match=re.escape(NO_GROUP)):
        RankBasedEvaluator().evaluate(TableModel(table), graph.triples, use_tqdm=False, distributed=True)


def test_a_process_group_without_initialisation_raises() -> None:
    with pytest.raises(ValueError, match=re.escape(NO_GROUP)):
        resolve_group(None, process_group=object())


def test_distributed_must_be_a_bool_or_none() -> None:
    with pytest.raises(TypeError, match=re.escape("distributed must be None, True or False, got 'yes'")):
        resolve_group("yes")  # type: ignore[arg-type]


def test_shard_without_a_group_keeps_every_task() -> None:
    tasks = torch.arange(5)
    assert shard(tasks, None) is tasks


def test_checksum_sees_values_and_positions() -> None:
    triples = torch.tensor([[0, 1, 2], [3, 4, 5]])
    assert checksum(triples) == checksum(triples.clone())
    assert checksum(triples) != checksum(triples.flip(0))
    changed = triples.clone()
    changed[1, 2] = 6
    assert checksum(triples) != checksum(changed)
    assert fingerprint(a=triples, b=[triples], c=3) == {
        "a": ((2, 3), checksum(triples)),
        "b": (((2, 3), checksum(triples)),),
        "c": 3,
    }


def test_an_interrupted_rank_makes_the_others_fail_at_once(outcomes) -> None:
    """A BaseException (KeyboardInterrupt caught by a training loop that stays alive) is exchanged like any error:
    the other ranks raise well before the 30 s collective timeout instead of hanging in a collective."""
    ranks = [value for _status, value in (outcome["interrupted_on_one_rank"] for outcome in outcomes[3])]
    assert ranks[1][0] == "interrupted"
    for rank in (0, 2):
        status, kind, message, seconds = ranks[rank][0], ranks[rank][1], ranks[rank][2], ranks[rank][-1]
        assert (status, kind) == ("error", "DistributedEvaluationError")
        assert message == "distributed evaluation failed on another rank (rank 1: KeyboardInterrupt: )"
        assert seconds < 20


def test_a_forecasting_hook_failing_on_one_rank_makes_the_other_fail_at_once(outcomes) -> None:
    """The hook ran between time steps outside every collective check: the other rank waited in the next step
    until the process group timed out (30 minutes by default)."""
    ranks = [value for _status, value in (outcome["observe_fails_on_one_rank"] for outcome in outcomes[2])]
    assert ranks[1][:3] == ("error", "RuntimeError", "the forecasting hook failed")
    status, kind, message, seconds = ranks[0]
    assert (status, kind) == ("error", "DistributedEvaluationError")
    assert message == (
        "distributed evaluation failed on another rank (rank 1: RuntimeError: the forecasting hook failed)"
    )
    assert seconds < 20


def test_rank_zero_evaluating_alone_is_told_to_pass_distributed_false(outcomes) -> None:
    """``if rank == 0: evaluator.evaluate(...)`` with the default distributed=None: rank 0 raises the one-sentence
    error once the entry check's timeout (2 s here) has passed -- before, it waited in the first collective until the
    process group timed out (30 s here, 30 min by default) and failed with a gloo error that named neither kgeval nor
    the fix. (The other scenarios of this run, every rank evaluating, pass the same check and stay exact.)"""
    ranks = [value for _status, value in (outcome["rank_zero_alone"] for outcome in outcomes[2])]
    assert ranks[1] == ("skipped",)
    status, kind, message, seconds = ranks[0]
    assert (status, kind) == ("error", "DistributedEvaluationError")
    assert message.startswith("kgeval: rank 0 evaluates alone: pass distributed=False to evaluate on this rank only")
    assert "KGEVAL_DISTRIBUTED_ENTRY_TIMEOUT" in message
    assert seconds < 20


def test_ranks_holding_different_models_are_refused_naming_them(outcomes) -> None:
    """Two ranks, each with its own DistMult, every rank calling evaluate: before, both returned the merged ranks
    of neither model; now every rank refuses, naming rank 1 and the remedy, and distributed=False evaluates each
    rank's own model (equal to its single-process results)."""
    for outcome in outcomes[2]:
        status, (together, per_rank, own) = outcome["models_differ"]
        assert status == "ok"
        kind, message = together[1:]
        assert (together[0], kind) == ("error", "ValueError")
        assert message.startswith("the ranks hold models that score differently: rank(s) [1] score kgeval's probe")
        assert "pass distributed=False on every rank" in message
        assert per_rank[0] == "ok" and per_rank[1] == own


def test_a_group_evaluates_together_after_rank_zero_evaluated_alone(outcomes) -> None:
    """After rank 0's evaluation alone was abandoned, the next evaluation every rank calls runs as usual: before,
    rank 0's count of evaluations stayed one ahead of the others' and every later one failed, naming a late rank."""
    expected = SCENARIOS["after_alone"](None)
    for outcome in outcomes[2]:
        status, value = outcome["after_alone"]
        assert status == "ok", value
        assert_same_results(value, expected)


@pytest.mark.cuda
def test_nccl_ranks_return_the_single_process_results(tmp_path) -> None:
    """On a machine with two GPUs or more: the same scenarios over NCCL (one GPU per rank) as over gloo."""
    if torch.cuda.device_count() < 2 or not dist.is_nccl_available():
        pytest.skip("NCCL evaluation needs NCCL and two GPUs (one per rank)")
    names = ["ties", "gemm", "sums_only", "restricted_tail"]
    per_rank = run_scenarios(2, names, tmp_path, backend="nccl")
    for name in names:
        expected = SCENARIOS[name](None)
        for got in ok_values(per_rank, name):
            assert_same_results(got, expected)
