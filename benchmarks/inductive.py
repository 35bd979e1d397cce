"""Inductive evaluation on ILPC2022-large: kgeval against PyKEEN's own evaluator on the same PyKEEN inductive model,
and against the bare GEMM of the distinct test queries.

Usage::

    python benchmarks/inductive.py                         # ../shared/data/ILPC2022-large, NodePiece dim 100
    python benchmarks/inductive.py --model gnn --dim 32 --rounds 3
    python benchmarks/inductive.py --dataset ILPC2022-small

Contenders (each in its own subprocess, so its peak RSS is its own; best of ``--repeats`` calls; the rounds
interleave the contenders and each ratio is taken within a round, the best round's printed). The model is PyKEEN's
``InductiveNodePiece`` (``--model nodepiece``, MLP aggregation, 5 tokens, as the organisers' baseline) or
``InductiveNodePieceGNN`` (``--model gnn``), seeded, untrained or trained ``--train-epochs`` epochs first as the
organisers train it (weights shared by every contender; the relation-context rows stay untrained); the test split of
the inference graph, mode ``"testing"``, filtered by the inference graph and the validation triples, both sides:

- ``kgeval``: ``kgeval.integrations.pykeen.RankBasedEvaluator(mode="testing").evaluate`` (PyKEEN's arithmetic on
  the mode's representations, computed once; every metric and rank type).
- ``pykeen``: PyKEEN's ``RankBasedEvaluator(mode="testing").evaluate`` with its defaults (batch size chosen by its
  memory search), which recomputes the mode's representations for every batch.
- ``floor``: the model's representations of the mode computed once (its own ``_get_representations``), then the
  bare GEMM of the distinct (h, r) and (t, r_inv) queries against every entity (DistMult's query/candidate form;
  blocks of 1024 rows, one preallocated output): the least an exact full ranking computes.
- ``kgeval-context`` / ``floor-context``: the same two for kgeval's ``RelationContextDistMult`` (the demo's
  inductive baseline, same dim), which kgeval ranks on its GEMM fast path.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (
    contender,
    load_average,
    machine,
    measure,
    print_rounds,
    run_rounds,
    run_worker,
)

from kgeval.datasets import load_inductive_dataset, shared_data_dir

FLOOR_ROWS = 1024
CONTENDERS = ("kgeval", "pykeen", "floor", "kgeval-context", "floor-context")


def folder_of(name: str) -> Path:
    folder = Path(name)
    if folder.is_dir():
        return folder
    shared = shared_data_dir()
    if shared is None or not (shared / name).is_dir():
        raise SystemExit(f"{name}: neither a folder nor a dataset of the shared data folder")
    return shared / name


def pykeen_setup(args: argparse.Namespace) -> tuple[Any, Any, list[torch.Tensor]]:
    """(PyKEEN model in eval mode, test triples, filter triples), read from the folder as the organisers read it."""
    from pykeen.models import InductiveNodePiece, InductiveNodePieceGNN

    logging.getLogger("pykeen").setLevel(logging.ERROR)
    data = load_inductive_dataset(folder_of(args.dataset))
    factories = data.to_pykeen(create_inverse_triples=True)
    cls = InductiveNodePieceGNN if args.model == "gnn" else InductiveNodePiece
    model = cls(triples_factory=factories["transductive_training"], inference_factory=factories["inductive_inference"],
                embedding_dim=args.dim, num_tokens=5, aggregation="mlp", random_seed=0)  # fmt: skip
    if getattr(args, "weights", None):
        model.load_state_dict(torch.load(args.weights, weights_only=True))
    model.eval()
    kwargs = data.evaluation_kwargs("test")
    return model, kwargs["mapped_triples"], kwargs["additional_filter_triples"]


@contender("kgeval")
def kgeval_contender(args: argparse.Namespace) -> dict[str, Any]:
    from kgeval.integrations.pykeen import RankBasedEvaluator

    model, test, known = pykeen_setup(args)
    evaluator = RankBasedEvaluator(mode="testing")
    results: dict[str, float] = {}

    def run() -> None:
        results["mrr"] = evaluator.evaluate(model, test, additional_filter_triples=known, use_tqdm=False)["mrr"]

    return measure(run, args.repeats) | results


@contender("pykeen")
def pykeen_contender(args: argparse.Namespace) -> dict[str, Any]:
    from pykeen.evaluation import RankBasedEvaluator

    model, test, known = pykeen_setup(args)
    evaluator = RankBasedEvaluator(mode="testing")
    results: dict[str, float] = {}

    def run() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = evaluator.evaluate(model, test, additional_filter_triples=known, use_tqdm=False)
        results["mrr"] = float(got.get_metric("both.realistic.inverse_harmonic_mean_rank"))

    return measure(run, args.repeats) | results


def _floor(vectors: Any, queries: dict[str, torch.Tensor], repeats: int) -> dict[str, Any]:
    """Time ``vectors()`` -> (entities (E, d), query function) and the GEMM of every distinct query row."""
    out = torch.empty(FLOOR_ROWS, 1)

    def run() -> None:
        nonlocal out
        entities, query = vectors()
        if out.shape[1] != len(entities):
            out = torch.empty(FLOOR_ROWS, len(entities))
        for target, rows in queries.items():
            for start in range(0, len(rows), FLOOR_ROWS):
                block = query(rows[start : start + FLOOR_ROWS], target)
                torch.matmul(block, entities.T, out=out[: len(block)])

    with torch.inference_mode():
        return measure(run, repeats, rows=sum(len(rows) for rows in queries.values()))


def distinct_queries(test: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"tail": torch.unique(test[:, [0, 1]], dim=0), "head": torch.unique(test[:, [1, 2]], dim=0)}


@contender("floor")
def floor_contender(args: argparse.Namespace) -> dict[str, Any]:
    model, test, _ = pykeen_setup(args)

    def vectors() -> tuple[torch.Tensor, Any]:
        entities, relations, _ = model._get_representations(h=None, r=None, t=None, mode="testing")

        def query(rows: torch.Tensor, target: str) -> torch.Tensor:
            if target == "tail":  # (h, r): relation ids as the model stores them (2r with inverse triples)
                return entities[rows[:, 0]] * relations[2 * rows[:, 1]]
            return entities[rows[:, 1]] * relations[2 * rows[:, 0] + 1]  # (t, r_inv)

        return entities, query

    return _floor(vectors, distinct_queries(test), args.repeats)


def context_setup(args: argparse.Namespace) -> tuple[Any, Any]:
    from kgeval.models import RelationContextDistMult

    data = load_inductive_dataset(folder_of(args.dataset))
    return RelationContextDistMult.for_dataset(data, dim=args.dim, seed=0).eval(), data


@contender("kgeval-context")
def kgeval_context_contender(args: argparse.Namespace) -> dict[str, Any]:
    from kgeval import RankBasedEvaluator

    model, data = context_setup(args)
    evaluator = RankBasedEvaluator()
    results: dict[str, float] = {}

    def run() -> None:
        results["mrr"] = evaluator.evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False)["mrr"]

    return measure(run, args.repeats) | results


@contender("floor-context")
def floor_context_contender(args: argparse.Namespace) -> dict[str, Any]:
    model, data = context_setup(args)

    def vectors() -> tuple[torch.Tensor, Any]:
        entities = model.entity_vectors("testing")

        def query(rows: torch.Tensor, target: str) -> torch.Tensor:
            if target == "tail":
                return entities[rows[:, 0]] * model.relation_weights[rows[:, 1]]
            return model.relation_weights[rows[:, 0]] * entities[rows[:, 1]]

        return entities, query

    return _floor(vectors, distinct_queries(data.test), args.repeats)


def train_once(args: argparse.Namespace, path: Path) -> float:
    """Train the PyKEEN model ``args.train_epochs`` epochs as the organisers do (sLCWA on the training graph, mode
    "training"), save its weights to ``path`` for every contender; the training's wall seconds."""
    from pykeen.training import SLCWATrainingLoop

    started = time.perf_counter()
    args.weights = None
    model, _, _ = pykeen_setup(args)
    model.train()
    data = load_inductive_dataset(folder_of(args.dataset)).to_pykeen(create_inverse_triples=True)
    loop = SLCWATrainingLoop(triples_factory=data["transductive_training"], model=model, mode="training",
                             optimizer_kwargs={"lr": 0.0005})  # fmt: skip
    loop.train(triples_factory=data["transductive_training"], num_epochs=args.train_epochs, batch_size=256,
               use_tqdm=False)  # fmt: skip
    torch.save(model.state_dict(), path)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="ILPC2022-large")
    parser.add_argument("--model", choices=("nodepiece", "gnn"), default="nodepiece")
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--train-epochs",
        type=int,
        default=0,
        help="train the PyKEEN model this many epochs first (0: untrained, the default)",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return run_worker(args)
    argv = ["--dataset", args.dataset, "--model", args.model, "--dim", str(args.dim), "--repeats", str(args.repeats)]
    if args.train_epochs:
        weights = Path(tempfile.mkdtemp()) / "weights.pt"
        seconds = train_once(args, weights)
        print(f"(trained {args.train_epochs} epochs in {seconds:.0f} s; every contender loads those weights)")
        argv += ["--weights", str(weights)]
    print(f"# kgeval inductive benchmark: {args.dataset} test, PyKEEN {args.model} dim {args.dim}\n\n"
          f"machine: {machine()}\nload average before: {load_average()}\n")  # fmt: skip
    started = time.time()
    rounds = run_rounds(__file__, CONTENDERS, argv, args.rounds)
    print_rounds(rounds, CONTENDERS, (("PyKEEN's evaluator / kgeval", "pykeen", "kgeval"),
                                      ("kgeval / representations once + bare GEMM", "kgeval", "floor"),
                                      ("kgeval, relation-context model / its bare GEMM", "kgeval-context",
                                       "floor-context")), mrr_digits=6)  # fmt: skip
    print(f"\n{time.time() - started:.0f} s in all; load average after: {load_average()}")


if __name__ == "__main__":
    main()
