"""Fully inductive evaluation: validation and test triples ranked over the inference graph's entities with the
inference graph's own relation ids (new relations included), filtered as FullyInductiveDataset.evaluation_kwargs
says for each validation protocol -- task for task equal to a brute-force reference over the model's own scores, on
random fully inductive graphs with heavy ties and on a shared InGram set."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval.datasets import shared_data_dir
from kgeval.datasets.fully_inductive import load_fully_inductive_folder
from kgeval.models import RelationContextDistMult
from tests.helpers.loop_ranks import loop_ranks
from tests.helpers.ranks import assert_same_ranks, ranks_by_side
from tests.helpers.reference import reference_ranks
from tests.support.fully_inductive import random_fully_inductive

DIM = 3


class PerGraphTables(torch.nn.Module):
    """kgeval's inductive protocol with a relation vocabulary per graph (``kgeval_num_relations(mode)``): DistMult
    over entity and relation tables of each graph, entries in {-1, 0, 1} (heavy ties, exact in any order).
    ``num_relations`` is the training graph's, smaller than the inference graph's: the mode's count must win."""

    def __init__(self, entities: dict[str, int], relations: dict[str, int], seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.sizes, self.relation_sizes = entities, relations
        self.entity_tables = torch.nn.ParameterDict({
            f"{graph}_graph": torch.nn.Parameter(
                torch.randint(-1, 2, (entities[graph], DIM), generator=generator).float())
            for graph in ("training", "inference")})  # fmt: skip
        self.relation_tables = torch.nn.ParameterDict({
            f"{graph}_graph": torch.nn.Parameter(
                torch.randint(-1, 2, (relations[graph], DIM), generator=generator).float())
            for graph in ("training", "inference")})  # fmt: skip
        self.num_relations = relations["training"]

    @staticmethod
    def graph(mode: str) -> str:
        return "training" if mode == "training" else "inference"

    def tables(self, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(entity table, relation table) of the mode's graph."""
        key = f"{self.graph(mode)}_graph"
        return self.entity_tables[key], self.relation_tables[key]

    def kgeval_num_entities(self, mode: str) -> int:
        return self.sizes[self.graph(mode)]

    def kgeval_num_relations(self, mode: str) -> int:
        return self.relation_sizes[self.graph(mode)]

    def score_t(self, hr_batch: torch.Tensor, *, mode: str) -> torch.Tensor:
        entities, relations = self.tables(mode)
        return (entities[hr_batch[:, 0]] * relations[hr_batch[:, 1]]) @ entities.T

    def score_h(self, rt_batch: torch.Tensor, *, mode: str) -> torch.Tensor:
        entities, relations = self.tables(mode)
        return (relations[rt_batch[:, 0]] * entities[rt_batch[:, 1]]) @ entities.T

    def table(self, mode: str) -> torch.Tensor:
        entities, relations = self.tables(mode)
        return torch.einsum("hd,rd,td->hrt", entities, relations, entities).detach()


@pytest.mark.parametrize(("batch_size", "slice_size"), [(None, None), (1, 4), (7, 11)])
@pytest.mark.parametrize(
    ("split", "validation_filter"), [("valid", "inference"), ("valid", "inference+test"), ("test", "inference")]
)
def test_new_relations_ranked_over_the_inference_graph(batch_size, slice_size, split, validation_filter) -> None:
    data = random_fully_inductive(seed=5)
    model = PerGraphTables({"training": 11, "inference": 19}, {"training": 3, "inference": 7}, seed=2)
    kwargs = data.evaluation_kwargs(split, validation_filter=validation_filter)
    assert int(kwargs["mapped_triples"][:, 1].max()) >= model.num_relations  # new relations are evaluated
    results = RankBasedEvaluator(batch_size=batch_size, slice_size=slice_size).evaluate(
        model, **kwargs, use_tqdm=False)  # fmt: skip
    expected = reference_ranks(model.table(kwargs["mode"]), kwargs["mapped_triples"],
                               kwargs["additional_filter_triples"])  # fmt: skip
    assert_same_ranks(results.records, expected)
    both = expected["both"]
    assert (both["pessimistic"] - both["optimistic"]).max() >= 3  # heavy ties really occur


def test_the_validation_filter_changes_ranks() -> None:
    """With the test triples in the validation filter (InGram's and ULTRA's code) some validation ranks change:
    the option is not a no-op on data whose valid and test queries meet."""
    data = random_fully_inductive(seed=5)
    model = PerGraphTables({"training": 11, "inference": 19}, {"training": 3, "inference": 7}, seed=2)
    ranks = {}
    for choice in ("inference", "inference+test"):
        records = RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("valid", validation_filter=choice),
                                                use_tqdm=False).records  # fmt: skip
        ranks[choice] = ranks_by_side(records)["tail"]["pessimistic"]
    assert (ranks["inference+test"] <= ranks["inference"]).all()
    assert (ranks["inference+test"] < ranks["inference"]).sum() > 0


def test_a_bad_relation_count_is_refused() -> None:
    class Broken(PerGraphTables):
        def kgeval_num_relations(self, mode: str) -> int:
            return 0

    data = random_fully_inductive(seed=1)
    model = Broken({"training": 11, "inference": 19}, {"training": 3, "inference": 7})
    with pytest.raises(ValueError, match="kgeval_num_relations\\('testing'\\) must be a positive int"):
        RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False)
    too_few = PerGraphTables({"training": 11, "inference": 19}, {"training": 3, "inference": 5})
    with pytest.raises(ValueError, match="relation"):  # a relation id beyond the mode's graph
        RankBasedEvaluator().evaluate(too_few, **data.evaluation_kwargs("test"), use_tqdm=False)


@pytest.mark.parametrize("validation_filter", ["inference", "inference+test"])
def test_a_shared_ingram_set_equals_the_loop_over_the_models_rows(validation_filter) -> None:
    root = shared_data_dir()
    if root is None or not (root / "InGram-NL-25").is_dir():
        pytest.skip("needs the shared InGram-NL-25 data")
    data = load_fully_inductive_folder(root / "InGram-NL-25")
    model = PerGraphTables({"training": data.num_training_entities, "inference": data.num_inference_entities},
                           {"training": data.num_training_relations, "inference": data.num_inference_relations},
                           seed=7)  # fmt: skip
    kwargs = data.evaluation_kwargs("valid", validation_filter=validation_filter)
    rows = torch.arange(0, len(data.valid), 5)  # 149 validation triples, new relations among them
    kwargs["mapped_triples"] = data.valid[rows]
    kwargs["additional_filter_triples"] = [*kwargs["additional_filter_triples"], data.valid]  # the rows left out
    results = RankBasedEvaluator().evaluate(model, **kwargs, use_tqdm=False)

    def row(query: tuple[int, int], side: str) -> np.ndarray:
        batch = torch.tensor([query])
        method = model.score_t if side == "tail" else model.score_h
        return method(batch, mode="validation")[0].detach().numpy()

    expected = loop_ranks(row, kwargs["mapped_triples"], kwargs["additional_filter_triples"])
    assert_same_ranks(results.records, expected)
    new = data.inference_relation_to_training < 0
    assert int(new[kwargs["mapped_triples"][:, 1]].sum()) > 0


def test_the_relation_context_baseline_refuses_a_fully_inductive_dataset() -> None:
    """RelationContextDistMult has a vector per training relation only: on a fully inductive dataset it says so and
    names the model that scores new relations (before, an AttributeError on num_relations)."""
    with pytest.raises(TypeError, match="cannot score the relations of a fully inductive dataset"):
        RelationContextDistMult.for_dataset(random_fully_inductive(seed=1))
