"""GPU benchmarks, measured in one run: FB15k-237 full filtered evaluation against a bare GEMM and PyKEEN, and a
synthetic ogbl-wikikg2-sized graph ranked in full.

Usage (on a machine with a CUDA device)::

    python benchmarks/gpu.py                              # both parts
    python benchmarks/gpu.py --part fb15k --skip-pykeen
    python benchmarks/gpu.py --device cpu --part wikikg2 --scale 0.0005 --kernels eager   # a CPU smoke run

Part ``fb15k``: a seeded DistMult (d=200) evaluated on FB15k-237's test split, filtered by train + valid + test,
both sides, every metric, with each counting kernel ("compare", and "triton" where triton is installed), against a
bare GEMM of the same queries against every entity (``torch.matmul``, no counting) and against PyKEEN 1.11.1's
``RankBasedEvaluator`` on a PyKEEN DistMult holding the same embeddings. Part ``wikikg2``: a random graph of
ogbl-wikikg2's size -- 2,500,604 entities, 535 relations, 16,109,182 known triples, 598,543 test triples -- with
d=100, every test triple ranked against every entity on both sides, filtered: time, peak device memory beyond the
embeddings, and candidate scores per second. ``--scale`` shrinks the synthetic graph (entities and triples).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import best_time, machine, wikikg2_like

from kgeval import RankBasedEvaluator
from kgeval.models import DistMult


def kernels(args: argparse.Namespace) -> list[str]:
    """The kernels to time: those asked for, "triton" only where triton is installed."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return [kernel for kernel in args.kernels if kernel != "triton"]
    return list(args.kernels)


def bare_gemm(model: DistMult, triples: torch.Tensor, batch_size: int = 4096) -> None:
    """The floor: every task's query times every entity, in batches, the scores written and dropped."""
    entities = model.kgeval_candidates("tail")
    for target, columns in (("tail", [0, 1]), ("head", [1, 2])):
        queries = triples[:, columns]
        for start in range(0, queries.shape[0], batch_size):
            torch.matmul(model.kgeval_query(queries[start : start + batch_size], target), entities.T)


def fb15k(args: argparse.Namespace, device: torch.device) -> None:
    from kgeval.datasets import load_dataset

    data = load_dataset("FB15k-237")
    model = DistMult(data.num_entities, data.num_relations, dim=200, seed=0).to(device)
    kwargs = {key: value for key, value in data.evaluation_kwargs("test").items()}
    triples = kwargs["mapped_triples"].to(device)
    print(f"FB15k-237 test: {len(triples)} triples, {data.num_entities} entities, DistMult d=200, {device}")
    with torch.inference_mode():
        gemm, _ = best_time(lambda: bare_gemm(model, triples), args.repeats, device)
    print(f"  bare GEMM of every task:        {gemm * 1e3:9.1f} ms")
    for kernel in kernels(args):
        evaluator = RankBasedEvaluator(kernel=kernel)  # type: ignore[arg-type]
        run = lambda e=evaluator: e.evaluate(model, use_tqdm=False, **kwargs)  # noqa: E731
        seconds, results = best_time(run, args.repeats, device)
        print(f"  kgeval [{kernel:>6}]:               {seconds * 1e3:9.1f} ms  ({seconds / gemm:.2f}x the bare GEMM)  "
              f"MRR {results['mrr']:.6f}")  # fmt: skip
    if not args.skip_pykeen:
        pykeen_seconds = pykeen_evaluation(model, data, device, args.repeats)
        print(f"  PyKEEN 1.11.1 RankBasedEvaluator: {pykeen_seconds * 1e3:9.1f} ms")


def pykeen_evaluation(model: DistMult, data: Any, device: torch.device, repeats: int) -> float:
    from pykeen.evaluation import RankBasedEvaluator as PyKEENEvaluator
    from pykeen.models import DistMult as PyKEENDistMult
    from pykeen.triples import CoreTriplesFactory

    factory = CoreTriplesFactory.create(data.train, num_entities=data.num_entities, num_relations=data.num_relations)
    pykeen_model = PyKEENDistMult(triples_factory=factory, embedding_dim=200, random_seed=0).to(device)
    with torch.no_grad():
        pykeen_model.entity_representations[0]._embeddings.weight.copy_(model.entity_embeddings.weight)
        pykeen_model.relation_representations[0]._embeddings.weight.copy_(model.relation_embeddings.weight)
    evaluator = PyKEENEvaluator()
    known = [data.train.to(device), data.valid.to(device)]
    seconds, _ = best_time(
        lambda: evaluator.evaluate(pykeen_model, data.test.to(device), additional_filter_triples=known, use_tqdm=False),
        repeats,
        device,
    )
    return seconds


def wikikg2(args: argparse.Namespace, device: torch.device) -> None:
    sizes, known, test = wikikg2_like(args.scale)
    test = test.to(device)
    model = DistMult(sizes["entities"], sizes["relations"], dim=100, seed=0).to(device)
    embeddings = sum(p.numel() * p.element_size() for p in model.parameters())
    print(f"wikikg2-sized: {sizes['entities']:,} entities, {sizes['relations']} relations, {sizes['known']:,} known, "
          f"{sizes['test']:,} test triples, DistMult d=100, {device}")  # fmt: skip
    for kernel in kernels(args):
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            base = torch.cuda.memory_allocated(device)
        evaluator = RankBasedEvaluator(kernel=kernel)  # type: ignore[arg-type]
        seconds, results = best_time(
            lambda e=evaluator: e.evaluate(model, test, additional_filter_triples=[known.to(device)], use_tqdm=False),
            1,
            device,
        )
        scores = 2 * sizes["test"] * sizes["entities"]
        memory = ""
        if device.type == "cuda":
            extra = (torch.cuda.max_memory_allocated(device) - base) / 2**30
            memory = f", peak {extra:.2f} GiB beyond the {embeddings / 2**30:.2f} GiB of embeddings"
        print(f"  kgeval [{kernel:>6}]: {seconds:8.2f} s, {scores / seconds:.3e} candidate scores/s{memory}, "
              f"MRR {results['mrr']:.3e}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("all", "fb15k", "wikikg2"), default="all")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the synthetic wikikg2-sized graph")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-pykeen", action="store_true")
    parser.add_argument("--kernels", nargs="+", default=["eager", "triton"], choices=("eager", "triton"))
    args = parser.parse_args()
    device = torch.device(args.device)
    print(machine())
    if device.type == "cuda":
        print(f"device: {torch.cuda.get_device_name(device)}")
    if args.part in ("all", "fb15k"):
        fb15k(args, device)
    if args.part in ("all", "wikikg2"):
        wikikg2(args, device)


if __name__ == "__main__":
    main()
