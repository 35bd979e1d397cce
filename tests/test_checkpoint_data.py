"""Checkpoints that describe their data: ``kgeval demo --save-checkpoint m.pt`` then ``kgeval evaluate --checkpoint
m.pt`` -- no --dataset -- finds the dataset the checkpoint names, lines its ids up and checks it is the same data
(its fingerprint); a PyKEEN results folder is matched by its label maps; each refusal says what is missing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator, TemporalRankBasedEvaluator
from kgeval.cli import main
from kgeval.datasets import (
    dataset_fingerprint,
    labels_by_id,
    load_shipped_dataset,
    load_temporal_tsv,
    load_tsv_dataset,
)
from kgeval.models.checkpoint import load_checkpoint, load_model_file, save_checkpoint


def metrics(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)["metrics"]


def test_a_demo_checkpoint_is_evaluated_on_its_own_dataset_without_being_told(tmp_path, capsys) -> None:
    """The issue's case: a nations checkpoint was evaluated on UMLS (the default) and failed on its labels."""
    path = tmp_path / "m.pt"
    assert main(["demo", "--dataset", "nations", "--epochs", "1", "--no-progress", "--save-checkpoint", str(path)]) == 0
    capsys.readouterr()
    loaded = load_model_file(path)
    data = load_shipped_dataset("nations")
    assert (loaded.dataset, loaded.fingerprint) == ("nations", dataset_fingerprint(data))
    assert loaded.entity_to_id == data.entity_to_id and loaded.relation_to_id == data.relation_to_id
    assert main(["evaluate", "--checkpoint", str(path), "--json"]) == 0
    expected = RankBasedEvaluator().evaluate(load_checkpoint(path), **data.evaluation_kwargs("test"), use_tqdm=False)
    assert metrics(capsys)["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(expected["mrr"], rel=1e-12)


def copy_nations(folder: Path) -> Path:
    """Nations written out as a folder of TSV files (a dataset found by its folder, not its name)."""
    data = load_shipped_dataset("nations")
    labels = (labels_by_id(data.entity_to_id), labels_by_id(data.relation_to_id))
    folder.mkdir()
    for split in ("train", "valid", "test"):
        rows = getattr(data, split).tolist()
        (folder / f"{split}.txt").write_text("".join(f"{labels[0][h]}\t{labels[1][r]}\t{labels[0][t]}\n"
                                                     for h, r, t in rows))  # fmt: skip
    return folder


def test_a_dataset_read_from_a_folder_is_found_by_that_folder_and_checked(tmp_path, capsys) -> None:
    folder = copy_nations(tmp_path / "my-nations")
    path = tmp_path / "m.pt"
    assert main(["demo", "--dataset", str(folder), "--epochs", "1", "--no-progress", "--save-checkpoint",
                 str(path)]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(path), "--json"]) == 0
    assert "both.realistic.inverse_harmonic_mean_rank" in metrics(capsys)
    lines = (folder / "test.txt").read_text().splitlines()
    (folder / "test.txt").write_text("\n".join(lines[:-1]) + "\n")  # the data changed since the training
    assert main(["evaluate", "--checkpoint", str(path)]) == 2
    err = capsys.readouterr().err
    assert "is not the data the checkpoint's model was trained on (fingerprint" in err
    assert "no --dataset was given, so the dataset was" in err
    with pytest.warns(UserWarning, match="is not the data the checkpoint's model was trained on"):
        assert main(["evaluate", "--checkpoint", str(path), "--dataset", str(folder), "--json"]) == 0  # on purpose
    capsys.readouterr()
    shutil.rmtree(folder)  # gone: the message says where it looked
    assert main(["evaluate", "--checkpoint", str(path)]) == 2
    err = capsys.readouterr().err
    assert "dataset 'my-nations' is not a shipped dataset" in err and "looked at" in err and "KGEVAL_SHARED_DATA" in err


