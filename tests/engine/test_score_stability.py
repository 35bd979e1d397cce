"""Scores that are not a function of the query are not ranked without a word (kgeval._engine.form_check's stability
probe, issue 58).

A dynamically quantized scorer and one whose own code puts batch norm in training mode (scores depend on the
batch), one adding noise in eval mode (randomness), one counting its calls (state) and one trained inside
``parametrize.cached()`` (a stale cache) are each warned with their cause. kgeval's own models (fast path and own
methods, at several batch sizes and widths), a PyKEEN model, a ``score_fn`` and a model read through a fresh
parametrize cache are never warned. The probe costs at most four calls of at most four queries against at most
:data:`~kgeval._engine.form_check.PROBE_WINDOW` candidates per side; :func:`caller_rng_restored` gives the caller's
random number generators back.
"""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

from kgeval import RankBasedEvaluator
from kgeval._engine.form_check import (
    BATCH_DEPENDENCE,
    PROBE_WINDOW,
    RANDOMNESS,
    STALE_CACHE,
    FormChecks,
    caller_rng_restored,
    probe_instability,
)
from kgeval._engine.gemm_scoring import GemmScorer
from kgeval._engine.scorer_choice import make_scorer
from kgeval.exceptions import ScoreStabilityWarning
from kgeval.models import RESCAL, ComplEx, DistMult, RotatE, TransE
from tests.helpers.graphs import random_graph

E, R, DIM = 60, 4, 16
GRAPH = random_graph(7, num_entities=E, num_relations=R, num_triples=90, num_filter=120)


class LinearScorer(nn.Module):
    """A scorer with an nn.Linear between its embeddings and its scores: score_t(h, r) = W [e_h; w_r] . e_t (and
    score_h alike), every entity at once."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.entity = nn.Parameter(torch.randn(E, DIM, generator=generator))
        self.relation = nn.Parameter(torch.randn(R, DIM, generator=generator))
        self.mix = nn.Linear(2 * DIM, DIM)
        with torch.no_grad():
            self.mix.weight.copy_(torch.randn(DIM, 2 * DIM, generator=generator) / DIM**0.5)
            self.mix.bias.zero_()

    def query(self, entities: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        return self.mix(torch.cat([self.entity[entities], self.relation[relations]], dim=1))

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return self.query(hr_batch[:, 0], hr_batch[:, 1]) @ self.entity.T

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return self.query(rt_batch[:, 1], rt_batch[:, 0]) @ self.entity.T


class NoisyScorer(LinearScorer):
    """Adds Gaussian noise to its scores, in eval mode too (the caller's RNG advances)."""

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        scores = super().score_t(hr_batch)
        return scores + torch.randn_like(scores)

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        scores = super().score_h(rt_batch)
        return scores + torch.randn_like(scores)


class CountingScorer(LinearScorer):
    """Adds the number of its calls to its scores: state, not randomness (no two rows of one call differ)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return super().score_t(hr_batch) + self.calls


class BatchNormScorer(LinearScorer):
    """Normalises its query vectors with a BatchNorm1d that its own code puts in training mode while it scores."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(DIM)

    def query(self, entities: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        self.norm.train()  # the user's code forces it (kgeval's eval mode does not reach into score_t)
        return self.norm(super().query(entities, relations))


class Scale(nn.Module):
    """A parametrization: the weight times 2."""

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return 2 * weight


def stability_warnings(model: object, *, batch_size: int | None = None, **options: object) -> list[str]:
    """The messages of the ScoreStabilityWarnings of one filtered evaluation of ``model`` on GRAPH."""
    evaluator = RankBasedEvaluator(**options.pop("evaluator", {}))  # type: ignore[arg-type]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluator.evaluate(model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False,
                           num_entities=E, batch_size=batch_size, **options)  # type: ignore[arg-type]  # fmt: skip
    return [str(w.message) for w in caught if issubclass(w.category, ScoreStabilityWarning)]


def quantized() -> nn.Module:
    """LinearScorer with its nn.Linear dynamically quantized (int8 weights; activations quantized per call)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation
        return torch.ao.quantization.quantize_dynamic(LinearScorer(), {nn.Linear}, dtype=torch.qint8)


# -- warned, with the cause ---------------------------------------------------------------------------------------


def test_a_dynamically_quantized_scorer_is_warned_batch_dependent() -> None:
    """quantize_dynamic scales each batch's activations by the batch's range: a query's row depends on the rest of
    its batch (before: no warning)."""
    found = stability_warnings(quantized())
    assert len(found) == 1, found
    assert BATCH_DEPENDENCE in found[0] and "quantize_dynamic" in found[0]
    assert "LinearScorer" in found[0] and "score_" in found[0]


def test_a_dynamically_quantized_scorer_ranks_otherwise_at_batch_size_one() -> None:
    """The control: the quantized scorer's ranks do change with the batch size, so the warning is not idle."""
    model = quantized()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScoreStabilityWarning)
        ranks = [
            RankBasedEvaluator(keep_records=True)
            .evaluate(model, GRAPH.triples, use_tqdm=False, num_entities=E, batch_size=size)
            .records.optimistic  # type: ignore[union-attr]
            for size in (1, None)
        ]
    assert (ranks[0] != ranks[1]).sum() > 0


