"""dicee models (every ``BaseKGE``) ranked by kgeval through dicee's own methods, against dicee's own evaluation
of the same trained model: its KvsAll evaluator's tail ranks task for task, its head-and-tail evaluator's MRR and
hits, and on tie-heavy scores dicee's rank (torch.sort position) inside kgeval's optimistic..pessimistic bounds."""

from __future__ import annotations

import collections
import copy
import pickle
import shutil
import tempfile
import types
from pathlib import Path

import numpy as np
import pytest
import torch

dicee_models = pytest.importorskip("dicee.models")

from dicee.evaluation.evaluator import Evaluator as DiceeEvaluator  # noqa: E402
from dicee.evaluation.link_prediction import evaluate_lp  # noqa: E402
from dicee.models.base_model import BaseKGE  # noqa: E402

from kgeval import RankBasedEvaluator  # noqa: E402
from kgeval.adapters import scoring_view  # noqa: E402
from kgeval.adapters.dicee import DiceeScoring  # noqa: E402
from kgeval.datasets import load_shipped_dataset  # noqa: E402

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


# -- dicee's own training (Execute) and experiment folders ------------------------------------------------------
def offline_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    """dicee's KG builds a GPT-2 tokenizer whatever the model (tiktoken downloads its vocabulary): a stand-in, as
    these models are not byte-pair encoded and never use it."""
    tiktoken = pytest.importorskip("tiktoken")
    stand_in = types.SimpleNamespace(n_vocab=50257, encode=lambda text: [0], decode=lambda tokens: "")
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: stand_in)


def labelled(ds, split: str) -> list[tuple[str, str, str]]:
    """The split's triples as labels."""
    entities = {i: label for label, i in ds.entity_to_id.items()}
    relations = {i: label for label, i in ds.relation_to_id.items()}
    return [(entities[h], relations[r], entities[t]) for h, r, t in getattr(ds, split).tolist()]


def write_dataset(ds, folder) -> None:
    """The shipped dataset as dicee reads it: train.txt / valid.txt / test.txt of labels."""
    folder.mkdir()
    for split in ("train", "valid", "test"):
        (folder / f"{split}.txt").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in labelled(ds, split)))


def train_with_execute(root, ds, scoring: str, model: str = "DistMult"):
    """A dicee experiment folder trained by dicee's own ``Execute`` (its preprocessing, training and evaluation)
    under ``root``, and dicee's report."""
    from dicee.config import Namespace
    from dicee.executer import Execute

    root.mkdir()
    write_dataset(ds, root / "data")
    args = Namespace()
    args.model, args.scoring_technique, args.dataset_dir = model, scoring, str(root / "data")
    args.num_epochs, args.embedding_dim, args.batch_size, args.lr = 10, 16, 256, 0.05
    args.neg_ratio = 4 if scoring == "NegSample" else 0
    args.eval_model, args.path_to_store_single_run = "val_test", str(root / "experiment")
    args.trainer, args.random_seed = "torchCPUTrainer", 1
    report = Execute(args).start()
    return root / "experiment", report


@pytest.fixture(scope="module")
def experiments(nations):
    """{scoring technique: (experiment folder, dicee's report)}: KvsAll (reciprocal relations) and NegSample.

    dicee tells its files apart by ``'test' in path`` over the whole path (dicee 0.3.3, read_from_disk.py): under
    pytest's temporary folders (``.../pytest-of-root/...``) every file would be read as the test split. The
    experiments live in a folder of their own whose path names no split."""
    root = Path(tempfile.mkdtemp(prefix="kgeval_dicee_"))
    if any(split in str(root) for split in ("train", "valid", "test")):
        pytest.skip(f"dicee would misread the splits of a dataset under {root}")
    patch = pytest.MonkeyPatch()
    offline_tokenizer(patch)
    patch.setattr(np, "Inf", np.inf, raising=False)
    try:
        yield {scoring: train_with_execute(root / scoring, nations, scoring) for scoring in ("KvsAll", "NegSample")}
    finally:
        patch.undo()
        shutil.rmtree(root, ignore_errors=True)


