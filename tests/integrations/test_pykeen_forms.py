"""The query/candidate forms of PyKEEN's interactions beyond DistMult / ComplEx / RESCAL / TransE / RotatE
(kgeval.adapters.pykeen.FORMS and its wrappers): each is chosen where it computes the model's scores, and ranks every
task as a brute force over the PyKEEN model's own ``predict`` does, ties included. The tails-only forms (a network of
(h, r): ConvE, ERMLPE, CrossE, ProjE, Transformer) rank heads without inverse triples through a per-relation
candidate table of that network's vectors (kgeval.adapters.pykeen.PyKEENHeadTable), held to the same brute force.

The expectations come from the PyKEEN model itself: every score row from ``model.predict(batch, target=...)``, the
known answers masked, the optimistic rank 1 + #(scores above the true one), the pessimistic #(scores at least the
true one). Weights are small integers (and batch norms with integer statistics and eps = 0) so that every score is
exact in float32 in both the model's arithmetic and the form's: the many ties must then come out tie for tie. The
Transformer interaction (layer norms, softmax) has no integer arithmetic; its entities repeat a few distinct rows, so
its ties are those of equal candidates.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

pykeen = pytest.importorskip("pykeen")

from pykeen import models as pykeen_models  # noqa: E402
from pykeen.models import ERModel  # noqa: E402
from pykeen.nn import modules as pykeen_modules  # noqa: E402
from pykeen.triples import TriplesFactory  # noqa: E402

from kgeval import RankBasedEvaluator  # noqa: E402
from kgeval._engine.gemm_scoring import GemmScorer, L1Scorer  # noqa: E402
from kgeval._engine.relation_tables import RelationTableScorer  # noqa: E402
from kgeval._engine.scorer_choice import make_scorer  # noqa: E402
from kgeval._engine.scoring import SlicedScorer  # noqa: E402
from kgeval.adapters import pykeen as pykeen_adapter  # noqa: E402
from kgeval.adapters import scoring_view  # noqa: E402
from kgeval.adapters.pykeen import PyKEENHeadTable, PyKEENQueryCandidate, PyKEENScoring  # noqa: E402
from kgeval.exceptions import FastPathWarning  # noqa: E402
from kgeval.protocol import RelationTableModel  # noqa: E402
from tests.helpers.ranks import rank_tuples  # noqa: E402

pytestmark = pytest.mark.pykeen
logging.getLogger("pykeen").setLevel(logging.ERROR)

NUM_ENTITIES, NUM_RELATIONS = 24, 4
TARGETS = ("head", "tail")


def _factory(inverse: bool) -> TriplesFactory:
    generator = torch.Generator().manual_seed(0)
    triples = torch.stack(
        [
            torch.randint(0, NUM_ENTITIES, (240,), generator=generator),
            torch.randint(0, NUM_RELATIONS, (240,), generator=generator),
            torch.randint(0, NUM_ENTITIES, (240,), generator=generator),
        ],
        dim=1,
    )
    triples = torch.unique(triples, dim=0)
    return TriplesFactory(
        triples,
        entity_to_id={str(i): i for i in range(NUM_ENTITIES)},
        relation_to_id={str(i): i for i in range(NUM_RELATIONS)},
        create_inverse_triples=inverse,
    )


def _multilinear_tucker(factory: TriplesFactory) -> ERModel:
    model = ERModel(
        triples_factory=factory,
        interaction="MultiLinearTucker",
        interaction_kwargs={"head_dim": 4, "relation_dim": 3, "tail_dim": 5},
        entity_representations_kwargs=[{"shape": 4}, {"shape": 5}],
        relation_representations_kwargs={"shape": 3},
        random_seed=0,
    )
    with torch.no_grad():
        model.interaction.core_tensor.normal_()
    return model


def _transformer(factory: TriplesFactory) -> ERModel:
    return ERModel(
        triples_factory=factory,
        interaction="Transformer",
        interaction_kwargs={"input_dim": 8, "num_layers": 1, "num_heads": 2, "dim_feedforward": 16},
        entity_representations_kwargs={"shape": 8},
        relation_representations_kwargs={"shape": 8},
        random_seed=0,
    )


def _affine_distmult(factory: TriplesFactory) -> ERModel:
    interaction = pykeen_modules.MonotonicAffineTransformationInteraction(
        base=pykeen_modules.DistMultInteraction(), initial_bias=3.0
    )
    return ERModel(
        triples_factory=factory,
        interaction=interaction,
        entity_representations_kwargs={"shape": 6},
        relation_representations_kwargs={"shape": 6},
        random_seed=0,
    )


def _model(cls: str, **kwargs) -> Callable[[TriplesFactory], ERModel]:
    def build(factory: TriplesFactory) -> ERModel:
        return getattr(pykeen_models, cls)(triples_factory=factory, random_seed=0, **kwargs)

    return build


CONVE = {"embedding_dim": 8, "output_channels": 2, "embedding_height": 2, "embedding_width": 4, "kernel_height": 2,
         "kernel_width": 2}  # fmt: skip

#: name -> (builder, similarity, targets served without inverse triples)
CASES: dict[str, tuple[Callable[[TriplesFactory], ERModel], str, tuple[str, ...]]] = {
    "TuckER": (_model("TuckER", embedding_dim=4, relation_dim=3), "dot", TARGETS),
    "TuckER-no-batch-norm": (_model("TuckER", embedding_dim=4, apply_batch_normalization=False), "dot", TARGETS),
    "MultiLinearTucker": (_multilinear_tucker, "dot", TARGETS),
    "QuatE": (_model("QuatE", embedding_dim=3), "dot", TARGETS),
    "SimplE": (_model("SimplE", embedding_dim=5), "dot", TARGETS),
    "CP": (_model("CP", embedding_dim=3, rank=2), "dot", TARGETS),
    "DistMA": (_model("DistMA", embedding_dim=5), "dot", TARGETS),
    "AutoSF": (_model("AutoSF", embedding_dim=3), "dot", TARGETS),
    "HolE": (_model("HolE", embedding_dim=4), "dot", TARGETS),  # d = 4: the FFT of small integers is exact
    "TransF": (_model("TransF", embedding_dim=5), "dot", TARGETS),
    "UM-L1": (_model("UM", embedding_dim=4, scoring_fct_norm=1), "l1", TARGETS),
    "UM-L2": (_model("UM", embedding_dim=4, scoring_fct_norm=2, power_norm=True), "l2", TARGETS),
    "MonotonicAffine(DistMult)": (_affine_distmult, "dot", TARGETS),
    "ConvE": (_model("ConvE", **CONVE), "dot", ("tail",)),
    "ERMLPE": (_model("ERMLPE", embedding_dim=5, hidden_dim=4), "dot", ("tail",)),
    "CrossE": (_model("CrossE", embedding_dim=5, combination_activation="relu"), "dot", ("tail",)),
    "CrossE-tanh": (_model("CrossE", embedding_dim=5), "dot", ("tail",)),
    "ProjE": (_model("ProjE", embedding_dim=5, inner_non_linearity="relu"), "dot", ("tail",)),
    "Transformer": (_transformer, "dot", ("tail",)),
}
#: cases whose scores are not all exact in float32 with integer weights (ties only between equal candidates)
INEXACT = {"Transformer", "CrossE-tanh"}


def build(name: str, inverse: bool) -> ERModel:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CASES[name][0](_factory(inverse)).eval()


def integer_weights(model: ERModel, name: str) -> ERModel:
    """Every parameter in {-1, 0, 1} (complex: both parts); batch norms with integer statistics, unit variance and
    eps = 0 (an integer affine map); QuatE's relations signed unit quaternions (its normalisation leaves them);
    the entities drawn from a few distinct rows, so that equal candidates tie whatever the arithmetic."""
    generator = torch.Generator().manual_seed(1)

    def draw(shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        values = torch.randint(-1, 2, shape, generator=generator).float()
        if dtype.is_complex:
            return torch.complex(values, torch.randint(-1, 2, shape, generator=generator).float()).to(dtype)
        return values.to(dtype)

    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(draw(parameter.shape, parameter.dtype))
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm1d | torch.nn.BatchNorm2d):
                module.eps = 0.0
                module.running_mean.copy_(draw(module.running_mean.shape, module.running_mean.dtype))
                module.running_var.fill_(1.0)
        for representation in model.entity_representations:
            weight = representation._embeddings.weight
            pool = weight[:6].clone()
            weight.copy_(pool[torch.randint(0, len(pool), (len(weight),), generator=generator)])
        if name == "QuatE":
            for representation in model.relation_representations:
                weight = representation._embeddings.weight  # (R, d * 4): one signed unit component per quaternion
                quaternions = torch.zeros(weight.shape[0], weight.shape[1] // 4, 4)
                axis = torch.randint(0, 4, quaternions.shape[:2], generator=generator)
                sign = torch.randint(0, 2, quaternions.shape[:2], generator=generator) * 2 - 1
                quaternions.scatter_(2, axis[..., None], sign[..., None].float())
                weight.copy_(quaternions.reshape(weight.shape))
    return model


def random_weights(model: ERModel) -> ERModel:
    """Random float weights and batch-norm statistics (float arithmetic: scores agree within rounding)."""
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dtype.is_complex:
                parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype))
            else:
                parameter.copy_(torch.randn(parameter.shape, generator=generator).to(parameter.dtype))
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm1d | torch.nn.BatchNorm2d):
                module.running_mean.copy_(torch.randn(module.running_mean.shape, generator=generator))
                module.running_var.copy_(0.5 + torch.rand(module.running_var.shape, generator=generator))
    return model


def split() -> tuple[torch.Tensor, torch.Tensor]:
    """(evaluation triples, other known triples) of the factory's triples."""
    triples = _factory(False).mapped_triples
    return triples[:50], triples[50:]


