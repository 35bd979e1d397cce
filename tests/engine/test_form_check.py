"""The fast path stands in for a model's own scores, never replaces them (kgeval._engine.form_check).

Every built-in model class, subclassed with scoring methods that score otherwise (negated, shifted by a per-entity
offset, candidates permuted), is ranked as its own methods rank it: the expectation is the brute-force reference
over a table filled by the subclass's own ``score_t``. Unmodified subclasses keep the fast path. A model whose form
disagrees with its methods below the class check (a helper overridden) is caught by the one-off probe, which
never flags a model whose form is right (random, tie-heavy, large and mixed-precision embeddings).
"""

from __future__ import annotations

import warnings

import pytest
import torch

from kgeval import RankBasedEvaluator, predict_top_k
from kgeval._engine import form_check
from kgeval._engine.form_check import FormChecks, probe_disagreement
from kgeval._engine.gemm_scoring import GemmScorer, L1Scorer
from kgeval._engine.scorer_choice import make_scorer
from kgeval._engine.scoring import SlicedScorer
from kgeval.adapters.overrides import method_below_form
from kgeval.exceptions import FastPathWarning
from kgeval.models import RESCAL, ComplEx, DistMult, RotatE, TransE
from tests.helpers.graphs import random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

E, R = 40, 3
GRAPH = random_graph(4, num_entities=E, num_relations=R, num_triples=50, num_filter=80)
BUILDERS = {
    "DistMult": lambda: DistMult(E, R, dim=6, seed=1),
    "ComplEx": lambda: ComplEx(E, R, dim=4, seed=1),
    "RESCAL": lambda: RESCAL(E, R, dim=4, seed=1),
    "TransE-L1": lambda: TransE(E, R, dim=5, p=1, seed=1),
    "TransE-L2": lambda: TransE(E, R, dim=5, p=2, seed=1),
    "RotatE": lambda: RotatE(E, R, dim=4, seed=1),
}
OFFSETS = torch.linspace(-3.0, 3.0, E, dtype=torch.float64)[
    torch.randperm(E, generator=torch.Generator().manual_seed(5))
]
PERMUTATION = torch.randperm(E, generator=torch.Generator().manual_seed(6))


def overriding(base: type, kind: str) -> type:
    """A subclass of ``base`` whose score_t / score_h score the triple function f'(h, r, t) of ``kind`` instead of
    the base's f: "negated" -f, "shifted" f + w[h] + w[t], "permuted" f(p[h], r, p[t]) -- one f' for both sides."""

    class Overriding(base):
        def score_t(self, hr_batch, tails=None):
            ids = torch.arange(E) if tails is None else tails
            if kind == "permuted":
                hr_batch = torch.stack([PERMUTATION[hr_batch[:, 0]], hr_batch[:, 1]], dim=1)
                return super().score_t(hr_batch, tails=PERMUTATION[ids])
            scores = super().score_t(hr_batch, tails=ids)
            if kind == "negated":
                return -scores
            return scores + OFFSETS[hr_batch[:, 0], None].to(scores.dtype) + OFFSETS[ids].to(scores.dtype)

        def score_h(self, rt_batch, heads=None):
            ids = torch.arange(E) if heads is None else heads
            if kind == "permuted":
                rt_batch = torch.stack([rt_batch[:, 0], PERMUTATION[rt_batch[:, 1]]], dim=1)
                return super().score_h(rt_batch, heads=PERMUTATION[ids])
            scores = super().score_h(rt_batch, heads=ids)
            if kind == "negated":
                return -scores
            return scores + OFFSETS[ids].to(scores.dtype) + OFFSETS[rt_batch[:, 1], None].to(scores.dtype)

    Overriding.__name__ = f"{kind.capitalize()}{base.__name__}"
    return Overriding


def instance_of(cls: type, name: str) -> torch.nn.Module:
    """``cls`` (a subclass of the model ``name`` builds) holding the built model's parameters, in float64."""
    built = BUILDERS[name]()
    model = cls.__new__(cls)
    model.__dict__.update(built.__dict__)
    return model.double()