def test_batch_norm_in_training_mode_inside_the_model_is_warned_batch_dependent() -> None:
    found = stability_warnings(BatchNormScorer())
    assert len(found) == 1 and BATCH_DEPENDENCE in found[0] and "batch norm" in found[0], found


def test_noise_in_eval_mode_is_warned_as_randomness() -> None:
    """randn added to the scores in eval mode: two rows of one query in one batch differ (before: no warning)."""
    found = stability_warnings(NoisyScorer())
    assert len(found) == 1 and RANDOMNESS in found[0] and "twice in one batch" in found[0], found


def test_scores_that_change_from_call_to_call_are_warned_as_state() -> None:
    found = stability_warnings(CountingScorer(), targets=("tail",))
    assert len(found) == 1 and RANDOMNESS in found[0] and "two calls of one batch" in found[0], found


def test_a_model_trained_inside_parametrize_cached_is_warned_stale() -> None:
    """Inside ``parametrize.cached()`` the parametrized weight is read from the cache its first read filled: after a
    change to the weights, the scores are the old weights' (before: no warning)."""
    model = LinearScorer()
    parametrize.register_parametrization(model.mix, "weight", Scale())
    with parametrize.cached():
        assert stability_warnings(model) == []  # the evaluation fills the cache from the current weights: fresh
        with torch.no_grad():
            model.mix.parametrizations.weight.original.mul_(-1)  # a training step, inside cached()
        found = stability_warnings(model)
    assert len(found) == 1 and STALE_CACHE in found[0] and "mix.weight" in found[0], found
    assert stability_warnings(model) == []  # outside cached(): read fresh


def test_a_form_whose_query_vectors_depend_on_the_batch_is_found() -> None:
    """A query/candidate form is probed through its query vectors (the candidates' are read once): vectors
    centred on the batch's mean depend on the batch; DistMult's own do not."""

    class Centred(DistMult):
        def kgeval_query(self, queries: torch.Tensor, target: str = "tail") -> torch.Tensor:
            vectors = super().kgeval_query(queries, target)
            return vectors - vectors.mean(dim=0)

    queries = GRAPH.triples[:, :2]
    found = probe_instability(GemmScorer(Centred(E, R, dim=8, seed=0), "tail", E, None), queries)
    assert found is not None and found.cause == BATCH_DEPENDENCE and "query vector" in found.detail
    assert probe_instability(GemmScorer(DistMult(E, R, dim=8, seed=0), "tail", E, None), queries) is None


def test_a_noisy_scorer_is_not_probed_without_check_fast_path() -> None:
    """``check_fast_path=False`` turns every probe off, this one included."""
    assert stability_warnings(NoisyScorer(), evaluator={"check_fast_path": False}) == []


def test_a_noisy_scorer_is_warned_once_per_evaluation() -> None:
    """Both sides, every candidate group (type constraints: one group per relation), one warning."""
    found = stability_warnings(NoisyScorer(), targets=("head", "tail"))
    assert len(found) == 1


# -- never warned -------------------------------------------------------------------------------------------------

BUILDERS = {
    "DistMult": lambda dim: DistMult(E, R, dim=dim, seed=1),
    "ComplEx": lambda dim: ComplEx(E, R, dim=dim, seed=1),
    "RESCAL": lambda dim: RESCAL(E, R, dim=dim, seed=1),
    "TransE-L1": lambda dim: TransE(E, R, dim=dim, p=1, seed=1),
    "TransE-L2": lambda dim: TransE(E, R, dim=dim, p=2, seed=1),
    "RotatE": lambda dim: RotatE(E, R, dim=dim, seed=1),
}


