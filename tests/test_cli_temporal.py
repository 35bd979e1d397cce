"""The command line and the audit on temporal data: a folder of quadruples makes ``kgeval demo`` train TNTComplEx
and print the three filter settings beside the recurrency baseline, ``kgeval evaluate`` rank a TNTComplEx
checkpoint, ``kgeval audit`` print the temporal card -- whose numbers are checked here against plain loops."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from kgeval.audit.temporal import audit_temporal_dataset, split_fingerprint
from kgeval.cli import main
from kgeval.datasets import load_any_dataset, load_temporal_tsv


def write_tkg(folder: Path, seed: int = 0, forecasting: bool = True, shuffle: bool = False) -> dict[str, list]:
    """A small temporal folder: 12 entities, 3 relations, days 1..20 (test days after the training days when
    ``forecasting``, else a random split); repeated facts so that recurrence is not trivial."""
    rng = random.Random(seed)
    facts = [(f"e{rng.randrange(12)}", f"r{rng.randrange(3)}", f"e{rng.randrange(12)}") for _ in range(25)]
    rows = [(*rng.choice(facts), f"2014-01-{rng.randrange(1, 21):02d}") for _ in range(220)]
    if forecasting:
        rows.sort(key=lambda row: row[3])
        splits = {"train": rows[:150], "valid": rows[150:185], "test": rows[185:]}
    else:
        rng.shuffle(rows)
        splits = {"train": rows[:150], "valid": rows[150:185], "test": rows[185:]}
    folder.mkdir(parents=True, exist_ok=True)
    for split, lines in splits.items():
        lines = list(lines)
        if shuffle:
            rng.shuffle(lines)
        (folder / f"{split}.txt").write_text("".join("\t".join(row) + "\n" for row in lines), encoding="utf-8")
    return splits


def test_load_any_dataset_tells_quadruples_from_triples(tmp_path: Path) -> None:
    write_tkg(tmp_path / "tkg")
    assert type(load_any_dataset(tmp_path / "tkg", unseen="keep")).__name__ == "TemporalDataset"
    assert type(load_any_dataset("nations")).__name__ == "TriplesDataset"


def test_demo_trains_tntcomplex_and_prints_the_settings_beside_the_baseline(tmp_path: Path, capsys) -> None:
    write_tkg(tmp_path / "tkg")
    checkpoint = tmp_path / "tnt.pt"
    argv = ["demo", "--dataset", str(tmp_path / "tkg"), "--epochs", "2", "--dim", "4", "--no-progress",
            "--save-checkpoint", str(checkpoint)]  # fmt: skip
    with _maybe_warns():  # labels unseen in train, if any
        assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Dataset tkg (temporal): " in out and "train / valid / test quadruples" in out
    assert "Trained TNTComplEx (dim=4) for 2 epochs" in out
    assert "test quadruples are at times it never trained on" in out
    test_part = out[out.index("== test: 35 quadruples, filtered by train + valid + test") :]
    for model in ("TNTComplEx", "recurrency"):
        assert model in test_part
    for setting in ("time-aware", "static", "raw"):
        assert test_part.count(setting) >= 2
    with _maybe_warns():
        assert main(["evaluate", "--checkpoint", str(checkpoint), "--dataset", str(tmp_path / "tkg"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["protocol"]["setting"] == "time-aware" and set(document["other_settings"]) == {"static", "raw"}
    assert document["source"]["model"] == "TNTComplEx"
    # the evaluate command gives the numbers the library gives
    with _maybe_warns():
        data = load_temporal_tsv(tmp_path / "tkg")
    from kgeval import TemporalRankBasedEvaluator
    from kgeval.models.checkpoint import load_checkpoint

    model = load_checkpoint(checkpoint)
    ours = TemporalRankBasedEvaluator(filtered="static", ks=(1, 3, 10)).evaluate(
        model, **data.evaluation_kwargs("test"), use_tqdm=False)  # fmt: skip
    assert document["other_settings"]["static"]["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(
        ours["mrr"]
    )


def test_evaluate_refuses_a_model_of_other_data(tmp_path: Path, capsys) -> None:
    from kgeval.models import TNTComplEx
    from kgeval.models.checkpoint import save_checkpoint

    write_tkg(tmp_path / "tkg")
    save_checkpoint(TNTComplEx(5, 3, 20, dim=2), tmp_path / "other.pt")
    with _maybe_warns():
        assert main(["evaluate", "--checkpoint", str(tmp_path / "other.pt"), "--dataset", str(tmp_path / "tkg")]) != 0
    assert "num_entities=5" in capsys.readouterr().err


def loop_recurrence(splits: dict[str, list]) -> float:
    every = [row for rows in splits.values() for row in rows]
    test = splits["test"]
    return sum(any(o[:3] == q[:3] and o[3] < q[3] for o in every) for q in test) / len(test)


def loop_filter_sizes(splits: dict[str, list]) -> dict[str, float]:
    known = {row for rows in splits.values() for row in rows}
    sizes = {"time-aware": [], "static": []}
    for s, r, o, t in splits["test"]:
        sizes["time-aware"].append(len({x[2] for x in known if x[:2] == (s, r) and x[3] == t} - {o}))
        sizes["time-aware"].append(len({x[0] for x in known if x[1:3] == (r, o) and x[3] == t} - {s}))
        sizes["static"].append(len({x[2] for x in known if x[:2] == (s, r)} - {o}))
        sizes["static"].append(len({x[0] for x in known if x[1:3] == (r, o)} - {s}))
    return {name: sum(values) / len(values) for name, values in sizes.items()}


@pytest.mark.parametrize("forecasting", [True, False])
def test_the_temporal_audit_against_plain_loops(tmp_path: Path, forecasting: bool) -> None:
    splits = write_tkg(tmp_path / "tkg", seed=1, forecasting=forecasting)
    with _maybe_warns():
        data = load_temporal_tsv(tmp_path / "tkg")
    report = audit_temporal_dataset(data)
    assert report.sizes == {split: len(rows) for split, rows in splits.items()}
    times = {split: {row[3] for row in rows} for split, rows in splits.items()}
    assert report.shared_times["train & test"] == len(times["train"] & times["test"])
    if forecasting:
        assert report.setting in ("forecasting", "mixed")  # a day may straddle the split
    else:
        assert report.setting in ("completion", "mixed")
    assert report.duplicates["test"] == len(splits["test"]) - len(set(splits["test"]))
    assert report.duplicates["test in train"] == len(set(splits["test"]) & set(splits["train"]))
    assert report.recurrence == pytest.approx(loop_recurrence(splits))
    for name, size in loop_filter_sizes(splits).items():
        assert report.filter_sizes[name] == pytest.approx(size)
    assert 0 < report.recurrency_mrr <= 1
    markdown = report.to_markdown()
    for section in ("Fingerprint", "Time overlap", "Duplicates", "Recurrence", "Filter sizes", "Baselines"):
        assert f"### {section}" in markdown
    assert json.loads(report.to_json())["format"] == "kgeval-temporal-audit-1"


def _maybe_warns():
    import contextlib
    import warnings

    context = contextlib.ExitStack()
    context.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return context


def test_the_fingerprint_is_of_the_content_not_the_file_order_or_ids(tmp_path: Path) -> None:
    write_tkg(tmp_path / "a", seed=2)
    write_tkg(tmp_path / "b", seed=2, shuffle=True)
    write_tkg(tmp_path / "c", seed=3)
    with _maybe_warns():
        a, b, c = (load_temporal_tsv(tmp_path / name) for name in "abc")
    assert not torch.equal(a.test, b.test)  # the order differs (and so the ids); the hash must not
    for split in ("train", "valid", "test"):
        assert split_fingerprint(a, split) == split_fingerprint(b, split)
        assert split_fingerprint(a, split) != split_fingerprint(c, split)


def test_audit_command_on_temporal_data(tmp_path: Path, capsys) -> None:
    write_tkg(tmp_path / "tkg")
    with _maybe_warns():
        assert main(["audit", "--dataset", str(tmp_path / "tkg")]) == 0
    out = capsys.readouterr().out
    assert "## Temporal evaluation audit: tkg" in out and "Recurrency baseline" in out
    with _maybe_warns():
        assert main(["audit", "--dataset", str(tmp_path / "tkg"), "--json", "--no-baseline"]) == 0
    assert json.loads(capsys.readouterr().out)["recurrency_mrr"] is None
    (tmp_path / "ranks.csv").write_text("head,relation,tail,side,optimistic,pessimistic\n")
    with _maybe_warns():
        assert main(["audit", "--dataset", str(tmp_path / "tkg"), "--ranks", str(tmp_path / "ranks.csv")]) == 2
    assert "has no time column: it ranks triples, not the quadruples of tkg" in capsys.readouterr().err


@pytest.fixture(scope="module")
def temporal_run(tmp_path_factory: pytest.TempPathFactory):
    """A TNTComplEx checkpoint of a small temporal folder, and its evaluation saved as a rank table by the CLI."""
    from kgeval.models import TNTComplEx
    from kgeval.models.checkpoint import save_checkpoint

    folder = tmp_path_factory.mktemp("temporal")
    write_tkg(folder / "tkg")
    with _maybe_warns():
        data = load_temporal_tsv(folder / "tkg")
    save_checkpoint(TNTComplEx(data.num_entities, data.num_relations, data.num_times, dim=4, seed=1),
                    folder / "tnt.pt", data)  # fmt: skip
    return folder, data


def _run_json(argv: list[str], capsys) -> dict:
    with _maybe_warns():
        assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_save_ranks_of_a_temporal_evaluation_reads_back_to_the_same_numbers(temporal_run, capsys) -> None:
    """--save-ranks writes every setting's rows with the quadruple's time (and its label); evaluate --ranks of the
    table gives the checkpoint's numbers in each setting, in the same document shape."""
    import pandas as pd

    folder, data = temporal_run
    checkpoint = ["evaluate", "--checkpoint", str(folder / "tnt.pt"), "--dataset", str(folder / "tkg")]
    direct = _run_json([*checkpoint, "--save-ranks", str(folder / "ranks.csv")], capsys)
    assert direct["ranks_file"] == str(folder / "ranks.csv")
    table = pd.read_csv(folder / "ranks.csv", dtype={"time_label": str})
    assert table["setting"].value_counts().to_dict() == {"time-aware": 70, "static": 70, "raw": 70}  # 35 x 2 sides
    assert (table["time"] == data.test[:, 3].numpy()[table["task_index"].to_numpy()]).all()  # the quadruple's time
    labels = {i: label for label, i in data.time_to_id.items()}
    assert table["time_label"].tolist() == [labels[t] for t in table["time"]]
    assert set(table["model"]) == {"TNTComplEx"} and set(table["dataset"]) == {"tkg"}
    back = _run_json(["evaluate", "--ranks", str(folder / "ranks.csv"), "--ks", "1", "3", "10"], capsys)
    assert back["protocol"]["setting"] == direct["protocol"]["setting"] == "time-aware"
    assert back["metrics"] == pytest.approx(direct["metrics"], rel=1e-12, nan_ok=True)
    for setting in ("static", "raw"):
        assert back["other_settings"][setting] == pytest.approx(direct["other_settings"][setting], rel=1e-12,
                                                                nan_ok=True)  # fmt: skip
    with _maybe_warns():
        assert main(["evaluate", "--ranks", str(folder / "ranks.csv")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"== temporal ranks of {folder / 'ranks.csv'} (model TNTComplEx, dataset tkg, split test)")
    assert "time-aware" in out and "static" in out and "raw" in out


def test_every_protocol_has_one_json_shape(temporal_run, tmp_path: Path, capsys) -> None:
    """Static and temporal --json documents: the same keys, protocol.setting one string, metrics one flat dict of
    the same keys; the temporal document adds the other settings beside them."""
    from kgeval.datasets import load_shipped_dataset
    from kgeval.models import DistMult
    from kgeval.models.checkpoint import save_checkpoint

    folder, _data = temporal_run
    nations = load_shipped_dataset("nations")
    save_checkpoint(DistMult(nations.num_entities, nations.num_relations, dim=4), tmp_path / "d.pt", nations)
    static = _run_json(["evaluate", "--checkpoint", str(tmp_path / "d.pt"), "--ks", "1", "3", "10"], capsys)
    temporal = _run_json(["evaluate", "--checkpoint", str(folder / "tnt.pt"), "--dataset", str(folder / "tkg")],
                         capsys)  # fmt: skip
    assert set(temporal) - set(static) == {"other_settings"} and set(static) <= set(temporal)
    assert static["protocol"].keys() == temporal["protocol"].keys()
    assert (static["protocol"]["setting"], temporal["protocol"]["setting"]) == ("filtered", "time-aware")
    assert static["metrics"].keys() == temporal["metrics"].keys()
    assert all(value is None or isinstance(value, float | int) for value in temporal["metrics"].values())


def test_audit_reads_a_temporal_rank_table(temporal_run, capsys) -> None:
    """audit --ranks of a temporal table reports the model's MRR in each setting, those of audit --checkpoint."""
    folder, _data = temporal_run
    dataset = ["--dataset", str(folder / "tkg"), "--no-baseline"]
    with _maybe_warns():
        assert main(["evaluate", "--checkpoint", str(folder / "tnt.pt"), *dataset[:2], "--save-ranks",
                     str(folder / "audit.csv")]) == 0  # fmt: skip
    capsys.readouterr()
    from_model = _run_json(["audit", "--checkpoint", str(folder / "tnt.pt"), *dataset], capsys)
    from_table = _run_json(["audit", "--ranks", str(folder / "audit.csv"), *dataset], capsys)
    assert set(from_table["model_mrr"]) == {"time-aware", "static", "raw"}
    assert from_table["model_mrr"] == pytest.approx(from_model["model_mrr"], rel=1e-12)
