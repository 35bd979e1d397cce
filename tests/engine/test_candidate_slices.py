"""Candidate slices (kgeval._engine.candidate_slices): read in place, released from a shared file mapping once
counted, or streamed from host memory to the device one slice at a time."""

from __future__ import annotations

import mmap

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval._engine import candidate_slices as slices_module
from kgeval._engine.candidate_slices import (
    STREAM_SLICE_BYTES,
    GatheredSlices,
    InPlaceSlices,
    MappedFileSlices,
    StreamedSlices,
    candidate_slices,
    shared_file_mapping,
    streamed_slice_rows,
)
from kgeval._engine.gemm_scoring import GemmScorer


class HostTableDistMult(torch.nn.Module):
    """DistMult whose relation vectors (and so queries) live on ``device`` and whose entity table is ``table``,
    wherever that is (host memory, pinned or not, or the device)."""

    kgeval_similarity = "dot"

    def __init__(self, table: torch.Tensor, relations: torch.Tensor, device: torch.device) -> None:
        super().__init__()
        self.table, self.device = table, device
        self.relations = torch.nn.Parameter(relations.to(device), requires_grad=False)
        self.num_entities, self.num_relations = table.shape[0], relations.shape[0]

    def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        entity_column, relation_column = (0, 1) if target == "tail" else (1, 0)
        entities = self.table[batch[:, entity_column].to(self.table.device)].to(self.device)
        return entities * self.relations[batch[:, relation_column]]

    def kgeval_candidates(self, target: str) -> torch.Tensor:
        return self.table

    def score_hrt(self, hrt: torch.Tensor) -> torch.Tensor:
        heads, tails = (self.table[ids.to(self.table.device)].to(self.device) for ids in (hrt[:, 0], hrt[:, 2]))
        return (heads * self.relations[hrt[:, 1]] * tails).sum(dim=1)


class HostTableTransE(HostTableDistMult):
    """TransE-L2 (or L1) over ``table``: query h + r (or t - r), similarity "l2" ("l1")."""

    def __init__(self, table: torch.Tensor, relations: torch.Tensor, device: torch.device, p: int) -> None:
        super().__init__(table, relations, device)
        self.p, self.kgeval_similarity = p, f"l{p}"

    def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        if target == "tail":
            return self.table[batch[:, 0]].to(self.device) + self.relations[batch[:, 1]]
        return self.table[batch[:, 1]].to(self.device) - self.relations[batch[:, 0]]

    def score_hrt(self, hrt: torch.Tensor) -> torch.Tensor:
        heads, tails = (self.table[ids].to(self.device) for ids in (hrt[:, 0], hrt[:, 2]))
        return -(heads + self.relations[hrt[:, 1]] - tails).norm(p=self.p, dim=1)


