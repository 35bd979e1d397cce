"""Adjusted and z metrics against PyKEEN 1.11 (skipped when PyKEEN is not importable).

A PyKEEN DistMult (random init with a fixed seed; on UMLS with small-integer embeddings, so that more than half of
the ranks have ties) is evaluated by ``pykeen.evaluation.RankBasedEvaluator(filtered=True)`` and by kgeval with
the same filter triples. PyKEEN reports every adjusted hits@k under one key, ``adjusted_hits_at_k`` (also
``z_hits_at_k``), which holds its last k: only k = 10 is comparable.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator, RankBasedMetricResults
from kgeval.datasets import load_shipped_dataset
from kgeval.metrics import METRICS
from kgeval.metrics.registry import canonical_name, lookup

pytest.importorskip("pykeen")
pytestmark = pytest.mark.pykeen

from pykeen.evaluation import RankBasedEvaluator as PyKEENEvaluator  # noqa: E402
from pykeen.metrics import ranking  # noqa: E402
from pykeen.models import DistMult  # noqa: E402
from pykeen.triples import CoreTriplesFactory  # noqa: E402

SIDES = ("head", "tail", "both")
#: kgeval key -> (PyKEEN key, PyKEEN metric instance)
COMPARABLE = {
    "adjusted_arithmetic_mean_rank": ("adjusted_arithmetic_mean_rank", ranking.AdjustedArithmeticMeanRank()),
    "adjusted_arithmetic_mean_rank_index": (
        "adjusted_arithmetic_mean_rank_index",
        ranking.AdjustedArithmeticMeanRankIndex(),
    ),
    "adjusted_inverse_harmonic_mean_rank": (
        "adjusted_inverse_harmonic_mean_rank",
        ranking.AdjustedInverseHarmonicMeanRank(),
    ),
    "adjusted_geometric_mean_rank_index": (
        "adjusted_geometric_mean_rank_index",
        ranking.AdjustedGeometricMeanRankIndex(),
    ),
    "adjusted_hits_at_10": ("adjusted_hits_at_k", ranking.AdjustedHitsAtK(k=10)),
    "z_arithmetic_mean_rank": ("z_arithmetic_mean_rank", ranking.ZArithmeticMeanRank()),
    "z_inverse_harmonic_mean_rank": ("z_inverse_harmonic_mean_rank", ranking.ZInverseHarmonicMeanRank()),
    "z_geometric_mean_rank": ("z_geometric_mean_rank", ranking.ZGeometricMeanRank()),
    "z_hits_at_10": ("z_hits_at_k", ranking.ZHitsAtK(k=10)),
}
CASES = [("umls", "ties"), ("kinship", "random"), ("nations", "random")]


def pykeen_model(name: str, kind: str) -> tuple[DistMult, object]:
    data = load_shipped_dataset(name)
    factory = CoreTriplesFactory.create(data.train, num_entities=data.num_entities, num_relations=data.num_relations)
    model = DistMult(triples_factory=factory, embedding_dim=16, random_seed=0)
    if kind == "ties":  # integer scores: exact in float32, many ties
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(torch.randint(-3, 4, parameter.shape, generator=generator).float())
    return model, data


@pytest.fixture(scope="module", params=CASES, ids=[f"{name}-{kind}" for name, kind in CASES])
def evaluations(request: pytest.FixtureRequest) -> tuple[object, RankBasedMetricResults]:
    model, data = pykeen_model(*request.param)
    filters = [data.train, data.valid]
    logging.getLogger("pykeen").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = PyKEENEvaluator(filtered=True).evaluate(
            model, data.test, additional_filter_triples=filters, use_tqdm=False, batch_size=256
        )
    ours = RankBasedEvaluator().evaluate(model, data.test, additional_filter_triples=filters, use_tqdm=False)
    return theirs, ours


def side_records(results: RankBasedMetricResults, side: str) -> tuple[np.ndarray, np.ndarray]:
    """Realistic ranks and num_candidates of one side, from kgeval's records."""
    records = results.records
    chosen = np.ones(len(records["side"]), dtype=bool) if side == "both" else records["side"] == SIDES.index(side)
    ranks = (records["optimistic"][chosen] + records["pessimistic"][chosen]) / 2
    return ranks, records["num_candidates"][chosen]


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("key", list(COMPARABLE))
def test_adjusted_values_agree_with_pykeens_evaluator(evaluations, side: str, key: str) -> None:
    """PyKEEN aggregates realistic ranks in float32, so agreement is to float32 precision (z-scores amplify it)."""
    theirs, ours = evaluations
    pykeen_key, _metric = COMPARABLE[key]
    tolerance = 1e-4 if key.startswith("z_") else 1e-6
    assert ours.get_metric(f"{side}.{key}") == pytest.approx(
        theirs.get_metric(f"{side}.realistic.{pykeen_key}"), abs=tolerance
    )


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("key", list(COMPARABLE))
def test_adjusted_values_agree_with_pykeens_formulas_on_the_same_ranks(evaluations, side: str, key: str) -> None:
    """PyKEEN's metric classes in float64 on kgeval's realistic ranks: the closed forms agree to rounding."""
    _theirs, ours = evaluations
    ranks, num_candidates = side_records(ours, side)
    expected = COMPARABLE[key][1](ranks, num_candidates=num_candidates)
    assert ours.get_metric(f"{side}.{key}") == pytest.approx(expected, rel=1e-8, abs=1e-11)


