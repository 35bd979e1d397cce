"""kgeval.integrations.pykeen: PyKEEN models are ranked exactly as PyKEEN's own evaluator ranks them.

For every model class the integration knows (and one it has no fast path for), with and without inverse triples,
kgeval's per-task ranks are compared with the ranks PyKEEN's RankBasedEvaluator computes on the same model:
exactly with ``fast_path=False``; on the fast path up to float near-ties, each of which is checked to be one.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
import torch

pykeen = pytest.importorskip("pykeen")

from pykeen import models as pykeen_models  # noqa: E402
from pykeen.datasets import Nations  # noqa: E402
from pykeen.evaluation import RankBasedEvaluator as PyKEENEvaluator  # noqa: E402
from pykeen.models.inductive import InductiveERModel  # noqa: E402

from kgeval import RankBasedEvaluator  # noqa: E402
from kgeval._engine.gemm_scoring import GemmScorer, L1Scorer  # noqa: E402
from kgeval._engine.relation_tables import RelationTableScorer  # noqa: E402
from kgeval._engine.scorer_choice import make_scorer  # noqa: E402
from kgeval._engine.scoring import FullRowScorer, SlicedScorer  # noqa: E402
from kgeval.adapters import scoring_view  # noqa: E402
from kgeval.adapters.pykeen_tables import PyKEENRelationTable  # noqa: E402
from kgeval.exceptions import FastPathWarning  # noqa: E402
from kgeval.integrations.pykeen import PyKEENPredicting, PyKEENQueryCandidate, PyKEENScoring  # noqa: E402
from tests.helpers.ranks import rank_tuples  # noqa: E402

pytestmark = pytest.mark.pykeen
logging.getLogger("pykeen").setLevel(logging.ERROR)

#: name -> (PyKEEN class, model kwargs, fast-path similarity or None)
CONFIGS = {
    "DistMult": ("DistMult", {}, "dot"),
    "ComplEx": ("ComplEx", {}, "dot"),
    "RESCAL": ("RESCAL", {}, "dot"),
    "TransE-L1": ("TransE", {"scoring_fct_norm": 1}, "l1"),
    "TransE-L2": ("TransE", {"scoring_fct_norm": 2}, "l2"),
    "RotatE": ("RotatE", {}, "l2"),
    "TransH": ("TransH", {}, "table"),  # candidates projected per relation: a per-relation candidate table
    "ERMLP": ("ERMLP", {}, None),  # no form: scored through PyKEEN's own score_t / score_h
}
#: the scorer each CONFIGS similarity gets (None: the model's own methods)
SCORERS = {None: SlicedScorer, "l1": L1Scorer, "table": RelationTableScorer, "dot": GemmScorer, "l2": GemmScorer}
TARGETS = ("head", "tail")


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "inverse"])
def dataset(request: pytest.FixtureRequest) -> Nations:
    return Nations(create_inverse_triples=request.param)


def build(dataset: Nations, name: str, **extra) -> pykeen_models.Model:
    cls, kwargs, _similarity = CONFIGS[name]
    return getattr(pykeen_models, cls)(
        triples_factory=dataset.training, embedding_dim=8, random_seed=0, **kwargs, **extra
    )


def known(dataset: Nations) -> list[torch.Tensor]:
    return [dataset.training.mapped_triples, dataset.validation.mapped_triples]


def pykeen_ranks(model, dataset: Nations) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """target -> (optimistic, pessimistic, num_candidates) per test triple, from PyKEEN's own evaluator."""
    evaluator = PyKEENEvaluator(clear_on_finalize=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluator.evaluate(
            model, dataset.testing.mapped_triples, additional_filter_triples=known(dataset), use_tqdm=False,
            batch_size=32,
        )  # fmt: skip
    return {
        target: (
            np.concatenate(evaluator.ranks[target, "optimistic"]).astype(np.int64),
            np.concatenate(evaluator.ranks[target, "pessimistic"]).astype(np.int64),
            np.concatenate(evaluator.num_candidates[target]).astype(np.int64),
        )
        for target in TARGETS
    }


def kgeval_ranks(model, dataset: Nations, **kwargs) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """target -> (optimistic, pessimistic, num_candidates) per test triple, from kgeval's records."""
    evaluator_kwargs = {key: kwargs.pop(key) for key in ("fast_path", "batch_size", "slice_size") if key in kwargs}
    results = RankBasedEvaluator(**evaluator_kwargs).evaluate(
        model, dataset.testing.mapped_triples, additional_filter_triples=known(dataset), use_tqdm=False, **kwargs
    )
    return rank_tuples(results.records)


def scores_of(model, dataset: Nations, target: str, row: int) -> tuple[np.ndarray, float]:
    """PyKEEN's scores of every candidate and of the true answer for one task (``model.predict``)."""
    triple = dataset.testing.mapped_triples[row : row + 1]
    with torch.inference_mode():
        scores = model.predict(triple, target=target)[0].double().numpy()
    return scores, scores[int(triple[0, 0 if target == "head" else 2])]


def assert_near_ties_only(model, dataset: Nations, fast, exact) -> None:
    """Fast-path ranks equal the exact ones except on tasks where a candidate's score is within float rounding
    of the true score (the GEMM sums in another order): each such difference is checked to be a near-tie."""
    for target in TARGETS:
        differing = np.flatnonzero((fast[target][0] != exact[target][0]) | (fast[target][1] != exact[target][1]))
        assert len(differing) <= 0.02 * len(fast[target][0])
        for row in differing:
            scores, true = scores_of(model, dataset, target, int(row))
            gaps = np.abs(scores - true)
            gaps[gaps == 0] = np.inf
            assert gaps.min() <= 1e-5 * max(1.0, np.abs(scores).max()), (target, row)
        np.testing.assert_array_equal(fast[target][2], exact[target][2])


@pytest.mark.parametrize("name", list(CONFIGS))
def test_ranks_equal_pykeens_evaluator(dataset: Nations, name: str) -> None:
    model = build(dataset, name)
    theirs = pykeen_ranks(model, dataset)
    exact = kgeval_ranks(model, dataset, fast_path=False)
    for target in TARGETS:
        for ours, expected in zip(exact[target], theirs[target], strict=True):
            np.testing.assert_array_equal(ours, expected)
    fast = kgeval_ranks(model, dataset, batch_size=16, slice_size=5)
    assert_near_ties_only(model, dataset, fast, exact)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_fast_path_is_taken_where_the_interaction_has_one(dataset: Nations, name: str) -> None:
    model = build(dataset, name)
    view = scoring_view(model)
    similarity = CONFIGS[name][2]
    views = {None: PyKEENScoring, "table": PyKEENRelationTable}
    assert type(view) is views.get(similarity, PyKEENQueryCandidate)
    assert view.num_relations == dataset.training.real_num_relations == 55  # without the inverse relations
    for target in TARGETS:
        assert type(make_scorer(model, target, dataset.num_entities, None)) is SCORERS[similarity]
    if similarity not in (None, "table"):
        assert view.kgeval_similarity == similarity


def test_inverse_models_are_not_scored_through_score_h() -> None:
    """The defect this integration fixes: a model trained with inverse triples predicts heads through the inverse
    relation; scoring its score_h with the raw relation id (what kgeval did) ranks heads differently."""
    dataset = Nations(create_inverse_triples=True)
    model = build(dataset, "DistMult")

    class RawScores:  # PyKEEN's score_h / score_t called directly, as for any model
        num_entities = model.num_entities

        def score_h(self, rt_batch, heads=None):
            return model.score_h(rt_batch, heads=heads)

        def score_t(self, hr_batch, tails=None):
            return model.score_t(hr_batch, tails=tails)

    theirs = pykeen_ranks(model, dataset)
    raw = kgeval_ranks(RawScores(), dataset, fast_path=False)
    assert not np.array_equal(raw["head"][0], theirs["head"][0])
    ours = kgeval_ranks(model, dataset)
    assert (ours["head"][0] == theirs["head"][0]).mean() > 0.98


def test_sigmoid_is_not_applied_so_saturation_adds_no_ties() -> None:
    """``predict_with_sigmoid=True``: PyKEEN ranks sigmoid(score), which float32 saturates to 1.0 for large scores
    (artificial ties); kgeval ranks the raw scores, so its [optimistic, pessimistic] lies inside PyKEEN's and equals
    the ranks of the same model without sigmoid."""
    dataset = Nations()
    model = build(dataset, "DistMult", predict_with_sigmoid=True)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(8.0)  # scores of order 100: sigmoid(score) == 1.0 in float32
    theirs = pykeen_ranks(model, dataset)
    ours = kgeval_ranks(model, dataset, fast_path=False)
    model.predict_with_sigmoid = False
    unsaturated = pykeen_ranks(model, dataset)
    wider = 0
    for target in TARGETS:
        their_opt, their_pess, their_count = theirs[target]
        opt, pess, count = ours[target]
        assert (their_opt <= opt).all() and (opt <= pess).all() and (pess <= their_pess).all()
        np.testing.assert_array_equal(count, their_count)
        np.testing.assert_array_equal(opt, unsaturated[target][0])
        np.testing.assert_array_equal(pess, unsaturated[target][1])
        wider += int(((their_pess - their_opt) > (pess - opt)).sum())
    assert wider > 10  # the test data really saturates


def test_inductive_models_need_a_mode() -> None:
    """Without a mode an inductive model has no candidates (tests/integrations/test_pykeen_inductive.py scores it
    per mode)."""
    model = InductiveERModel.__new__(InductiveERModel)  # the type is what kgeval checks
    with pytest.raises(TypeError, match="inductive PyKEEN model, which scores the entities of one graph per mode"):
        scoring_view(model)


def test_other_models_pass_through() -> None:
    linear = torch.nn.Linear(2, 2)
    assert scoring_view(linear) is linear
    dataset = Nations()
    assert isinstance(make_scorer(build(dataset, "DistMult"), "tail", 14, None, fast_path=False), SlicedScorer)
    assert not isinstance(make_scorer(build(dataset, "DistMult"), "tail", 14, None, fast_path=False), FullRowScorer)


@pytest.mark.parametrize("name", ["DistMult", "TransE-L2", "ComplEx"])
def test_integer_embeddings_keep_exact_ties(dataset: Nations, name: str) -> None:
    """Integer embeddings: every score exact in float32, so the fast path must equal PyKEEN tie for tie."""
    model = build(dataset, name)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randint(-1, 2, parameter.shape, generator=generator).to(parameter.dtype))
    theirs = pykeen_ranks(model, dataset)
    fast = kgeval_ranks(model, dataset)
    ties = 0
    for target in TARGETS:
        for ours, expected in zip(fast[target], theirs[target], strict=True):
            np.testing.assert_array_equal(ours, expected)
        ties += int((fast[target][1] > fast[target][0]).sum())
    assert ties > 0.1 * 2 * len(fast["head"][0])


