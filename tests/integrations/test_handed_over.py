"""Models as a training loop hands them over -- compiled (``torch.compile(m)`` and ``m.compile()``), inside
``DataParallel``, an EMA ``AveragedModel``, nested wrappers, or a module delegating to the model it holds -- rank
exactly as the unwrapped model's own scores rank, and keep its fast path where it has one.

Expected ranks come from the brute-force reference over tables of every score computed by each library's own API
on the unwrapped model (kgeval: score_t / score_h; PyKEEN: ``predict``, which maps inverse relations; PyG:
``forward``; TorchKGE: ``scoring_function``): never from kgeval's own output.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval._engine.gemm_scoring import GemmScorer
from kgeval._engine.scorer_choice import make_scorer
from kgeval.adapters.wrappers import describe, unwrap
from kgeval.exceptions import FastPathWarning, IgnoredCandidatesWarning
from kgeval.models import DistMult, RotatE, TransE
from tests.helpers.graphs import random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

E, R = 12, 4
GRAPH = random_graph(3, num_entities=E, num_relations=R, num_triples=40, num_filter=60)
ALL = torch.arange(E)


# -- each library's own scores of every (h, r, t), from its own API ------------------------------------------------
def kgeval_tables(model: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(tail table, head table) of a kgeval model: score_t of every (h, r), score_h of every (r, t)."""
    hr = torch.cartesian_prod(ALL, torch.arange(R))
    rt = torch.cartesian_prod(torch.arange(R), ALL)
    with torch.no_grad():
        tails = model.score_t(hr).reshape(E, R, E)
        heads = model.score_h(rt).reshape(R, E, E).permute(2, 0, 1)  # [r, t, h] -> [h, r, t]
    return tails, heads