def test_a_temporal_checkpoint_finds_its_dataset(tmp_path, capsys) -> None:
    folder = tmp_path / "tkg"
    folder.mkdir()
    generator = np.random.default_rng(3)
    for split, (first, last, count) in {"train": (1, 8, 150), "valid": (8, 9, 30), "test": (9, 10, 30)}.items():
        rows = [(f"e{generator.integers(12)}", f"r{generator.integers(3)}", f"e{generator.integers(12)}",
                 f"2014-01-{generator.integers(first, last):02d}") for _ in range(count)]  # fmt: skip
        (folder / f"{split}.txt").write_text("".join("\t".join(row) + "\n" for row in rows))
    path = tmp_path / "t.pt"
    assert main(["demo", "--dataset", str(folder), "--epochs", "1", "--dim", "4", "--no-progress", "--unseen", "keep",
                 "--save-checkpoint", str(path)]) == 0  # fmt: skip
    capsys.readouterr()
    assert load_model_file(path).time_to_id is not None
    assert main(["evaluate", "--checkpoint", str(path), "--unseen", "keep", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    data = load_temporal_tsv(folder, unseen="keep")
    expected = TemporalRankBasedEvaluator(filtered="all", ks=(1, 3, 10)).evaluate(
        load_checkpoint(path), **data.evaluation_kwargs("test"), use_tqdm=False)  # fmt: skip
    assert got["source"]["dataset"] == "tkg"
    assert got["metrics"]["time-aware"]["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(
        expected["mrr"], rel=1e-12)  # fmt: skip


def test_a_pykeen_folder_is_matched_to_its_dataset_by_its_label_maps(tmp_path, capsys) -> None:
    pytest.importorskip("pykeen")
    from pykeen.models import DistMult as PyKEENDistMult
    from pykeen.triples import TriplesFactory

    data = load_shipped_dataset("kinship")
    entities = {label: data.num_entities - 1 - i for label, i in data.entity_to_id.items()}  # ids unlike kgeval's
    relations = {label: data.num_relations - 1 - i for label, i in data.relation_to_id.items()}
    labels = (labels_by_id(data.entity_to_id), labels_by_id(data.relation_to_id))
    train = np.array([[labels[0][h], labels[1][r], labels[0][t]] for h, r, t in data.train.tolist()])
    factory = TriplesFactory.from_labeled_triples(train, entity_to_id=entities, relation_to_id=relations)
    model = PyKEENDistMult(triples_factory=factory, embedding_dim=4, random_seed=0)
    folder = tmp_path / "run"
    (folder / "training_triples").mkdir(parents=True)
    torch.save(model, folder / "trained_model.pkl")
    factory.to_path_binary(folder / "training_triples")
    assert main(["evaluate", "--checkpoint", str(folder), "--trust-checkpoint", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["source"]["dataset"] == "kinship"
    aligned = load_shipped_dataset("kinship", entity_to_id=entities, relation_to_id=relations)
    expected = RankBasedEvaluator().evaluate(model, **aligned.evaluation_kwargs("test"), use_tqdm=False)
    assert document["metrics"]["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(expected["mrr"], rel=1e-12)


def test_a_checkpoint_description_is_checked_and_files_without_one_still_load(tmp_path) -> None:
    data = load_shipped_dataset("nations")
    from kgeval.models import DistMult

    model = DistMult(data.num_entities, data.num_relations, dim=4, seed=0)
    save_checkpoint(model, tmp_path / "plain.pt")  # no dataset: an older-style file
    assert load_model_file(tmp_path / "plain.pt").dataset is None
    with pytest.raises(ValueError, match="the dataset umls has 135 entities, the model 14"):
        save_checkpoint(model, tmp_path / "wrong.pt", load_shipped_dataset("umls"))
    save_checkpoint(model, tmp_path / "described.pt", data)
    document = torch.load(tmp_path / "described.pt", weights_only=True)
    document["data"]["entities"] = document["data"]["entities"][:-1]
    torch.save(document, tmp_path / "tampered.pt")
    with pytest.raises(ValueError, match="data description must hold a name, a fingerprint and one label per id"):
        load_checkpoint(tmp_path / "tampered.pt")


def test_unseen_on_the_command_line(tmp_path, capsys) -> None:
    """--unseen drop drops the test triples whose labels never occur in train, as the warning suggests."""
    folder = copy_nations(tmp_path / "n")
    with (folder / "test.txt").open("a") as handle:
        handle.write("newcomer\tintergovorgs\tusa\n")
    with pytest.warns(UserWarning, match="--unseen drop / keep on the command line"):
        load_tsv_dataset(folder)
    assert main(["demo", "--dataset", str(folder), "--epochs", "1", "--no-progress", "--unseen", "drop"]) == 0
    dropped = capsys.readouterr().out
    assert main(["demo", "--dataset", str(folder), "--epochs", "1", "--no-progress", "--unseen", "keep"]) == 0
    kept = capsys.readouterr().out
    assert "/ 201 train / valid / test triples" in dropped and "/ 202 train / valid / test triples" in kept
