"""The fallbacks of PyKEEN's query/candidate forms (kgeval.adapters.pykeen: every case of test_pykeen_forms.CASES, the
tails-only forms with their head tables included) and per-relation candidate tables (kgeval.adapters.pykeen_tables:
every case of test_pykeen_tables.CASES), and the ambient mixed precision evaluation sets aside:

1. a model in half precision (``.to(torch.bfloat16)``; a few cases also float16) is scored through its own
   methods with a FastPathWarning saying its parameters are in that dtype (kgeval._engine.scorer_choice), or --
   where its own method cannot compute in that dtype -- refused with a TypeError before any ranking;
2. a form whose probe disagrees with the model's own scores (the view as kgeval builds it, one candidate's vector
   pushed far off on purpose) is scored through the model's own score_t / score_h with a FastPathWarning saying
   the fast path disagrees with them (kgeval._engine.form_check); unperturbed, the same view keeps its fast path;
3. inside ``torch.autocast("cpu", dtype=torch.bfloat16)`` the fast path is used and ranks as outside it
   (kgeval._engine.precision sets the region aside).

The expectations come from the PyKEEN model itself: test_pykeen_forms.brute_force ranks every task over the rows of
``model.predict`` (in the model's own dtype, converted to float64 only afterwards), outside any autocast region. The
half-precision outcome of each case -- fallback or refusal -- is written out per case (:data:`REFUSED_IN_HALF`), as
this CPU build of torch computes it, so that a case that changes behaviour fails here.
"""

from __future__ import annotations

import logging
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import torch

pykeen = pytest.importorskip("pykeen")

from pykeen.models import ERModel  # noqa: E402

from kgeval._engine import front  # noqa: E402
from kgeval._engine.gemm_scoring import GemmScorer, L1Scorer  # noqa: E402
from kgeval._engine.relation_tables import RelationTableScorer  # noqa: E402
from kgeval._engine.scorer_choice import make_scorer  # noqa: E402
from kgeval._engine.scoring import FullRowScorer, SlicedScorer  # noqa: E402
from kgeval.adapters import scoring_view  # noqa: E402
from kgeval.adapters.pykeen import PyKEENHeadTable, PyKEENQueryCandidate  # noqa: E402
from kgeval.adapters.pykeen_tables import PyKEENRelationTable  # noqa: E402
from kgeval.exceptions import FastPathWarning  # noqa: E402
from tests.integrations import test_pykeen_forms as forms  # noqa: E402
from tests.integrations import test_pykeen_tables as tables  # noqa: E402
from tests.integrations.test_pykeen_forms import (  # noqa: E402
    TARGETS,
    assert_equal_but_near_ties,
    brute_force,
    integer_weights,
    kgeval_ranks,
    random_weights,
    split,
)

pytestmark = pytest.mark.pykeen
logging.getLogger("pykeen").setLevel(logging.ERROR)

#: every case of both files (their names do not collide)
CASES = [*forms.CASES, *tables.CASES]
assert len(CASES) == len(set(CASES)) == len(forms.CASES) + len(tables.CASES)

#: the cases whose own methods cannot score in half precision on the CPU, so kgeval refuses them at the door: HolE's
#: circular correlation goes through torch.fft.rfft, which has no bfloat16 / float16 kernel on the CPU ("Unsupported
#: dtype BFloat16"); every other case falls back to its own methods
REFUSED_IN_HALF = {"HolE"}
#: the cases also converted to float16 (one of each kind: plain forms, a distance, a head table, two tables, HolE)
FLOAT16_CASES = ["TuckER", "UM-L2", "HolE", "ConvE", "TransR", "MuRE"]

OWN_SCORERS = (SlicedScorer, FullRowScorer)


def integer_model(name: str) -> ERModel:
    """The case's model (without inverse triples) with test_pykeen_forms.integer_weights: entries in {-1, 0, 1}
    (the tables' too: in half precision both sides of the comparison are the model's own arithmetic, so TransR's
    and TransD's clamped projections need not be exact), entities repeating a few distinct rows -- many ties."""
    model = forms.build(name, False) if name in forms.CASES else tables.build(name, False)
    return integer_weights(model, name)


def float32_model(name: str) -> ERModel:
    """The case's model (without inverse triples) with the weights its own file ranks it with exactly in float32:
    integer weights for the forms, the tables' small random weights (no clamped projection)."""
    if name in forms.CASES:
        return integer_weights(forms.build(name, False), name)
    return tables.build(name, False)


def fast_scorers(name: str) -> dict[str, type]:
    """target -> the scorer class of the case's fast path (plain form, or per-relation table)."""
    if name in tables.CASES:
        return dict.fromkeys(TARGETS, RelationTableScorer)
    _builder, similarity, sides = forms.CASES[name]
    plain = L1Scorer if similarity == "l1" else GemmScorer
    return {target: plain if target in sides else RelationTableScorer for target in TARGETS}


