"""The cost of sharded candidates (kgeval._engine.sharding), measured, and projected to the largest public graphs.

    python benchmarks/sharding.py --entities 1000000 --dim 200 --tasks 200 --ranks 2

A synthetic graph (DistMult, ``--entities`` x ``--dim`` float32, ``--known`` random known triples plus the test
triples) is ranked in full, both sides, filtered:

1. by one process holding the whole table (1 thread), and
2. by ``--ranks`` gloo processes (1 thread each) holding contiguous shards of it.

Each rank reports its wall time, the time and bytes of its collectives (every ``torch.distributed`` call is
wrapped and timed), and so its compute time per candidate score. The two runs must give identical ranks (checked;
the benchmark fails otherwise). The projection then multiplies the measured per-score cost of a rank by the
shard sizes of WikiKG90Mv2 (91,230,610 entities, d = 200) and Freebase-86m (86,054,151 entities) over 8 and 16
ranks, and adds the measured bytes per task -- what travels does not grow with the entity count. The per-score
cost is this machine's (CPU); on a GPU it is the GEMM floor of that device, which benchmarks/gpu.py measures.
"""

from __future__ import annotations

import argparse
import datetime
import os
import pickle
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as mp
from torch import distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kgeval import RankBasedEvaluator

#: rows of the entity table generated from one seed: every process builds the same table, whatever its shard
BLOCK = 65536

#: the graphs of the projection: (name, entities, dimension, evaluation tasks per side)
PROJECTED = [
    ("WikiKG90Mv2 (valid, 15,000 tasks)", 91_230_610, 200, 15_000),
    ("Freebase-86m (10,000 tasks)", 86_054_151, 200, 10_000),
]


class ShardDistMult(torch.nn.Module):
    """DistMult holding entity rows [start, stop) of the synthetic table and every relation."""

    kgeval_similarity = "dot"

    def __init__(self, args: argparse.Namespace, start: int, stop: int) -> None:
        super().__init__()
        self.start, self.stop = start, stop
        self.num_entities, self.num_relations = args.entities, args.relations
        self.entities = torch.nn.Parameter(entity_rows(args, start, stop), requires_grad=False)
        generator = torch.Generator().manual_seed(args.seed + 1)
        self.relations = torch.nn.Parameter(torch.randn(args.relations, args.dim, generator=generator),
                                            requires_grad=False)  # fmt: skip

    def kgeval_candidate_shard(self, target: str) -> tuple[int, int]:
        return self.start, self.stop

    def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        if target == "tail":
            return self.entities[batch[:, 0] - self.start] * self.relations[batch[:, 1]]
        return self.relations[batch[:, 0]] * self.entities[batch[:, 1] - self.start]

    def kgeval_candidates(self, target: str) -> torch.Tensor:
        return self.entities


