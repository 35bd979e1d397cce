"""KGEvalCallback in a real Lightning Trainer on CPU: a DistMult LightningModule trained a few epochs on the shipped
Nations graph. Each evaluation's ranks equal the brute-force reference over the model's weights at that epoch, with
the right filter set; the logged names drive EarlyStopping and ModelCheckpoint; 2 DDP processes over gloo shard the
tasks and give the single-process ranks."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

pl = pytest.importorskip("lightning.pytorch")
from kgeval.integrations.lightning import KGEvalCallback  # noqa: E402
from tests.support.lightning_models import LitDistMult, loader  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no `val_dataloader`"),
    pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated"),
    pytest.mark.filterwarnings("ignore:The '\\w+_dataloader' does not have many workers"),
]


class Snapshots(pl.Callback):
    """Copies the model's weights at the end of every training epoch (after the fit evaluation of that epoch)."""

    def __init__(self) -> None:
        self.states: dict[int, dict[str, torch.Tensor]] = {}

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self.states[trainer.current_epoch] = copy.deepcopy(pl_module.model.state_dict())


@pytest.fixture(scope="module")
def nations():
    return load_shipped_dataset("nations")


def trainer(callbacks: list, max_epochs: int = 3, **kwargs: Any) -> Any:
    settings = {
        "accelerator": "cpu",
        "devices": 1,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
    }
    settings.update(kwargs)
    return pl.Trainer(max_epochs=max_epochs, callbacks=callbacks, **settings)


def model_at(ds, state: dict[str, torch.Tensor]) -> DistMult:
    model = DistMult(ds.num_entities, ds.num_relations, dim=16, seed=0)
    model.load_state_dict(state)
    return model


def score_table(model: DistMult) -> torch.Tensor:
    """(E, R, E) scores of every triple through the model's own score_t, in float64."""
    e, r = model.num_entities, model.num_relations
    with torch.no_grad():
        hr = torch.cartesian_prod(torch.arange(e), torch.arange(r))
        return model.score_t(hr).double().reshape(e, r, e)


def assert_reference_ranks(results, model: DistMult, triples: torch.Tensor, filter_triples: list) -> None:
    expected = reference_ranks(score_table(model), triples, filter_triples)
    assert_same_ranks(results.records, expected)


def test_fit_without_validation_loop_ranks_each_epoch_as_the_reference(nations):
    """No val dataloader: one evaluation per epoch at the end of the training epoch, of that epoch's weights,
    filtered by the given train + valid triples; the logged values are the results' headline."""
    snapshots = Snapshots()
    callback = KGEvalCallback(nations.valid, additional_filter_triples=[nations.train, nations.valid])
    module = LitDistMult(nations.num_entities, nations.num_relations)
    run = trainer([callback, snapshots], max_epochs=3)
    run.fit(module, train_dataloaders=loader(nations.train))
    assert [(e.stage, e.epoch) for e in callback.history] == [("fit", 0), ("fit", 1), ("fit", 2)]
    for evaluation in callback.history:
        model = model_at(nations, snapshots.states[evaluation.epoch])
        assert_reference_ranks(evaluation.results, model, nations.valid, [nations.train, nations.valid])
        assert evaluation.logged == evaluation.results.headline("val")
    mrrs = [e.results.get_metric("both.realistic.mrr") for e in callback.history]
    assert len(set(mrrs)) == 3  # three different models were evaluated
    last = callback.history[-1]
    assert set(last.logged) <= set(run.callback_metrics)
    assert float(run.callback_metrics["val/mrr"]) == pytest.approx(last.logged["val/mrr"], rel=1e-6)
    assert float(run.callback_metrics["val/hits_at_10"]) == pytest.approx(last.logged["val/hits_at_10"], rel=1e-6)
    assert module.model.training  # the evaluator restored the training mode


def test_filter_triples_are_the_ones_given(nations):
    """Without additional filter triples only the evaluated triples are filtered: the ranks differ from the
    filtered-by-train ones and equal the reference with that filter set."""
    snapshots = Snapshots()
    callback = KGEvalCallback(nations.valid)
    module = LitDistMult(nations.num_entities, nations.num_relations)
    trainer([callback, snapshots], max_epochs=1).fit(module, train_dataloaders=loader(nations.train))
    model = model_at(nations, snapshots.states[0])
    assert_reference_ranks(callback.history[0].results, model, nations.valid, [])
    with_train = RankBasedEvaluator().evaluate(
        model, nations.valid, additional_filter_triples=[nations.train], use_tqdm=False
    )
    assert with_train.get_metric("mrr") > callback.history[0].results.get_metric("mrr")


