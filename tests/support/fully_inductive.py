"""Random fully inductive datasets: an inference graph with relations of its own, for the evaluation tests."""

from __future__ import annotations

import torch

from kgeval.datasets.fully_inductive import FullyInductiveDataset


def random_fully_inductive(seed: int, entities: int = 19, relations: int = 7,
                           training_relations: int = 3) -> FullyInductiveDataset:  # fmt: skip
    """A dataset of random triples whose inference graph has ``relations`` relations, the last
    ``relations - training_relations`` of them new; valid and test share queries (so the validation filter
    decides ranks)."""
    generator = torch.Generator().manual_seed(seed)

    def triples(count: int, nodes: int, kinds: int) -> torch.Tensor:
        return torch.stack([torch.randint(0, nodes, (count,), generator=generator),
                            torch.randint(0, kinds, (count,), generator=generator),
                            torch.randint(0, nodes, (count,), generator=generator)], dim=1)  # fmt: skip

    valid = triples(40, entities, relations)
    test = valid.clone()
    test[:, 2] = torch.randint(0, entities, (40,), generator=generator)  # same (h, r), other tails
    test[::2, 0] = torch.randint(0, entities, (20,), generator=generator)
    return FullyInductiveDataset(
        name="random", train=triples(50, 11, training_relations), inference=triples(60, entities, relations),
        valid=valid, test=test,
        training_entity_to_id={f"t{i}": i for i in range(11)},
        training_relation_to_id={f"r{i}": i for i in range(training_relations)},
        inference_entity_to_id={f"i{i}": i for i in range(entities)},
        inference_relation_to_id={f"r{i}": i for i in range(relations)})  # fmt: skip
