"""kgeval against TorchKGE's own LinkPredictionEvaluator on the same model and triples (both sides, filtered by
the evaluated triples, as TorchKGE filters; TorchKGE's ranks are kgeval's pessimistic ranks).

Usage::

    python benchmarks/torchkge_compare.py --dataset umls
    python benchmarks/torchkge_compare.py --dataset FB15k-237 --triples 2000 --dim 200

Each contender's best of ``--repeats`` runs is printed, then the ratios, all from this one run.
"""

from __future__ import annotations

import platform

import torch
from _harness import best_time, peer_comparison
from torchkge.data_structures import KnowledgeGraph
from torchkge.evaluation import LinkPredictionEvaluator
from torchkge.models import TransEModel

from kgeval import RankBasedEvaluator


def main() -> None:
    args, data, test = peer_comparison(__doc__, lambda parser: parser.add_argument(
        "--batch", type=int, default=256, help="TorchKGE's evaluation batch size"
    ))  # fmt: skip
    model = TransEModel(args.dim, data.num_entities, data.num_relations, dissimilarity_type="L2").eval()
    kg = KnowledgeGraph(
        kg={"heads": test[:, 0], "tails": test[:, 2], "relations": test[:, 1]},
        ent2ix={str(i): i for i in range(data.num_entities)},
        rel2ix={str(i): i for i in range(data.num_relations)},
    )

    def torchkge_run() -> float:
        evaluator = LinkPredictionEvaluator(model, kg)
        with torch.no_grad():
            evaluator.evaluate(b_size=args.batch, verbose=False)
        ranks = torch.cat([evaluator.filt_rank_true_heads, evaluator.filt_rank_true_tails]).double()
        return float((1 / ranks).mean())

    theirs_time, theirs_mrr = best_time(torchkge_run, args.repeats)
    runs = {}
    for label, fast_path in (("kgeval (fast path)", True), ("kgeval (scoring_function)", False)):
        evaluator = RankBasedEvaluator(fast_path=fast_path)
        runs[label] = best_time(lambda evaluator=evaluator: evaluator.evaluate(model, test, use_tqdm=False),
                                args.repeats)  # fmt: skip
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{data.name}: {len(test)} test triples, {data.num_entities} entities, TransE-L2 d={args.dim}, filtered")
    print(f"TorchKGE LinkPredictionEvaluator  {theirs_time:8.3f} s   pessimistic MRR {theirs_mrr:.6f}")
    for label, (seconds, results) in runs.items():
        print(f"{label:33s} {seconds:8.3f} s   pessimistic MRR {results['both.pessimistic.mrr']:.6f}")
    for label, (seconds, _results) in runs.items():
        print(f"TorchKGE / {label}: {theirs_time / seconds:.1f}x")


if __name__ == "__main__":
    main()
