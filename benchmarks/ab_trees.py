"""Before / after: the same full filtered evaluation timed with two checkouts of kgeval, interleaved, in one run.

Usage::

    git worktree add /tmp/before <commit>
    python benchmarks/ab_trees.py --before /tmp/before --after . --dataset FB15k-237

Each (tree, kernel) runs in its own subprocess with that tree first on ``sys.path``, evaluates the dataset's test
split (filtered by train + valid + test, both sides, every metric) with a seeded DistMult, and reports its best of
``--repeats`` calls; ``--rounds`` interleaves the trees. Printed: the best time per tree and kernel, the after / before
ratio, and the MRR of each (which must agree).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

WORKER = """
import sys, time
sys.path.insert(0, {tree!r})
import kgeval
assert kgeval.__file__.startswith({tree!r}), kgeval.__file__
from kgeval import RankBasedEvaluator
from kgeval.datasets import load_dataset
from kgeval.models import DistMult
data = load_dataset({dataset!r})
model = DistMult(data.num_entities, data.num_relations, dim={dim}, seed=0)
evaluator = RankBasedEvaluator(kernel={kernel!r})
kwargs = data.evaluation_kwargs("test")
best = float("inf")
for _ in range({repeats}):
    start = time.perf_counter()
    results = evaluator.evaluate(model, use_tqdm=False, **kwargs)
    best = min(best, time.perf_counter() - start)
print(best, results["mrr"])
"""


def run(tree: str, kernel: str, args: argparse.Namespace) -> tuple[float, float]:
    code = WORKER.format(tree=tree, dataset=args.dataset, dim=args.dim, kernel=kernel, repeats=args.repeats)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, mrr = done.stdout.split()[-2:]
    return float(seconds), float(mrr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", default=".")
    parser.add_argument("--dataset", default="FB15k-237")
    parser.add_argument("--dim", type=int, default=200)
    parser.add_argument("--kernels", nargs="+", default=["eager", "numba"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = {"before": str(Path(args.before).resolve()), "after": str(Path(args.after).resolve())}
    best: dict[tuple[str, str], float] = {}
    mrrs: dict[tuple[str, str], float] = {}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            for kernel in args.kernels:
                seconds, mrr = run(tree, kernel, args)
                best[name, kernel] = min(best.get((name, kernel), float("inf")), seconds)
                mrrs[name, kernel] = mrr
    print(f"{args.dataset}, DistMult d={args.dim}, full filtered test, best of {args.repeats} x {args.rounds} rounds")
    for kernel in args.kernels:
        before, after = best["before", kernel], best["after", kernel]
        print(f"[{kernel}] before {before:.3f} s  after {after:.3f} s  after / before {after / before:.2f}x  "
              f"MRR {mrrs['before', kernel]:.6f} / {mrrs['after', kernel]:.6f}")  # fmt: skip


if __name__ == "__main__":
    main()
