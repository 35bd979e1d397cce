"""Candidates from a memory-mapped table (a model larger than memory): kgeval ranks them in place -- the same
ranks as the table in memory, and the process's anonymous memory grows far less than the table (the mapped pages are
the kernel's to drop) -- run through benchmarks/mmap_scale.py."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from mmap_scale import MappedDistMult, write_table  # noqa: E402


def test_a_memory_mapped_table_ranks_as_the_table_in_memory(tmp_path) -> None:
    path = tmp_path / "entities.f32"
    write_table(path, 5000, 16, seed=1)
    mapped = torch.from_numpy(np.memmap(path, dtype=np.float32, mode="r+", shape=(5000, 16)))
    generator = torch.Generator().manual_seed(0)
    triples = (torch.rand(40, 3, generator=generator) * torch.tensor([5000, 4, 5000])).long()
    known = (torch.rand(2000, 3, generator=generator) * torch.tensor([5000, 4, 5000])).long()
    results = {}
    for name, table in (("mapped", mapped), ("in memory", mapped.clone())):
        model = MappedDistMult(table, 4, seed=1)
        results[name] = RankBasedEvaluator(slice_size=700).evaluate(model, triples, additional_filter_triples=known,
                                                                    use_tqdm=False)  # fmt: skip
    assert results["mapped"] == results["in memory"]


def _anonymous_growth(entities: int, folder: Path) -> tuple[float, float]:
    """(anonymous memory growth during the evaluation, table size), MiB, of benchmarks/mmap_scale.py at d = 32."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "mmap_scale.py"), "--entities", str(entities), "--dim", "32",
         "--tasks", "50", "--known", "100000", "--folder", str(folder)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r"anonymous ([\d,]+) MiB \(before: ([\d,]+) MiB\)", done.stdout)
    peak, before = (float(value.replace(",", "")) for value in found.groups())
    table = float(re.search(r"table ([\d,]+) MiB", done.stdout).group(1).replace(",", ""))
    return peak - before, table


def test_the_table_is_never_copied_whole(tmp_path) -> None:
    """Tables of 1M and 4M entities (122 and 488 MiB): the evaluation's anonymous memory (fixed costs aside: numba,
    the filter index, tiles) grows by far less between them than the tables do -- the table is read in place."""
    small_growth, small_table = _anonymous_growth(1_000_000, tmp_path)
    large_growth, large_table = _anonymous_growth(4_000_000, tmp_path)
    assert large_growth - small_growth < (large_table - small_table) / 4, (small_growth, large_growth)


# -- a table several times larger than the memory it may use ------------------------------------------------------

BIG_ENTITIES, BIG_DIM = 2_000_000, 64  #: a 488 MiB table
BUDGET_MIB = 128  #: the memory the evaluation may hold: a quarter of the table


def _rank_in_subprocess(table: Path, out: Path, *options: str) -> dict[str, np.ndarray]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.mmap_worker", str(table), str(BIG_ENTITIES), str(BIG_DIM), str(out),
         *options],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    return dict(np.load(out))


@pytest.fixture(scope="module")
def big_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    """The 488 MiB table on disk and the ranks of the evaluation with it loaded in memory."""
    folder = tmp_path_factory.mktemp("big_table")
    path = folder / "entities.f32"
    write_table(path, BIG_ENTITIES, BIG_DIM, seed=1)
    return path, _rank_in_subprocess(path, folder / "loaded.npz", "--loaded")


@pytest.fixture(scope="module")
def loaded_runs(big_table, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, np.ndarray]]:
    """Per model, the evaluation with the table loaded in memory: its ranks, and the anonymous memory it adds --
    kgeval's tiles and the BLAS's own buffers, which differ between machines (an Intel and an AMD host, their BLAS
    code paths and allocators), so the mapped runs below are held to that working set plus the budget, not to a
    constant that one machine's libraries happen to fit."""
    path, loaded = big_table
    transe = _rank_in_subprocess(
        path, tmp_path_factory.mktemp("transe") / "loaded.npz", "--loaded", "--model", "transe"
    )
    return {"distmult": loaded, "transe": transe}


def _anonymous_growth_mib(run: dict[str, np.ndarray]) -> float:
    return float(run["anonymous_peak"] - run["anonymous_before"]) / 1024


