"""dicee models (every ``BaseKGE``) ranked by kgeval through dicee's own methods, against dicee's own evaluation
of the same trained model: its KvsAll evaluator's tail ranks task for task, its head-and-tail evaluator's MRR and
hits, and on tie-heavy scores dicee's rank (torch.sort position) inside kgeval's optimistic..pessimistic bounds."""

from __future__ import annotations

import collections
import types

import numpy as np
import pytest
import torch

dicee_models = pytest.importorskip("dicee.models")

from dicee.evaluation.evaluator import Evaluator as DiceeEvaluator  # noqa: E402
from dicee.evaluation.link_prediction import evaluate_lp  # noqa: E402
from dicee.models.base_model import BaseKGE  # noqa: E402

from kgeval import RankBasedEvaluator  # noqa: E402
from kgeval.datasets import load_shipped_dataset  # noqa: E402
from kgeval.integrations import scoring_view  # noqa: E402
from kgeval.integrations.dicee import DiceeScoring  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(autouse=True)
def numpy_inf(monkeypatch: pytest.MonkeyPatch) -> None:
    """dicee's evaluators write ``-np.Inf``, a name NumPy 2 removed (dicee pins NumPy 1.26): give it back."""
    monkeypatch.setattr(np, "Inf", np.inf, raising=False)


@pytest.fixture(scope="module")
def nations():
    return load_shipped_dataset("nations")


