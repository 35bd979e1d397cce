"""Inductive link prediction through PyKEEN's modes: kgeval's drop-in ``RankBasedEvaluator(mode=...)`` ranks
``InductiveNodePiece`` and ``InductiveNodePieceGNN`` over ILPC 2022's inference graph (../shared/data, skipped
without it) task for task as PyKEEN's own evaluator does, and as a numpy reference over the model's own
``predict(..., mode=...)`` rows and Python sets of the known triples; the loader's ids are PyKEEN's; the
organisers' training workflow runs with kgeval's evaluators swapped in.
"""

from __future__ import annotations

import itertools
import json
import logging
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("pykeen")

from pykeen.datasets.inductive.base import DisjointInductivePathDataset
from pykeen.evaluation import RankBasedEvaluator as PyKEENEvaluator
from pykeen.models import InductiveNodePiece, InductiveNodePieceGNN

from kgeval import RankBasedEvaluator as KGEvalEvaluator
from kgeval.adapters import scoring_view
from kgeval.adapters.pykeen import PyKEENInductiveScoring, PyKEENScoring
from kgeval.datasets import load_inductive_dataset, shared_data_dir
from kgeval.integrations.pykeen import RankBasedEvaluator, SampledRankBasedEvaluator
from tests.helpers.ranks import ranks_by_side

pytestmark = [pytest.mark.pykeen, pytest.mark.slow]  # PyKEEN models over ILPC graphs: ~2 minutes in all
logging.getLogger("pykeen").setLevel(logging.ERROR)

TARGETS = ("head", "tail")
MODELS = {"InductiveNodePiece": InductiveNodePiece, "InductiveNodePieceGNN": InductiveNodePieceGNN}


def ilpc(size: str) -> Path:
    folder = shared_data_dir()
    if folder is None or not (folder / f"ILPC2022-{size}").is_dir():
        pytest.skip(f"ILPC2022-{size} is not in the shared data folder")
    return folder / f"ILPC2022-{size}"


@pytest.fixture(scope="module", params=["small", "large"])
def data(request: pytest.FixtureRequest):
    """(PyKEEN's dataset of the ILPC folder, kgeval's) -- PyKEEN's read as the organisers read it."""
    folder = ilpc(request.param)
    files = [str(folder / f"{name}.txt.gz") for name in ("train", "inference", "inference_test",
                                                         "inference_validation")]  # fmt: skip
    pykeen_data = DisjointInductivePathDataset(*files, eager=True, create_inverse_triples=True)
    return pykeen_data, load_inductive_dataset(folder)


def build(pykeen_data, name: str, **kwargs):
    return MODELS[name](triples_factory=pykeen_data.transductive_training,
                        inference_factory=pykeen_data.inductive_inference, embedding_dim=8, num_tokens=5,
                        random_seed=0, **kwargs)  # fmt: skip


def test_the_loader_numbers_as_pykeen_does(data) -> None:
    pykeen_data, ours = data
    assert ours.training_entity_to_id == pykeen_data.transductive_training.entity_to_id
    assert ours.inference_entity_to_id == pykeen_data.inductive_inference.entity_to_id
    assert ours.relation_to_id == pykeen_data.transductive_training.relation_to_id
    for split, theirs in (
        ("train", pykeen_data.transductive_training),
        ("inference", pykeen_data.inductive_inference),
        ("valid", pykeen_data.inductive_validation),
        ("test", pykeen_data.inductive_testing),
    ):
        rows = getattr(ours, split)
        assert len(rows) == len(theirs.mapped_triples)  # no file repeats a triple, none is dropped
        assert set(map(tuple, rows.tolist())) == set(map(tuple, theirs.mapped_triples.tolist())), split
    assert "entities in both graphs: 0 (a disjoint split)" in ours.summary()


