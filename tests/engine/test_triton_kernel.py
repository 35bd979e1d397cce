"""The "triton" counting kernel against the reference counts, under Triton's interpreter on CPU tensors (compiled
on a GPU): ties, +-inf, NaN, float16 / bfloat16 / float32 / float64 tiles, row maps and strided views, and whole
evaluations against the brute-force reference, filtered and raw."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("triton")

from kgeval import RankBasedEvaluator
from kgeval._engine.kernels import TRITON, comparison_counts
from kgeval._engine.kernels.choice import KernelChooser, triton_kernel_available
from tests.helpers.graphs import TableModel, quantised_table, random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def random_tile(seed: int, rows: int, width: int, dtype: torch.dtype) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    values = rng.integers(-2, 3, (rows, width)).astype(np.float64)
    special = rng.random((rows, width))
    values[special < 0.05] = np.inf
    values[(special >= 0.05) & (special < 0.1)] = -np.inf
    values[(special >= 0.1) & (special < 0.13)] = np.nan
    return torch.from_numpy(values).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", range(3))
def test_counts_equal_the_reference(seed: int, dtype: torch.dtype) -> None:
    assert triton_kernel_available(DEVICE)
    rng = np.random.default_rng(seed)
    wide = random_tile(seed, 6, 37, dtype).to(DEVICE)
    tile = wide[:, 2:]  # a view into a wider matrix: row stride 37
    rows = torch.as_tensor(rng.integers(0, 6, 9), device=DEVICE)
    true = random_tile(seed + 10, 1, 9, dtype)[0].to(DEVICE)
    greater, less, nan = TRITON.count(tile, true, rows)
    expected = comparison_counts(tile.float(), rows, true.float())
    assert greater.tolist() == expected[0].tolist()
    assert less.tolist() == expected[1].tolist()
    assert nan.tolist() == ((expected[2] > 0) | torch.isnan(true)).tolist()


def test_width_beyond_one_block_and_identity_rows() -> None:
    tile = random_tile(4, 3, 2500, torch.float32).to(DEVICE)  # more than one 1024-score step per row
    true = torch.tensor([0.0, 1.0, -1.0], device=DEVICE)
    greater, less, _ = TRITON.count(tile, true)
    expected = comparison_counts(tile, torch.arange(3, device=DEVICE), true)
    assert (greater.tolist(), less.tolist()) == (expected[0].tolist(), expected[1].tolist())


@pytest.mark.parametrize("filtered", [True, False])
@pytest.mark.parametrize("sizes", [(None, None), (3, 4)])
def test_evaluations_match_the_reference(filtered: bool, sizes: tuple) -> None:
    graph = random_graph(6, num_entities=12, num_relations=2, num_triples=15, num_filter=20)
    table = quantised_table(6, 12, 2, levels=3, inf_fraction=0.1)
    evaluator = RankBasedEvaluator(filtered=filtered, kernel="triton", batch_size=sizes[0], slice_size=sizes[1])
    results = evaluator.evaluate(
        TableModel(table.to(DEVICE)), graph.triples.to(DEVICE), additional_filter_triples=graph.filter_triples,
        use_tqdm=False,
    )  # fmt: skip
    expected = reference_ranks(table, graph.triples, graph.filter_triples, filtered=filtered)
    assert_same_ranks(results.records, expected)


def test_the_chooser_picks_triton_only_where_it_runs(monkeypatch) -> None:
    assert KernelChooser("triton").choose(DEVICE, 10) is TRITON
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # set only where there is no GPU
    if not torch.cuda.is_available():
        with pytest.warns(RuntimeWarning, match="the triton counting kernel needs triton and a CUDA device"):
            assert KernelChooser("triton").choose(torch.device("cpu"), 10) is not TRITON
    assert KernelChooser("auto").choose(torch.device("meta"), 10) is not TRITON  # auto: never triton (by name only)


@pytest.mark.cuda
def test_cuda_evaluation_equals_the_cpu_one() -> None:
    """On a GPU: every kernel's CUDA evaluation gives the CPU's ranks."""
    graph = random_graph(7, num_entities=40, num_relations=3, num_triples=60, num_filter=80)
    table = quantised_table(7, 40, 3, levels=3, inf_fraction=0.05)
    cpu = RankBasedEvaluator(kernel="eager").evaluate(
        TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
    )
    for kernel in ("eager", "triton"):
        cuda = RankBasedEvaluator(kernel=kernel).evaluate(
            TableModel(table.cuda()), graph.triples.cuda(), additional_filter_triples=graph.filter_triples,
            use_tqdm=False,
        )  # fmt: skip
        assert cuda.records.equals(cpu.records), kernel