def experiment_dataset(experiment, nations):
    """The shipped dataset read with the experiment's ids (as the CLI lines them up)."""
    from kgeval.datasets import load_labelled_triples

    splits = (np.asarray(labelled(nations, split)) for split in ("train", "valid", "test"))
    return load_labelled_triples(*splits, entity_to_id=experiment.entity_to_id,
                                 relation_to_id=experiment.relation_to_id)  # fmt: skip


def test_a_kvsall_model_ranks_heads_through_its_reciprocal_relations_as_dicee_does(experiments, nations) -> None:
    """dicee's own evaluator ranks the tails of the test triples and of their reverses (t, r_inverse, h); kgeval's
    tail and head ranks are the same tasks: task for task inside the tie bounds (equal where there is no tie), and
    the MRR dicee reported after training equals kgeval's realistic MRR."""
    from kgeval.adapters.dicee import load_dicee_experiment

    folder, report = experiments["KvsAll"]
    experiment = load_dicee_experiment(folder)
    assert experiment.reciprocal and experiment.model.num_relations == 2 * nations.num_relations
    ds = experiment_dataset(experiment, nations)
    results = RankBasedEvaluator(ks=(1, 3, 10)).evaluate(
        experiment.model, ds.test, additional_filter_triples=[ds.train, ds.valid], use_tqdm=False
    )
    test = np.load(folder / "test_set.npy")  # dicee's test tasks: the triples, then their reverses
    evaluator = DiceeEvaluator.__new__(DiceeEvaluator)
    evaluator.er_vocab = pickle.loads((folder / "er_vocab.p").read_bytes())
    evaluator.args = types.SimpleNamespace(batch_size=64, eval_model="test")
    theirs, _hits = evaluator._evaluate_entity_prediction(experiment.model, test, len(test), [1, 3, 10])
    records = results.records
    inverse_of = {inv: r for r, inv in experiment.model.kgeval_inverse_relations.items()}
    ours = {}
    for h, r, t, side, lo, hi in zip(records.head, records.relation, records.tail, records.side,
                                     records.optimistic, records.pessimistic, strict=True):  # fmt: skip
        ours[(int(h), int(r), int(t)) if side == 1 else (int(t), -int(r) - 1, int(h))] = (lo, hi)
    assert len(theirs) == len(test) == 2 * len(ds.test)
    differing = []
    for (h, r, t), rank in zip(test.tolist(), theirs, strict=True):
        low, high = ours[(h, r, t) if r not in inverse_of else (h, -inverse_of[r] - 1, t)]
        if not low <= rank <= high:
            differing.append((h, r, t))
    assert len(differing) <= 0.01 * len(test)
    for h, r, t in differing:  # dicee scored its batches of 64 rows, kgeval others: float rounding, near-ties only
        with torch.no_grad():
            scores = experiment.model.forward_k_vs_all(x=torch.tensor([[h, r]]))[0].double()
        gaps = (scores - scores[t]).abs()
        gaps[t] = torch.inf
        assert float(gaps.min()) <= 1e-5 * float(scores.abs().max()), (h, r, t)
    assert results.get_metric("both.realistic.mrr") == pytest.approx(report["Test"]["MRR"], rel=1e-12)
    assert results.get_metric("both.optimistic.mrr") == results.get_metric("both.pessimistic.mrr")  # no ties here


