"""kgeval against PyTorch Geometric's own KGEModel.test() on the same model and triples (tail side, raw ranks).

Usage::

    python benchmarks/pyg_compare.py --dataset umls --triples all
    python benchmarks/pyg_compare.py --dataset FB15k-237 --triples 500 --dim 200

PyG's test() ranks each triple's tail in a Python loop, scoring all entities in chunks of ``--pyg-batch`` through
the model's forward; kgeval ranks the same tails (raw, optimistic = PyG's rank + 1 without ties) through the fast
path read from the model's embeddings and, for reference, through the model's forward (``fast_path=False``).
Each contender's best of ``--repeats`` runs is printed, then the ratios, all from this one run.
"""

from __future__ import annotations

import platform

import torch
from _harness import best_time, peer_comparison
from torch_geometric.nn.kge import DistMult

from kgeval import RankBasedEvaluator


def main() -> None:
    args, data, test = peer_comparison(__doc__, lambda parser: parser.add_argument(
        "--pyg-batch", type=int, default=20_000, help="PyG test()'s batch_size (entities per call)"
    ))  # fmt: skip
    model = DistMult(data.num_entities, data.num_relations, args.dim).eval()
    head, relation, tail = test.unbind(dim=1)

    with torch.no_grad():
        pyg_time, (pyg_mr, pyg_mrr, pyg_hits) = best_time(
            lambda: model.test(head, relation, tail, batch_size=args.pyg_batch, k=10, log=False), args.repeats
        )
    runs = {}
    for label, fast_path in (("kgeval (fast path)", True), ("kgeval (model forward)", False)):
        evaluator = RankBasedEvaluator(filtered=False, fast_path=fast_path)
        runs[label] = best_time(
            lambda evaluator=evaluator: evaluator.evaluate(model, test, targets=("tail",), use_tqdm=False),
            args.repeats,
        )
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{data.name}: {len(test)} test triples, {data.num_entities} entities, DistMult d={args.dim}, tail, raw")
    print(f"PyG KGEModel.test()        {pyg_time:8.3f} s   MRR {pyg_mrr:.6f}  MR {pyg_mr + 1:.3f}  H@10 {pyg_hits:.4f}")
    for label, (seconds, results) in runs.items():
        print(f"{label:26s} {seconds:8.3f} s   MRR {results['tail.optimistic.mrr']:.6f}  "
              f"MR {results['tail.optimistic.mr']:.3f}  H@10 {results['tail.optimistic.hits@10']:.4f}")  # fmt: skip
    for label, (seconds, _results) in runs.items():
        print(f"PyG test() / {label}: {pyg_time / seconds:.1f}x")


if __name__ == "__main__":
    main()