def test_metrics_equal_pykeen_evaluator() -> None:
    dataset = Nations(create_inverse_triples=True)
    model = build(dataset, "DistMult")
    ours = RankBasedEvaluator().evaluate(
        model, dataset.testing.mapped_triples, additional_filter_triples=known(dataset), use_tqdm=False
    )
    theirs = PyKEENEvaluator(filtered=True).evaluate(
        model, dataset.testing.mapped_triples, additional_filter_triples=known(dataset), use_tqdm=False, batch_size=64
    )
    for key, value in theirs.to_flat_dict().items():
        assert ours.get_metric(key) == pytest.approx(value, rel=1e-5, abs=1e-6), key  # PyKEEN sums in float32


@pytest.mark.parametrize("name", ["DistMult", "TransE-L2", "TransH"])
def test_relation_ranks_come_from_pykeens_score_r(dataset: Nations, name: str) -> None:
    """Relation prediction of a PyKEEN model: the brute-force ranks over PyKEEN's own score_r matrix (the real
    relations: columns 2r for a model with inverse triples, PyKEEN's layout), filtered by train + valid + test."""
    from tests.helpers.reference import reference_relation_ranks

    model = build(dataset, name).eval()
    triples = dataset.testing.mapped_triples[:60]
    num_entities, num_relations = dataset.num_entities, model.num_real_relations
    heads, tails = torch.meshgrid(torch.arange(num_entities), torch.arange(num_entities), indexing="ij")
    with torch.no_grad():
        scores = model.score_r(torch.stack([heads.reshape(-1), tails.reshape(-1)], dim=1))
    if dataset.create_inverse_triples:
        scores = scores[:, 0::2]  # stored ids: relation r at 2r, its inverse at 2r + 1
    table = scores.reshape(num_entities, num_entities, num_relations).permute(0, 2, 1)
    filters = known(dataset)
    results = RankBasedEvaluator(batch_size=16).evaluate(
        model, triples, additional_filter_triples=[*filters, dataset.testing.mapped_triples], targets=("relation",),
        use_tqdm=False,
    )  # fmt: skip
    expected = reference_relation_ranks(table, triples, [*filters, dataset.testing.mapped_triples])
    records = results.records
    np.testing.assert_array_equal(records.optimistic, expected["optimistic"])
    np.testing.assert_array_equal(records.pessimistic, expected["pessimistic"])
    np.testing.assert_array_equal(records.num_candidates, expected["num_candidates"])