def entity_rows(args: argparse.Namespace, start: int, stop: int) -> torch.Tensor:
    """Rows [start, stop) of the synthetic entity table (the same values in every process)."""
    parts = []
    for block in range(start // BLOCK, (stop + BLOCK - 1) // BLOCK):
        generator = torch.Generator().manual_seed(args.seed * 100_003 + block)
        rows = torch.randn(BLOCK, args.dim, generator=generator)
        lo, hi = max(start, block * BLOCK) - block * BLOCK, min(stop, (block + 1) * BLOCK) - block * BLOCK
        parts.append(rows[lo:hi])
    return torch.cat(parts) if parts else torch.zeros(0, args.dim)


def graph(args: argparse.Namespace) -> tuple[torch.Tensor, torch.Tensor]:
    """(test triples (tasks, 3), known triples (known, 3)), random and seeded."""
    rng = np.random.default_rng(args.seed)
    high = [args.entities, args.relations, args.entities]
    test = torch.from_numpy(rng.integers(0, high, size=(args.tasks, 3)))
    known = torch.from_numpy(rng.integers(0, high, size=(args.known, 3)))
    return test, known


class CollectiveMeter:
    """Wraps the torch.distributed calls kgeval makes: their count, seconds and tensor bytes (objects pickled)."""

    NAMES = ("all_reduce", "all_gather", "all_gather_object", "broadcast")

    def __init__(self) -> None:
        self.seconds, self.bytes, self.calls = 0.0, 0, 0
        self._originals = {name: getattr(dist, name) for name in self.NAMES}

    def __enter__(self) -> CollectiveMeter:
        for name, original in self._originals.items():
            setattr(dist, name, self._wrap(original))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, original in self._originals.items():
            setattr(dist, name, original)

    def _wrap(self, original: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            payload = args[1] if original.__name__.startswith("all_gather") else args[0]
            if isinstance(payload, torch.Tensor):
                self.bytes += payload.numel() * payload.element_size()
            else:
                self.bytes += len(pickle.dumps(payload))
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1

        return timed


def evaluate(model: Any, args: argparse.Namespace, distributed: bool) -> tuple[Any, float]:
    test, known = graph(args)
    evaluator = RankBasedEvaluator(kernel=args.kernel, check_fast_path=False)
    started = time.perf_counter()
    results = evaluator.evaluate(model, test, additional_filter_triples=known, use_tqdm=False, distributed=distributed)
    return results, time.perf_counter() - started


def _rank_worker(rank: int, args: argparse.Namespace, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.ranks,
                            timeout=datetime.timedelta(seconds=600))  # fmt: skip
    bounds = np.linspace(0, args.entities, args.ranks + 1).astype(int)
    model = ShardDistMult(args, int(bounds[rank]), int(bounds[rank + 1]))
    evaluate(model, args, True)  # warm-up: numba, the filter index, the allocator
    with CollectiveMeter() as meter:
        results, seconds = evaluate(model, args, True)
    dist.destroy_process_group()
    outcome = {"seconds": seconds, "collective_seconds": meter.seconds, "bytes": meter.bytes, "calls": meter.calls,
               "shard": int(bounds[rank + 1] - bounds[rank]), "records": results.records}  # fmt: skip
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as handle:
        pickle.dump(outcome, handle)


def run_ranks(args: argparse.Namespace) -> list[dict]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    out_dir = tempfile.mkdtemp()
    mp.start_processes(_rank_worker, args=(args, port, out_dir), nprocs=args.ranks, start_method="fork")
    outcomes = []
    for rank in range(args.ranks):
        with open(os.path.join(out_dir, f"rank{rank}.pkl"), "rb") as handle:
            outcomes.append(pickle.load(handle))
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=200)
    parser.add_argument("--relations", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=200, help="test triples (each ranked on both sides)")
    parser.add_argument("--known", type=int, default=500_000, help="random known triples filtered")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--kernel", default="numba", choices=["eager", "numba"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    print(f"{args.entities:,} entities x d={args.dim}, {args.tasks} test triples x 2 sides, {args.known:,} known "
          f"triples, kernel {args.kernel}, torch {torch.__version__}")  # fmt: skip
    torch.set_num_threads(1)
    whole = ShardDistMult(args, 0, args.entities)
    evaluate(whole, args, False)  # warm-up
    single, single_seconds = evaluate(whole, args, False)
    del whole
    scores = 2 * args.tasks * args.entities
    per_score = single_seconds / scores * 1e9
    print(f"one process, whole table, 1 thread: {single_seconds:.2f} s, {per_score:.2f} ns per score")

    outcomes = run_ranks(args)
    for column in ("optimistic", "pessimistic", "num_candidates"):
        for rank, outcome in enumerate(outcomes):
            if not np.array_equal(outcome["records"][column], single.records[column]):
                raise SystemExit(f"rank {rank}: {column} differs from the single process")
    print(f"{args.ranks} gloo ranks, 1 thread each: ranks identical to the single process on every rank")
    per_task_bytes = []
    compute_per_score = []
    for rank, outcome in enumerate(outcomes):
        compute = outcome["seconds"] - outcome["collective_seconds"]
        rank_scores = 2 * args.tasks * outcome["shard"]
        compute_per_score.append(compute / max(rank_scores, 1))
        per_task_bytes.append(outcome["bytes"] / (2 * args.tasks))
        print(f"  rank {rank}: shard {outcome['shard']:,} entities, {outcome['seconds']:.2f} s "
              f"({outcome['collective_seconds']:.2f} s in {outcome['calls']} collectives, "
              f"{outcome['bytes'] / 2**20:.2f} MiB sent: {per_task_bytes[-1]:.0f} B per task), compute "
              f"{compute_per_score[-1] * 1e9:.2f} ns per score")  # fmt: skip
    slowest = max(outcome["seconds"] for outcome in outcomes)
    print(f"speed-up over one process: {single_seconds / slowest:.2f}x with {args.ranks} ranks "
          f"(ideal {args.ranks}x; this machine has {os.cpu_count()} cores)")  # fmt: skip

    cost = max(compute_per_score)
    bytes_per_task = max(per_task_bytes) * 200 / args.dim  # the query vectors scale with d; projected at d = 200
    print(f"\nprojection at {cost * 1e9:.2f} ns per score per rank (this machine, d={args.dim}; scales ~linearly "
          f"with d) and {bytes_per_task:.0f} B sent per task and rank:")  # fmt: skip
    for name, entities, dim, tasks in PROJECTED:
        for ranks in (8, 16):
            shard = entities / ranks
            seconds = 2 * tasks * shard * cost * dim / args.dim
            table = shard * dim * 4 / 2**30
            sent = 2 * tasks * bytes_per_task / 2**20
            print(f"  {name}: {ranks} ranks of {shard / 1e6:.1f}M entities ({table:.1f} GiB each): "
                  f"{seconds / 3600:.1f} h per rank, {sent:.0f} MiB sent per rank")  # fmt: skip


if __name__ == "__main__":
    main()