def dicee_model(ds, name: str = "DistMult", dim: int = 16, epochs: int = 15):
    """A dicee model trained with its own KvsAll training_step (BCE over all tails of each (h, r))."""
    args = {"embedding_dim": dim, "num_entities": ds.num_entities, "num_relations": ds.num_relations,
            "learning_rate": 0.05, "optim": "Adam", "scoring_technique": "KvsAll", "model": name}  # fmt: skip
    torch.manual_seed(0)
    model = getattr(dicee_models, name)(args)
    optimizer = model.configure_optimizers()
    queries, inverse = torch.unique(ds.train[:, :2], dim=0, return_inverse=True)
    labels = torch.zeros(len(queries), ds.num_entities)
    labels[inverse, ds.train[:, 2]] = 1.0
    model.train()
    for _ in range(epochs):
        for start in range(0, len(queries), 128):
            loss = model.training_step((queries[start : start + 128], labels[start : start + 128]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()


def vocabularies(ds) -> tuple[dict, dict]:
    """dicee's filter vocabularies over train + valid + test: (h, r) -> tails, (r, t) -> heads."""
    er, re_ = collections.defaultdict(list), collections.defaultdict(list)
    for h, r, t in torch.cat([ds.train, ds.valid, ds.test]).tolist():
        er[(h, r)].append(t)
        re_[(r, t)].append(h)
    return er, re_


def dicee_tail_ranks(model, ds) -> np.ndarray:
    """Ranks of dicee's KvsAll evaluator (``_evaluate_entity_prediction``: forward_k_vs_all, filtered, sorted)."""
    evaluator = DiceeEvaluator.__new__(DiceeEvaluator)  # its vocabularies set directly, as vocab_preparation would
    evaluator.er_vocab, _ = vocabularies(ds)
    evaluator.args = types.SimpleNamespace(batch_size=64, eval_model="train_val_test")
    test = ds.test.numpy()
    ranks, _hits = evaluator._evaluate_entity_prediction(model, test, len(test), [1, 3, 10])
    return np.asarray(ranks)


def evaluate(model, ds):
    """kgeval's filtered evaluation of the test split (train + valid + test filtered, as dicee's evaluators do)."""
    return RankBasedEvaluator().evaluate(model, ds.test, additional_filter_triples=[ds.train, ds.valid], use_tqdm=False)


def kgeval_ranks(results, side: int) -> tuple[np.ndarray, np.ndarray]:
    records = results.records
    chosen = records.side == side
    order = np.argsort(records.task_index[chosen], kind="stable")
    return records.optimistic[chosen][order], records.pessimistic[chosen][order]


@pytest.mark.parametrize("name", ["DistMult", "ComplEx", "TransE", "QMult"])
def test_tail_ranks_equal_dicees_kvsall_evaluator(nations, name: str) -> None:
    model = dicee_model(nations, name)
    assert isinstance(scoring_view(model), DiceeScoring)
    results = evaluate(model, nations)
    optimistic, pessimistic = kgeval_ranks(results, side=1)
    theirs = dicee_tail_ranks(model, nations)
    assert ((optimistic <= theirs) & (theirs <= pessimistic)).all()
    np.testing.assert_array_equal(theirs[optimistic == pessimistic], optimistic[optimistic == pessimistic])
    assert (optimistic == pessimistic).mean() > 0.95  # a trained float model: few ties, so the ranks are compared


def test_head_and_tail_metrics_equal_dicees_evaluate_lp(nations) -> None:
    """dicee's evaluate_lp scores heads and tails through forward_triples; kgeval scores heads the same way."""
    model = dicee_model(nations)
    er, re_ = vocabularies(nations)
    with torch.no_grad():
        theirs = evaluate_lp(model, nations.test.numpy(), nations.num_entities, er, re_)
    results = RankBasedEvaluator(ks=(1, 3, 10)).evaluate(
        model, nations.test, additional_filter_triples=[nations.train, nations.valid], use_tqdm=False
    )
    assert results.get_metric("both.optimistic.mrr") == results.get_metric("both.pessimistic.mrr")  # no ties
    assert float(theirs["MRR"]) == pytest.approx(results.get_metric("both.realistic.mrr"), rel=1e-12)
    for k in (1, 3, 10):
        assert theirs[f"H@{k}"] == pytest.approx(results.get_metric(f"both.realistic.hits@{k}"), rel=1e-12)


def test_tie_heavy_scores_stay_inside_the_bounds(nations) -> None:
    """Embeddings rounded to a coarse grid tie many candidates: dicee's sort position lies between kgeval's bounds,
    and kgeval's realistic rank is their mean."""
    model = dicee_model(nations, epochs=3)
    with torch.no_grad():
        for table in (model.entity_embeddings.weight, model.relation_embeddings.weight):
            table.copy_(torch.round(table * 2) / 2)
    results = evaluate(model, nations)
    optimistic, pessimistic = kgeval_ranks(results, side=1)
    theirs = dicee_tail_ranks(model, nations)
    assert (optimistic < pessimistic).sum() > 20  # the grid made ties
    assert ((optimistic <= theirs) & (theirs <= pessimistic)).all()


def test_a_model_without_an_all_entity_method_is_scored_by_triples(nations) -> None:
    class TriplesOnly(BaseKGE):
        """A dicee model with forward_triples only (BaseKGE's forward_k_vs_all raises)."""

        def score(self, h, r, t):
            return (h * r * t).sum(dim=1)

    args = {"embedding_dim": 8, "num_entities": nations.num_entities, "num_relations": nations.num_relations,
            "model": "TriplesOnly", "scoring_technique": "NegSample"}  # fmt: skip
    torch.manual_seed(1)
    model = TriplesOnly(args).eval()
    view = scoring_view(model)
    assert not hasattr(view, "score_t")
    results = RankBasedEvaluator().evaluate(model, nations.test, use_tqdm=False)
    distmult = dicee_models.DistMult({**args, "model": "DistMult"}).eval()
    distmult.load_state_dict(model.state_dict())
    same = RankBasedEvaluator().evaluate(distmult, nations.test, use_tqdm=False)
    np.testing.assert_array_equal(results.records.optimistic, same.records.optimistic)


def test_byte_pair_encoded_models_are_refused(nations) -> None:
    model = dicee_model(nations, epochs=0)
    model.byte_pair_encoding = True
    with pytest.raises(TypeError, match="byte-pair-encoded"):
        scoring_view(model)


def test_a_dicee_model_in_a_lightning_trainer_with_kgevals_callback(nations) -> None:
    """A dicee model is a LightningModule: trained by a Lightning Trainer with KGEvalCallback, the callback ranks the
    module itself, and its last evaluation is the evaluation of the trained model."""
    pl = pytest.importorskip("lightning.pytorch")
    from kgeval.integrations.lightning import KGEvalCallback

    model = dicee_model(nations, epochs=0).train()
    queries, inverse = torch.unique(nations.train[:, :2], dim=0, return_inverse=True)
    labels = torch.zeros(len(queries), nations.num_entities)
    labels[inverse, nations.train[:, 2]] = 1.0
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(queries, labels), batch_size=128)
    callback = KGEvalCallback(nations.test, additional_filter_triples=[nations.train, nations.valid])
    trainer = pl.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[callback])  # fmt: skip
    trainer.fit(model, train_dataloaders=loader)
    assert [evaluation.epoch for evaluation in callback.history] == [0, 1]
    assert callback.history[-1].results == evaluate(model.eval(), nations)
