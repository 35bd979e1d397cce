"""No host synchronisation inside the batch loop on an accelerator, checked on CPU.

The loop runs with the choices kgeval makes off the CPU (the "masked" pair layout, the "compare" kernel) under a
TorchFunctionMode that records every operation which, on CUDA, would wait for the device: reading a value
(``item``, ``tolist``, ``bool``, ``int``, ``float``), data-dependent shapes (``nonzero``, ``unique``, boolean
indexing, ``masked_select``, ``repeat_interleave`` without ``output_size``) and copies to the host. The only reads
allowed are in functions that do them on a CPU only; each of those is shown to leave a non-CPU tensor unread.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode

from kgeval import RankBasedEvaluator
from kgeval._engine import gemm_scoring, scoring, sizes
from kgeval._engine.kernels import COMPARE, TritonKernel, comparison_counts
from kgeval._engine.kernels.choice import KernelChooser
from kgeval._engine.loop import EngineState, LoopSettings
from kgeval.models import DistMult, TransE
from tests.helpers.graphs import FullScoreTableModel, TableModel, quantised_table, random_graph

READS = {
    torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__bool__, torch.Tensor.__int__, torch.Tensor.__float__,
    torch.Tensor.__index__, torch.Tensor.numpy, torch.Tensor.cpu, torch.Tensor.nonzero, torch.nonzero,
    torch.Tensor.unique, torch.unique, torch.unique_consecutive, torch.masked_select, torch.Tensor.masked_select,
    torch.argwhere,
}  # fmt: skip
#: functions that read values on a CPU only (checked below to leave other devices' tensors unread)
CPU_ONLY = {"_largest", "_nan_free"}


class SyncRecorder(TorchFunctionMode):
    """Records (operation, kgeval function) of every operation that would synchronise with a device."""

    def __init__(self) -> None:
        super().__init__()
        self.found: Counter[tuple[str, str]] = Counter()

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        syncs = func in READS
        if func in (torch.repeat_interleave, torch.Tensor.repeat_interleave) and "output_size" not in kwargs:
            repeats = kwargs.get("repeats", args[1] if len(args) > 1 else args[0])
            syncs = isinstance(repeats, torch.Tensor)  # a tensor of repeats: the output size must be read
        if func is torch.Tensor.__getitem__ and len(args) > 1:
            index = args[1] if isinstance(args[1], tuple) else (args[1],)
            if any(isinstance(part, torch.Tensor) and part.dtype == torch.bool for part in index):
                syncs, name = True, "boolean indexing"
        if syncs:
            frames = [frame for frame in traceback.extract_stack()[:-1] if "/kgeval/" in frame.filename]
            if not frames or frames[-1].name not in CPU_ONLY:
                where = f"{frames[-1].filename.split('/kgeval/')[-1]}:{frames[-1].lineno}" if frames else "?"
                self.found[name, where] += 1
        return func(*args, **kwargs)


def around_each_batch(monkeypatch: pytest.MonkeyPatch, context: Callable[[], AbstractContextManager[Any]]) -> None:
    """Run every batch of the loop (the work ``run_with_retry`` hands each batch), and nothing else, inside
    ``context()``."""
    original = sizes.run_with_retry

    def instrumented(ranges: Any, run: Any, *args: Any, **kwargs: Any) -> Any:
        def watched(begin: int, end: int) -> Any:
            with context():
                return run(begin, end)

        return original(ranges, watched, *args, **kwargs)

    monkeypatch.setattr(sizes, "run_with_retry", instrumented)


@contextmanager
def recording_batches(monkeypatch: pytest.MonkeyPatch) -> Iterator[SyncRecorder]:
    """Record inside every batch of the loop, nowhere else."""
    recorder = SyncRecorder()
    around_each_batch(monkeypatch, lambda: recorder)
    yield recorder


GRAPH = random_graph(3, num_entities=20, num_relations=3, num_triples=40, num_filter=60)
TABLE = quantised_table(3, 20, 3, levels=4)


class TriplesOnly(torch.nn.Module):
    """Scores whole triples only (the TripleScorer path)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = DistMult(20, 3, dim=8, seed=1)
        self.num_entities = 20

    def score_hrt(self, hrt: torch.Tensor) -> torch.Tensor:
        return self.inner.score_hrt(hrt)


MODELS = {
    "gemm": lambda: DistMult(20, 3, dim=8, seed=0),
    "cdist": lambda: TransE(20, 3, dim=8, p=1, seed=0),
    "sliced": lambda: TableModel(TABLE),
    "full_rows": lambda: FullScoreTableModel(TABLE),
    "triples": TriplesOnly,
}


@pytest.mark.parametrize("restrict", [False, True])
@pytest.mark.parametrize("filtered", [True, False, "both"])
@pytest.mark.parametrize("kind", list(MODELS))
def test_no_synchronisation_inside_the_batch_loop(monkeypatch, kind: str, filtered: Any, restrict: bool) -> None:
    evaluator = RankBasedEvaluator(filtered=filtered, batch_size=7, slice_size=6)
    evaluator._state = EngineState(kernels=KernelChooser(COMPARE), settings=LoopSettings(layout="masked"))
    extra = {"restrict_entities_to": list(range(0, 20, 2)), "drop_outside_restriction": True} if restrict else {}
    with recording_batches(monkeypatch) as recorder:
        results = evaluator.evaluate(
            MODELS[kind](), GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False, **extra
        )
    assert results.get_metric("count") > 0
    assert dict(recorder.found) == {}


