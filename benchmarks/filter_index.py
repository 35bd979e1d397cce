"""Filter index build time on a real dataset (train + valid + test), and the cost of a cache hit.

Usage::

    python benchmarks/filter_index.py --dataset FB15k-237
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's kgeval, installed or not
from kgeval._engine.filter_index import FilterIndex, FilterIndexCache
from kgeval.datasets import load_dataset, shared_data_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="FB15k-237")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    path = Path(args.dataset)
    if not path.exists():
        path = (shared_data_dir() or Path(".")) / args.dataset
    data = load_dataset(str(path))
    parts = [data.test, data.train, data.valid]
    builds, misses, hits = [], [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        index = FilterIndex(torch.cat(parts))
        builds.append(time.perf_counter() - start)
        cache = FilterIndexCache()
        start = time.perf_counter()
        cache.get(parts, torch.device("cpu"))
        misses.append(time.perf_counter() - start)
        start = time.perf_counter()
        cache.get([part.clone() for part in parts], torch.device("cpu"))  # equal content, other tensors
        hits.append(time.perf_counter() - start)
        assert cache.hits == 1
    print(f"{args.dataset}: {index.num_triples:,} unique known triples")
    print(f"FilterIndex build: best {min(builds):.3f} s, first {builds[0]:.3f} s")
    print(f"cache miss (hash + build): best {min(misses):.3f} s; cache hit (hash only): best {min(hits):.3f} s")


if __name__ == "__main__":
    main()