def test_with_validation_loop_evaluates_after_validation_not_in_sanity_check(nations):
    """With a val dataloader: no evaluation in the sanity check, one per due epoch (every_n_epochs=2), logged
    before on_validation_end so EarlyStopping / ModelCheckpoint checking there see it."""
    seen_at_validation_end = []

    class Probe(pl.Callback):
        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            if not trainer.sanity_checking:
                seen_at_validation_end.append((trainer.current_epoch, "val/mrr" in trainer.callback_metrics))

    callback = KGEvalCallback(nations.valid, additional_filter_triples=[nations.train], every_n_epochs=2)
    module = LitDistMult(nations.num_entities, nations.num_relations)
    run = trainer([Probe(), callback], max_epochs=4, num_sanity_val_steps=2)
    run.fit(module, train_dataloaders=loader(nations.train), val_dataloaders=loader(nations.valid))
    assert [(e.stage, e.epoch) for e in callback.history] == [("fit", 1), ("fit", 3)]
    assert (1, True) in seen_at_validation_end and (3, True) in seen_at_validation_end


def test_early_stopping_and_checkpoint_monitor_the_logged_names(nations, tmp_path):
    """A model that gets worse every epoch: EarlyStopping on val/mrr stops after `patience` evaluations without
    improvement; ModelCheckpoint keeps the first epoch, whose logged MRR is its best score."""
    early = pl.callbacks.EarlyStopping(monitor="val/mrr", mode="max", patience=2)
    best = pl.callbacks.ModelCheckpoint(dirpath=tmp_path, monitor="val/mrr", mode="max", filename="best")
    callback = KGEvalCallback(nations.valid, additional_filter_triples=[nations.train, nations.valid])
    module = LitDistMult(nations.num_entities, nations.num_relations, lr=0.05, sign=-1.0)
    run = trainer([callback, early, best], max_epochs=20, enable_checkpointing=True)
    run.fit(module, train_dataloaders=loader(nations.train))
    mrrs = [e.logged["val/mrr"] for e in callback.history]
    assert len(mrrs) == 3, mrrs  # epoch 0 best, then two evaluations without improvement
    assert mrrs[0] > mrrs[1] > mrrs[2]
    assert early.stopped_epoch == 2
    assert float(best.best_model_score) == pytest.approx(mrrs[0], rel=1e-6)
    assert Path(best.best_model_path).name == "best.ckpt"


def test_validate_and_test_stages(nations):
    """trainer.validate ranks the validation triples; trainer.test the test triples with the test filter set,
    logged under test/ (and returned by trainer.test)."""
    test_filter = [nations.train, nations.valid, nations.test]
    callback = KGEvalCallback(
        nations.valid,
        additional_filter_triples=[nations.train, nations.valid],
        test_triples=nations.test,
        test_filter_triples=test_filter,
    )
    module = LitDistMult(nations.num_entities, nations.num_relations)
    run = trainer([callback], max_epochs=1)
    run.fit(module, train_dataloaders=loader(nations.train))
    run.validate(module, dataloaders=loader(nations.valid))
    (returned,) = run.test(module, dataloaders=loader(nations.test))
    assert [e.stage for e in callback.history] == ["fit", "validate", "test"]
    model = module.model
    assert_reference_ranks(callback.history[1].results, model, nations.valid, [nations.train, nations.valid])
    assert_reference_ranks(callback.history[2].results, model, nations.test, test_filter)
    assert returned["test/mrr"] == pytest.approx(callback.history[2].logged["test/mrr"], rel=1e-6)
    assert "val/mrr" not in returned