@dataclass
class Chosen:
    """What the evaluations' engine did: the class of every scorer it made, per target, and how many sides (scorer
    by scorer) it ranked."""

    scorers: dict[str, list[type]] = field(default_factory=dict)
    ranked: int = 0

    def only(self) -> dict[str, type]:
        """target -> the one scorer class made for it (every scorer made for a target is of one class)."""
        assert all(len(set(made)) == 1 for made in self.scorers.values()), self.scorers
        return {target: made[0] for target, made in self.scorers.items()}


@pytest.fixture
def chosen(monkeypatch: pytest.MonkeyPatch) -> Chosen:
    """The scorers kgeval._engine.front's make_scorer makes, and the sides its rank_side ranks, in this test."""
    seen = Chosen()
    ranked = front.rank_side

    def recording_make_scorer(model: Any, target: str, *args: Any, **kwargs: Any) -> Any:
        scorer = make_scorer(model, target, *args, **kwargs)
        seen.scorers.setdefault(target, []).append(type(scorer))
        return scorer

    def recording_rank_side(*args: Any, **kwargs: Any) -> Any:
        seen.ranked += 1
        return ranked(*args, **kwargs)

    monkeypatch.setattr(front, "make_scorer", recording_make_scorer)
    monkeypatch.setattr(front, "rank_side", recording_rank_side)
    return seen


def assert_same_ranks(name: str, ours: dict, expected: dict, model: ERModel | None = None) -> None:
    """Every field of every task equal; or, given the ``model`` (float arithmetic: no weights make it exact), equal
    but near float ties (test_pykeen_forms.assert_equal_but_near_ties, asked only where some field differs: it
    re-scores the differing tasks, and PyKEEN's predict of an empty batch raises for some interactions)."""
    evaluated = split()[0]
    for target in TARGETS:
        pairs = list(zip(("optimistic", "pessimistic", "num_candidates"), ours[target], expected[target], strict=True))
        if model is not None and not all(np.array_equal(got, want) for _name, got, want in pairs):
            assert_equal_but_near_ties(model, evaluated, target, ours[target], expected[target])
            continue
        for what, got, want in pairs:
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {target} {what}")


def half_cases() -> list[Any]:
    return [pytest.param(name, torch.bfloat16, id=f"{name}-bfloat16") for name in CASES] + [
        pytest.param(name, torch.float16, id=f"{name}-float16") for name in FLOAT16_CASES
    ]


@pytest.mark.parametrize(("name", "dtype"), half_cases())
def test_a_model_in_half_precision_falls_back_to_its_own_scores_or_is_refused(
    name: str, dtype: torch.dtype, chosen: Chosen
) -> None:
    """Converted to half precision, the model is scored through its own methods, with a FastPathWarning naming the
    dtype, and ranks every task as a brute force over its own ``predict`` rows in that dtype; or, for the cases of
    :data:`REFUSED_IN_HALF`, whose own ``predict`` fails in that dtype too, refused with a TypeError before any
    side is ranked.

    The weights are test_pykeen_forms.integer_weights (entries in {-1, 0, 1}, entities repeating a few rows): ties
    are plentiful, and the scores (but those of the layer norms and tanh of test_pykeen_forms.INEXACT) are
    integers. bfloat16 (8 significant bits) holds integers exactly only while they are small (|s| <= 256; float16,
    11 bits: 2048) -- these are, so the model's own arithmetic gives the same scores however kgeval batches its
    calls."""
    model = integer_model(name).to(dtype)
    assert next(model.parameters()).dtype == dtype
    evaluated, known = split()
    if name not in REFUSED_IN_HALF:  # the brute force's rows are the model's own in dtype (float64 only after)
        assert model.predict(evaluated[:2], target="tail").dtype == dtype
    written = str(dtype).replace(".", r"\.")
    if name in REFUSED_IN_HALF:
        with pytest.raises(RuntimeError, match="Unsupported dtype"):  # its own predict cannot compute in dtype
            brute_force(model, evaluated, known)
        with pytest.raises(TypeError, match=rf"cannot score in {written} here.*float32 copy"):
            kgeval_ranks(model, evaluated, known)
        assert chosen.ranked == 0  # refused at the door: no side was ranked
        return
    expected = brute_force(model, evaluated, known)
    with pytest.warns(FastPathWarning, match=rf"not scored through its query/candidate fast path: its parameters "
                                             rf"are {written}") as caught:  # fmt: skip
        ours = kgeval_ranks(model, evaluated, known)
    assert all(re.search(f"its parameters are {written}", str(w.message)) for w in caught.list
               if issubclass(w.category, FastPathWarning))  # fmt: skip
    scorers = chosen.only()
    assert set(scorers) == set(TARGETS) and all(issubclass(s, OWN_SCORERS) for s in scorers.values()), scorers
    assert chosen.ranked == 2
    assert_same_ranks(name, ours, expected)
    ties = sum(int((expected[target][1] > expected[target][0]).sum()) for target in TARGETS)
    assert ties > 0.1 * 2 * len(evaluated)  # the weights really tie scores


#: how far the perturbed candidate is pushed: far beyond every score of the cases' weights
PUSH = 1000.0


