"""Every metric key PyKEEN reports or resolves resolves in kgeval to the same value (skipped without PyKEEN).

The key strings are generated from PyKEEN's own vocabulary (its metric classes, keys, synonyms, sides, rank types
and rank-type synonyms, with and without a trailing ``.k``), never from a hand-written list. PyKEEN's meaning of a
key is recovered with PyKEEN's own parser (``RankBasedMetricResults.key_from_string`` and the patterns and
resolver it uses), and its value computed by PyKEEN's metric class on the same ranks kgeval reports.
"""

from __future__ import annotations

import itertools
import logging
import warnings
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator, RankBasedMetricResults
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult

pytest.importorskip("pykeen")
pytestmark = pytest.mark.pykeen

from pykeen.evaluation import RankBasedEvaluator as PyKEENEvaluator  # noqa: E402
from pykeen.evaluation import rank_based_evaluator as pykeen_rank_based  # noqa: E402
from pykeen.metrics.ranking import HITS_METRICS, rank_based_metric_resolver  # noqa: E402
from pykeen.typing import RANK_TYPE_SYNONYMS, RANK_TYPES, SIDES  # noqa: E402

TARGETS = ("head", "tail")


def pykeen_metric_names() -> list[str]:
    """Every name PyKEEN's resolver knows: class names, keys, normalised names and synonyms (raw and normalised),
    and each hits@k spelling with a k written in it (the form PyKEEN's HITS_PATTERN reads)."""
    names: set[str] = set(rank_based_metric_resolver.lookup_dict) | set(rank_based_metric_resolver.synonyms)
    for cls in rank_based_metric_resolver:
        names |= {cls.__name__, cls().key, *getattr(cls, "synonyms", ())}
    for name in list(names):
        if name.endswith(("@", "_at_")):
            names |= {f"{name}{k}" for k in (1, 3, 5, 10)}
    return sorted(names)


def pykeen_key_strings() -> Iterator[str]:
    """name x side prefix x rank-type prefix x trailing k, every combination."""
    sides = (None, *sorted(SIDES))
    rank_types = (None, *RANK_TYPES, *RANK_TYPE_SYNONYMS)
    for name, side, rank_type, k in itertools.product(pykeen_metric_names(), sides, rank_types, (None, 1, 3, 10)):
        yield ".".join(str(part) for part in (side, rank_type, name, k) if part is not None)


def pykeen_meaning(key: str) -> tuple[str, str, object] | None:
    """(side, rank type, metric instance) as PyKEEN resolves ``key``, or None when PyKEEN rejects it.

    Mirrors ``RankBasedMetricResults.key_from_string`` step by step with PyKEEN's own objects, to recover the
    metric instance (the key it returns drops k for adjusted / z hits@k) and checks it against that function.
    """
    try:
        parsed = pykeen_rank_based.RankBasedMetricResults.key_from_string(key)
    except (ValueError, KeyError, AssertionError):
        return None
    match = pykeen_rank_based.METRIC_PATTERN.match(key)
    name, k = match.group("name").lower(), match.group("k")
    hits = pykeen_rank_based.HITS_PATTERN.match(name)
    if hits:
        name, k = hits.groups()
    cls = rank_based_metric_resolver.lookup(name)
    kwargs = {"k": int(k or 10)} if issubclass(cls, HITS_METRICS) else {}
    metric = rank_based_metric_resolver.make(cls, kwargs)
    assert metric.key == parsed.metric, key
    return parsed.side, parsed.rank_type, metric


@pytest.fixture(scope="module")
def results() -> RankBasedMetricResults:
    """A kgeval evaluation with many ties (small-integer DistMult embeddings on UMLS), records kept."""
    data = load_shipped_dataset("umls")
    model = DistMult(data.num_entities, data.num_relations, dim=8)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randint(-2, 3, parameter.shape, generator=generator).float())
    evaluator = RankBasedEvaluator(ks=(1, 3, 5, 10))
    results = evaluator.evaluate(model, data.test, additional_filter_triples=[data.train, data.valid], use_tqdm=False)
    assert (results.records["pessimistic"] > results.records["optimistic"]).mean() > 0.2  # ties matter
    return results


def ranks_of(results: RankBasedMetricResults, side: str, rank_type: str) -> tuple[np.ndarray, np.ndarray]:
    """The ranks (float64) of one side and rank type and their num_candidates (int64), from kgeval's records."""
    records = results.records
    chosen = np.ones(len(records["side"]), bool) if side == "both" else records["side"] == TARGETS.index(side)
    optimistic = records["optimistic"][chosen].astype(np.float64)
    pessimistic = records["pessimistic"][chosen].astype(np.float64)
    ranks = {"optimistic": optimistic, "pessimistic": pessimistic, "realistic": (optimistic + pessimistic) / 2}
    return ranks[rank_type], records["num_candidates"][chosen].astype(np.int64)


