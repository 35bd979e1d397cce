"""PyKEEN ConvE's head table split into entity, relation and mixed parts (kgeval.adapters.pykeen_conve): the split
network's outputs equal the model's own network of (h, r) -- the interaction's ``hr2d`` / ``hr1d`` run on the
stacked images, as PyKEEN runs them -- exactly on integer weights and within float rounding on random ones, for
several image, kernel and channel shapes, with and without batch norms; every entity's part is computed once per
evaluation and again after a parameter changes in place; above the size cap each table computes its candidates'
parts itself; anything but PyKEEN's own ConvE layers, in evaluation mode, keeps the plain network.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch

pykeen = pytest.importorskip("pykeen")

from pykeen import models as pykeen_models  # noqa: E402
from pykeen.nn import modules as pykeen_modules  # noqa: E402

from kgeval.adapters import pykeen_conve, scoring_view  # noqa: E402
from kgeval.adapters.pykeen import PyKEENHeadTable  # noqa: E402
from kgeval.adapters.pykeen_conve import ConvEFactors, conve_factors  # noqa: E402
from tests.integrations.test_pykeen_forms import (  # noqa: E402
    NUM_ENTITIES,
    NUM_RELATIONS,
    _factory,
    integer_weights,
    random_weights,
)

pytestmark = pytest.mark.pykeen
logging.getLogger("pykeen").setLevel(logging.ERROR)

#: ConvE shapes: (embedding_dim, input_channels, embedding_height, embedding_width, kernel_height, kernel_width,
#: output_channels) -- a kernel as tall as the image (no row of h or r alone), one row tall (no mixed row), channels
SHAPES = {
    "2x4-k2": (8, 1, 2, 4, 2, 2, 2),
    "3x4-k3": (12, 1, 3, 4, 3, 2, 3),
    "4x3-k1": (12, 1, 4, 3, 1, 2, 2),
    "2-channels": (16, 2, 2, 4, 2, 3, 2),
    "5x2-k2": (10, 1, 5, 2, 2, 1, 4),
}


def conve(shape: str, batch_norm: bool = True) -> Any:
    """A ConvE model of ``shape`` (:data:`SHAPES`), in evaluation mode (PyKEEN resolves the image from at most two
    of channels, height and width)."""
    dim, channels, height, width, kernel_height, kernel_width, out = SHAPES[shape]
    image = {"embedding_height": height} if channels == 1 else {"input_channels": channels}
    model = pykeen_models.ConvE(triples_factory=_factory(False), embedding_dim=dim, embedding_width=width, **image,
                                kernel_height=kernel_height, kernel_width=kernel_width, output_channels=out,
                                apply_batch_normalization=batch_norm, random_seed=0)  # fmt: skip
    info = model.interaction.shape_info
    assert (info.input_channels, info.image_height, info.image_width) == (channels, height, width)
    return model.eval()


def own_network(model: Any, relation: int) -> torch.Tensor:
    """(E, d) the interaction's own ``hr2d`` / ``hr1d`` on every entity's image stacked above ``relation``'s, in one
    batch (PyKEEN's arithmetic)."""
    interaction, info = model.interaction, model.interaction.shape_info
    image = (info.input_channels, info.image_height, info.image_width)
    entities = model.entity_representations[0](indices=None)
    relations = model.relation_representations[0](indices=torch.full((NUM_ENTITIES,), relation))
    x = torch.cat([entities.view(-1, *image), relations.view(-1, *image)], dim=-2)
    return interaction.hr1d(interaction.hr2d(x).view(-1, info.num_in_features))


def table(view: PyKEENHeadTable, relation: int, entities: torch.Tensor | None = None) -> torch.Tensor:
    """The view's table of ``relation`` without its column of ones."""
    ids = torch.arange(NUM_ENTITIES) if entities is None else entities
    return view.kgeval_relation_candidates(relation, "head", ids)[:, :-1]


@pytest.mark.parametrize("batch_norm", [True, False], ids=["batch-norm", "no-batch-norm"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_split_network_equals_the_models_own(shape: str, batch_norm: bool) -> None:
    """Integer weights (every sum exact in float32): equal value for value; random weights: within 1e-5."""
    for weights in ("integer", "random"):
        model = conve(shape, batch_norm)
        model = integer_weights(model, "ConvE") if weights == "integer" else random_weights(model)
        view = scoring_view(model)
        assert isinstance(view, PyKEENHeadTable) and isinstance(conve_factors(model.interaction), ConvEFactors)
        with torch.inference_mode():
            for relation in range(NUM_RELATIONS):
                own, ours = own_network(model, relation), table(view, relation)
                if weights == "integer":
                    assert torch.equal(ours, own), (shape, relation)
                else:
                    torch.testing.assert_close(ours, own, rtol=1e-5, atol=1e-5 * own.abs().max().item())
                assert own.abs().sum() > 0


def test_a_subset_of_candidates_in_chunks_gets_their_rows() -> None:
    model = random_weights(conve("3x4-k3"))
    view = scoring_view(model)
    assert isinstance(view, PyKEENHeadTable)
    view.chunk_rows = 4
    some = torch.tensor([5, 0, 23, 5, 11, 2, 17])
    with torch.inference_mode():
        whole = table(view, 2)
        torch.testing.assert_close(table(view, 2, some), whole[some])  # other GEMM sizes: rounding


def test_every_entitys_part_is_computed_once_and_again_after_a_change(monkeypatch: pytest.MonkeyPatch) -> None:
    model = random_weights(conve("2x4-k2"))
    view = scoring_view(model)
    assert isinstance(view, PyKEENHeadTable)
    rows: list[int] = []
    original = ConvEFactors.entity_parts

    def counted(self: ConvEFactors, entities: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rows.append(len(entities))
        return original(self, entities)

    monkeypatch.setattr(ConvEFactors, "entity_parts", counted)
    with torch.inference_mode():
        for relation in range(NUM_RELATIONS):
            table(view, relation)
    assert sum(rows) == NUM_ENTITIES  # once, for every relation's table
    with torch.no_grad():
        model.entity_representations[0]._embeddings.weight[3] += 1.0  # an in-place step, as an optimiser's
    with torch.inference_mode():
        changed = table(view, 1)
        assert sum(rows) == 2 * NUM_ENTITIES
        torch.testing.assert_close(changed, own_network(model, 1), rtol=1e-5, atol=1e-5)


def test_above_the_cap_each_table_computes_its_candidates_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    model = integer_weights(conve("3x4-k3"), "ConvE")
    view = scoring_view(model)
    assert isinstance(view, PyKEENHeadTable)
    monkeypatch.setattr(pykeen_conve, "ENTITY_PARTS_BYTES", 0)
    monkeypatch.setattr("kgeval.adapters.pykeen.ENTITY_PARTS_BYTES", 0)
    view.chunk_rows = 5
    with torch.inference_mode():
        for relation in range(NUM_RELATIONS):
            assert torch.equal(table(view, relation), own_network(model, relation))
    assert view._conve_parts is not None and view._conve_parts[1] is None


def test_only_pykeens_own_layers_in_evaluation_mode_are_split() -> None:
    model = conve("2x4-k2")
    interaction = model.interaction
    assert conve_factors(interaction) is not None
    interaction.train()
    assert conve_factors(interaction) is None  # dropout is random, batch norms use the batch
    interaction.eval()
    interaction.hr1d.append(torch.nn.Identity())
    assert conve_factors(interaction) is None
    model = conve("2x4-k2")
    model.interaction.hr2d[2] = torch.nn.Conv2d(1, 2, (2, 2), padding=1)
    assert conve_factors(model.interaction) is None
    model = conve("2x4-k2")
    model.interaction.hr2d[0].track_running_stats, model.interaction.hr2d[0].running_mean = False, None
    assert conve_factors(model.interaction) is None

    class Subclass(pykeen_modules.ConvEInteraction):
        pass

    subclass = Subclass(embedding_dim=8, embedding_height=2, embedding_width=4, kernel_height=2, kernel_width=2,
                        output_channels=2).eval()  # fmt: skip
    assert conve_factors(subclass) is None
    assert conve_factors(pykeen_modules.ERMLPEInteraction(embedding_dim=4).eval()) is None


def test_a_modified_network_keeps_the_plain_table_and_its_scores() -> None:
    """A layer added to the network: the head table runs the network itself, and still gives its outputs."""
    model = random_weights(conve("2x4-k2"))
    model.interaction.hr1d.append(torch.nn.Tanh())
    view = scoring_view(model)
    assert isinstance(view, PyKEENHeadTable) and conve_factors(model.interaction) is None
    with torch.inference_mode():
        torch.testing.assert_close(table(view, 0), own_network(model, 0))
    assert view._conve_parts is None


def test_a_linear_layer_without_bias_is_split_too() -> None:
    model = conve("3x4-k3")
    linear = model.interaction.hr1d[0]
    model.interaction.hr1d[0] = torch.nn.Linear(linear.in_features, linear.out_features, bias=False)
    model = integer_weights(model, "ConvE").eval()
    view = scoring_view(model)
    assert isinstance(view, PyKEENHeadTable) and conve_factors(model.interaction) is not None
    with torch.inference_mode():
        for relation in range(NUM_RELATIONS):
            assert torch.equal(table(view, relation), own_network(model, relation))


def test_a_model_of_inference_tensors_recomputes_its_parts_each_table() -> None:
    """Parameters made under inference mode keep no version: nothing is kept between tables, and each is right."""
    with torch.inference_mode():
        model = random_weights(conve("2x4-k2"))
        view = scoring_view(model)
        assert isinstance(view, PyKEENHeadTable)
        for relation in range(NUM_RELATIONS):
            torch.testing.assert_close(table(view, relation), own_network(model, relation))
    assert view._conve_parts is not None and view._conve_parts[0] is None  # no version was kept