@pytest.mark.parametrize("fast_path", [True, False])
@pytest.mark.parametrize("dim", [8, 256])
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_kgeval_models_are_never_warned(name: str, dim: int, fast_path: bool) -> None:
    """Through the fast path and through their own score_t / score_h (``fast_path=False``), at batch sizes 1, 3
    and the default: no false alarm from a GEMM blocked otherwise for another batch size."""
    model = BUILDERS[name](dim)
    for batch_size in (1, 3, None):
        assert stability_warnings(model, batch_size=batch_size, evaluator={"fast_path": fast_path}) == []


@pytest.mark.parametrize("size", [1, 2, 4, 5, 17, 64, 512])
def test_the_probe_tolerance_covers_gemm_blocking_of_large_batches(size: int) -> None:
    """The probe compares against rows of 1, 2 or 4 queries; the rows of a batch of ``size`` (other GEMM blocking)
    differ from a batch of 1's by far less than the tolerance, for wide vectors far from the origin too."""
    generator = torch.Generator().manual_seed(size)
    queries = torch.randn(size, 1000, generator=generator) + 3
    candidates = torch.randn(300, 1000, generator=generator) + 3
    batch = queries @ candidates.T
    alone = torch.cat([queries[row : row + 1] @ candidates.T for row in range(size)])
    magnitude = torch.maximum(batch.abs().amax(dim=1), alone.abs().amax(dim=1))
    assert ((batch - alone).abs().amax(dim=1) <= 1e-5 * magnitude).all()


def test_a_score_fn_is_never_warned() -> None:
    model = DistMult(E, R, dim=DIM, seed=2)

    def score_fn(heads: torch.Tensor, relations: torch.Tensor, tails: torch.Tensor) -> torch.Tensor:
        return model.score_hrt(torch.stack([heads, relations, tails], dim=1))

    for batch_size in (1, 5, None):
        assert stability_warnings(model, batch_size=batch_size, score_fn=score_fn) == []


def test_a_model_read_through_a_fresh_parametrize_cache_is_never_warned() -> None:
    model = LinearScorer()
    parametrize.register_parametrization(model.mix, "weight", Scale())
    with parametrize.cached():
        _ = model.mix.weight  # filled from the current weights
        assert stability_warnings(model) == []
        assert stability_warnings(model, batch_size=2) == []


@pytest.mark.pykeen
@pytest.mark.parametrize("name", ["TransE", "DistMult", "ConvE"])
def test_a_pykeen_model_is_never_warned(name: str) -> None:
    """ConvE holds batch norm and dropout: in eval mode, as kgeval scores it, neither depends on the batch."""
    pykeen_models = pytest.importorskip("pykeen.models")
    from pykeen.triples import CoreTriplesFactory

    factory = CoreTriplesFactory.create(GRAPH.filter_triples[0], num_entities=E, num_relations=R)
    options = {"embedding_dim": 16, "random_seed": 0}
    if name == "ConvE":
        options.update(embedding_height=4, embedding_width=4)
    model = getattr(pykeen_models, name)(triples_factory=factory, **options)
    for batch_size in (1, 3, None):
        assert stability_warnings(model, batch_size=batch_size) == []


# -- bounded, and the caller's RNG ----------------------------------------------------------------------------------