def sweep(results: RankBasedMetricResults) -> dict[str, list[str]]:
    """Every generated key: accepted by PyKEEN or not, and for the accepted ones whether kgeval resolves it to the
    value PyKEEN's metric gives on the same ranks."""
    outcome: dict[str, list[str]] = {"pykeen_rejects": [], "equal": [], "different": [], "kgeval_rejects": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key in dict.fromkeys(pykeen_key_strings()):
            meaning = pykeen_meaning(key)
            if meaning is None:
                outcome["pykeen_rejects"].append(key)
                continue
            side, rank_type, metric = meaning
            ranks, num_candidates = ranks_of(results, side, rank_type)
            expected = float(metric(ranks=ranks, num_candidates=num_candidates))
            try:
                value = results.get_metric(key)
            except KeyError:
                outcome["kgeval_rejects"].append(key)
                continue
            same = value == pytest.approx(expected, rel=1e-9, abs=1e-12, nan_ok=True)
            outcome["equal" if same else "different"].append(key)
    return outcome


def test_every_key_pykeen_accepts_resolves_to_pykeens_value(results: RankBasedMetricResults) -> None:
    logging.getLogger("pykeen").setLevel(logging.ERROR)
    outcome = sweep(results)
    accepted = len(outcome["equal"]) + len(outcome["different"]) + len(outcome["kgeval_rejects"])
    assert accepted > 4000 and len(outcome["pykeen_rejects"]) > 1000  # the sweep covers both kinds
    assert outcome["kgeval_rejects"] == []
    assert outcome["different"] == []
    assert len(outcome["equal"]) == accepted


def test_pykeens_examples_of_k(results: RankBasedMetricResults) -> None:
    """The k spellings PyKEEN documents, spelled out against kgeval's own per-k keys."""
    assert results.get_metric("hits_at_k") == results.get_metric("both.realistic.hits_at_10")
    assert results.get_metric("head.best.hits_at_k.3") == results.get_metric("head.optimistic.hits_at_3")
    assert results.get_metric("adjusted_hits_at_k.3") == results.get_metric("adjusted_hits_at_3")
    assert results.get_metric("zahk") == results.get_metric("z_hits_at_10")
    assert results.get_metric(("tail", "pessimistic", "arithmetic_mean_rank")) == results.get_metric("tail.worst.mr")
    assert results.get_metric(None) == results.get_metric(name="mrr")


def test_every_key_pykeens_evaluator_reports_is_exported_with_its_value(results: RankBasedMetricResults) -> None:
    """PyKEEN's own evaluator, fed the same ranks, reports 225 keys; kgeval's flat dict has each with its value
    (PyKEEN's ``adjusted_hits_at_k`` / ``z_hits_at_k`` hold its last k, 10)."""
    evaluator = PyKEENEvaluator()
    for target in TARGETS:
        for rank_type in RANK_TYPES:
            evaluator.ranks[target, rank_type].append(ranks_of(results, target, rank_type)[0])
        evaluator.num_candidates[target].append(ranks_of(results, target, "realistic")[1])
    evaluator.num_entities = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = evaluator.finalize().to_flat_dict()
    ours = results.to_flat_dict()
    assert len(theirs) == 225
    missing = sorted(set(theirs) - set(ours))
    assert missing == []
    different = [key for key, value in theirs.items() if ours[key] != pytest.approx(value, rel=1e-9, abs=1e-12)]
    assert different == []


def test_key_from_string_resolves_every_key_pykeen_accepts_as_pykeen_does() -> None:
    """PyKEEN code calls ``RankBasedMetricResults.key_from_string`` and reads ``key.side`` / ``.rank_type`` /
    ``.metric``: kgeval's gives the same fields, the metric name canonical with its k where PyKEEN's key drops it
    (adjusted and z hits@k: PyKEEN's ``adjusted_hits_at_k`` is kgeval's ``adjusted_hits_at_10``)."""
    checked = 0
    for key in pykeen_key_strings():
        try:
            theirs = pykeen_rank_based.RankBasedMetricResults.key_from_string(key)
        except (ValueError, KeyError, AssertionError):
            continue
        ours = RankBasedMetricResults.key_from_string(key)
        assert (ours.side, ours.rank_type) == (theirs.side, theirs.rank_type), key
        assert ours.metric == ours.name
        assert ours.metric == theirs.metric or (theirs.metric.endswith("_at_k") and
                                                ours.metric.startswith(theirs.metric[:-1])), key  # fmt: skip
        checked += 1
    assert checked > 1000
    default = RankBasedMetricResults.key_from_string(None)
    assert tuple(default) == tuple(pykeen_rank_based.RankBasedMetricResults.key_from_string(None))


def test_results_data_keys_have_pykeens_attributes(results: RankBasedMetricResults) -> None:
    key = next(iter(results.data))
    assert (key.side, key.rank_type, key.metric) == tuple(key)
    assert (
        results.data[("both", "realistic", "hits_at_10")]
        == results.data[RankBasedMetricResults.key_from_string("hits@10")]
    )
