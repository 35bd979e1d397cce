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


def daily_quadruples(folder: Path, seed: int) -> Path:
    """A folder of random quadruples over 12 entities, 3 relations and the days of early January 2014: train on days
    1-7, valid on day 8, test on day 9."""
    folder.mkdir()
    generator = np.random.default_rng(seed)
    for split, (first, last, count) in {"train": (1, 8, 150), "valid": (8, 9, 30), "test": (9, 10, 30)}.items():
        rows = [(f"e{generator.integers(12)}", f"r{generator.integers(3)}", f"e{generator.integers(12)}",
                 f"2014-01-{generator.integers(first, last):02d}") for _ in range(count)]  # fmt: skip
        (folder / f"{split}.txt").write_text("".join("\t".join(row) + "\n" for row in rows))
    return folder


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
    assert f"the checkpoint's data was read from {folder}, which is not here" in err
    assert "my-nations is no shipped dataset nor in" in err and "pass --dataset" in err


def test_a_temporal_checkpoint_finds_its_dataset(tmp_path, capsys) -> None:
    folder = daily_quadruples(tmp_path / "tkg", seed=3)
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
    assert got["metrics"]["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(
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
    entities = torch.load(tmp_path / "described.pt", weights_only=True)["data"]["entities"]
    tampered = {
        "one label short": {"entities": entities[:-1]},
        "a label twice": {"entities": [entities[1], *entities[1:]]},
        "times that are no list": {"times": 5},
        "a time that is no string": {"times": [1, 2]},
        "a folder that is no string": {"folder": 3},
        "an unknown reading": {"read_with": {"unseen": "skip"}},
    }
    for why, change in tampered.items():
        document = torch.load(tmp_path / "described.pt", weights_only=True)
        document["data"].update(change)
        torch.save(document, tmp_path / f"{why}.pt")
        with pytest.raises(ValueError, match="data description must hold a name, a fingerprint, one distinct label"):
            load_checkpoint(tmp_path / f"{why}.pt")


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


def test_the_recorded_folder_wins_over_a_dataset_of_its_name(tmp_path, capsys, monkeypatch) -> None:
    """A user's own folder named like a shipped dataset is the data the checkpoint names, not the shipped one; a
    folder of the current directory named like the data does not stand in for it."""
    folder = tmp_path / "data" / "nations"
    folder.parent.mkdir()
    copy_nations(folder)
    lines = (folder / "train.txt").read_text().splitlines()
    (folder / "train.txt").write_text("\n".join(lines[:-40]) + "\n")  # not the shipped nations
    path = tmp_path / "m.pt"
    assert main(["demo", "--dataset", str(folder), "--epochs", "1", "--no-progress", "--save-checkpoint",
                 str(path)]) == 0  # fmt: skip
    capsys.readouterr()
    assert load_model_file(path).dataset == str(folder.resolve())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    copy_nations(elsewhere / "nations")  # the shipped content, named like the data, in the current directory
    monkeypatch.chdir(elsewhere)
    assert main(["evaluate", "--checkpoint", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"]["dataset"] == "nations"


def test_a_temporal_checkpoint_of_data_that_spells_a_time_two_ways(tmp_path, capsys) -> None:
    """The checkpoint records one label per time ("1"); the files also write "1.0" and "40.0": evaluated without
    being told, with the fingerprint unchanged by spelling and row order."""
    folder = tmp_path / "spell"
    folder.mkdir()
    generator = np.random.default_rng(5)
    for split, times in {"train": ["1", "1.0", "2", "10"], "valid": ["20"], "test": ["40", "40.0"]}.items():
        rows = [(f"e{i % 8}", f"r{generator.integers(2)}", f"e{(i * 3 + 1) % 8}", times[i % len(times)])
                for i in range(40 if split == "train" else 8)]  # fmt: skip
        (folder / f"{split}.txt").write_text("".join("\t".join(row) + "\n" for row in rows))
    path = tmp_path / "t.pt"
    assert main(["demo", "--dataset", str(folder), "--epochs", "1", "--dim", "4", "--no-progress",
                 "--save-checkpoint", str(path)]) == 0  # fmt: skip
    capsys.readouterr()
    assert load_model_file(path).time_to_id == {"1": 0, "2": 1, "10": 2, "20": 3, "40": 4}
    assert main(["evaluate", "--checkpoint", str(path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    data = load_temporal_tsv(folder)
    expected = TemporalRankBasedEvaluator(filtered="all", ks=(1, 3, 10)).evaluate(
        load_checkpoint(path), **data.evaluation_kwargs("test"), use_tqdm=False)  # fmt: skip
    assert got["metrics"]["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(
        expected["mrr"], rel=1e-12)  # fmt: skip
    train = (folder / "train.txt").read_text().splitlines()
    respelled = [line.replace("\t1.0", "\t1") if line.endswith("\t1.0") else line.replace("\t1", "\t1.0", 1)
                 if line.endswith("\t1") else line for line in reversed(train)]  # fmt: skip
    (folder / "train.txt").write_text("\n".join(respelled) + "\n")
    assert dataset_fingerprint(load_temporal_tsv(folder)) == dataset_fingerprint(data)


def test_a_checkpoint_trained_with_unseen_rows_dropped_is_evaluated_so(tmp_path, capsys) -> None:
    """The reading options that decide the rows are recorded and are the defaults of a later evaluate."""
    folder = copy_nations(tmp_path / "n")
    with (folder / "test.txt").open("a") as handle:
        handle.write("newcomer\tintergovorgs\tusa\n")
    path = tmp_path / "m.pt"
    assert main(["demo", "--dataset", str(folder), "--epochs", "1", "--no-progress", "--unseen", "drop",
                 "--save-checkpoint", str(path)]) == 0  # fmt: skip
    capsys.readouterr()
    assert load_model_file(path).read_with == {"unseen": "drop", "duplicates": "keep"}
    assert main(["evaluate", "--checkpoint", str(path), "--json"]) == 0
    assert "both.realistic.inverse_harmonic_mean_rank" in metrics(capsys)
    assert main(["evaluate", "--checkpoint", str(path), "--unseen", "keep"]) == 2
    err = capsys.readouterr().err
    assert "the checkpoint's model has 14 entities, the dataset n 15" in err  # the newcomer counted
    assert "the checkpoint's data was read with --unseen drop" in err


@pytest.mark.parametrize("trust", [False, True])
def test_files_that_are_no_checkpoint_are_named_in_one_line(tmp_path, capsys, trust: bool) -> None:
    """A text file raised a KeyError traceback; a Markdown file was called "a pickled object", and with
    --trust-checkpoint then an UnpicklingError traceback; a pickled class that cannot be imported here an
    AttributeError traceback. Each is one line and exit 2."""
    import subprocess
    import sys

    (tmp_path / "text.pt").write_text("hello\n")
    (tmp_path / "notes.pt").write_text("# a heading\n\nsome *markdown*\n")
    maker = "import torch\nclass Foo(torch.nn.Module):\n    pass\ntorch.save(Foo(), 'foo.pt')\n"
    subprocess.run([sys.executable, "-c", maker], cwd=tmp_path, check=True)  # Foo lives in that __main__ only
    trusted = ["--trust-checkpoint"] if trust else []
    for name, message in (("text.pt", "it is no file torch.save wrote"), ("notes.pt", "it is no file torch.save wrote"),
                          ("foo.pt", "cannot unpickle" if trust else "a pickled object")):  # fmt: skip
        assert main(["evaluate", "--dataset", "nations", "--checkpoint", str(tmp_path / name), *trusted]) == 2
        error = capsys.readouterr().err
        assert error.startswith("kgeval evaluate: error: ") and error.count("\n") == 1 and message in error, error


def test_a_damaged_pykeen_label_map_is_refused(tmp_path, capsys) -> None:
    """A truncated entity_to_id.tsv.gz raised an EOFError traceback; one whose ids repeat (two labels on id 0) was
    read, merging two entities (MRR 0.4451 where 0.4876). Both are one line; a label map given in Python that puts
    two labels on one id is refused the same way."""
    import gzip

    from kgeval.models.checkpoint import _pykeen_ids

    truncated = tmp_path / "truncated.tsv.gz"
    truncated.write_bytes(gzip.compress(b"id\tlabel\n0\ta\n1\tb\n")[:20])
    with pytest.raises(ValueError, match="cannot read .*truncated.tsv.gz"):
        _pykeen_ids(truncated)
    twice = tmp_path / "twice.tsv.gz"
    twice.write_bytes(gzip.compress(b"id\tlabel\n0\ta\n0\tb\n2\tc\n"))
    with pytest.raises(ValueError, match="not a one-to-one map of labels to integer ids"):
        _pykeen_ids(twice)
    data = load_shipped_dataset("nations")
    merged = dict(data.entity_to_id)
    first, second = list(merged)[:2]
    merged[second] = merged[first]
    with pytest.raises(ValueError, match=f"gives the id 0 to both {first!r} and {second!r}"):
        load_shipped_dataset("nations", entity_to_id=merged)


def test_a_temporal_audit_ranks_with_the_checkpoints_ids(tmp_path, capsys) -> None:
    """A TNTComplEx trained with its own entity ids (reversed): `kgeval audit --checkpoint` read the folder with
    the default ids and reported the MRR of misaligned ids (0.1917 where 0.1817), and a checkpoint of other data
    passed without a word; now it reads the checkpoint's label maps, as evaluate does, and checks its fingerprint."""
    from kgeval.cli.temporal import temporal_evaluation
    from kgeval.datasets import load_any_dataset
    from kgeval.models.temporal import TNTComplEx
    from kgeval.models.training import train_model

    folder = daily_quadruples(tmp_path / "tkg", seed=5)
    base = load_any_dataset(folder, unseen="keep")
    reversed_ids = {label: i for i, label in enumerate(sorted(base.entity_to_id, reverse=True))}
    data = load_any_dataset(folder, unseen="keep", entity_to_id=reversed_ids, relation_to_id=base.relation_to_id,
                            time_to_id=base.time_to_id)  # fmt: skip
    model = TNTComplEx(data.num_entities, data.num_relations, data.num_times, dim=8, seed=0)
    train_model(model, data.train, num_epochs=5, batch_size=64, lr=0.05, seed=0, use_tqdm=False)
    model.eval()
    save_checkpoint(model, tmp_path / "t.pt", data)
    aligned = temporal_evaluation(model, data, "test", False).get_metric("both.realistic.mrr")
    misaligned = temporal_evaluation(model, base, "test", False).get_metric("both.realistic.mrr")
    assert aligned != misaligned
    assert main(["audit", "--checkpoint", str(tmp_path / "t.pt"), "--dataset", str(folder), "--no-baseline",
                 "--unseen", "keep"]) == 0  # fmt: skip
    assert f"time-aware MRR {aligned:.4f}" in capsys.readouterr().out
    lines = (folder / "test.txt").read_text().splitlines()
    (folder / "test.txt").write_text("\n".join(lines[:-1]) + "\n")  # other data than the checkpoint's
    with pytest.warns(UserWarning, match="is not the data the checkpoint's model was trained on"):
        main(["audit", "--checkpoint", str(tmp_path / "t.pt"), "--dataset", str(folder), "--no-baseline",
              "--unseen", "keep"])  # fmt: skip


def test_a_shipped_datasets_checkpoint_from_another_install_finds_the_shipped_copy(tmp_path, monkeypatch) -> None:
    """Its recorded folder (another install's package) is not here and no shared folder holds the dataset: it was
    refused as "no shipped dataset"; the shipped copy of its name is used, its fingerprint still checked."""
    import kgeval.models.checkpoint as checkpoint

    data = load_shipped_dataset("nations")
    from kgeval.models import DistMult

    save_checkpoint(DistMult(data.num_entities, data.num_relations, dim=4, seed=0), tmp_path / "m.pt", data)
    document = torch.load(tmp_path / "m.pt", weights_only=True)
    document["data"]["folder"] = str(tmp_path / "elsewhere" / "site-packages" / "kgeval" / "datasets" / "data" /
                                     "nations")  # fmt: skip
    torch.save(document, tmp_path / "other.pt")
    monkeypatch.setattr(checkpoint, "shared_data_dir", lambda: None)
    assert load_model_file(tmp_path / "other.pt").dataset == "nations"


def test_temporal_evaluate_refuses_what_it_does_not_honour_and_its_json_has_the_readme_keys(tmp_path, capsys) -> None:
    """--ks, --targets, --full and --progress-file were ignored on temporal data (always hits@1/3/10, both sides),
    and the --json document had no kgeval_version or protocol."""
    folder = daily_quadruples(tmp_path / "tkg", seed=3)
    path = tmp_path / "t.pt"
    assert main(["demo", "--dataset", str(folder), "--epochs", "1", "--dim", "4", "--no-progress", "--unseen", "keep",
                 "--save-checkpoint", str(path)]) == 0  # fmt: skip
    capsys.readouterr()
    common = ["evaluate", "--checkpoint", str(path), "--unseen", "keep"]
    for option in (["--ks", "1", "5"], ["--targets", "tail"], ["--full"], ["--progress-file", str(tmp_path / "p")]):
        assert main([*common, *option]) == 2
        assert f"{option[0]} is not available for temporal data yet" in capsys.readouterr().err
    assert main([*common, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert {"kgeval_version", "source", "protocol", "metrics"} <= set(document)
    assert document["protocol"]["setting"] == "time-aware" and list(document["other_settings"]) == ["static", "raw"]
    assert "both.realistic.inverse_harmonic_mean_rank" in document["metrics"]
    assert document["protocol"]["ks"] == [1, 3, 10] and document["source"]["targets"] == ["head", "tail"]
