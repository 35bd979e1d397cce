"""TorchKGE 0.17.7's own ``TripletClassificationEvaluator`` and kgeval's ``convention="torchkge"`` on the same model
and the same negatives (issue 60): TorchKGE draws its negatives itself, unseeded, so the test injects a seeded set --
one corrupted tail per triple, the triple's relation kept, as TorchKGE's sampler corrupts -- into its sampler. Its
thresholds are each relation's highest validation-negative score (the highest of all for a relation validation
lacks), a test triple true when its score is above; its accuracy counts a test negative right only when its score is
below. kgeval's thresholds equal TorchKGE's bit for bit, and its accuracy equals TorchKGE's plus the test negatives
that score exactly their threshold (TorchKGE counts them wrong; kgeval predicts them false, as every triple not
above its threshold), counted: seeded untrained models, Nations TransE 15 of 201 test negatives, DistMult 2; UMLS
TransE 1 of 661, DistMult 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from kgeval.datasets import load_shipped_dataset
from kgeval.variants import LabelledTriples, classify_triples

torchkge = pytest.importorskip("torchkge")
from torchkge.data_structures import KnowledgeGraph  # noqa: E402
from torchkge.evaluation import TripletClassificationEvaluator  # noqa: E402
from torchkge.models import DistMultModel, TransEModel  # noqa: E402


def corrupted_tails(triples: torch.Tensor, num_entities: int, seed: int) -> torch.Tensor:
    """One negative per triple: its tail replaced by another entity drawn with ``seed`` (relation and head kept)."""
    generator = torch.Generator().manual_seed(seed)
    shift = torch.randint(1, num_entities, (triples.shape[0],), generator=generator)
    negatives = triples.clone()
    negatives[:, 2] = (triples[:, 2] + shift) % num_entities
    return negatives


def knowledge_graph(triples: torch.Tensor, num_entities: int, num_relations: int) -> Any:
    ent2ix = {str(i): i for i in range(num_entities)}
    rel2ix = {str(i): i for i in range(num_relations)}
    return KnowledgeGraph(kg={"heads": triples[:, 0], "tails": triples[:, 2], "relations": triples[:, 1]},
                          ent2ix=ent2ix, rel2ix=rel2ix)  # fmt: skip


@pytest.mark.parametrize("model_class", [TransEModel, DistMultModel])
@pytest.mark.parametrize("dataset", ["nations", "umls"])
def test_torchkges_accuracy_equals_kgevals_under_its_convention(model_class: Any, dataset: str) -> None:
    data = load_shipped_dataset(dataset)
    torch.manual_seed(0)
    if model_class is TransEModel:
        model = TransEModel(32, data.num_entities, data.num_relations, dissimilarity_type="L2")
    else:
        model = DistMultModel(32, data.num_entities, data.num_relations)
    valid_negatives = corrupted_tails(data.valid, data.num_entities, 1)
    test_negatives = corrupted_tails(data.test, data.num_entities, 2)

    graphs = [knowledge_graph(split, data.num_entities, data.num_relations) for split in (data.valid, data.test)]
    theirs = TripletClassificationEvaluator(model, *graphs)
    injected = {"main": valid_negatives, "test": test_negatives}
    theirs.sampler.corrupt_kg = lambda batch_size, use_cuda, which: (injected[which][:, 0], injected[which][:, 2])
    model.eval()
    with torch.no_grad():
        accuracy = theirs.accuracy(b_size=256)

    valid = LabelledTriples.from_positives_and_negatives(data.valid, valid_negatives)
    test = LabelledTriples.from_positives_and_negatives(data.test, test_negatives)
    ours = classify_triples(model, valid, test, convention="torchkge")
    thresholds = theirs.thresholds.double().numpy()
    assert ours.thresholds == {relation: float(thresholds[relation]) for relation in ours.thresholds}  # bit for bit
    negatives = ~ours.labels
    at_threshold = int(np.sum(ours.scores[negatives] == thresholds[ours.relations[negatives]]))
    # TorchKGE counts a test negative scoring exactly its threshold wrong (neither above nor below); kgeval predicts
    # it false, as every negative not above the threshold: its accuracy is higher by those negatives, counted
    assert ours.get_metric("accuracy") == pytest.approx(accuracy + at_threshold / len(test), abs=1e-12)