def test_a_negsample_model_ranks_both_sides_by_forward_triples_as_dicee_does(experiments, nations, monkeypatch):
    """dicee evaluates a NegSample model with ``evaluate_lp`` (heads and tails by forward_triples): its rank of
    every task, read as it computes them, equals kgeval's; and the MRR and hits it reported after training."""
    from dicee.evaluation import link_prediction

    from kgeval.adapters.dicee import load_dicee_experiment

    folder, report = experiments["NegSample"]
    experiment = load_dicee_experiment(folder)
    assert not experiment.reciprocal and experiment.model.num_relations == nations.num_relations
    ds = experiment_dataset(experiment, nations)
    results = RankBasedEvaluator(ks=(1, 3, 10)).evaluate(
        experiment.model, ds.test, additional_filter_triples=[ds.train, ds.valid], use_tqdm=False
    )
    computed = []  # evaluate_lp ranks the tail, then the head, of each triple in turn
    rank_of = link_prediction.compute_filtered_rank

    def recorded(*args):
        computed.append(rank_of(*args))
        return computed[-1]

    monkeypatch.setattr(link_prediction, "compute_filtered_rank", recorded)
    vocabulary = {name: pickle.loads((folder / f"{name}.p").read_bytes()) for name in ("er_vocab", "re_vocab")}
    test = np.load(folder / "test_set.npy")
    link_prediction.evaluate_lp(experiment.model, test, experiment.model.num_entities, vocabulary["er_vocab"],
                                vocabulary["re_vocab"])  # fmt: skip
    np.testing.assert_array_equal(np.asarray(test, dtype=np.int64), ds.test.numpy())
    optimistic, pessimistic = (kgeval_ranks(results, side=1)[i] for i in (0, 1))
    np.testing.assert_array_equal(optimistic, pessimistic)  # no ties: a trained float model
    np.testing.assert_array_equal(np.asarray(computed[0::2]), optimistic)
    np.testing.assert_array_equal(np.asarray(computed[1::2]), kgeval_ranks(results, side=0)[0])
    assert results.get_metric("both.optimistic.mrr") == results.get_metric("both.pessimistic.mrr")
    assert results.get_metric("both.realistic.mrr") == pytest.approx(report["Test"]["MRR"], rel=1e-12)
    for k in (1, 3, 10):
        assert results.get_metric(f"both.realistic.hits@{k}") == pytest.approx(report["Test"][f"H@{k}"], rel=1e-12)


def test_a_reciprocal_model_without_its_index_is_refused_and_with_it_ranks_as_its_folder(experiments, nations):
    from kgeval.adapters.dicee import load_dicee_experiment, with_relation_index

    folder, _ = experiments["KvsAll"]
    experiment = load_dicee_experiment(folder)
    bare = copy.deepcopy(experiment.model)
    del bare.kgeval_inverse_relations
    ds = experiment_dataset(experiment, nations)
    refusal = r"trained with reciprocal relations.*load_dicee_experiment.*with_relation_index"
    with pytest.raises(TypeError, match=refusal):
        RankBasedEvaluator().evaluate(bare, ds.test, use_tqdm=False)
    with_relation_index(bare, experiment.relation_to_id)
    kwargs = {"additional_filter_triples": [ds.train, ds.valid], "use_tqdm": False}
    assert RankBasedEvaluator().evaluate(bare, ds.test, **kwargs) == RankBasedEvaluator().evaluate(
        experiment.model, ds.test, **kwargs
    )
    with pytest.raises(ValueError, match="the index of another model"):
        with_relation_index(bare, {label: i for label, i in experiment.relation_to_id.items() if i < 10})
    inverse_id = next(iter(experiment.model.kgeval_inverse_relations.values()))
    with pytest.raises(ValueError, match="it is an inverse relation itself"):
        RankBasedEvaluator().evaluate(experiment.model, torch.tensor([[0, inverse_id, 1]]), use_tqdm=False)


@pytest.mark.slow
def test_the_cli_evaluates_an_experiment_folder_with_its_ids(experiments, nations, tmp_path) -> None:
    """``kgeval evaluate --checkpoint FOLDER`` reads dicee's folder (plain tensors: no --trust-checkpoint), lines
    the dataset's labels up with its index and reports dicee's own test MRR; without --dataset it reads the dataset
    the folder's configuration names."""
    import json
    import subprocess
    import sys

    folder, report = experiments["KvsAll"]
    dataset_dir = json.loads((folder / "configuration.json").read_text())["dataset_dir"]
    for extra in (["--dataset", dataset_dir], []):
        command = [sys.executable, "-m", "kgeval", "evaluate", "--checkpoint", str(folder), "--json", *extra]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        assert "pickle" not in done.stderr.lower()
        metrics = json.loads(done.stdout)["metrics"]
        assert metrics["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(report["Test"]["MRR"], rel=1e-12)
    shipped = subprocess.run([sys.executable, "-m", "kgeval", "evaluate", "--checkpoint", str(folder),
                              "--dataset", "umls"], capture_output=True, text=True, check=False)  # fmt: skip
    assert shipped.returncode == 2
    assert "umls" in shipped.stderr and "kgeval evaluate: error:" in shipped.stderr