def test_sampled_ranks_equal_pykeens_sampled_evaluator() -> None:
    """PyKEEN's SampledRankBasedEvaluator with the same TriplesFactory, negatives and filter triples: the same
    optimistic and pessimistic ranks and num_candidates per task (its filtered scores leave out negatives that are
    known triples; negatives here never repeat the answer, which PyKEEN would count as a tie with itself)."""
    from pykeen.evaluation import SampledRankBasedEvaluator as PyKEENSampled

    from kgeval import SampledRankBasedEvaluator

    data = Nations()
    model = build(data, "DistMult").eval()
    triples, num_entities = data.testing.mapped_triples, data.num_entities
    generator = torch.Generator().manual_seed(0)
    shifts = {side: 1 + torch.randint(0, num_entities - 1, (len(triples), 10), generator=generator) for side in TARGETS}
    negatives = {
        side: (triples[:, column, None] + shifts[side]) % num_entities for side, column in (("head", 0), ("tail", 2))
    }
    theirs = PyKEENSampled(data.testing, head_negatives=negatives["head"], tail_negatives=negatives["tail"],
                           clear_on_finalize=False)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs.evaluate(model, triples, additional_filter_triples=known(data), batch_size=32, use_tqdm=False)
    ours = SampledRankBasedEvaluator(data.testing, head_negatives=negatives["head"], tail_negatives=negatives["tail"])
    records = ours.evaluate(model, triples, additional_filter_triples=known(data)).records
    for code, side in enumerate(TARGETS):
        chosen = records.side == code
        np.testing.assert_array_equal(records.optimistic[chosen], np.concatenate(theirs.ranks[side, "optimistic"]))
        np.testing.assert_array_equal(records.pessimistic[chosen], np.concatenate(theirs.ranks[side, "pessimistic"]))
        np.testing.assert_array_equal(records.num_candidates[chosen], np.concatenate(theirs.num_candidates[side]))
    assert (records.num_candidates < 11).any()  # some negatives were known triples, left out by both