def _assert_same_ranks(got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    for column in ("optimistic", "pessimistic", "num_candidates"):
        np.testing.assert_array_equal(got[column], expected[column], err_msg=column)


def test_the_pages_of_counted_slices_are_let_go(big_table, tmp_path) -> None:
    """Memory-mapped and released (as kgeval does when a table crowds the memory available; forced here, where it
    fits), the 488 MiB table ranks as in memory, and the process's file-backed resident memory grows by less than
    the budget (a quarter of the table) while every slice is read: each slice's pages are handed back once counted.
    (Kept, they would all be resident at the end of the first pass: ~488 MiB.)"""
    path, loaded = big_table
    mapped = _rank_in_subprocess(path, tmp_path / "mapped.npz", "--always-release")
    _assert_same_ranks(mapped, loaded)
    growth_mib = (mapped["file_peak"] - mapped["file_before"]) / 1024
    assert growth_mib < BUDGET_MIB, growth_mib


def test_an_l2_model_never_copies_the_table(big_table, loaded_runs, tmp_path) -> None:
    """TransE ("l2": scores 2 q.c - ||c||^2) over the 488 MiB table, released slice by slice, ranks as with the
    table in memory; file-backed memory grows by less than the budget, and anonymous memory by less than the budget
    beyond the evaluation's working set with the table in memory: the squared norms are one float per entity, and
    the table is not extended by a column (a copy as large as the table, before)."""
    path, _distmult_ranks = big_table
    loaded = loaded_runs["transe"]
    mapped = _rank_in_subprocess(path, tmp_path / "mapped.npz", "--always-release", "--model", "transe")
    _assert_same_ranks(mapped, loaded)
    file_growth_mib = (mapped["file_peak"] - mapped["file_before"]) / 1024
    assert file_growth_mib < BUDGET_MIB, file_growth_mib
    working_set = _anonymous_growth_mib(loaded)
    assert _anonymous_growth_mib(mapped) - working_set < BUDGET_MIB, (_anonymous_growth_mib(mapped), working_set)


@pytest.mark.parametrize("model", ["distmult", "transe"])
def test_a_whitelist_is_gathered_a_slice_at_a_time(big_table, loaded_runs, tmp_path, model: str) -> None:
    """Candidates restricted to half the 488 MiB table's entities, released slice by slice: the ranks are those of
    the table in memory, file-backed memory grows by less than the budget and anonymous memory by less than the
    budget beyond the working set of the unrestricted evaluation with the table in memory -- each slice's rows are
    gathered when it is counted (before, the whitelist's rows were copied at once: 244 MiB)."""
    path, _distmult_ranks = big_table
    loaded = _rank_in_subprocess(path, tmp_path / "loaded.npz", "--loaded", "--whitelist", "--model", model)
    mapped = _rank_in_subprocess(path, tmp_path / "mapped.npz", "--always-release", "--whitelist", "--model", model)
    _assert_same_ranks(mapped, loaded)
    assert (loaded["num_candidates"] <= BIG_ENTITIES // 2).all()
    file_growth_mib = (mapped["file_peak"] - mapped["file_before"]) / 1024
    assert file_growth_mib < BUDGET_MIB, file_growth_mib
    working_set = _anonymous_growth_mib(loaded_runs[model])
    assert _anonymous_growth_mib(mapped) - working_set < BUDGET_MIB, (_anonymous_growth_mib(mapped), working_set)


def _memory_cgroup(limit_bytes: int) -> Path | None:
    """A new cgroup (v1 memory controller, or v2) limited to ``limit_bytes``: its procs file, or None where this
    machine does not let the test create one."""
    candidates = [(Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"), (Path("/sys/fs/cgroup"), "memory.max")]
    for root, limit_file in candidates:
        if not (root / limit_file).exists() and not (root / "cgroup.procs").exists():
            continue
        group = root / f"kgeval-test-{os.getpid()}"
        try:
            group.mkdir(exist_ok=True)
            (group / limit_file).write_text(str(limit_bytes))
            return group / "cgroup.procs"
        except OSError:
            with contextlib.suppress(OSError):
                group.rmdir()
    return None


def test_a_table_four_times_the_memory_limit_ranks_as_in_memory(big_table, tmp_path) -> None:
    """Under a hard memory limit (a cgroup) of 128 MiB of new charges -- the 488 MiB table's page cache included --
    the evaluation finishes with the ranks of the table in memory (kgeval sees the cgroup's limit and releases each
    slice; loaded into memory instead, the same evaluation is killed). Skipped where no cgroup can be created."""
    path, loaded = big_table
    procs = _memory_cgroup(BUDGET_MIB * 2**20)
    if procs is None:
        pytest.skip("this machine does not let the test create a memory cgroup")
    try:
        limited = _rank_in_subprocess(path, tmp_path / "limited.npz", "--cgroup-procs", str(procs))
    finally:
        with contextlib.suppress(OSError):
            procs.parent.rmdir()
    _assert_same_ranks(limited, loaded)