class SlicedCounter(nn.Module):
    """A DistMult scoring candidate slices (``tails=``), no fast path, recording the (queries, candidates) of every
    call."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(3)
        self.entity = nn.Parameter(torch.randn(500, 8, generator=generator))
        self.relation = nn.Parameter(torch.randn(R, 8, generator=generator))
        self.calls: list[tuple[int, int]] = []

    def score_t(self, hr_batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        self.calls.append((hr_batch.shape[0], 500 if tails is None else tails.numel()))
        candidates = self.entity if tails is None else self.entity[tails]
        return (self.entity[hr_batch[:, 0]] * self.relation[hr_batch[:, 1]]) @ candidates.T


def test_the_probe_scores_at_most_four_calls_of_four_queries_against_a_window() -> None:
    """Of 300 distinct queries and 500 candidates, the probe asks for at most 4 calls of at most 4 queries against
    at most PROBE_WINDOW candidates, once per evaluation and side (a second candidate group is not probed)."""
    model = SlicedCounter()
    generator = torch.Generator().manual_seed(0)
    queries = torch.stack(
        [torch.randint(500, (300,), generator=generator), torch.randint(R, (300,), generator=generator)], 1
    )
    checks = FormChecks()
    make_scorer(model, "tail", 500, None, probe_queries=queries, checks=checks)
    assert 1 <= len(model.calls) <= 4, model.calls
    assert all(rows <= 4 and width <= PROBE_WINDOW for rows, width in model.calls), model.calls
    assert sum(rows * width for rows, width in model.calls) <= 4 * 4 * PROBE_WINDOW
    before = len(model.calls)
    make_scorer(model, "tail", 500, torch.arange(100), probe_queries=queries, checks=checks)
    assert len(model.calls) == before  # probed once per side and evaluation
    make_scorer(model, "tail", 500, None, probe_queries=None, checks=FormChecks(probe=False))
    assert len(model.calls) == before  # no probe queries: no probe


@pytest.mark.parametrize(("batch_size", "slice_size"), [(1, 5), (2, 7), (3, None), (None, 9)])
def test_the_probe_keeps_to_the_requested_batch_and_slice_sizes(batch_size: int | None, slice_size: int | None) -> None:
    """A requested batch or slice size bounds the probe's calls as it bounds the evaluation's (a model evaluated one
    query at a time for its memory is probed one query at a time)."""
    model = SlicedCounter()
    queries = torch.stack([torch.arange(300) % 500, torch.arange(300) % R], 1)
    make_scorer(model, "tail", 500, None, probe_queries=queries, batch_size=batch_size, slice_size=slice_size)
    assert 2 <= len(model.calls) <= 4, model.calls
    assert all(rows <= (batch_size or 4) and width <= (slice_size or PROBE_WINDOW) for rows, width in model.calls)


@pytest.mark.parametrize("batch_size", [1, 2, 3])
def test_noise_is_warned_at_small_batch_sizes(batch_size: int) -> None:
    found = stability_warnings(NoisyScorer(), batch_size=batch_size)
    assert len(found) == 1 and RANDOMNESS in found[0], found


def test_batch_norm_in_training_mode_is_warned_at_batch_size_two() -> None:
    found = stability_warnings(BatchNormScorer(), batch_size=2)
    assert len(found) == 1 and BATCH_DEPENDENCE in found[0], found


def test_a_model_failing_at_its_first_call_is_called_once() -> None:
    """The probe's first call is the model's first: what it raises is the evaluation's error, raised once."""

    class Failing(LinearScorer):
        calls = 0

        def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
            Failing.calls += 1
            raise RuntimeError("a failing model")

    with pytest.raises(RuntimeError, match="a failing model"):
        RankBasedEvaluator().evaluate(Failing(), GRAPH.triples, num_entities=E, targets=("tail",), use_tqdm=False)
    assert Failing.calls == 1


def test_a_model_out_of_memory_above_one_query_is_probed_one_query_at_a_time() -> None:
    """An out-of-memory error of the probe's first call halves its rows, as the evaluation halves its batches: the
    noise is still seen (in two calls of one query), and the evaluation's ranks are made by its retries."""

    class NoisyAboveOne(NoisyScorer):
        def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
            if hr_batch.shape[0] > 1:
                raise torch.OutOfMemoryError("injected")
            return super().score_t(hr_batch)

    found = stability_warnings(NoisyAboveOne(), targets=("tail",))
    assert len(found) == 1 and RANDOMNESS in found[0] and "two calls" in found[0], found


def test_caller_rng_restored_gives_back_every_generator() -> None:
    """A model drawing random numbers inside the context leaves torch's, numpy's and Python's generators where they
    were; on an exception too."""
    model = NoisyScorer().eval()  # its initialisation draws
    torch.manual_seed(11)
    np.random.seed(11)  # noqa: NPY002 -- the caller's legacy global generator
    random.seed(11)
    before = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())  # noqa: NPY002
    with caller_rng_restored():
        model.score_t(torch.tensor([[0, 1], [2, 3]]))
        np.random.rand()  # noqa: NPY002
        random.random()
    assert torch.equal(torch.get_rng_state(), before[0])
    assert np.array_equal(np.random.get_state()[1], before[1]) and random.getstate() == before[2]  # noqa: NPY002
    with pytest.raises(RuntimeError, match="inside"):
        draw_then_raise()
    assert torch.equal(torch.get_rng_state(), before[0])
    expected = torch.randn(3)
    torch.set_rng_state(before[0])
    with caller_rng_restored():
        torch.randn(100)
    assert torch.equal(torch.randn(3), expected)  # the caller's next draws are those it would have had


def draw_then_raise() -> None:
    """Draw random numbers inside caller_rng_restored, then raise."""
    with caller_rng_restored():
        torch.randn(5)
        raise RuntimeError("inside")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_caller_rng_restored_gives_back_the_cuda_generators() -> None:
    torch.cuda.init()
    before = torch.cuda.get_rng_state_all()
    with caller_rng_restored():
        torch.randn(10, device="cuda")
    assert all(torch.equal(a, b) for a, b in zip(torch.cuda.get_rng_state_all(), before, strict=True))
