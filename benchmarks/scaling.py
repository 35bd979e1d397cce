"""Scaling sweep: time and peak memory of a filtered evaluation as the number of entities grows.

Usage::

    python benchmarks/scaling.py                                   # 10k .. 2M entities, dim 32
    python benchmarks/scaling.py --entities 10000 2000000 --test-triples 300
    python benchmarks/scaling.py --wikikg2 --test-triples 1000        # ogbl-wikikg2's size, a subset, extrapolated

Each size runs in its own subprocess: a synthetic graph (``--train-per-entity`` known triples per entity over
100 relations, ``--test-triples`` evaluation triples), an untrained DistMult of dimension 32, one filtered
evaluation of both sides with every metric (the first call, filter index build included, and the best of
``--repeats``). Printed per size: seconds, peak RSS of the process, and the extra RSS of the evaluation over
the RSS after the graph and the model were built. ``--wikikg2`` instead ranks a subset of the test triples of a
random graph of ogbl-wikikg2's size (2,500,604 entities, 535 relations, 16,109,182 known triples, DistMult d=100),
in full and filtered on both sides, and extrapolates to its 598,543 test triples.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (
    WIKIKG2,
    contender,
    format_table,
    load_average,
    machine,
    measure,
    run_contender,
    run_worker,
    wikikg2_like,
)

SIZES = [10_000, 30_000, 100_000, 300_000, 1_000_000, 2_000_000]


@contender("sweep")
def sweep(args):
    from kgeval import RankBasedEvaluator
    from kgeval.models import DistMult

    generator = torch.Generator().manual_seed(0)
    entities, relations = args.size, 100
    num_train = args.train_per_entity * entities

    def triples(n: int) -> torch.Tensor:
        heads = torch.randint(entities, (n,), generator=generator)
        return torch.stack([heads, torch.randint(relations, (n,), generator=generator),
                            torch.randint(entities, (n,), generator=generator)], dim=1)  # fmt: skip

    train, test = triples(num_train), triples(args.test_triples)
    model = DistMult(entities, relations, dim=args.dim, seed=0)
    evaluator = RankBasedEvaluator()
    with torch.inference_mode():
        result = measure(
            lambda: evaluator.evaluate(model, test, additional_filter_triples=[train], use_tqdm=False), args.repeats
        )
    return {**result, "entities": entities, "train": num_train, "test": args.test_triples}


def wikikg2(args: argparse.Namespace) -> None:
    """One filtered evaluation of a test subset of the wikikg2-sized graph, extrapolated to the whole test split."""
    from kgeval import RankBasedEvaluator
    from kgeval.models import DistMult

    start = time.perf_counter()
    sizes, known, test = wikikg2_like(1.0, args.test_triples)
    model = DistMult(sizes["entities"], sizes["relations"], dim=100, seed=0)
    built = time.perf_counter() - start
    evaluator = RankBasedEvaluator()
    first_start = time.perf_counter()
    evaluator.evaluate(model, test, additional_filter_triples=[known], use_tqdm=False)
    first = time.perf_counter() - first_start
    start = time.perf_counter()
    results = evaluator.evaluate(model, test, additional_filter_triples=[known], use_tqdm=False)
    seconds = time.perf_counter() - start
    scores = 2 * sizes["test"] * sizes["entities"]
    full = seconds * WIKIKG2["test"] / sizes["test"]
    print(f"# wikikg2-sized full filtered ranking on CPU\n\nmachine: {machine()}\n")
    print(
        f"graph: {sizes['entities']:,} entities, {sizes['relations']} relations, {sizes['known']:,} known "
        f"triples (built with the model in {built:.1f} s); DistMult d=100; {sizes['test']:,} test triples"
    )
    per_task = seconds / (2 * sizes["test"]) * 1e3
    print(
        f"first call (filter index built): {first:.2f} s; second call: {seconds:.2f} s = {per_task:.2f} ms per "
        f"task, {scores / seconds:.3e} candidate scores/s"
    )
    print(f"extrapolated to all {WIKIKG2['test']:,} test triples: {full:.0f} s ({full / 3600:.2f} h); "
          f"MRR of the untrained model {results['mrr']:.2e}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, nargs="+", default=SIZES)
    parser.add_argument("--test-triples", type=int, default=300)
    parser.add_argument("--train-per-entity", type=int, default=2)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--wikikg2", action="store_true", help="the wikikg2-sized case, a test subset extrapolated")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return run_worker(args)
    if args.wikikg2:
        return wikikg2(args)
    started = time.time()
    print(f"# kgeval scaling sweep (DistMult dim {args.dim}, {args.test_triples} test triples)\n")
    print(f"machine: {machine()}\nload average before: {load_average()}\n")
    rows = []
    for size in args.entities:
        argv = ["--size", str(size), "--test-triples", str(args.test_triples), "--dim", str(args.dim),
                "--train-per-entity", str(args.train_per_entity), "--repeats", str(args.repeats)]  # fmt: skip
        r = run_contender(__file__, "sweep", argv)
        if "seconds" not in r:
            rows.append([f"{size:,}", "-", "-", "-", "-", "-", r.get("skipped", "")])
            continue
        rows.append([f"{size:,}", f"{r['train']:,}", f"{r['first_seconds']:.2f}", f"{r['seconds']:.2f}",
                     f"{r['peak_rss_mib']:.0f}", f"{r['extra_rss_mib']:.0f}", ""])  # fmt: skip
        print(f"  {size:,} entities done", file=sys.stderr, flush=True)
    header = ["entities", "known triples", "first s", "best s", "peak RSS MiB", "extra RSS MiB", "note"]
    print(format_table(rows, header))
    print(f"\nload average after: {load_average()}; wall time {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
