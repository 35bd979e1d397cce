"""Ranks a memory-mapped (or loaded) entity table in a process of its own, optionally inside a memory cgroup, for
tests/test_mmap_candidates.py.

    python -m tests.support.mmap_worker TABLE ENTITIES DIM OUT [--loaded] [--cgroup-procs PATH] [--model transe]
        [--whitelist]

Writes OUT (``.npz``): the head and tail ranks and candidate counts of 20 seeded test triples (filtered by 20,000
seeded known triples, eager kernel), and the process's memory: peak RssFile and RssAnon sampled during the
evaluation, and their values before it (KiB). The model is DistMult ("dot"), or TransE ("l2": its squared-norm
expansion must not copy the table either); ``--whitelist`` restricts the candidates to the even entity ids
(the test triples' heads and tails moved onto them), a whitelist as large as half the table.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from mmap_scale import MappedDistMult, PeakMemory, memory_kib  # noqa: E402

from kgeval import RankBasedEvaluator  # noqa: E402
from kgeval._engine import candidate_slices  # noqa: E402


class MappedTransE(MappedDistMult):
    """TransE-L2 over a memory-mapped entity table: query h + r (or t - r), similarity "l2"."""

    kgeval_similarity = "l2"

    def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        if target == "tail":
            return self.table[batch[:, 0]] + self.relations[batch[:, 1]]
        return self.table[batch[:, 1]] - self.relations[batch[:, 0]]

    def score_hrt(self, hrt: torch.Tensor) -> torch.Tensor:
        return -(self.table[hrt[:, 0]] + self.relations[hrt[:, 1]] - self.table[hrt[:, 2]]).norm(dim=1)


MODELS = {"distmult": MappedDistMult, "transe": MappedTransE}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("table", type=Path)
    parser.add_argument("entities", type=int)
    parser.add_argument("dim", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--loaded", action="store_true", help="read the whole table into memory first")
    parser.add_argument("--cgroup-procs", type=Path, help="a memory cgroup's procs file to join before the evaluation")
    parser.add_argument("--always-release", action="store_true", help="release the mapped table's pages whatever "
                        "the memory available (else only when it crowds the memory: kgeval's default)")  # fmt: skip
    parser.add_argument("--model", choices=sorted(MODELS), default="distmult")
    parser.add_argument("--whitelist", action="store_true", help="rank among the even entity ids only")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.cgroup_procs is not None:
        args.cgroup_procs.write_text(str(os.getpid()))
    if args.always_release:
        candidate_slices.RELEASE_MEMORY_FRACTION = 0.0
    shape = (args.entities, args.dim)
    if args.loaded:
        table = torch.from_numpy(np.fromfile(args.table, dtype=np.float32).reshape(shape))
    else:  # read-only, as a model would map its checkpoint (torch warns that it cannot write to it)
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        table = torch.from_numpy(np.memmap(args.table, dtype=np.float32, mode="r", shape=shape))
    generator = torch.Generator().manual_seed(5)
    bounds = torch.tensor([args.entities, 4, args.entities])
    test = (torch.rand(20, 3, generator=generator) * bounds).long()
    known = (torch.rand(20_000, 3, generator=generator) * bounds).long()
    options = {}
    if args.whitelist:
        test[:, [0, 2]] = test[:, [0, 2]] // 2 * 2
        options["restrict_entities_to"] = torch.arange(0, args.entities, 2)
    before = memory_kib()
    with PeakMemory(interval=0.01) as peak:
        results = RankBasedEvaluator(kernel="eager").evaluate(
            MODELS[args.model](table, 4, seed=1), test, additional_filter_triples=known, use_tqdm=False, **options
        )
    records = results.records
    np.savez(
        args.out,
        optimistic=records["optimistic"],
        pessimistic=records["pessimistic"],
        num_candidates=records["num_candidates"],
        file_peak=peak.peak["RssFile"],
        file_before=before["RssFile"],
        anonymous_peak=peak.peak["RssAnon"],
        anonymous_before=before["RssAnon"],
    )


if __name__ == "__main__":
    main()