def pykeen_tables(model: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(tail table, head table) by PyKEEN's own ``predict`` (relation ids mapped, inverse head scoring)."""
    hr = torch.cartesian_prod(ALL, torch.arange(R))
    rt = torch.cartesian_prod(torch.arange(R), ALL)
    model.eval()
    with torch.no_grad():
        tails = model.predict(hr, target="tail", full_batch=False).reshape(E, R, E)
        heads = model.predict(rt, target="head", full_batch=False).reshape(R, E, E).permute(2, 0, 1)
    return tails, heads


def triple_table(score: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
    h, r, t = torch.meshgrid(ALL, torch.arange(R), ALL, indexing="ij")
    with torch.no_grad():
        return score(h.reshape(-1), r.reshape(-1), t.reshape(-1)).reshape(E, R, E)


def expected_ranks(tables: tuple[torch.Tensor, torch.Tensor]) -> dict[str, dict[str, np.ndarray]]:
    """The reference ranks: tails from the tail table, heads from the head table."""
    tails, heads = (reference_ranks(table.double(), GRAPH.triples, GRAPH.filter_triples) for table in tables)
    return {"tail": tails["tail"], "head": heads["head"]}


# -- the models -------------------------------------------------------------------------------------------------
def kgeval_model(cls: type) -> Callable[[], tuple[Any, Callable[[Any], Any]]]:
    return lambda: (cls(E, R, dim=6, seed=0), kgeval_tables)


def pykeen_model(name: str, inverse: bool) -> Callable[[], tuple[Any, Callable[[Any], Any]]]:
    def build() -> tuple[Any, Callable[[Any], Any]]:
        models = pytest.importorskip("pykeen.models")
        from pykeen.triples import TriplesFactory

        ids = {str(i): i for i in range(E)}
        factory = TriplesFactory(torch.cat(GRAPH.filter_triples), ids, {str(i): i for i in range(R)},
                                 create_inverse_triples=inverse)  # fmt: skip
        return getattr(models, name)(triples_factory=factory, embedding_dim=6, random_seed=0), pykeen_tables

    return build


def pyg_model(name: str) -> Callable[[], tuple[Any, Callable[[Any], Any]]]:
    def build() -> tuple[Any, Callable[[Any], Any]]:
        kge = pytest.importorskip("torch_geometric.nn.kge")
        torch.manual_seed(0)
        model = getattr(kge, name)(E, R, 6)
        return model, lambda m: (triple_table(m.forward),) * 2

    return build


def torchkge_model() -> tuple[Any, Callable[[Any], Any]]:
    models = pytest.importorskip("torchkge.models")
    torch.manual_seed(0)
    model = models.TransEModel(6, E, R, dissimilarity_type="L2")
    return model, lambda m: (triple_table(lambda h, r, t: m.scoring_function(h, t, r)),) * 2


def dicee_model() -> tuple[Any, Callable[[Any], Any]]:
    """A dicee DistMult (no reciprocal relations): tails by forward_k_vs_all, heads by forward_triples."""
    models = pytest.importorskip("dicee.models")
    torch.manual_seed(0)
    model = models.DistMult({"embedding_dim": 6, "num_entities": E, "num_relations": R, "learning_rate": 0.1,
                             "optim": "Adam", "scoring_technique": "KvsAll", "model": "DistMult"})  # fmt: skip

    def tables(m: Any) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            tails = m.forward_k_vs_all(x=torch.cartesian_prod(ALL, torch.arange(R))).reshape(E, R, E)
        heads = triple_table(lambda h, r, t: m.forward_triples(torch.stack([h, r, t], dim=1)).reshape(-1))
        return tails, heads

    return model.eval(), tables


MODELS = {
    "kgeval-DistMult": kgeval_model(DistMult),
    "kgeval-TransE": kgeval_model(TransE),
    "kgeval-RotatE": kgeval_model(RotatE),
    "pykeen-DistMult": pykeen_model("DistMult", inverse=False),
    "pykeen-DistMult-inverse": pykeen_model("DistMult", inverse=True),
    "pykeen-TransE-inverse": pykeen_model("TransE", inverse=True),
    "pykeen-TuckER-inverse": pykeen_model("TuckER", inverse=True),  # dropout and batch norms: a form in eval mode
    "pyg-DistMult": pyg_model("DistMult"),
    "pyg-TransE": pyg_model("TransE"),
    "torchkge-TransE": torchkge_model,
    "dicee-DistMult": dicee_model,
}


class Delegating(torch.nn.Module):
    """A LightningModule-like module: holds the model in ``self.model`` and scores through it, declaring nothing
    (no num_entities, no fast path) of its own."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def score_t(self, hr_batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        return self.model.score_t(hr_batch, tails=tails)

    def score_h(self, rt_batch: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        return self.model.score_h(rt_batch, heads=heads)


def compiled_in_place(model: Any) -> Any:
    model.compile()
    return model


WRAPPERS: dict[str, Callable[[Any], Any]] = {
    "torch.compile": torch.compile,
    "m.compile()": compiled_in_place,
    "DataParallel": torch.nn.DataParallel,
    "AveragedModel": lambda m: torch.optim.swa_utils.AveragedModel(m),
    "compile(DataParallel)": lambda m: torch.compile(torch.nn.DataParallel(m)),
    "AveragedModel(compile)": lambda m: torch.optim.swa_utils.AveragedModel(torch.compile(m)),
}


def evaluate(model: Any, **options: Any):
    return RankBasedEvaluator(**options).evaluate(
        model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False
    )


def scorer_kind(model: Any, target: str = "tail") -> type:
    """The scorer an evaluation gives ``model``: chosen in eval mode, as evaluate chooses it (a model with dropout,
    TuckER's, draws in training mode, and its probe then refuses every form)."""
    queries = GRAPH.triples[:, :2] if target == "tail" else GRAPH.triples[:, 1:]
    training = model.training
    model.eval()
    try:
        return type(make_scorer(model, target, E, None, probe_queries=queries))
    finally:
        model.train(training)


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
@pytest.mark.parametrize("name", list(MODELS))
def test_a_wrapped_model_ranks_as_the_unwrapped_models_own_scores(name: str, wrapper: str) -> None:
    """Through the models' own methods the ranks are the reference's exactly; through the fast path they are the
    unwrapped model's fast-path ranks exactly (which equal the reference's up to float rounding, an "l2" form's
    near-ties included: tests/integrations/test_pyg.py and the others)."""
    model, tables = MODELS[name]()
    wrapped = WRAPPERS[wrapper](copy.deepcopy(model))
    assert_same_ranks(evaluate(wrapped, fast_path=False).records, expected_ranks(tables(model)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)  # the unwrapped model's fast path, unrefused
        results = evaluate(wrapped)
    assert_same_records(results, evaluate(model))
    assert scorer_kind(wrapped) is scorer_kind(model)  # its fast path (or its own methods) as unwrapped


def assert_same_records(got: Any, expected: Any) -> None:
    for column in ("side", "task_index", "optimistic", "pessimistic", "num_candidates"):
        np.testing.assert_array_equal(got.records[column], expected.records[column], err_msg=column)


@pytest.mark.parametrize("name", ["kgeval-DistMult", "kgeval-TransE", "pykeen-DistMult-inverse", "pyg-DistMult"])
def test_a_module_delegating_to_the_model_keeps_its_fast_path(name: str) -> None:
    model, tables = MODELS[name]()
    if name.startswith("pyg"):  # PyG models have no score_t: the module delegates to their forward

        class Triples(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def score_hrt(self, hrt: torch.Tensor) -> torch.Tensor:
                return self.inner(hrt[:, 0], hrt[:, 1], hrt[:, 2])

        module: Any = Triples(model)
    elif name.startswith("pykeen"):

        class Predicting(Delegating):  # PyKEEN's own prediction, which maps the inverse relations
            def score_t(self, hr_batch, tails=None):
                return self.model.predict(hr_batch, target="tail", full_batch=False, ids=tails)

            def score_h(self, rt_batch, heads=None):
                return self.model.predict(rt_batch, target="head", full_batch=False, ids=heads)

        module = Predicting(model)
    else:
        module = Delegating(model)
    assert_same_ranks(evaluate(module, fast_path=False).records, expected_ranks(tables(model)))
    assert_same_records(evaluate(module), evaluate(model))
    assert scorer_kind(module) is GemmScorer is scorer_kind(model)


class ReversedRelation(Delegating):
    """Delegates, except that the scores of one relation are negated: not the held model's scores."""

    def __init__(self, model: Any, relation: int) -> None:
        super().__init__(model)
        self.relation = relation

    def score_t(self, hr_batch, tails=None):
        scores = super().score_t(hr_batch, tails)
        return torch.where((hr_batch[:, 1] == self.relation).unsqueeze(1), -scores, scores)


@pytest.mark.parametrize("relation", range(R))
def test_a_module_that_changes_one_relations_scores_is_scored_through_its_own_method(relation: int) -> None:
    """The delegation probe reads one query of every relation, so the module's change is seen whichever relation
    it touches (the first few queries alone would miss most of them)."""
    module = ReversedRelation(DistMult(E, R, dim=6, seed=0), relation)
    assert relation in GRAPH.triples[:, 1].tolist()
    results = evaluate(module)
    assert_same_ranks(results.records, expected_ranks(kgeval_tables(module)))
    assert scorer_kind(module) is not GemmScorer
    assert scorer_kind(module, "head") is GemmScorer  # its head scores are the held model's


def test_delegation_needs_the_probe() -> None:
    """Without the probe nothing shows that the module scores as the model it holds: its own method scores it."""
    module = Delegating(DistMult(E, R, dim=6, seed=0))
    assert type(make_scorer(module, "tail", E, None, probe_queries=None)) is not GemmScorer
    results = evaluate(module, check_fast_path=False)
    assert_same_ranks(results.records, expected_ranks(kgeval_tables(module)))


class Rule(DistMult):
    """A user's subclass that redefines score_t (one relation's scores reversed): its form is not its scoring."""

    def score_t(self, hr_batch, tails=None):
        scores = super().score_t(hr_batch, tails)
        return torch.where((hr_batch[:, 1] == 1).unsqueeze(1), -scores, scores)


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_the_overriding_subclass_check_sees_through_every_wrapper(wrapper: str) -> None:
    model = Rule(E, R, dim=6, seed=0)
    wrapped = WRAPPERS[wrapper](copy.deepcopy(model))
    with pytest.warns(FastPathWarning, match=r"^kgeval: Rule is not scored .*Rule\.score_t overrides"):
        results = evaluate(wrapped)
    assert_same_ranks(results.records, expected_ranks(kgeval_tables(model)))


def test_unwrap_names_the_wrappers_and_keeps_a_wrapper_subclass_that_scores() -> None:
    model = DistMult(E, R, dim=6, seed=0)
    nested = torch.compile(torch.nn.DataParallel(torch.optim.swa_utils.AveragedModel(model)))
    unwrapped = unwrap(nested)
    assert unwrapped.wrappers == ("torch.compile", "DataParallel", "AveragedModel")
    assert unwrapped.model is nested._orig_mod.module.module
    assert describe(nested) == "DistMult (inside AveragedModel inside DataParallel inside torch.compile)"

    class ScoringParallel(torch.nn.DataParallel):
        def score_t(self, hr_batch):
            return self.module.score_t(hr_batch) + 1

    own = ScoringParallel(model)
    assert unwrap(own).model is own


def test_a_wrapper_kgeval_does_not_know_is_named_in_the_error_with_what_to_pass() -> None:
    class Holder(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.net = inner

    with pytest.raises(TypeError, match=r"Holder has no score_h.*it holds DistMult in \.net.*model\.net.*model='net'"):
        evaluate(Holder(DistMult(E, R, dim=6, seed=0)))
    delegating = Delegating(DistMult(E, R, dim=6, seed=0))
    delegating.other = DistMult(E, R, dim=6, seed=1)  # two models that count entities: neither is the delegate
    with pytest.raises(ValueError, match=r"Delegating has no num_entities.*DistMult in \.model, DistMult in \.other"):
        evaluate(delegating)


# -- half precision ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["DistMult", "ComplEx", "RESCAL", "TransE", "RotatE"])
def test_a_half_precision_model_ranks_as_its_own_scores_or_is_refused_at_the_door(name: str, dtype) -> None:
    """The reference reads the model's own half-precision scores (exact in float64): ties from their rounding
    included. Where the model's own methods cannot compute in that precision (complex bfloat16), evaluate raises
    before ranking, with what to do -- never a warning followed by a crash."""
    import kgeval.models

    model = getattr(kgeval.models, name)(E, R, dim=6, seed=0).to(dtype)
    try:  # one query, as kgeval tries it (cdist in float16 fails for few rows on CPU, passes for many)
        with torch.no_grad():
            model.score_t(GRAPH.triples[:1, :2])
            model.score_h(GRAPH.triples[:1, 1:])
        tables = kgeval_tables(model)
    except RuntimeError:  # the model's own methods have no kernel for this dtype here
        with warnings.catch_warnings():
            warnings.simplefilter("error", FastPathWarning)  # the refusal comes first, no warning before it
            with pytest.raises(TypeError, match=rf"{name} holds {dtype} parameters.*float32 copy"):
                evaluate(model)
        return
    with pytest.warns(FastPathWarning, match=f"its parameters are {dtype}"):
        results = evaluate(model)
    assert_same_ranks(results.records, expected_ranks(tables))


# -- signatures that say more than they do ----------------------------------------------------------------------
class IgnoresCandidates(torch.nn.Module):
    """score_t / score_h take ``**kwargs`` (so ``tails=`` / ``heads=`` are accepted) and return every entity's
    scores whatever they are asked."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.inner = model
        self.num_entities = model.num_entities
        self.calls = 0

    def score_t(self, hr_batch: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        self.calls += 1
        return self.inner.score_t(hr_batch)

    def score_h(self, rt_batch: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        self.calls += 1
        return self.inner.score_h(rt_batch)


class PositionalOnly(torch.nn.Module):
    """Candidate ids as a positional-only parameter: ``score_h(rt, heads=None, /)``."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.inner = model
        self.num_entities = model.num_entities
        self.widths: list[int] = []

    def score_t(self, hr_batch, tails=None, /):
        scores = self.inner.score_t(hr_batch, tails)
        self.widths.append(scores.shape[1])
        return scores

    def score_h(self, rt_batch, heads=None, /):
        scores = self.inner.score_h(rt_batch, heads)
        self.widths.append(scores.shape[1])
        return scores


@pytest.mark.parametrize("whitelist", [None, [0, 2, 3, 5, 7, 8, 9, 11]])
@pytest.mark.parametrize(("batch_size", "slice_size"), [(3, 5), (40, 2), (7, 11)])
def test_a_model_ignoring_candidate_ids_ranks_exactly_on_a_graph_wider_than_a_slice(
    batch_size: int, slice_size: int, whitelist: list[int] | None
) -> None:
    model = DistMult(E, R, dim=6, seed=0)
    ignoring = IgnoresCandidates(model)
    kept = GRAPH.triples
    if whitelist is not None:
        kept = GRAPH.triples[torch.isin(GRAPH.triples[:, 0], torch.tensor(whitelist))
                             & torch.isin(GRAPH.triples[:, 2], torch.tensor(whitelist))]  # fmt: skip
    # the stability probe off (check_fast_path=False): the loop's calls are counted below
    evaluator = RankBasedEvaluator(batch_size=batch_size, slice_size=slice_size, fast_path=False,
                                   check_fast_path=False)  # fmt: skip
    with pytest.warns(IgnoredCandidatesWarning, match=r"IgnoresCandidates\.score_[th] returned the scores of all 12"):
        results = evaluator.evaluate(
            ignoring, kept, additional_filter_triples=GRAPH.filter_triples, restrict_entities_to=whitelist,
            use_tqdm=False,
        )  # fmt: skip
    expected = {
        side: reference_ranks(table.double(), kept, GRAPH.filter_triples, restrict_entities_to=whitelist)[side]
        for side, table in zip(("tail", "head"), kgeval_tables(model), strict=True)
    }
    assert_same_ranks(results.records, expected)
    batches = -(-len(kept) // batch_size)
    assert ignoring.calls <= 2 * batches + 2  # whole rows once per batch, not once per slice


def test_candidate_ids_are_passed_positionally_where_the_signature_says_so() -> None:
    model = DistMult(E, R, dim=6, seed=0)
    positional = PositionalOnly(model)
    results = RankBasedEvaluator(slice_size=5, fast_path=False).evaluate(  # its own methods, not the held form
        positional, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False
    )
    assert_same_ranks(results.records, expected_ranks(kgeval_tables(model)))
    assert max(positional.widths) <= 5  # slices, as asked


def test_an_error_about_a_wrapped_model_names_the_wrappers() -> None:
    class TailsOnly(torch.nn.Module):
        num_entities = E

        def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
            return torch.zeros(hr_batch.shape[0], E)

    wrapped = torch.compile(torch.nn.DataParallel(TailsOnly()))
    with pytest.raises(TypeError, match=r"^TailsOnly \(inside DataParallel inside torch\.compile\) has no score_h"):
        evaluate(wrapped)
    results = RankBasedEvaluator().evaluate(wrapped, GRAPH.triples, targets=("tail",), use_tqdm=False)
    assert results.get_metric("tail.optimistic.mr") == 1  # every score ties at zero


def test_a_model_set_up_by_lightning_fabric_ranks_as_the_model() -> None:
    fabric = pytest.importorskip("lightning.fabric")
    model = TransE(E, R, dim=6, seed=0)
    wrapped = fabric.Fabric(accelerator="cpu", devices=1).setup_module(copy.deepcopy(model))
    assert unwrap(wrapped).wrappers == ("Lightning Fabric",)
    assert_same_records(evaluate(wrapped), evaluate(model))
    assert scorer_kind(wrapped) is GemmScorer
