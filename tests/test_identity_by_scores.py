"""A model is what it scores: results reused across calls (a resumed ``progress_path``, ``evaluate_many``'s
``results_dir``) belong to a model only when it scores kgeval's probe as the saved one did. Before, a model whose
scoring state is not in a ``state_dict`` -- a plain object holding a module, a module whose tables are plain tensor
attributes, a plain scorer, a factory reading a registry -- was "the same" after retraining: its old results were
resumed (``evaluate_many``) or mixed with the retrained model's ranks (``progress_path``), without a word.

Each case retrains the model in place (its tables moved) between two calls, and expects a ResumeWarning and the
retrained model's own results, computed by a fresh evaluation; the probe itself is checked against float rounding
(scored in another batch composition, it agrees) and against a one-entity change (it sees it).
"""

from __future__ import annotations

import warnings
from typing import Any

import pandas as pd
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval._fingerprints import ScoreSignature
from kgeval.datasets import load_shipped_dataset
from kgeval.exceptions import ResumeWarning
from kgeval.many import evaluate_many
from kgeval.models import DistMult
from tests.support.distributed import Crash, CrashingScores

DIM = 16


@pytest.fixture(scope="module")
def umls():
    return load_shipped_dataset("umls")


class PlainHolder:
    """Not a module: holds a DistMult in an attribute and scores through it (no ``state_dict``)."""

    def __init__(self, net: DistMult) -> None:
        self.net = net
        self.num_entities, self.num_relations = net.num_entities, net.num_relations

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return self.net.score_t(hr_batch)

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return self.net.score_h(rt_batch)

    def tables(self) -> list[torch.Tensor]:
        return [self.net.entity_embeddings.weight, self.net.relation_embeddings.weight]