def push(vectors: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``vectors`` with the rows ``rows`` (a boolean mask) moved by PUSH along a fixed random direction: a dot product
    with any query vector but those orthogonal to it (none of the cases' integer queries) moves by far more than
    any score, and a distance grows far beyond any other, so the candidate's form scores leave their place among the
    model's own."""
    direction = torch.randn(vectors.shape[-1], generator=torch.Generator().manual_seed(3)).to(vectors)
    moved = vectors.clone()
    moved[rows] += PUSH * direction
    return moved


def perturb(view: Any) -> list[str]:
    """Wrap the view's candidate methods on the instance so that entity 0's candidate vector is pushed off
    (:func:`push`), in the plain form's candidates and in every relation's table; the names of the methods
    wrapped."""
    wrapped = []
    if isinstance(view, PyKEENQueryCandidate):
        candidates = view.kgeval_candidates

        def kgeval_candidates(target: str) -> torch.Tensor:
            vectors = candidates(target)
            return push(vectors, torch.arange(len(vectors), device=vectors.device) == 0)

        view.kgeval_candidates = kgeval_candidates  # type: ignore[method-assign]
        wrapped.append("kgeval_candidates")
    if isinstance(view, PyKEENHeadTable | PyKEENRelationTable):
        relation_candidates = view.kgeval_relation_candidates

        def kgeval_relation_candidates(relation: int, target: str, entities: torch.Tensor) -> torch.Tensor:
            return push(relation_candidates(relation, target, entities), entities == 0)

        view.kgeval_relation_candidates = kgeval_relation_candidates  # type: ignore[method-assign]
        wrapped.append("kgeval_relation_candidates")
    return wrapped


# the view is evaluated itself (as test_pykeen_tables evaluates its views), to carry the perturbation: kgeval says it
# cannot look into the form's callables for modules to put in eval mode -- the model is in eval mode already
@pytest.mark.filterwarnings("ignore:kgeval. PyKEENQueryCandidate is not a torch module:UserWarning")
@pytest.mark.parametrize("name", CASES)
def test_a_form_whose_probe_disagrees_falls_back_to_the_own_methods(name: str, chosen: Chosen) -> None:
    """The view kgeval builds for the model (kgeval.adapters.scoring_view), its fast path made wrong on purpose
    (:func:`perturb`): both sides are scored through the model's own score_t / score_h, each with a FastPathWarning
    saying the fast path disagrees with it, and every task ranks as the brute force over the model's own scores.
    Unperturbed, the same view's probe passes on both sides without a FastPathWarning: the warning is the
    perturbation's."""
    model = float32_model(name)
    view = scoring_view(model)
    expected_view = PyKEENRelationTable if name in tables.CASES else (
        PyKEENHeadTable if name in forms.HEAD_TABLES else PyKEENQueryCandidate)  # fmt: skip
    assert type(view) is expected_view
    for target, scorer in forms.chosen_scorers(view).items():
        assert type(scorer) is fast_scorers(name)[target], target
    evaluated, known = split()
    wrapped = perturb(view)
    assert wrapped == {PyKEENQueryCandidate: ["kgeval_candidates"], PyKEENRelationTable: ["kgeval_relation_candidates"],
                       PyKEENHeadTable: ["kgeval_candidates", "kgeval_relation_candidates"]}[expected_view]  # fmt: skip
    expected = brute_force(model, evaluated, known)
    with pytest.warns(FastPathWarning, match=r"fast path of \w+ disagrees with its own score_[th]") as caught:
        ours = tables.kgeval_ranks(view, evaluated, known)
    methods = {
        found.group(1)
        for w in caught.list
        if (found := re.search(r"fast path of \w+ disagrees with its own (score_[th])", str(w.message)))
    }
    assert methods == {"score_t", "score_h"}  # the perturbation reached both sides' probes
    scorers = chosen.only()
    assert set(scorers) == set(TARGETS) and all(issubclass(s, OWN_SCORERS) for s in scorers.values()), scorers
    assert chosen.ranked == 2
    assert_same_ranks(name, ours, expected)


@pytest.mark.parametrize("name", CASES)
def test_an_autocast_region_is_set_aside(name: str, chosen: Chosen) -> None:
    """Evaluated inside ``torch.autocast("cpu", dtype=torch.bfloat16)``, the float32 model keeps its fast path
    (the plain form's GEMM / L1 scorer, or its per-relation table) without a FastPathWarning, and ranks as the
    brute force over its own scores computed outside any autocast region. The weights are random floats (the
    forms': test_pykeen_forms.random_weights): scores computed in bfloat16 would tie and reorder candidates, so
    the region would show in the ranks if it were not set aside; in float32 the fast path's order may differ from
    PyKEEN's only between scores within float32 rounding of each other (assert_equal_but_near_ties)."""
    model = random_weights(forms.build(name, False)) if name in forms.CASES else tables.build(name, False)
    evaluated, known = split()
    expected = brute_force(model, evaluated, known)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert torch.is_autocast_enabled("cpu")
            ours = kgeval_ranks(model, evaluated, known)
    assert not torch.is_autocast_enabled("cpu")
    assert chosen.only() == fast_scorers(name) and chosen.ranked == 2
    assert_same_ranks(name, ours, expected, model=None if name in tables.CASES else model)