def pykeen_ranks(model, triples, known, mode: str) -> tuple[dict[str, dict[str, np.ndarray]], object]:
    """(side -> optimistic / pessimistic / num_candidates per triple, the metrics), from PyKEEN's own evaluator."""
    evaluator = PyKEENEvaluator(mode=mode, clear_on_finalize=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = evaluator.evaluate(model, triples, additional_filter_triples=known, batch_size=256, use_tqdm=False)
    ranks = {target: {"optimistic": np.concatenate(evaluator.ranks[target, "optimistic"]).astype(np.int64),
                      "pessimistic": np.concatenate(evaluator.ranks[target, "pessimistic"]).astype(np.int64),
                      "num_candidates": np.concatenate(evaluator.num_candidates[target]).astype(np.int64)}
             for target in TARGETS}  # fmt: skip
    return ranks, results


def sorted_rows(triples: torch.Tensor) -> torch.Tensor:
    """PyKEEN's factories hold their triples unique and sorted: the same rows in that order."""
    return torch.unique(triples, dim=0)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("split", ["valid", "test"])
def test_the_drop_in_ranks_as_pykeens_evaluator(data, name: str, split: str) -> None:
    """Task for task, ties included, and every metric to float32 rounding (PyKEEN aggregates in float32)."""
    pykeen_data, ours = data
    model = build(pykeen_data, name)
    kwargs = ours.evaluation_kwargs(split)
    triples, known, mode = sorted_rows(kwargs["mapped_triples"]), kwargs["additional_filter_triples"], kwargs["mode"]
    triples = triples[:: max(1, len(triples) // 1500)]  # a spread subset: PyKEEN takes ~25 s for ILPC2022-large
    expected, theirs = pykeen_ranks(model, triples, known, mode)
    results = RankBasedEvaluator(mode=mode).evaluate(model, triples, additional_filter_triples=known, use_tqdm=False)
    got = ranks_by_side(results.records)
    for target in TARGETS:
        for field in ("optimistic", "pessimistic", "num_candidates"):
            np.testing.assert_array_equal(got[target][field], expected[target][field], err_msg=f"{target} {field}")
    for key in (
        "both.realistic.inverse_harmonic_mean_rank",
        "head.optimistic.hits_at_10",
        "tail.pessimistic.hits_at_1",
        "both.realistic.arithmetic_mean_rank",
        "both.realistic.adjusted_arithmetic_mean_rank_index",
    ):
        assert results.get_metric(key) == pytest.approx(theirs.get_metric(key), rel=2e-6, abs=1e-6), key


def reference_ranks(model, triples: torch.Tensor, known: list[torch.Tensor], mode: str) -> dict:
    """side -> optimistic / pessimistic / num_candidates per triple, from the model's own ``predict(mode=...)``
    rows (no sigmoid) and Python sets of the known triples (the evaluated ones among them)."""
    facts = {tuple(row) for table in (triples, *known) for row in table.tolist()}
    by_query: dict[tuple, set[int]] = {}
    for h, r, t in facts:
        by_query.setdefault(("tail", h, r), set()).add(t)
        by_query.setdefault(("head", r, t), set()).add(h)
    out = {}
    with torch.inference_mode():
        for target, answer in (("head", 0), ("tail", 2)):
            rows = model.predict(triples, target=target, mode=mode).double().numpy()
            optimistic, pessimistic, counts = [], [], []
            for row, (h, r, t) in zip(rows, triples.tolist(), strict=True):
                truth = (h, r, t)[answer]
                others = by_query[("tail", h, r) if target == "tail" else ("head", r, t)] - {truth}
                keep = np.ones(len(row), dtype=bool)
                keep[list(others)] = False
                candidates = row[keep]
                optimistic.append(1 + int((candidates > row[truth]).sum()))
                pessimistic.append(int((candidates >= row[truth]).sum()))
                counts.append(int(keep.sum()))
            out[target] = {"optimistic": np.array(optimistic), "pessimistic": np.array(pessimistic),
                           "num_candidates": np.array(counts)}  # fmt: skip
    return out


@pytest.mark.parametrize(("batch_size", "slice_size"), [(None, None), (7, 1000), (300, 6653)])
def test_ranks_equal_a_reference_over_the_models_own_rows(data, batch_size, slice_size) -> None:
    """kgeval's own evaluator, in batches and candidate slices, against explicit loops over PyKEEN's rows."""
    pykeen_data, ours = data
    if ours.num_inference_entities > 10_000:
        pytest.skip("the loop reference runs on ILPC2022-small")
    model = build(pykeen_data, "InductiveNodePieceGNN", aggregation="mlp")
    kwargs = ours.evaluation_kwargs("test")
    triples = kwargs["mapped_triples"][:400]
    expected = reference_ranks(model, triples, kwargs["additional_filter_triples"], "testing")
    results = KGEvalEvaluator(batch_size=batch_size, slice_size=slice_size).evaluate(
        model, triples, additional_filter_triples=kwargs["additional_filter_triples"], mode="testing",
        use_tqdm=False)  # fmt: skip
    got = ranks_by_side(results.records)
    for target in TARGETS:
        for field in ("optimistic", "pessimistic", "num_candidates"):
            np.testing.assert_array_equal(got[target][field], expected[target][field], err_msg=f"{target} {field}")


@pytest.mark.parametrize("elements", [8 * 50, 8 * 6_000, 8 * 6_652, 2**21])
@pytest.mark.parametrize("name", list(MODELS))
def test_blocks_of_rows_and_candidates_give_pykeens_own_rows(data, monkeypatch, name: str, elements: int) -> None:
    """The view computes the interaction in blocks (a few rows x some candidates, of ``elements`` intermediates):
    every score equals, bit for bit, the row PyKEEN's own ``predict_t`` / ``predict_h`` give for the mode. 8 x 6,652
    would leave a last block of one candidate, which PyKEEN multiplies in another order (its shape-based reordering
    ties): it is folded into the block before; 37 rows in blocks of 2 would leave one row likewise."""
    import kgeval.adapters.pykeen as adapter

    pykeen_data, ours = data
    if ours.num_inference_entities > 10_000:
        pytest.skip("the blocks are checked on ILPC2022-small (the budgets force row and candidate blocks there)")
    monkeypatch.setattr(adapter, "eager_chunk_elements", lambda cache: elements)
    model = build(pykeen_data, name).eval()
    test = ours.evaluation_kwargs("test")["mapped_triples"][:37]
    view = scoring_view(model, "testing")
    with torch.inference_mode():
        tails = view.score_t(test[:, [0, 1]])
        heads = view.score_h(test[:, [1, 2]])
        assert torch.equal(tails, model.predict_t(test[:, [0, 1]], mode="testing"))
        assert torch.equal(heads, model.predict_h(test[:, [1, 2]], mode="testing"))
        some = torch.tensor([5, 0, ours.num_inference_entities - 1, 17])
        assert torch.equal(view.score_t(test[:, [0, 1]], tails=some), tails[:, some])


def test_spans_never_leave_a_block_of_one() -> None:
    from kgeval.adapters.pykeen import _spans

    assert _spans(1, 2) == [(0, 1)]
    assert _spans(5, 2) == [(0, 2), (2, 5)]
    assert _spans(6, 2) == [(0, 2), (2, 4), (4, 6)]
    assert _spans(6653, 6652) == [(0, 6653)]
    assert _spans(7, 10) == [(0, 7)]
    for total in range(1, 40):
        for size in range(2, 9):
            spans = _spans(total, size)
            assert spans[0][0] == 0 and spans[-1][1] == total
            assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
            assert total == 1 or all(stop - start >= 2 for start, stop in spans)


def test_an_inductive_model_is_scored_per_mode_and_checked(data) -> None:
    pykeen_data, ours = data
    model = build(pykeen_data, "InductiveNodePiece")
    view = scoring_view(model, "testing")
    assert isinstance(view, PyKEENInductiveScoring) and view.num_entities == ours.num_inference_entities
    assert scoring_view(model, "training").num_entities == ours.num_training_entities
    with pytest.raises(TypeError, match="an inductive PyKEEN model, which scores the entities of one graph per mode"):
        scoring_view(model)
    with pytest.raises(ValueError, match="mode must be None \\(transductive\\) or one of"):
        scoring_view(model, "test")
    test = ours.evaluation_kwargs("test")
    beyond = test["mapped_triples"][:5].clone()
    beyond[2, 2] = ours.num_inference_entities  # an id of no entity of the inference graph
    with pytest.raises(ValueError, match="row 2"):
        KGEvalEvaluator().evaluate(model, beyond, mode="testing", use_tqdm=False)
    training_ids = ours.train[:5]  # training-graph ids beyond the inference graph's entities
    if int(training_ids[:, [0, 2]].max()) >= ours.num_inference_entities:
        with pytest.raises(ValueError, match="mapped_triples"):
            KGEvalEvaluator().evaluate(model, training_ids, mode="testing", use_tqdm=False)


def test_the_organisers_workflow_with_kgevals_evaluators(data) -> None:
    """ILPC 2022's baseline (pykeen/ilpc2022 main.py) on PyKEEN 1.11: an evaluation callback at mode=validation
    during training, then the test at mode=testing filtered by the inference graph and the validation triples."""
    from pykeen.losses import NSSALoss
    from pykeen.training import SLCWATrainingLoop

    pykeen_data, ours = data
    if ours.num_inference_entities > 10_000:
        pytest.skip("trained on ILPC2022-small")
    model = InductiveNodePiece(triples_factory=pykeen_data.transductive_training,
                               inference_factory=pykeen_data.inductive_inference, num_tokens=5, embedding_dim=8,
                               aggregation="mlp", loss=NSSALoss(margin=15.0), random_seed=42)  # fmt: skip
    valid_evaluator = RankBasedEvaluator(mode="validation", metrics=["hits_at_k"] * 2,
                                         metrics_kwargs=[{"k": 1}, {"k": 100}], add_defaults=True)  # fmt: skip
    test_evaluator = RankBasedEvaluator(mode="testing", metrics=["hits_at_k"] * 2,
                                        metrics_kwargs=[{"k": 1}, {"k": 100}], add_defaults=True)  # fmt: skip
    loop = SLCWATrainingLoop(triples_factory=pykeen_data.transductive_training, model=model,
                             optimizer=torch.optim.Adam(model.parameters(), lr=1e-4),
                             negative_sampler_kwargs={"num_negs_per_pos": 4}, mode="training")  # fmt: skip
    seen = []

    class Record(RankBasedEvaluator):  # the callback's evaluations, as they happen
        def evaluate(self, *args, **kwargs):
            results = super().evaluate(*args, **kwargs)
            seen.append(results.get_metric("both.realistic.hits_at_100"))
            return results

    valid_evaluator.__class__ = Record
    loop.train(triples_factory=pykeen_data.transductive_training, num_epochs=1, batch_size=4096,
               callbacks="evaluation", use_tqdm=False,
               callbacks_kwargs={"evaluator": valid_evaluator, "prefix": "validation", "frequency": 1,
                                 "evaluation_triples": pykeen_data.inductive_validation.mapped_triples,
                                 "additional_filter_triples": pykeen_data.inductive_inference.mapped_triples,
                                 "batch_size": 256})  # fmt: skip
    assert len(seen) == 1 and 0 < seen[0] < 1
    known = [pykeen_data.inductive_inference.mapped_triples, pykeen_data.inductive_validation.mapped_triples]
    ours_test = test_evaluator.evaluate(model=model, mapped_triples=pykeen_data.inductive_testing.mapped_triples,
                                        additional_filter_triples=known, batch_size=256)  # fmt: skip
    theirs = PyKEENEvaluator(mode="testing", metrics=["hits_at_k"] * 2, metrics_kwargs=[{"k": 1}, {"k": 100}],
                             add_defaults=True).evaluate(model, pykeen_data.inductive_testing.mapped_triples,
                                                         additional_filter_triples=known, batch_size=256,
                                                         use_tqdm=False)  # fmt: skip
    for key in ("inverse_harmonic_mean_rank", "hits_at_1", "hits_at_100", "adjusted_arithmetic_mean_rank_index"):
        assert ours_test.get_metric(key) == pytest.approx(theirs.get_metric(key), rel=2e-6, abs=1e-6), key


def test_the_sampled_evaluator_draws_from_the_modes_graph(data) -> None:
    pykeen_data, ours = data
    model = build(pykeen_data, "InductiveNodePiece")
    kwargs = ours.evaluation_kwargs("valid")
    evaluator = SampledRankBasedEvaluator(mode="validation", num_negatives=20)
    results = evaluator.evaluate(model, kwargs["mapped_triples"][:200],
                                 additional_filter_triples=kwargs["additional_filter_triples"])  # fmt: skip
    assert results.records is not None and int(results.records.num_candidates.max()) <= 21
    assert 0 < results.get_metric("both.realistic.inverse_harmonic_mean_rank") <= 1


def test_a_transductive_model_has_no_mode() -> None:
    from pykeen.datasets import Nations
    from pykeen.models import DistMult

    model = DistMult(triples_factory=Nations().training, embedding_dim=4, random_seed=0)
    assert type(scoring_view(model)) is not PyKEENInductiveScoring
    assert isinstance(scoring_view(model), PyKEENScoring)
    with pytest.raises(ValueError, match="transductive PyKEEN model: it has no inductive mode"):
        scoring_view(model, "testing")


def test_kgeval_evaluate_takes_a_saved_inductive_model_and_its_folder(data, tmp_path, capsys) -> None:
    """``kgeval evaluate --checkpoint model.pkl --trust-checkpoint --dataset ILPC-folder``: mode and filter from the
    folder, the numbers of the API."""
    from kgeval.cli import main

    pykeen_data, ours = data
    if ours.num_inference_entities > 10_000:
        pytest.skip("run on ILPC2022-small")
    model = build(pykeen_data, "InductiveNodePieceGNN")
    torch.save(model, tmp_path / "model.pkl")
    folder = str(ilpc("small"))
    assert main(["evaluate", "--checkpoint", str(tmp_path / "model.pkl"), "--trust-checkpoint", "--dataset", folder,
                 "--json", "--save-ranks", str(tmp_path / "ranks.csv")]) == 0  # fmt: skip
    document = json.loads(capsys.readouterr().out)
    assert document["source"]["mode"] == "testing"
    expected = KGEvalEvaluator().evaluate(model, **ours.evaluation_kwargs("test"), use_tqdm=False)
    assert document["metrics"]["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(expected["mrr"],
                                                                                             rel=1e-12)  # fmt: skip
    import pandas as pd

    table, theirs = pd.read_csv(document["ranks_file"]), expected.ranks_df()
    for column in ("head", "tail", "optimistic", "pessimistic", "num_candidates"):
        np.testing.assert_array_equal(table[column].to_numpy(), theirs[column].to_numpy(), err_msg=column)
    labels = {i: label for label, i in ours.inference_entity_to_id.items()}  # the inference graph's labels
    assert table["tail_label"].tolist() == [labels[i] for i in table["tail"]]