def brute_force(model: ERModel, evaluated: torch.Tensor, known: torch.Tensor) -> dict[str, tuple[np.ndarray, ...]]:
    """target -> (optimistic, pessimistic, num_candidates) per evaluated triple, from the model's own ``predict``
    rows with every other known answer of the query masked."""
    everything = {tuple(row) for row in torch.cat([evaluated, known]).tolist()}
    out = {}
    with torch.inference_mode():
        for target, answer_column in (("head", 0), ("tail", 2)):
            scores = model.predict(evaluated, target=target).double()
            optimistic, pessimistic, counts = [], [], []
            for row, (h, r, t) in enumerate(evaluated.tolist()):
                answer = (h, t)[answer_column // 2]
                keep = [e == answer or ((e, r, t) if target == "head" else (h, r, e)) not in everything
                        for e in range(NUM_ENTITIES)]  # fmt: skip
                values = scores[row][torch.tensor(keep)]
                true = scores[row, answer]
                optimistic.append(1 + int((values > true).sum()))
                pessimistic.append(int((values >= true).sum()))
                counts.append(int(sum(keep)))
            out[target] = (np.array(optimistic), np.array(pessimistic), np.array(counts))
    return out


def kgeval_ranks(model: Any, evaluated: torch.Tensor, known: torch.Tensor, **sizes) -> dict[str, tuple]:
    """target -> (optimistic, pessimistic, num_candidates) per evaluated triple, from kgeval's records (a model or a
    view)."""
    results = RankBasedEvaluator(**sizes).evaluate(model, evaluated, additional_filter_triples=known, use_tqdm=False)
    return rank_tuples(results.records)


def chosen_scorers(model: Any) -> dict[str, Any]:
    """target -> the scorer kgeval chooses for ``model`` (a model or a view), probed on the split's evaluated
    triples, a FastPathWarning an error."""
    evaluated = split()[0]
    scorers = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        for target in TARGETS:
            queries = evaluated[:, :2] if target == "tail" else evaluated[:, 1:]
            scorers[target] = make_scorer(model, target, NUM_ENTITIES, None, probe_queries=queries)
    return scorers


@pytest.fixture(params=[False, True], ids=["plain", "inverse"])
def inverse(request: pytest.FixtureRequest) -> bool:
    return request.param


@pytest.mark.parametrize("name", list(CASES))
def test_the_form_is_chosen(name: str, inverse: bool) -> None:
    model = integer_weights(build(name, inverse), name)
    _builder, similarity, sides = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        view = scoring_view(model)
        assert isinstance(view, PyKEENQueryCandidate)
        assert view.kgeval_similarity == similarity
        served = TARGETS if inverse else sides
        assert tuple(view.kgeval_targets) == tuple(served)
        tables = () if inverse else tuple(target for target in TARGETS if target not in sides)
        assert (type(view) is PyKEENHeadTable) == bool(tables)
        assert isinstance(view, RelationTableModel) == bool(tables)
        assert tuple(getattr(view, "kgeval_table_targets", ())) == tables
        for target, scorer in chosen_scorers(model).items():
            expected = (L1Scorer if similarity == "l1" else GemmScorer) if target in served else RelationTableScorer
            assert type(scorer) is expected, target
            assert scorer.model_scores == (similarity != "l2"), target  # a head table's constants are in its query


@pytest.mark.parametrize("sizes", [(1, 1), (3, 4), (None, None)], ids=["1x1", "3x4", "whole"])
@pytest.mark.parametrize("name", list(CASES))
def test_ranks_equal_a_brute_force_over_the_models_own_scores(
    name: str, inverse: bool, sizes: tuple[int | None, int | None]
) -> None:
    model = integer_weights(build(name, inverse), name)
    evaluated, known = split()
    expected = brute_force(model, evaluated, known)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        ours = kgeval_ranks(model, evaluated, known, batch_size=sizes[0], slice_size=sizes[1])
    ties = 0
    for target in TARGETS:
        if name in INEXACT:
            assert_equal_but_near_ties(model, evaluated, target, ours[target], expected[target])
        else:
            for got, want in zip(ours[target], expected[target], strict=True):
                np.testing.assert_array_equal(got, want, err_msg=target)
        ties += int((expected[target][1] > expected[target][0]).sum())
    assert ties > 0.1 * 2 * len(evaluated)  # the weights really tie scores


def assert_equal_but_near_ties(model: ERModel, evaluated: torch.Tensor, target: str, ours: tuple, expected: tuple
                               ) -> None:  # fmt: skip
    """Float arithmetic (no integer weights make it exact): ranks equal except on a few tasks whose true score has
    another candidate within float rounding of it (equal candidates the fast path's query, computed in another
    batch, may round apart), num_candidates equal."""
    np.testing.assert_array_equal(ours[2], expected[2])
    differing = np.flatnonzero((ours[0] != expected[0]) | (ours[1] != expected[1]))
    assert len(differing) <= 0.1 * len(evaluated), (target, differing)
    with torch.inference_mode():
        scores = model.predict(evaluated[differing], target=target).double()
    for row, task in enumerate(differing):
        answer = int(evaluated[task, 0 if target == "head" else 2])
        gaps = (scores[row] - scores[row, answer]).abs()
        gaps[answer] = math.inf
        assert gaps.min() <= 1e-5 * scores[row].abs().max(), (target, task)


@pytest.mark.parametrize("name", list(CASES))
def test_query_and_candidates_give_the_models_scores(name: str, inverse: bool) -> None:
    """kgeval_query . kgeval_candidates (or the distance) equals PyKEEN's own score rows within 1e-5 relative, on
    random float weights."""
    model = random_weights(build(name, inverse))
    view = scoring_view(model)
    assert isinstance(view, PyKEENQueryCandidate)
    triples = split()[0][:16]
    with torch.inference_mode():
        for target in view.kgeval_targets:
            batch = triples[:, :2] if target == "tail" else triples[:, 1:]
            own = model.predict(triples, target=target).double()
            query = view.kgeval_query(batch, target).double()
            candidates = view.kgeval_candidates(target).double()
            assert query.dtype == candidates.dtype
            if view.kgeval_similarity == "dot":
                form = query @ candidates.T
            else:
                p = 1 if view.kgeval_similarity == "l1" else 2
                form = -torch.cdist(query, candidates, p=p)
                if model.interaction.power_norm:
                    form = -((-form) ** p)
            scale = own.abs().max()
            assert ((form - own).abs().max() / scale).item() < 1e-5, target


#: the cases whose heads (without inverse triples) are ranked through a per-relation table of the network's vectors
HEAD_TABLES = [name for name, (_builder, _similarity, sides) in CASES.items() if "head" not in sides]


@pytest.mark.parametrize("chunk_rows", [None, 5], ids=["whole", "chunks-of-5"])
@pytest.mark.parametrize("name", HEAD_TABLES)
def test_the_head_table_gives_the_models_scores(name: str, chunk_rows: int | None) -> None:
    """kgeval_query(., "head") against each relation's kgeval_relation_candidates equals PyKEEN's own head score
    rows within 1e-5 relative, on random float weights; in chunks of 5 candidates as in one piece."""
    model = random_weights(build(name, False))
    view = scoring_view(model)
    assert isinstance(view, PyKEENHeadTable)
    if chunk_rows is not None:
        view.chunk_rows = chunk_rows
    triples = split()[0][:16]
    everyone = torch.arange(NUM_ENTITIES)
    with torch.inference_mode():
        own = model.predict(triples, target="head").double()
        queries = view.kgeval_query(triples[:, 1:], "head").double()
        form = torch.stack([queries[row] @ view.kgeval_relation_candidates(relation, "head", everyone).double().T
                            for row, relation in enumerate(triples[:, 1].tolist())])  # fmt: skip
    assert ((form - own).abs().max() / own.abs().max()).item() < 1e-5


@pytest.mark.parametrize("sizes", [(1, 1), (3, 4), (None, None)], ids=["1x1", "3x4", "whole"])
@pytest.mark.parametrize("name", ["ConvE", "ERMLPE", "ProjE"])
def test_head_tables_computed_in_chunks_rank_exactly(
    name: str, sizes: tuple[int | None, int | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The network's chunks (here a few candidates each, so that every table of a slice is several) change no
    rank: integer weights, every head rank equal to the brute force's, ties included."""
    model = integer_weights(build(name, False), name)
    width = pykeen_adapter.network_width(model.interaction)
    monkeypatch.setattr(pykeen_adapter, "NETWORK_CHUNK_ELEMENTS", 3 * width)
    view = scoring_view(model)
    assert isinstance(view, PyKEENHeadTable) and view.chunk_rows == 3
    evaluated, known = split()
    expected = brute_force(model, evaluated, known)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        ours = kgeval_ranks(model, evaluated, known, batch_size=sizes[0], slice_size=sizes[1])
    for got, want in zip(ours["head"], expected["head"], strict=True):
        np.testing.assert_array_equal(got, want)
    assert (expected["head"][1] > expected["head"][0]).any()  # ties among the heads


@pytest.mark.parametrize("name", HEAD_TABLES)
def test_a_subclass_overriding_score_h_falls_back_from_the_head_table(name: str) -> None:
    """A subclass redefining score_h alone (a PyKEEN model class, or ERModel for the Transformer) loses both the
    tail form and the head table, with a FastPathWarning, and ranks as its own methods do."""
    model = integer_weights(build(name, False), name)
    base = type(model)

    class Overriding(base):  # type: ignore[misc, valid-type]
        def score_h(self, rt_batch, **kwargs):
            return super().score_h(rt_batch, **kwargs)

    model.__class__ = Overriding
    view = scoring_view(model)
    assert type(view) is PyKEENScoring and "Overriding.score_h redefines PyKEEN's scoring" in view.kgeval_form_refused
    evaluated, known = split()
    with pytest.warns(FastPathWarning, match=r"Overriding\.score_h redefines PyKEEN's scoring"):
        scorer = make_scorer(model, "head", NUM_ENTITIES, None, probe_queries=evaluated[:, 1:])
    assert type(scorer) is SlicedScorer
    expected = brute_force(model, evaluated, known)
    with pytest.warns(FastPathWarning, match=r"Overriding\.score_h redefines PyKEEN's scoring"):
        ours = kgeval_ranks(model, evaluated, known, batch_size=3, slice_size=4)
    for target in TARGETS:
        if name in INEXACT:
            assert_equal_but_near_ties(model, evaluated, target, ours[target], expected[target])
        else:
            for got, want in zip(ours[target], expected[target], strict=True):
                np.testing.assert_array_equal(got, want, err_msg=target)


def test_a_batch_norm_without_running_statistics_has_no_head_table() -> None:
    """In evaluation mode such a batch norm normalises with the statistics of its batch: the table's chunks are not
    PyKEEN's batches, so heads are left to the model's own score_h (the tail form is the probe's concern)."""
    model = build("ERMLPE", False)
    model.interaction.mlp[3] = torch.nn.BatchNorm1d(4, track_running_stats=False)
    view = scoring_view(model)
    assert type(view) is PyKEENQueryCandidate and tuple(view.kgeval_targets) == ("tail",)
    assert type(make_scorer(model, "head", NUM_ENTITIES, None)) is SlicedScorer


def test_a_wrapped_tails_only_form_gets_the_head_table_too() -> None:
    """A monotonic affine transformation of ConvE: the table of the wrapped form's tail query, the scale and the
    shift in it, against the tail's [t, b_t, 1]."""
    interaction = pykeen_modules.MonotonicAffineTransformationInteraction(
        base=pykeen_modules.ConvEInteraction(**CONVE, input_dropout=0.0), initial_bias=2.0, initial_scale=3.0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ERModel(triples_factory=_factory(False), interaction=interaction,
                        entity_representations_kwargs=[{"shape": 8}, {"shape": tuple()}],
                        relation_representations_kwargs={"shape": 8}, random_seed=0).eval()  # fmt: skip
    model = integer_weights(model, "ConvE")
    with torch.no_grad():  # a scale of exactly 2 (exp in float32 of log 2): every score stays exact
        model.interaction.log_scale.fill_(math.log(2.0))
    assert model.interaction.log_scale.exp().item() == 2.0
    view = scoring_view(model)
    assert type(view) is PyKEENHeadTable and view.kind == "MonotonicAffineTransformation(ConvEInteraction)"
    evaluated, known = split()
    expected = brute_force(model, evaluated, known)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        assert type(make_scorer(model, "head", NUM_ENTITIES, None, probe_queries=evaluated[:, 1:])) is (
            RelationTableScorer)  # fmt: skip
        ours = kgeval_ranks(model, evaluated, known, batch_size=3, slice_size=4)
    for target in TARGETS:
        for got, want in zip(ours[target], expected[target], strict=True):
            np.testing.assert_array_equal(got, want, err_msg=target)


def _negated(base: type) -> type:
    class Negated(base):
        def score_t(self, hr_batch, **kwargs):
            return -super().score_t(hr_batch, **kwargs)

        def score_h(self, rt_batch, **kwargs):
            return -super().score_h(rt_batch, **kwargs)

        def score_h_inverse(self, rt_batch, **kwargs):
            return -super().score_h_inverse(rt_batch, **kwargs)

    return Negated


@pytest.mark.parametrize("cls", ["TuckER", "SimplE", "QuatE", "ConvE"])
def test_a_subclass_overriding_scoring_falls_back_saying_why(cls: str, inverse: bool) -> None:
    kwargs = CONVE if cls == "ConvE" else {"embedding_dim": 4}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = _negated(getattr(pykeen_models, cls))(triples_factory=_factory(inverse), random_seed=0, **kwargs)
    model = integer_weights(model.eval(), cls)
    assert type(scoring_view(model)) is PyKEENScoring
    evaluated, known = split()
    expected = brute_force(model, evaluated, known)
    with pytest.warns(FastPathWarning, match=r"Negated\.score_[th]\w* redefines PyKEEN's scoring"):
        ours = kgeval_ranks(model, evaluated, known)
    for target in TARGETS:
        for got, want in zip(ours[target], expected[target], strict=True):
            np.testing.assert_array_equal(got, want)


def test_simple_with_a_clamp_falls_back_saying_why(inverse: bool) -> None:
    """A clamp ties every score beyond it, which the dot product does not: SimplE with one has no form."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = pykeen_models.SimplE(triples_factory=_factory(inverse), embedding_dim=5, clamp_score=2.0,
                                     random_seed=0).eval()  # fmt: skip
    model = integer_weights(model, "SimplE")
    view = scoring_view(model)
    assert type(view) is PyKEENScoring
    assert "clamps the scores to [-2.0, 2.0]" in view.kgeval_form_refused
    evaluated, known = split()
    expected = brute_force(model, evaluated, known)
    with pytest.warns(FastPathWarning, match=r"SimplE is not scored through its query/candidate fast path: its "
                                             r"ClampedInteraction clamps the scores"):  # fmt: skip
        ours = kgeval_ranks(model, evaluated, known)
    ties = 0
    for target in TARGETS:
        for got, want in zip(ours[target], expected[target], strict=True):
            np.testing.assert_array_equal(got, want)
        ties += int((expected[target][1] > expected[target][0]).sum())
    assert ties > 0


def test_proje_with_an_outer_activation_falls_back_saying_why() -> None:
    model = build("ProjE", False)
    model.interaction.outer_activation = torch.nn.Sigmoid()
    view = scoring_view(model)
    assert type(view) is PyKEENScoring
    assert "applies Sigmoid to the dot product" in view.kgeval_form_refused


@pytest.mark.parametrize("power", [math.inf, 3])
def test_norms_other_than_l1_and_l2_have_no_form(power: float) -> None:
    model = build("UM-L1", False)
    model.interaction.p = power
    view = scoring_view(model)
    assert type(view) is PyKEENScoring and view.kgeval_form_refused is None


def test_a_users_subclass_of_an_interaction_gets_no_form() -> None:
    class Mine(pykeen_modules.TuckERInteraction):
        def forward(self, h, r, t):
            return -super().forward(h, r, t)

    model = build("TuckER", False)
    mine = Mine(embedding_dim=4, relation_dim=3)
    mine.load_state_dict(model.interaction.state_dict())
    model.interaction = mine.eval()
    assert type(scoring_view(model)) is PyKEENScoring