class TensorAttributes(torch.nn.Module):
    """A module whose tables are plain tensor attributes (no parameter, no buffer: an empty ``state_dict``)."""

    def __init__(self, num_entities: int, num_relations: int, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.entities = torch.randn(num_entities, DIM, generator=generator)
        self.relations = torch.randn(num_relations, DIM, generator=generator)
        self.num_entities, self.num_relations = num_entities, num_relations

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return (self.entities[hr_batch[:, 0]] * self.relations[hr_batch[:, 1]]) @ self.entities.T

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return (self.relations[rt_batch[:, 0]] * self.entities[rt_batch[:, 1]]) @ self.entities.T

    def tables(self) -> list[torch.Tensor]:
        return [self.entities, self.relations]


class PlainTables:
    """Neither a module nor a holder of one: its tables are tensors in plain attributes."""

    def __init__(self, num_entities: int, num_relations: int, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.entities = torch.randn(num_entities, DIM, generator=generator)
        self.relations = torch.randn(num_relations, DIM, generator=generator)
        self.num_entities, self.num_relations = num_entities, num_relations

    score_t = TensorAttributes.score_t
    score_h = TensorAttributes.score_h
    tables = TensorAttributes.tables


class Crashing(CrashingScores):
    """The resume tests' crashing wrapper, here without a ``state_dict`` of its own: the models it wraps keep their
    scoring state elsewhere, so what identifies them is what they score."""

    state_dict = None


def retrain(model: Any) -> None:
    """Move every table of ``model`` in place, as training steps would (the objects stay the same)."""
    generator = torch.Generator().manual_seed(123)
    with torch.no_grad():
        for table in model.tables():
            table.add_(0.5 * torch.randn(table.shape, generator=generator))


def make(form: str, umls: Any) -> Any:
    if form == "plain holder":
        return PlainHolder(DistMult(umls.num_entities, umls.num_relations, dim=DIM, seed=0))
    if form == "tensor attributes":
        return TensorAttributes(umls.num_entities, umls.num_relations)
    return PlainTables(umls.num_entities, umls.num_relations)


FORMS = ["plain holder", "tensor attributes", "plain tables"]


@pytest.mark.parametrize("form", FORMS)
def test_a_retrained_model_is_not_resumed_from_its_progress_file(umls, tmp_path, form: str) -> None:
    """Interrupted after 300 query rows, retrained, rerun with the same file: before, the saved counts of the old
    model were resumed and mixed with the retrained model's (UMLS, 1,322 tasks: hundreds of ranks differed from the
    retrained model's own, no warning); now the file is another model's, started over with a ResumeWarning."""
    model = make(form, umls)
    kwargs = {"additional_filter_triples": [umls.train, umls.valid], "use_tqdm": False, "batch_size": 64}
    path = tmp_path / "progress.pt"
    with pytest.raises(Crash):
        RankBasedEvaluator().evaluate(Crashing(model, 300), umls.test, progress_path=path, save_every=0, **kwargs)
    assert path.exists()
    retrain(model)
    expected = RankBasedEvaluator().evaluate(model, umls.test, **kwargs)
    with pytest.warns(ResumeWarning, match=r"holds the ranks of another model \(it scores otherwise"):
        got = RankBasedEvaluator().evaluate(Crashing(model), umls.test, progress_path=path, save_every=0, **kwargs)
    assert got == expected
    assert got.records is not None and expected.records is not None and got.records.equals(expected.records)


@pytest.mark.parametrize("form", FORMS)
def test_the_same_model_resumes_its_progress_file_without_a_word(umls, tmp_path, form: str) -> None:
    """The probe does not turn an unchanged model into another one: the file is resumed, silently, and the results
    are those of an uninterrupted run."""
    model = make(form, umls)
    kwargs = {"additional_filter_triples": [umls.train, umls.valid], "use_tqdm": False, "batch_size": 64}
    path = tmp_path / "progress.pt"
    with pytest.raises(Crash):
        RankBasedEvaluator().evaluate(Crashing(model, 300), umls.test, progress_path=path, save_every=0, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResumeWarning)
        second = Crashing(model)
        got = RankBasedEvaluator().evaluate(second, umls.test, progress_path=path, save_every=0, **kwargs)
    assert got == RankBasedEvaluator().evaluate(model, umls.test, **kwargs)
    assert second.rows < 600  # the resumed call scored what was left (and the probe), not everything again


MANY_FORMS = ["plain holder", "tensor attributes", "factory", "lambda over a plain scorer"]
#: the factory's registry: a function reading it has the same code and closure after its model was retrained
REGISTRY: dict[str, Any] = {}


def model_for(form: str, umls: Any) -> tuple[Any, Any]:
    """(what evaluate_many is given, the model it scores)."""
    if form == "factory":
        REGISTRY["model"] = make("plain holder", umls)

        def from_registry(dataset: Any) -> Any:
            return REGISTRY["model"]

        return from_registry, REGISTRY["model"]
    if form == "lambda over a plain scorer":
        plain = make("plain tables", umls)
        return (lambda dataset: plain), plain
    model = make(form, umls)
    return model, model


@pytest.mark.parametrize("form", MANY_FORMS)
def test_evaluate_many_evaluates_a_retrained_model_again(umls, tmp_path, form: str) -> None:
    """A results_dir written before the model was retrained: before, the old MRR was reported for the retrained
    model without a word; now the graph is evaluated again with a ResumeWarning, and the table is the retrained
    model's. Unchanged, the model is resumed without a word."""
    given, model = model_for(form, umls)
    results_dir = tmp_path / "results"
    first = evaluate_many(given, [umls], use_tqdm=False, results_dir=results_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResumeWarning)
        assert evaluate_many(given, [umls], use_tqdm=False, results_dir=results_dir).resumed == ("umls",)
    retrain(model)
    fresh = evaluate_many(given, [umls], use_tqdm=False)
    assert fresh.table["mrr_realistic"][0] != first.table["mrr_realistic"][0]  # the retraining changed the numbers
    with pytest.warns(ResumeWarning, match=r"evaluated by a model that scores otherwise"):
        again = evaluate_many(given, [umls], use_tqdm=False, results_dir=results_dir)
    assert again.resumed == ()
    pd.testing.assert_frame_equal(again.table.drop(columns="seconds"), fresh.table.drop(columns="seconds"))


def test_the_signature_sees_one_entity_moved_and_not_float_rounding(umls) -> None:
    """Two signatures of one model agree, also when the probe's rows come from another computation of the same
    scores (float rounding of another summation order); one entity's vector moved by 1 % is seen."""
    model = make("tensor attributes", umls)
    evaluator = RankBasedEvaluator()
    before = evaluator.score_signature(model, umls.test)
    assert before is not None and before.difference(evaluator.score_signature(model, umls.test)) is None
    scores = model.score_t(umls.test[:2, :2])
    reordered = (
        model.entities[umls.test[:2, 0]] * model.relations[umls.test[:2, 1]]
    ).double() @ model.entities.T.double()
    one = ScoreSignature.of_scores([("tail", scores)])
    assert one.difference(ScoreSignature.of_scores([("tail", reordered.float())])) is None
    with torch.no_grad():
        model.entities[7] *= 1.01
    assert before.difference(evaluator.score_signature(model, umls.test)) is not None
    assert one.difference(ScoreSignature.from_plain(one.to_plain())) is None  # through JSON values


def test_half_precision_scores_are_compared_at_their_own_rounding() -> None:
    """bfloat16 scores one ulp apart on a few candidates (another kernel's rounding) are the same model's; a
    retrained table's are not. Before, the float32 tolerance called the first another model."""
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 135, generator=generator).to(torch.bfloat16)
    rounded = scores.clone()
    rounded[:, :5] = torch.nextafter(rounded[:, :5].float(), torch.full((2, 5), 10.0)).to(torch.bfloat16)
    rounded[:, :5] = torch.where(rounded[:, :5] == scores[:, :5], scores[:, :5] * 1.01, rounded[:, :5])  # one ulp
    assert not torch.equal(rounded, scores)
    same = ScoreSignature.of_scores([("tail", scores)])
    assert same.difference(ScoreSignature.of_scores([("tail", rounded)])) is None
    retrained = (scores.float() + 0.5 * torch.randn(2, 135, generator=generator)).to(torch.bfloat16)
    assert same.difference(ScoreSignature.of_scores([("tail", retrained)])) is not None
    assert same.difference(ScoreSignature.of_scores([("tail", scores.float())])) is not None  # another dtype
