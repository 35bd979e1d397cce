"""Do the GEMM's threads and the counting threads fight? The CPU fast path with each threading setting, interleaved.

    python benchmarks/count_threads.py --dataset FB15k-237 --rounds 4

Block counting alternates a PyTorch GEMM (torch's OpenMP threads) with a numba count of the block (numba's
threads, TBB by default). Each call counts ~0.1 ms of work, shorter than the time torch's OpenMP workers keep
spinning after a GEMM, so the two pools can compete for the cores. Each setting runs in its own subprocess (the
threading layer is fixed per process), a full filtered evaluation of the test split with the numba kernel under
cProfile, its best of ``--repeats``; rounds interleave the settings. Printed per setting: the median over rounds
of the evaluation's time, of the GEMMs' (``torch.matmul``) and of the counts' (``count_blocks_in_bands``).

Settings: numba's TBB layer with the number of count threads kgeval measures and keeps (the default,
kgeval._engine.kernels.count_threads), with every thread kept, on one thread (``NUMBA_NUM_THREADS=1``), numba's OpenMP
layer (not fork-safe: a forked child that counts dies), its work queue, and torch's OpenMP workers made passive
(``OMP_WAIT_POLICY=PASSIVE``, read when torch loads).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import format_table, machine

SETTINGS: dict[str, dict[str, str]] = {
    "TBB, threads measured (default)": {},
    "TBB, every thread": {"BENCHMARK_COUNT_THREADS": "every"},
    "TBB, one thread": {"NUMBA_NUM_THREADS": "1"},
    "numba OpenMP layer": {"NUMBA_THREADING_LAYER": "omp"},
    "numba work queue": {"NUMBA_THREADING_LAYER": "workqueue"},
    "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
}

WORKER = """
import cProfile, json, os, pstats, sys, time, warnings
sys.path.insert(0, {root!r})
warnings.simplefilter("ignore")
import torch
from kgeval._engine.kernels.count_threads import count_threads
if os.environ.get("BENCHMARK_COUNT_THREADS") == "every":  # keep every thread, unmeasured
    count_threads().chosen[torch.get_num_threads()] = torch.get_num_threads()
from kgeval import RankBasedEvaluator
from kgeval.datasets import load_dataset
from kgeval.models import DistMult
data = load_dataset({dataset!r})
model = DistMult(data.num_entities, data.num_relations, dim=200, seed=0)
evaluator = RankBasedEvaluator(kernel="numba")
kwargs = data.evaluation_kwargs("test")
evaluator.evaluate(model, use_tqdm=False, **kwargs)  # compiles, warms
best = None
for _ in range({repeats}):
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    results = evaluator.evaluate(model, use_tqdm=False, **kwargs)
    profile.disable()
    total = time.perf_counter() - start
    parts = {{"gemm": 0.0, "count": 0.0}}
    for (_, _, name), (_, _, _, cumulative, _) in pstats.Stats(profile).stats.items():
        if name == "<built-in method torch.matmul>":
            parts["gemm"] += cumulative
        elif name == "count_blocks_in_bands":
            parts["count"] += cumulative
    if best is None or total < best["total"]:
        best = {{"total": total, **parts, "mrr": results["mrr"]}}
best["kept"] = str(count_threads().chosen)
print(json.dumps(best))
"""


def run(setting: dict[str, str], args: argparse.Namespace) -> dict[str, float]:
    code = WORKER.format(root=str(Path(__file__).resolve().parents[1]), dataset=args.dataset, repeats=args.repeats)
    environment = {**os.environ, **setting}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=environment)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="FB15k-237")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    measured: dict[str, list[dict[str, float]]] = {name: [] for name in SETTINGS}
    names = list(SETTINGS)
    for round_number in range(args.rounds):
        for name in names if round_number % 2 == 0 else reversed(names):
            measured[name].append(run(SETTINGS[name], args))
    rows = []
    for name, results in measured.items():
        median = {key: statistics.median(r[key] for r in results) for key in ("total", "gemm", "count")}
        spread = f"{min(r['total'] for r in results):.3f}-{max(r['total'] for r in results):.3f}"
        mrrs = {r["mrr"] for r in results}
        kept = ", ".join(sorted({r["kept"] for r in results}))
        rows.append([name, f"{median['total']:.3f} s ({spread})", f"{median['gemm']:.3f} s", f"{median['count']:.3f} s",
                     f"{mrrs.pop():.6f}" if len(mrrs) == 1 else "differ!", kept])  # fmt: skip
    print(f"{args.dataset}, DistMult d=200, filtered test, numba kernel; median of {args.rounds} rounds "
          f"(best of {args.repeats} each)")  # fmt: skip
    print(format_table(rows, ["setting", "evaluation", "GEMMs", "counts", "MRR", "kept {torch threads: count}"]))


if __name__ == "__main__":
    main()