class TorchFusedKernel(TritonKernel):
    """The fused kernel's interface in PyTorch operations: the engine's side of the fused path (true and filtered
    scores picked, counts over every candidate, pairs subtracted) runs as on a GPU, the Triton launches aside."""

    name = "torch-fused"

    def counts(self, scores, rows, true_scores):
        return comparison_counts(scores, rows, true_scores)

    def pick_scores(self, queries, candidates, rows, columns):
        return (queries[rows] * candidates[columns]).sum(dim=1)

    def fused_counts(self, queries, candidates, task_rows, true_scores):
        scores = queries[task_rows] @ candidates.T
        column = true_scores.unsqueeze(1)
        return (scores > column).sum(dim=1), (scores < column).sum(dim=1), torch.isnan(scores).any(dim=1)


@pytest.mark.parametrize("restrict", [False, True])
@pytest.mark.parametrize("filtered", [True, False, "both"])
@pytest.mark.parametrize("targets", [("head", "tail"), ("relation",)])
def test_no_synchronisation_on_the_fused_path(monkeypatch, filtered: Any, restrict: bool, targets) -> None:
    evaluator = RankBasedEvaluator(filtered=filtered, batch_size=7)
    evaluator._state = EngineState(kernels=KernelChooser(TorchFusedKernel()))
    extra = {"restrict_entities_to": list(range(0, 20, 2)), "drop_outside_restriction": True} if restrict else {}
    written = lambda *args: pytest.fail("the fused path wrote a score tile")  # noqa: E731
    monkeypatch.setattr(gemm_scoring.GemmScorer, "_scores", written)
    with recording_batches(monkeypatch) as recorder:
        results = evaluator.evaluate(
            DistMult(20, 3, dim=8, seed=0), GRAPH.triples, additional_filter_triples=GRAPH.filter_triples,
            targets=targets, use_tqdm=False, **extra,
        )  # fmt: skip
    assert results.get_metric(f"{'relation' if targets == ('relation',) else 'both'}.count") > 0
    assert dict(recorder.found) == {}


def test_the_recorder_sees_a_read() -> None:
    recorder = SyncRecorder()
    with recorder:
        _ = torch.tensor([1.0, 2.0]).sum().item()
        _ = torch.arange(3)[torch.tensor([True, False, True])]
        _ = torch.arange(3).repeat_interleave(torch.tensor([1, 0, 2]))
        _ = torch.arange(3).repeat_interleave(2)  # a Python int: the size is known, nothing to read
    assert sum(recorder.found.values()) == 3


def test_cpu_only_reads_leave_other_devices_unread() -> None:
    """On the meta device (no data to read) the CPU-only functions answer without reading any value."""
    meta = torch.empty(4, 3, device="meta")
    assert gemm_scoring._largest(meta) == float("inf")
    assert scoring._nan_free(meta) is False


def test_the_cpu_choices_do_read_the_host(monkeypatch) -> None:
    """The check is not vacuous: the CPU's own choices (sorted pairs with host offsets, the sign kernel's exactness
    check) read values inside the loop, which costs nothing there, and the recorder sees them."""
    evaluator = RankBasedEvaluator(batch_size=7, slice_size=6, kernel="eager")
    evaluator._state = EngineState(kernels=KernelChooser("eager"), settings=LoopSettings(layout="sorted"))
    with recording_batches(monkeypatch) as recorder:
        evaluator.evaluate(
            MODELS["gemm"](), GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False
        )
    assert sum(recorder.found.values()) > 0


@contextmanager
def cuda_sync_errors() -> Iterator[None]:
    """``torch.cuda.set_sync_debug_mode("error")`` inside the block: a synchronisation there -- a read of a device
    value, or a copy that blocks the host -- raises."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.cuda
@pytest.mark.parametrize("layout", ["masked", "sorted"])
@pytest.mark.parametrize("kind", ["gemm", "sliced"])
def test_no_synchronisation_inside_the_batch_loop_on_cuda(monkeypatch, kind: str, layout: str) -> None:
    """On a GPU, CUDA itself reports a synchronisation inside a batch: the masked layout, and the sorted one with one
    slice (its tile segments from the plan; its query groups -- every repeated query made one -- moved to the device
    from pinned memory without blocking), rank as the same evaluation on the CPU."""
    model = MODELS[kind]()
    reference = RankBasedEvaluator(batch_size=7).evaluate(
        model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False
    )
    evaluator = RankBasedEvaluator(batch_size=7, slice_size=20)
    evaluator.pair_layout = layout  # type: ignore[assignment]
    evaluator._state.settings = dataclasses.replace(evaluator._state.settings, group_min_pairs=1)
    around_each_batch(monkeypatch, cuda_sync_errors)
    results = evaluator.evaluate(
        model.to("cuda"), GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False
    )
    assert results.records is not None and reference.records is not None
    for column in ("optimistic", "pessimistic"):
        assert sorted(zip(results.records["task_index"], results.records[column], strict=True)) == sorted(
            zip(reference.records["task_index"], reference.records[column], strict=True)
        )
