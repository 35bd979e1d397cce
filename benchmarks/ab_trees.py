"""Before / after: the same full filtered evaluation timed with two checkouts of kgeval, interleaved, in one run.

Usage (one command: the working tree against a commit, both kernels)::

    python benchmarks/ab_trees.py --before HEAD~1 --dataset FB15k-237
    python benchmarks/ab_trees.py --before /tmp/before --after . --dataset WN18RR   # or two checkouts

``--before`` (and ``--after``) is a folder holding a kgeval checkout, or a git revision of this repository, which
is checked out into a temporary worktree for the run and removed afterwards.

Each (tree, kernel) runs in its own subprocess with that tree first on ``sys.path``, evaluates the dataset's test
split (filtered by train + valid + test, both sides, every metric) with a seeded DistMult (``--model``: another of
kgeval.models, e.g. TransE for the "l2" fast path), and reports its best of ``--repeats`` calls; ``--rounds``
interleaves the trees, every other round in reverse order (use an even number). Printed: the best time per tree and
kernel, the after / before ratio, and the MRR of each (which must agree).
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]

WORKER = """
import sys, time
sys.path.insert(0, {tree!r})
import kgeval
assert kgeval.__file__.startswith({tree!r}), kgeval.__file__
from kgeval import RankBasedEvaluator
from kgeval.datasets import load_dataset
from kgeval.models import {model}
data = load_dataset({dataset!r})
model = {model}(data.num_entities, data.num_relations, dim={dim}, seed=0)
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
    code = WORKER.format(
        tree=tree, dataset=args.dataset, dim=args.dim, kernel=kernel, repeats=args.repeats, model=args.model
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, mrr = done.stdout.split()[-2:]
    return float(seconds), float(mrr)


@contextlib.contextmanager
def checkout(tree_or_revision: str) -> Iterator[str]:
    """The folder of a kgeval tree: the folder given, or a temporary worktree of a git revision (removed after)."""
    path = Path(tree_or_revision)
    if (path / "kgeval" / "__init__.py").is_file():
        yield str(path.resolve())
        return
    with tempfile.TemporaryDirectory(prefix="kgeval-ab-") as parent:
        folder = str(Path(parent) / "tree")
        subprocess.run(["git", "-C", str(REPOSITORY), "worktree", "add", "--detach", "--quiet", folder,
                        tree_or_revision], check=True)  # fmt: skip
        try:
            yield folder
        finally:
            subprocess.run(["git", "-C", str(REPOSITORY), "worktree", "remove", "--force", folder], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="a kgeval checkout folder or a git revision")
    parser.add_argument("--after", default=".", help="a kgeval checkout folder or a git revision (default: .)")
    parser.add_argument("--dataset", default="FB15k-237")
    parser.add_argument("--dim", type=int, default=200)
    parser.add_argument("--model", default="DistMult", choices=["DistMult", "TransE", "RotatE", "ComplEx"],
                        help="a seeded model of kgeval.models (TransE: the \"l2\" fast path)")  # fmt: skip
    parser.add_argument("--kernels", nargs="+", default=["eager", "numba"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    with checkout(args.before) as before, checkout(args.after) as after:
        compare({"before": before, "after": after}, args)


def compare(trees: dict[str, str], args: argparse.Namespace) -> None:
    """Time every (tree, kernel), interleaved over the rounds, and print the best times and ratios."""
    best: dict[tuple[str, str], float] = {}
    mrrs: dict[tuple[str, str], float] = {}
    runs = [(name, kernel) for name in trees for kernel in args.kernels]
    for round_number in range(args.rounds):
        # ABBA: every other round runs in reverse order, so neither tree always follows the other (a process runs
        # measurably slower right after a busy one on a shared 2-core VM: 1.1x - 1.4x in one fixed order)
        for name, kernel in runs if round_number % 2 == 0 else runs[::-1]:
            tree = trees[name]
            seconds, mrr = run(tree, kernel, args)
            best[name, kernel] = min(best.get((name, kernel), float("inf")), seconds)
            mrrs[name, kernel] = mrr
    print(
        f"{args.dataset}, {args.model} d={args.dim}, full filtered test, best of {args.repeats} x {args.rounds} rounds"
    )
    print(f"before: {trees['before']}\nafter:  {trees['after']}")
    for kernel in args.kernels:
        before, after = best["before", kernel], best["after", kernel]
        print(f"[{kernel}] before {before:.3f} s  after {after:.3f} s  after / before {after / before:.2f}x  "
              f"MRR {mrrs['before', kernel]:.6f} / {mrrs['after', kernel]:.6f}")  # fmt: skip


if __name__ == "__main__":
    main()