def test_metrics_selection_and_keys(nations):
    """metrics= logs headline names and any metric key, each under the prefix; the module itself is the model
    when it has the scoring methods."""

    class ScoringModule(LitDistMult):
        def score_t(self, hr_batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
            return self.model.score_t(hr_batch, tails=tails)

        def score_h(self, rt_batch: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
            return -self.model.score_h(rt_batch, heads=heads)  # its own scores, not the inner model's

        @property
        def num_entities(self) -> int:
            return self.model.num_entities

    key = "both.realistic.adjusted_arithmetic_mean_rank_index"
    callback = KGEvalCallback(nations.valid, prefix="dev", metrics=("mrr", "tail/hits@10", key))
    module = ScoringModule(nations.num_entities, nations.num_relations)
    run = trainer([callback], max_epochs=1)
    run.fit(module, train_dataloaders=loader(nations.train))
    (evaluation,) = callback.history
    assert list(evaluation.logged) == ["dev/mrr", "dev/tail/hits@10", f"dev/{key}"]
    results = evaluation.results
    assert evaluation.logged["dev/mrr"] == results.get_metric("both.realistic.mrr")
    assert evaluation.logged["dev/tail/hits@10"] == results.get_metric("tail.realistic.hits_at_10")
    assert evaluation.logged[f"dev/{key}"] == results.get_metric(key)
    inner = RankBasedEvaluator().evaluate(module.model, nations.valid, use_tqdm=False)
    assert results.get_metric("head.realistic.mrr") != inner.get_metric("head.realistic.mrr")  # module's score_h
    assert results.get_metric("tail.realistic.mrr") == inner.get_metric("tail.realistic.mrr")


def test_model_argument_and_errors(nations):
    triples = nations.valid
    with pytest.raises(ValueError, match="every_n_epochs"):
        KGEvalCallback(triples, every_n_epochs=0)
    with pytest.raises(TypeError, match="RankBasedEvaluator"):
        KGEvalCallback(triples, evaluator=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rank_type"):
        KGEvalCallback(triples, rank_type="average")  # type: ignore[arg-type]

    class Bare(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = DistMult(nations.num_entities, nations.num_relations, dim=8, seed=0)

    class WithForm(Bare):
        """Declares a query/candidate form (and no score_t): the module itself is the model."""

        kgeval_similarity = "dot"

        def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
            return self.net.kgeval_query(batch, target)

        def kgeval_candidates(self, target: str) -> torch.Tensor:
            return self.net.kgeval_candidates(target)

    with_form = WithForm()
    assert KGEvalCallback(triples)._model_of(with_form) is with_form
    bare = Bare()
    assert KGEvalCallback(triples, model="net")._model_of(bare) is bare.net
    assert KGEvalCallback(triples, model=lambda module: module.net)._model_of(bare) is bare.net
    with pytest.raises(TypeError, match=r"no scoring method.*it holds DistMult in \.net.*model='net'"):
        KGEvalCallback(triples)._model_of(bare)
    with pytest.raises(AttributeError, match="'encoder'"):
        KGEvalCallback(triples, model="encoder")._model_of(bare)
    assert KGEvalCallback(triples, prefix="val").state_key != KGEvalCallback(triples, prefix="test").state_key


@pytest.mark.slow
def test_ddp_two_gloo_processes_give_the_single_process_ranks(tmp_path):
    """Trainer(strategy="ddp", devices=2) on CPU (gloo): the callback's evaluation runs sharded over both
    processes, each logs the whole evaluation's numbers, and the ranks equal one process's evaluation of the same
    weights."""
    from tests.support.distributed import rendezvous

    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    script = REPO / "tests" / "support" / "lightning_ddp.py"
    with rendezvous(2) as group:  # the ranks join a store this process hosts (no port picked, then bound)
        group.serve()  # before the processes start: they are not forked from this one
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(group.port), TORCHELASTIC_USE_AGENT_STORE="True")
        done = subprocess.run(
            [sys.executable, str(script), str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    reports = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    ds = load_shipped_dataset("nations")
    for report in reports:
        assert report["world_size"] == 2
        assert report["logged"] == reports[0]["logged"]  # every rank logs the same numbers
        assert report["evaluations"] == 2
    for (total0, share0), (total1, share1) in zip(reports[0]["shares"], reports[1]["shares"], strict=True):
        assert total0 == total1 and share0 + share1 == total0 and 0 < share0 < total0  # the tasks were split
    state = torch.load(tmp_path / "state.pt", weights_only=True)
    model = model_at(ds, state)
    single = RankBasedEvaluator().evaluate(
        model, ds.valid, additional_filter_triples=[ds.train, ds.valid], use_tqdm=False, distributed=False
    )
    records = np.load(tmp_path / "records.npz")
    assert_same_ranks(records, reference_ranks(score_table(model), ds.valid, [ds.train, ds.valid]))
    for name, value in reports[0]["logged"].items():
        metric = name.removeprefix("val/")
        expected = single.headline()[metric]
        assert math.isclose(value, expected, rel_tol=1e-12), (name, value, expected)
