"""Millions of entities from a memory-mapped candidate table: a synthetic DistMult-style graph ranked in full on CPU.

Usage::

    python benchmarks/mmap_scale.py --entities 10000000 --dim 64 --tasks 300

The entity table (entities x dim float32, seeded) is written to a file once (``--folder``, default a temporary one)
and read back through ``numpy.memmap``: the model's ``kgeval_candidates`` is that file, never loaded whole. A
few hundred test triples over random relations are ranked on both sides among every entity (filtered by a random
set of known triples). Printed: the time (and the per-score cost, seconds / (tasks x 2 sides x entities)), the
table's size, and the process's peak resident memory split into file-backed pages (the mapped table: kgeval hands
each slice's pages back once it is counted, kgeval._engine.candidate_slices) and anonymous memory (what kgeval
allocated), sampled every 50 ms.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

from kgeval import RankBasedEvaluator
from kgeval._engine import candidate_slices


class MappedDistMult:
    """DistMult whose entity table is a memory-mapped file: query = e_h * r (or r * e_t), candidates = the table."""

    kgeval_similarity = "dot"

    def __init__(self, table: torch.Tensor, num_relations: int, seed: int) -> None:
        self.table = table
        self.num_entities, self.num_relations = table.shape[0], num_relations
        generator = torch.Generator().manual_seed(seed)
        self.relations = torch.randn(num_relations, table.shape[1], generator=generator)

    def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        entity_column, relation_column = (0, 1) if target == "tail" else (1, 0)
        return self.table[batch[:, entity_column]] * self.relations[batch[:, relation_column]]

    def kgeval_candidates(self, target: str) -> torch.Tensor:
        return self.table

    def score_hrt(self, hrt: torch.Tensor) -> torch.Tensor:
        return (self.table[hrt[:, 0]] * self.relations[hrt[:, 1]] * self.table[hrt[:, 2]]).sum(dim=1)


def write_table(path: Path, entities: int, dim: int, seed: int) -> None:
    """entities x dim standard-normal float32 rows, written in blocks of 2**20 rows."""
    table = np.memmap(path, dtype=np.float32, mode="w+", shape=(entities, dim))
    rng = np.random.default_rng(seed)
    for start in range(0, entities, 2**20):
        stop = min(entities, start + 2**20)
        table[start:stop] = rng.standard_normal((stop - start, dim), dtype=np.float32)
    table.flush()
    del table


def memory_kib() -> dict[str, int]:
    """RssAnon and RssFile of this process, KiB (/proc/self/status)."""
    values = {}
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(("RssAnon:", "RssFile:")):
                name, value, _unit = line.split()
                values[name.rstrip(":")] = int(value)
    return values


class PeakMemory:
    """Samples memory_kib every ``interval`` seconds in a thread and keeps each peak."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval, self.peak = interval, {"RssAnon": 0, "RssFile": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, value in memory_kib().items():
                self.peak[name] = max(self.peak[name], value)
            time.sleep(self.interval)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, default=10_000_000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--relations", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=300, help="test triples (each ranked on both sides)")
    parser.add_argument("--known", type=int, default=1_000_000, help="random known triples filtered")
    parser.add_argument("--folder", type=Path, default=None, help="where the table file goes (default: a temp dir)")
    parser.add_argument("--kernel", default="numba", choices=["eager", "numba"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--always-release", action="store_true",
                        help="release each slice's pages once counted even where the table fits the memory available "
                             "(kgeval releases them only where it crowds the memory)")  # fmt: skip
    args = parser.parse_args()
    if args.always_release:
        candidate_slices.RELEASE_MEMORY_FRACTION = 0.0
    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        path = Path(folder) / "entities.f32"
        start = time.perf_counter()
        write_table(path, args.entities, args.dim, args.seed)
        written = time.perf_counter() - start
        mapped = np.memmap(path, dtype=np.float32, mode="r+", shape=(args.entities, args.dim))
        model = MappedDistMult(torch.from_numpy(mapped), args.relations, args.seed)
        generator = torch.Generator().manual_seed(args.seed)
        bounds = torch.tensor([args.entities, args.relations, args.entities])
        test = (torch.rand(args.tasks, 3, generator=generator) * bounds).long()
        known = (torch.rand(args.known, 3, generator=generator) * bounds).long()
        evaluator = RankBasedEvaluator(kernel=args.kernel)
        reader = candidate_slices.candidate_slices(model.table, torch.device("cpu"))
        released = isinstance(reader, candidate_slices.MappedFileSlices)  # kgeval's choice for this table here
        before = memory_kib()
        with PeakMemory() as peak:
            start = time.perf_counter()
            results = evaluator.evaluate(model, test, additional_filter_triples=known, use_tqdm=False)
            seconds = time.perf_counter() - start
        scores = 2 * args.tasks * args.entities
        table_mib = args.entities * args.dim * 4 / 2**20
        print(
            f"{args.entities:,} entities x {args.dim} (table {table_mib:,.0f} MiB, written in {written:.1f} s), "
            f"{args.tasks} test triples x 2 sides, {args.known:,} known triples, kernel {args.kernel}"
        )
        print(f"evaluation: {seconds:.2f} s, {seconds / scores * 1e9:.2f} ns per score, MRR {results['mrr']:.6f}")
        print(
            f"peak RSS during the evaluation: anonymous {peak.peak['RssAnon'] / 1024:,.0f} MiB "
            f"(before: {before['RssAnon'] / 1024:,.0f} MiB), file-backed {peak.peak['RssFile'] / 1024:,.0f} MiB "
            f"(before: {before['RssFile'] / 1024:,.0f} MiB; pages {'released' if released else 'kept'}; "
            f"{table_mib:,.0f} MiB on disk)"
        )
        del model, mapped


if __name__ == "__main__":
    main()