@pytest.mark.parametrize("side", SIDES)
def test_pykeens_collapsed_hits_key_holds_k_10(evaluations, side: str) -> None:
    theirs, ours = evaluations
    for family in ("adjusted_hits", "z_hits"):
        collapsed = theirs.get_metric(f"{side}.realistic.{family}_at_k")
        assert collapsed == pytest.approx(ours.get_metric(f"{side}.{family}_at_10"), rel=1e-9, abs=1e-12)
        assert collapsed != pytest.approx(ours.get_metric(f"{side}.{family}_at_1"), rel=1e-6)


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize(
    ("key", "metric"),
    [
        ("arithmetic_mean_rank", ranking.ArithmeticMeanRank()),
        ("inverse_harmonic_mean_rank", ranking.InverseHarmonicMeanRank()),
        ("geometric_mean_rank", ranking.GeometricMeanRank()),
        ("hits_at_10", ranking.HitsAtK(k=10)),
    ],
)
def test_null_moments_agree_with_pykeens_closed_forms(evaluations, side: str, key: str, metric) -> None:
    """PyKEEN's GMR variance is E[prod] - E^2 in linear space, so it agrees only to ~1e-9 relative."""
    _theirs, ours = evaluations
    _ranks, num_candidates = side_records(ours, side)
    assert ours.expected(f"{side}.{key}") == pytest.approx(metric.expected_value(num_candidates), rel=1e-12)
    assert ours.variance(f"{side}.{key}") == pytest.approx(metric.variance(num_candidates), rel=1e-8)


def pykeen_spellings(metric_class: type) -> list[str]:
    """PyKEEN's key and synonyms of a metric class, k-families written with k = 10 (bare ``ahk``-style skipped)."""
    spellings = []
    for name in (metric_class().key, *metric_class.synonyms):
        if name.endswith(("@", "_at_")):
            spellings.append(f"{name}10")
        elif name.endswith(("@k", "_at_k")):
            spellings.append(f"{name[:-1]}10")
        elif name not in ("ahk", "zahk"):
            spellings.append(name)
    return spellings


#: PyKEEN's rank-based metric classes in name order: the resolver's order is a set's, which differs between processes
#: (pytest -n collects in each worker, and the workers must agree)
RESOLVED = sorted(ranking.rank_based_metric_resolver, key=lambda cls: cls.__name__)


@pytest.mark.parametrize("metric_class", RESOLVED, ids=lambda cls: cls.__name__)
def test_pykeens_catalogue_resolves_in_kgeval(metric_class: type) -> None:
    names = {lookup(canonical_name(spelling))[0].name for spelling in pykeen_spellings(metric_class)}
    assert len(names) == 1, names
    info = METRICS[names.pop()]
    if info.increasing is not None:
        assert info.increasing == metric_class.increasing
    # PyKEEN's parser accepts only these rank types, yet its evaluator reports every metric for all three
    assert set(metric_class.supported_rank_types) <= set(info.rank_types) == {"optimistic", "pessimistic", "realistic"}
