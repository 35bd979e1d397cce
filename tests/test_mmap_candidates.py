"""Candidates from a memory-mapped table (a model larger than memory): kgeval ranks them in place -- the same
ranks as the table in memory, and the process's anonymous memory grows far less than the table (the mapped pages are
the kernel's to drop) -- run through benchmarks/mmap_scale.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
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
