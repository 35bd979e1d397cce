"""Train DistMult with DistributedDataParallel and evaluate it with kgeval, every rank sharing the ranking work.

Run on 2 CPU processes (gloo) or one process per GPU (NCCL)::

    torchrun --standalone --nproc_per_node=2 examples/distributed_evaluation.py
    torchrun --standalone --nproc_per_node=4 examples/distributed_evaluation.py --epochs 20   # 4 GPUs

Without torchrun it runs in one process and prints the same numbers (up to float rounding): with DDP each
rank takes its share of every batch of 256 triples and the gradients are averaged, so the updates agree.

Inside an initialised process group, ``RankBasedEvaluator.evaluate`` is a collective call: every rank calls it
with the same triples, each ranks its share, and every rank gets the results of the whole evaluation, identical
to a single-process run. Evaluate the plain model (``ddp.module``), not the DDP wrapper: the replicas are equal.
"""

from __future__ import annotations

import argparse
import os

import torch
from torch import distributed as dist
from torch import nn
from torch.nn import functional
from torch.nn.parallel import DistributedDataParallel

from kgeval import RankBasedEvaluator, RankBasedMetricResults
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult


class OneToNLoss(nn.Module):
    """Softmax cross-entropy of the tail and head tasks of a batch of triples (DDP needs a forward)."""

    def __init__(self, model: DistMult) -> None:
        super().__init__()
        self.model = model

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        scores = torch.cat([self.model.score_t(batch[:, :2]), self.model.score_h(batch[:, 1:])])
        return functional.cross_entropy(scores, torch.cat([batch[:, 2], batch[:, 0]]))


def set_up() -> tuple[int, int, torch.device]:
    """Join the process group torchrun describes (if any); returns rank, world size and this rank's device."""
    if "RANK" not in os.environ:
        return 0, 1, torch.device("cpu")
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))  # NCCL collectives use the current device
    dist.init_process_group(backend)
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    return dist.get_rank(), dist.get_world_size(), device


def main(argv: list[str] | None = None) -> RankBasedMetricResults:
    """Train, evaluate the validation split every epoch and the test split at the end; returns the test results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="umls", help="shipped dataset: umls, kinship or nations")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--dim", type=int, default=64)
    args = parser.parse_args(argv)
    rank, world_size, device = set_up()
    data = load_shipped_dataset(args.dataset)
    model = DistMult(data.num_entities, data.num_relations, dim=args.dim, seed=0).to(device)
    loss_module = OneToNLoss(model)
    ddp = DistributedDataParallel(loss_module) if world_size > 1 else loss_module
    optimizer = torch.optim.Adam(ddp.parameters(), lr=0.05)
    evaluator = RankBasedEvaluator(ks=(1, 3, 10))
    train = data.train.to(device)
    generator = torch.Generator().manual_seed(0)  # the same order on every rank; each takes every world_size-th
    for epoch in range(args.epochs):
        order = torch.randperm(len(train), generator=generator).to(device)[rank::world_size]
        for start in range(0, len(order), 256 // world_size):
            loss = ddp(train[order[start : start + 256 // world_size]])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        # every rank calls evaluate (a collective); every rank receives the same results
        results = evaluator.evaluate(model, data.valid, additional_filter_triples=[data.train], use_tqdm=False)
        if rank == 0:
            print(f"epoch {epoch + 1}: validation MRR {results.get_metric('mrr'):.4f}, ", end="")
            print(f"hits@10 {results.get_metric('hits@10'):.4f} ({world_size} process(es))")
    test = evaluator.evaluate(model, data.test, additional_filter_triples=[data.train, data.valid], use_tqdm=False)
    if rank == 0:
        print(test)
    if world_size > 1:
        dist.destroy_process_group()
    return test


if __name__ == "__main__":
    main()
