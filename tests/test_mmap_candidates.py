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


def test_the_table_is_never_copied_whole(tmp_path) -> None:
    """A 2,000,000 x 32 table (244 MiB): the evaluation's anonymous memory grows by well under the table's size."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "mmap_scale.py"), "--entities", "2000000", "--dim", "32",
         "--tasks", "50", "--known", "100000", "--folder", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r"anonymous ([\d,]+) MiB \(before: ([\d,]+) MiB\)", done.stdout)
    peak, before = (float(value.replace(",", "")) for value in found.groups())
    table = float(re.search(r"table ([\d,]+) MiB", done.stdout).group(1).replace(",", ""))
    assert peak - before < table / 2, done.stdout