def own_table(model) -> torch.Tensor:
    """score[h, r, t] from the model's own score_t: what its ranks must follow."""
    pairs = torch.cartesian_prod(torch.arange(E), torch.arange(R))
    with torch.no_grad():
        return model.score_t(pairs).reshape(E, R, E)


def evaluate(model, **options):
    return RankBasedEvaluator(**options).evaluate(model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples,
                                                  use_tqdm=False)  # fmt: skip


@pytest.mark.parametrize("kind", ["negated", "shifted", "permuted"])
@pytest.mark.parametrize("name", list(BUILDERS))
def test_a_subclass_overriding_its_scoring_is_ranked_by_its_own_methods(name: str, kind: str) -> None:
    base = type(BUILDERS[name]())
    model = instance_of(overriding(base, kind), name)
    with pytest.warns(FastPathWarning, match=rf"{type(model).__name__}\.score_[th] overrides the scoring method"):
        results = evaluate(model)
    expected = reference_ranks(own_table(model), GRAPH.triples, GRAPH.filter_triples)
    assert_same_ranks(results.records, expected)
    with pytest.warns(FastPathWarning):
        assert isinstance(make_scorer(model, "tail", E, None, checks=FormChecks()), SlicedScorer)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_an_unmodified_subclass_keeps_the_fast_path(name: str) -> None:
    base = type(BUILDERS[name]())
    plain = instance_of(type(f"Plain{base.__name__}", (base,), {}), name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        scorer = make_scorer(plain, "tail", E, None, probe_queries=GRAPH.triples[:, :2])
        results = evaluate(plain)
    assert isinstance(scorer, GemmScorer | L1Scorer)
    assert_same_ranks(results.records, reference_ranks(own_table(plain), GRAPH.triples, GRAPH.filter_triples))


def test_a_subclass_declaring_its_own_form_keeps_it() -> None:
    class Doubled(DistMult):
        """Scores twice DistMult's, and says so in its form (same order: the fast path stays)."""

        def score_t(self, hr_batch, tails=None):
            return 2 * super().score_t(hr_batch, tails)

        def kgeval_query(self, batch, target):
            return 2 * super().kgeval_query(batch, target)

    model = instance_of(Doubled, "DistMult")
    assert method_below_form(model, "score_t") is None
    assert isinstance(make_scorer(model, "tail", E, None, probe_queries=GRAPH.triples[:, :2]), GemmScorer)


def test_an_instance_attribute_overrides_too() -> None:
    model = instance_of(DistMult, "DistMult")
    plain_score_t = model.score_t
    model.score_t = lambda hr_batch, tails=None: -plain_score_t(hr_batch, tails)
    assert method_below_form(model, "score_t") == "DistMult (instance attribute).score_t"
    with pytest.warns(FastPathWarning):
        assert isinstance(make_scorer(model, "tail", E, None, checks=FormChecks()), SlicedScorer)


class HelperNegated(DistMult):
    """Passes the class check (score_t / score_h are the base class's) but negates the helper they share."""

    def _score_all(self, query, ids, matrix=None):
        return -super()._score_all(query, ids, matrix)


def test_the_probe_catches_a_form_that_disagrees_below_the_class_check() -> None:
    model = instance_of(HelperNegated, "DistMult")
    with pytest.warns(FastPathWarning, match=r"fast path of HelperNegated disagrees with its own score_[th]") as caught:
        results = evaluate(model)
    assert len(caught) == 2  # once per side, not once per batch
    assert "check_fast_path=False" in str(caught[0].message)
    assert_same_ranks(results.records, reference_ranks(own_table(model), GRAPH.triples, GRAPH.filter_triples))
    # switched off, the form is trusted: the ranks are the base model's, which the probe exists to prevent
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        unchecked = evaluate(model, check_fast_path=False)
    base = instance_of(DistMult, "DistMult")
    assert_same_ranks(unchecked.records, reference_ranks(own_table(base), GRAPH.triples, GRAPH.filter_triples))


def test_predict_top_k_probes_the_form_too() -> None:
    model = instance_of(HelperNegated, "DistMult")
    queries = GRAPH.triples[:5, :2]
    with pytest.warns(FastPathWarning, match="disagrees with its own score_t"):
        ids, _scores = predict_top_k(model, queries, k=3)
    expected = torch.sort(own_table(model)[queries[:, 0], queries[:, 1]], dim=1, descending=True, stable=True)
    assert torch.equal(ids, expected.indices[:, :3])


def _probe(model, target: str = "tail", queries: torch.Tensor | None = None) -> str | None:
    """The probe's verdict on ``model``'s form against its own method for ``target``."""
    form = (L1Scorer if model.kgeval_similarity == "l1" else GemmScorer)(model, target, E, None)
    own = SlicedScorer(model, target, E, None)
    queries = GRAPH.triples[:, :2] if queries is None else queries
    with torch.inference_mode():
        return probe_disagreement(form, own, queries if target == "tail" else GRAPH.triples[:, 1:], target)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("name", list(BUILDERS))
def test_the_probe_never_flags_a_right_form(name: str, dtype: torch.dtype) -> None:
    """Random embeddings at several scales, and integer ones (heavy ties), in every dtype the model supports."""
    for scale, integer in ((1.0, False), (1e3, False), (1e-3, False), (1.0, True)):
        model = BUILDERS[name]()
        with torch.no_grad():
            for parameter in model.parameters():
                values = torch.randint(-1, 2, parameter.shape).float() if integer else parameter * scale
                parameter.copy_(values)
        model = model.to(dtype)
        for target in ("head", "tail"):
            try:
                problem = _probe(model, target)
            except (RuntimeError, NotImplementedError):  # the model's own method has no kernel for this dtype here
                continue
            assert problem is None, (scale, integer, target, problem)


def test_the_probe_flags_ties_nans_and_swaps() -> None:
    model = instance_of(DistMult, "DistMult")

    class Constant(DistMult):
        def _score_all(self, query, ids, matrix=None):
            return torch.zeros_like(super()._score_all(query, ids, matrix))

    class NaNs(DistMult):
        def _score_all(self, query, ids, matrix=None):
            scores = super()._score_all(query, ids, matrix)
            return torch.where(torch.arange(scores.shape[1]) == 3, torch.nan, scores)

    class Swapped(DistMult):
        """Columns 0 and 1 of every row exchanged: a change of two candidates' scores only."""

        def _score_all(self, query, ids, matrix=None):
            scores = super()._score_all(query, ids, matrix)
            return scores[:, [1, 0, *range(2, scores.shape[1])]]

    assert _probe(model) is None
    assert "above" in _probe(instance_of(Constant, "DistMult"))
    assert "NaN" in _probe(instance_of(NaNs, "DistMult"))
    assert "candidate" in _probe(instance_of(Swapped, "DistMult"))


def test_the_probe_reads_the_last_candidates_too(monkeypatch) -> None:
    """Candidates past the first window are probed: a model wrong only on the last entity is caught."""

    class LastWrong(DistMult):
        def _score_all(self, query, ids, matrix=None):
            scores = super()._score_all(query, ids, matrix)
            last = (ids if ids is not None else torch.arange(E)) == E - 1
            return torch.where(last, -1e6, scores)

    assert E > 2 * form_check.PROBE_WINDOW or E > form_check.PROBE_WINDOW
    assert "candidate" in _probe(instance_of(LastWrong, "DistMult"))


def _offset_transe(offset: float, entities: int = 20, seed: int = 0):
    """TransE (p = 2) whose entity vectors are ``offset`` plus a spread of 0.1, relations of 0.1."""
    from kgeval.models import TransE

    model = TransE(entities, 1, dim=16, p=2, seed=0)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.entity_embeddings.weight.copy_(offset + 0.1 * torch.randn(entities, 16, generator=generator))
        model.relation_embeddings.weight.copy_(0.1 * torch.randn(1, 16, generator=generator))
    return model


def _brute_tail_ranks(model, triples: torch.Tensor) -> list[tuple[int, int]]:
    """(optimistic, pessimistic) of each tail task from the model's own score_t, one row at a time (unfiltered but
    for the evaluated triples themselves)."""
    known = {tuple(row) for row in triples.tolist()}
    ranks = []
    for h, r, t in triples.tolist():
        scores = model.score_t(torch.tensor([[h, r]]))[0]
        others = [e for e in range(scores.numel()) if e != t and (h, r, e) not in known]
        kept = scores[others]
        ranks.append((1 + int((kept > scores[t]).sum()), 1 + int((kept >= scores[t]).sum())))
    return ranks


@pytest.mark.parametrize("offset", [100.0, 1000.0])
def test_an_l2_expansion_that_cancels_is_not_used(offset: float) -> None:
    """Vectors far from the origin next to their distances: 2 q.c - ||c||^2 in float32 lost the distances (every
    one of 20 tasks ranked otherwise than the model's score_t at offset 300, MRR 0.379 where 0.139) with no
    warning; the probe now measures the cancellation, warns, and the model's own methods rank."""
    from kgeval.exceptions import FastPathWarning

    model = _offset_transe(offset)
    generator = torch.Generator().manual_seed(3)
    triples = torch.stack([torch.arange(20), torch.zeros(20, dtype=torch.long),
                           torch.randint(0, 20, (20,), generator=generator)], dim=1)  # fmt: skip
    with pytest.warns(FastPathWarning, match="loses about .* bits to cancellation"):
        results = RankBasedEvaluator().evaluate(model, triples, targets=("tail",), use_tqdm=False)
    got = list(zip(results.records.optimistic.tolist(), results.records.pessimistic.tolist(), strict=True))
    assert got == _brute_tail_ranks(model, triples)


def test_an_l2_expansion_that_would_overflow_is_not_used() -> None:
    """float32 vectors of 2e19: ||c||^2 and 2 q.c overflow to inf and inf - inf is NaN, which kgeval blamed on the
    model ("the model produced NaN scores") although its own scores are finite."""
    from kgeval.exceptions import FastPathWarning, UndefinedMetricWarning
    from kgeval.models import TransE

    model = TransE(5, 1, dim=1, p=2, seed=0)
    with torch.no_grad():
        model.entity_embeddings.weight.copy_(2e19 + 1e13 * torch.arange(5.0).unsqueeze(1))
        model.relation_embeddings.weight.zero_()
    triples = torch.tensor([[0, 0, 2]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)  # 5 candidates: no adjusted hits@10
        with pytest.warns(FastPathWarning, match="bits to cancellation"):
            results = RankBasedEvaluator().evaluate(model, triples, targets=("tail",), use_tqdm=False)
    got = list(zip(results.records.optimistic.tolist(), results.records.pessimistic.tolist(), strict=True))
    assert got == _brute_tail_ranks(model, triples)


def test_transe_scores_do_not_depend_on_how_many_rows_are_scored_at_once() -> None:
    """torch.cdist's default expands ||q - c||^2 through a matmul beyond 25 rows: TransE's own scores, and so its
    ranks without the fast path, changed with batch and slice sizes (MRR 0.0345 or 0.0359)."""
    model = _offset_transe(100.0, entities=200, seed=1)
    generator = torch.Generator().manual_seed(2)
    triples = torch.stack([torch.arange(200), torch.zeros(200, dtype=torch.long),
                           torch.randint(0, 200, (200,), generator=generator)], dim=1)  # fmt: skip
    whole = RankBasedEvaluator(fast_path=False).evaluate(model, triples, targets=("tail",), use_tqdm=False)
    piecewise = RankBasedEvaluator(fast_path=False, batch_size=1, slice_size=10).evaluate(
        model, triples, targets=("tail",), use_tqdm=False
    )
    assert whole == piecewise
    assert torch.equal(model.score_t(triples[:40, :2])[:3], model.score_t(triples[:3, :2]))