def assert_same_target_ranks(ours: dict, theirs: dict) -> None:
    """Optimistic, pessimistic ranks and num_candidates equal per target, task for task."""
    for target in TARGETS:
        for got, expected in zip(ours[target], theirs[target], strict=True):
            np.testing.assert_array_equal(got, expected)


def _negated_scoring(base: type) -> type:
    """A user's subclass of a PyKEEN model class whose score_t / score_h return the negated scores."""

    class Negated(base):
        def score_t(self, hr_batch, **kwargs):
            return -super().score_t(hr_batch, **kwargs)

        def score_h(self, rt_batch, **kwargs):
            return -super().score_h(rt_batch, **kwargs)

    return Negated


def _subclassed(dataset: Nations, name: str, cls: type) -> pykeen_models.Model:
    _pykeen_class, kwargs, _similarity = CONFIGS[name]
    return cls(triples_factory=dataset.training, embedding_dim=8, random_seed=0, **kwargs)


@pytest.mark.parametrize("name", ["DistMult", "ComplEx", "TransE-L1", "TransE-L2", "RotatE"])
def test_a_subclass_overriding_scoring_is_ranked_as_pykeen_ranks_it(dataset: Nations, name: str) -> None:
    """The issue's defect: a subclass of PyKEEN's DistMult negating score_t / score_h was ranked through the
    interaction's form (MRR 0.41 where PyKEEN's evaluator gives 0.38); now through its own methods, like PyKEEN."""
    model = _subclassed(dataset, name, _negated_scoring(getattr(pykeen_models, CONFIGS[name][0])))
    assert type(scoring_view(model)) is PyKEENScoring
    theirs = pykeen_ranks(model, dataset)
    with pytest.warns(FastPathWarning, match=r"Negated\.score_[th] redefines PyKEEN's scoring"):
        ours = kgeval_ranks(model, dataset)
    assert_same_target_ranks(ours, theirs)