def _graph(num_entities: int = 900, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(entities: small integers, ties everywhere; relations; test triples; known triples)."""
    rng = np.random.default_rng(seed)
    entities = torch.from_numpy(rng.integers(-1, 2, (num_entities, 8)).astype(np.float32))
    relations = torch.from_numpy(rng.integers(-1, 2, (5, 8)).astype(np.float32))
    high = [num_entities, 5, num_entities]
    return (
        entities,
        relations,
        torch.from_numpy(rng.integers(0, high, (60, 3))),
        torch.from_numpy(rng.integers(0, high, (3000, 3))),
    )


def test_a_table_on_the_device_is_read_in_place() -> None:
    table = torch.randn(10, 4)
    slices = candidate_slices(table, torch.device("cpu"))
    assert type(slices) is InPlaceSlices and not slices.streams
    assert slices.slice(2, 5).data_ptr() == table[2:5].data_ptr()  # a view


def test_streamed_slices_copy_one_slice_at_a_time() -> None:
    table = torch.arange(40.0).reshape(10, 4)
    slices = StreamedSlices(table, torch.device("cpu"))
    got = slices.slice(3, 7)
    assert torch.equal(got, table[3:7])  # (on the CPU "copied" to the CPU: the same memory)
    assert slices.copied_rows == 4
    assert streamed_slice_rows(table) == STREAM_SLICE_BYTES // (4 * 4)


def test_a_table_elsewhere_than_host_memory_and_the_device_is_refused() -> None:
    meta = torch.empty(4, 2, device="meta")
    with pytest.raises(ValueError, match="must live on the model's device or in host memory"):
        candidate_slices(meta, torch.device("cpu"))


def test_streamed_candidates_rank_as_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every table streamed (forced on CPU, where host and device memory are one), the ranks are those of the
    table read in place, and no copy ever holds more than one slice."""
    entities, relations, test, known = _graph()
    cpu = torch.device("cpu")
    in_place = RankBasedEvaluator(filtered="both", slice_size=200).evaluate(
        HostTableDistMult(entities, relations, cpu), test, additional_filter_triples=known, use_tqdm=False
    )
    made: list[StreamedSlices] = []

    def always_streamed(table: torch.Tensor, device: torch.device, rows: None = None) -> StreamedSlices:
        assert rows is None  # no whitelist here
        made.append(StreamedSlices(table, device))
        return made[-1]

    copies: list[int] = []
    original_copy = StreamedSlices._copy

    def counted_copy(self: StreamedSlices, start: int, stop: int) -> torch.Tensor:
        copies.append(stop - start)
        return original_copy(self, start, stop)

    monkeypatch.setattr("kgeval._engine.gemm_scoring.candidate_slices", always_streamed)
    monkeypatch.setattr(StreamedSlices, "_copy", counted_copy)
    streamed = RankBasedEvaluator(filtered="both", slice_size=200).evaluate(
        HostTableDistMult(entities, relations, cpu), test, additional_filter_triples=known, use_tqdm=False
    )
    assert streamed == in_place and streamed.raw == in_place.raw
    assert made and copies and max(copies) <= 200


def test_a_streamed_table_is_sliced_and_never_fused() -> None:
    """For a device other than the table's: at most STREAM_SLICE_BYTES of vectors per slice, and no fused kernel
    (it would read the host table from the device)."""
    table = torch.zeros(10, 16)
    model = HostTableDistMult(table, torch.zeros(2, 16), torch.device("cpu"))
    scorer = GemmScorer(model, "tail", 10, None)
    assert scorer.max_slice(torch.device("cpu")) is None
    assert scorer.max_slice(torch.device("cuda")) == STREAM_SLICE_BYTES // (16 * 4)
    assert scorer.fusable
    scorer._slices = StreamedSlices(table, torch.device("cpu"))
    assert not scorer.fusable


# -- shared file mappings -----------------------------------------------------------------------------------------


def _mapped(tmp_path, mode: str, rows: int = 4096, dim: int = 64) -> torch.Tensor:
    path = tmp_path / "table.f32"
    np.arange(rows * dim, dtype=np.float32).tofile(path)
    return torch.from_numpy(np.memmap(path, dtype=np.float32, mode=mode, shape=(rows, dim)))


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc/self/maps")
def test_only_shared_file_mappings_are_released(tmp_path) -> None:
    assert shared_file_mapping(_mapped(tmp_path, "r+"))
    assert not shared_file_mapping(_mapped(tmp_path, "c"))  # private copy-on-write: releasing could lose writes
    assert not shared_file_mapping(torch.zeros(4096, 64))  # anonymous memory: releasing would zero it
    assert not shared_file_mapping(torch.zeros(0, 64))


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc/self/maps")
def test_released_pages_read_back_unchanged(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large shared mapping is released a slice at a time; its values read back unchanged (from the file)."""
    monkeypatch.setattr(slices_module, "RELEASE_MIN_BYTES", 1)
    monkeypatch.setattr(slices_module, "RELEASE_MEMORY_FRACTION", 0.0)
    table = _mapped(tmp_path, "r+")
    expected = table.clone()
    slices = candidate_slices(table, torch.device("cpu"))
    assert type(slices) is MappedFileSlices
    for start in range(0, 4096, 512):
        assert torch.equal(slices.slice(start, start + 512), expected[start : start + 512])
    assert slices.released_bytes >= 7 * 512 * 64 * 4 - 14 * mmap.PAGESIZE  # 7 slices released (whole pages)
    assert torch.equal(table, expected)


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc")
def test_a_mapped_table_is_released_only_when_it_crowds_the_memory(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    available = slices_module.available_memory()
    assert available is not None and available > 0
    monkeypatch.setattr(slices_module, "RELEASE_MIN_BYTES", 1)
    table = _mapped(tmp_path, "r+")  # 1 MiB: far below half the memory available
    assert type(candidate_slices(table, torch.device("cpu"))) is InPlaceSlices
    monkeypatch.setattr(slices_module, "available_memory", lambda: 2 * 2**20 - 1)
    assert type(candidate_slices(table, torch.device("cpu"))) is MappedFileSlices


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc/self/maps")
def test_gathered_whitelist_slices_hold_the_whitelist_rows_and_release_the_previous_span(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slices_module, "RELEASE_MIN_BYTES", 1)
    monkeypatch.setattr(slices_module, "RELEASE_MEMORY_FRACTION", 0.0)
    table = _mapped(tmp_path, "r+")
    expected = table.clone()
    rows = torch.tensor([3, 4, 700, 701, 2048, 4000, 4095])
    slices = candidate_slices(table, torch.device("cpu"), rows)
    assert type(slices) is GatheredSlices and not slices.streams
    released: list[tuple[int, int]] = []
    monkeypatch.setattr(slices, "release", lambda start, stop: released.append((start, stop)))
    for start in range(0, 7, 3):
        assert torch.equal(slices.slice(start, min(start + 3, 7)), expected[rows[start : start + 3]])
    assert released == [(3, 701), (701, 4001)]  # the table rows each earlier slice spanned
    assert slices.gathered_rows == 7 and torch.equal(slices.take(1, 4), expected[rows[1:4]])
    assert torch.equal(table, expected)


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc/self/maps")
@pytest.mark.parametrize("similarity", ["dot", "l2", "l1"])
def test_a_whitelist_over_a_released_table_ranks_as_its_copy(
    tmp_path, monkeypatch: pytest.MonkeyPatch, similarity: str
) -> None:
    """A whitelist over a table whose pages are released is gathered slice by slice (never copied whole) and ranks
    exactly as the whitelist's copy in memory, with ties everywhere, filtered and raw, in several slices."""
    entities, relations, test, known = _graph()
    path = tmp_path / "entities.f32"
    entities.numpy().tofile(path)
    mapped = torch.from_numpy(np.memmap(path, dtype=np.float32, mode="r+", shape=tuple(entities.shape)))
    whitelist = torch.arange(0, entities.shape[0], 3)
    test = test[torch.isin(test[:, 0], whitelist) & torch.isin(test[:, 2], whitelist)]
    assert len(test) >= 5
    options = {"restrict_entities_to": whitelist, "additional_filter_triples": known, "use_tqdm": False}
    gathered: list[GatheredSlices] = []
    real_slices = slices_module.candidate_slices

    def recording(*args, **kwargs):
        made = real_slices(*args, **kwargs)
        if isinstance(made, GatheredSlices):
            gathered.append(made)
        return made

    results = {}
    for name, table in (("copied", entities), ("gathered", mapped)):
        cpu = torch.device("cpu")
        model = (
            HostTableDistMult(table, relations, cpu)
            if similarity == "dot"
            else HostTableTransE(table, relations, cpu, p=int(similarity[1]))
        )
        with monkeypatch.context() as patch:
            patch.setattr(slices_module, "RELEASE_MIN_BYTES", 1 if name == "gathered" else 2**62)
            patch.setattr(slices_module, "RELEASE_MEMORY_FRACTION", 0.0)
            patch.setattr("kgeval._engine.gemm_scoring.candidate_slices", recording)
            evaluator = RankBasedEvaluator(kernel="eager", filtered="both", slice_size=70)
            results[name] = evaluator.evaluate(model, test, **options)
    assert sum(slices.gathered_rows for slices in gathered) > 0  # the scorers read gathered slices
    for column in ("optimistic", "pessimistic", "num_candidates"):
        np.testing.assert_array_equal(results["gathered"].records[column], results["copied"].records[column])
    assert results["gathered"] == results["copied"] and results["gathered"].raw == results["copied"].raw


@pytest.mark.cuda
def test_a_pinned_host_table_streams_to_the_gpu_with_the_ranks_of_a_device_table() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    entities, relations, test, known = _graph(5000)
    cuda = torch.device("cuda")
    on_device = RankBasedEvaluator(filtered="both", slice_size=700).evaluate(
        HostTableDistMult(entities.to(cuda), relations, cuda), test, additional_filter_triples=known, use_tqdm=False
    )
    streamed = RankBasedEvaluator(filtered="both", slice_size=700).evaluate(
        HostTableDistMult(entities.pin_memory(), relations, cuda), test, additional_filter_triples=known,
        use_tqdm=False,
    )  # fmt: skip
    assert streamed == on_device and streamed.raw == on_device.raw