def test_a_subclass_overriding_predict_is_scored_through_predict(dataset: Nations) -> None:
    """PyKEEN's evaluator calls model.predict: a subclass redefining predict_t / predict_h is scored through them."""

    class Reversed(pykeen_models.DistMult):
        def predict_t(self, hr_batch, **kwargs):
            return -super().predict_t(hr_batch, **kwargs)

        def predict_h(self, rt_batch, **kwargs):
            return -super().predict_h(rt_batch, **kwargs)

    model = _subclassed(dataset, "DistMult", Reversed)
    assert type(scoring_view(model)) is PyKEENPredicting
    theirs = pykeen_ranks(model, dataset)
    with pytest.warns(FastPathWarning, match=r"Reversed\.predict"):
        ours = kgeval_ranks(model, dataset)
    assert_same_target_ranks(ours, theirs)


def test_an_unmodified_subclass_keeps_the_fast_path(dataset: Nations) -> None:
    class Mine(pykeen_models.DistMult):
        """A user's subclass that changes nothing PyKEEN scores with."""

        def describe(self) -> str:
            return "mine"

    model = _subclassed(dataset, "DistMult", Mine)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        assert isinstance(scoring_view(model), PyKEENQueryCandidate)
        assert type(make_scorer(model, "tail", dataset.num_entities, None)) is GemmScorer


def test_a_users_interaction_of_the_same_name_gets_no_form() -> None:
    """The form is chosen by PyKEEN's own interaction class, not by a class name a user's interaction may share."""
    from pykeen.nn.modules import DistMultInteraction as PyKEENDistMultInteraction

    class DistMultInteraction(PyKEENDistMultInteraction):
        def forward(self, h, r, t):
            return -super().forward(h, r, t)

    dataset = Nations()
    model = build(dataset, "DistMult")
    model.interaction = DistMultInteraction()
    assert type(scoring_view(model)) is PyKEENScoring
    theirs = pykeen_ranks(model, dataset)
    ours = kgeval_ranks(model, dataset)
    assert_same_target_ranks(ours, theirs)


@pytest.mark.parametrize("compiled", ["torch.compile", "m.compile()"])
@pytest.mark.parametrize("name", ["DistMult", "TransE-L2", "TransH"])
def test_a_compiled_model_ranks_as_pykeens_evaluator_ranks_the_same_object(
    dataset: Nations, name: str, compiled: str
) -> None:
    """The issue's case: a compiled model with inverse triples is PyKEEN's model all the same (its relation ids
    mapped, heads scored through the inverse relations), ranked as PyKEEN's evaluator ranks the compiled object."""
    model = build(dataset, name)
    if compiled == "torch.compile":
        model = torch.compile(model)
    else:
        model.compile()
    theirs = pykeen_ranks(model, dataset)
    exact = kgeval_ranks(model, dataset, fast_path=False)
    for target in TARGETS:
        for ours, expected in zip(exact[target], theirs[target], strict=True):
            np.testing.assert_array_equal(ours, expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        fast = kgeval_ranks(model, dataset)
    assert_near_ties_only(model, dataset, fast, exact)
    assert type(make_scorer(model, "head", dataset.num_entities, None)) is SCORERS[CONFIGS[name][2]]


def test_a_model_in_half_precision_ranks_as_its_own_scores_or_is_refused_at_the_door(dataset: Nations) -> None:
    """float16 / bfloat16: PyKEEN's own methods score (the fast path's GEMM rounds otherwise and ties differ);
    a model whose own methods cannot score in its precision is refused before any ranking, saying what to do."""
    for name, dtype in (("DistMult", torch.bfloat16), ("TransE-L2", torch.float16), ("RESCAL", torch.bfloat16)):
        model = build(dataset, name).to(dtype)
        theirs = pykeen_ranks(model, dataset)
        with pytest.warns(FastPathWarning, match=f"its parameters are {dtype}"):
            ours = kgeval_ranks(model, dataset)
        for target in TARGETS:
            for got, expected in zip(ours[target], theirs[target], strict=True):
                np.testing.assert_array_equal(got, expected)
    for name, dtype in (("ComplEx", torch.bfloat16), ("RotatE", torch.bfloat16)):
        model = build(dataset, name).to(dtype)
        with pytest.raises(TypeError, match=r"cannot score in torch\.bfloat16.*float32 copy"):
            kgeval_ranks(model, dataset)
