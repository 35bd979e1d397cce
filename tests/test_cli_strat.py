"""Tests of ``kgeval strat`` and ``kgeval demo --save-checkpoint`` (kgeval.cli)."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from kgeval import RankBasedEvaluator
from kgeval.analysis.stratified import stratified_metrics
from kgeval.cli import main
from kgeval.datasets import load_shipped_dataset
from kgeval.models.checkpoint import load_checkpoint

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DistMult trained for one epoch on Nations, saved by ``kgeval demo --save-checkpoint``."""
    path = tmp_path_factory.mktemp("strat") / "nations.pt"
    argv = ["demo", "--dataset", "nations", "--epochs", "1", "--dim", "8", "--no-progress"]
    assert main([*argv, "--save-checkpoint", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def nations_results(checkpoint: Path):
    nations = load_shipped_dataset("nations")
    model = load_checkpoint(checkpoint)
    return RankBasedEvaluator().evaluate(
        model, nations.test, additional_filter_triples=[nations.train, nations.valid], use_tqdm=False
    )


def _table(out: str) -> pd.DataFrame:
    """The printed table (after the header line) as a DataFrame."""
    return pd.read_csv(io.StringIO(out.split("\n", 1)[1]), sep=r"\s+")


def _assert_table(out: str, betas: list[tuple[float, float]], results, popularity, **kwargs) -> None:
    table = _table(out)
    assert [tuple(row) for row in table[["beta_e", "beta_r"]].itertuples(index=False)] == betas
    for (beta_e, beta_r), (_, row) in zip(betas, table.iterrows(), strict=True):
        wanted = stratified_metrics(results, popularity, beta_e, beta_r, **kwargs)
        assert list(table.columns[2:]) == list(wanted)
        for name, value in wanted.items():
            assert row[name] == pytest.approx(value, abs=5e-5), name


def test_demo_saves_a_checkpoint(checkpoint: Path) -> None:
    model = load_checkpoint(checkpoint)
    assert (model.num_entities, model.num_relations, model.dim) == (14, 55, 8)


def test_strat_from_a_checkpoint(checkpoint: Path, nations_results, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["strat", "--dataset", "nations", "--checkpoint", str(checkpoint), "--no-progress"]
    assert main([*argv, "--beta-e", "-1", "0.5", "--beta-r", "0", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Stratified metrics (realistic ranks; popularity counted on the train triples)\n")
    betas = [(-1.0, 0.0), (-1.0, 1.0), (0.5, 0.0), (0.5, 1.0)]
    _assert_table(out, betas, nations_results, load_shipped_dataset("nations").train)


def test_strat_from_exported_ranks(nations_results, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """results.ranks_df() written as CSV, without its task_index column (pairing then goes by triple)."""
    table = nations_results.ranks_df().drop(columns="task_index")
    path = tmp_path / "ranks.csv.gz"
    table.to_csv(path, index=False)
    argv = ["strat", "--dataset", "nations", "--ranks", str(path), "--popularity", "train+valid"]
    assert main([*argv, "--ks", "2", "5", "--rank-type", "pessimistic", "--beta-e", "0.25"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Stratified metrics (pessimistic ranks; popularity counted on the train+valid triples)\n")
    nations = load_shipped_dataset("nations")
    popularity = [nations.train, nations.valid]
    _assert_table(out, [(0.25, 0.0)], nations_results, popularity, ks=(2, 5), rank_type="pessimistic")


def test_strat_lemma_1_through_the_cli(checkpoint: Path, nations_results, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["strat", "--dataset", "nations", "--checkpoint", str(checkpoint), "--no-progress"]
    assert main([*argv, "--popularity", "evaluated", "--beta-r", "-1"]) == 0
    (row,) = _table(capsys.readouterr().out).to_dict("records")
    assert row["strat_mrr"] == pytest.approx(nations_results.get_metric("mrr"), abs=5e-5)
    assert row["strat_hits_at_10"] == pytest.approx(nations_results.get_metric("hits@10"), abs=5e-5)


def test_strat_plot(checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "curve.png"
    argv = ["strat", "--dataset", "nations", "--checkpoint", str(checkpoint), "--no-progress"]
    assert main([*argv, "--plot", str(path), "--vary", "relation"]) == 0
    assert capsys.readouterr().out == f"Wrote the stratified metrics over β_r in [-1, 1] to {path}\n"
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_strat_error_on_a_checkpoint_of_another_dataset(checkpoint: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["strat", "--dataset", "umls", "--checkpoint", str(checkpoint), "--no-progress"]) == 2
    message = "the checkpoint's model has 14 entities, the dataset umls 135: it was trained on other data"
    assert capsys.readouterr().err == f"kgeval strat: error: {message}\n"


def test_strat_error_on_a_bad_rank_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ranks.csv"
    pd.DataFrame({"head": [0], "tail": [1]}).to_csv(path, index=False)
    assert main(["strat", "--dataset", "nations", "--ranks", str(path)]) == 2
    message = (
        f"kgeval strat: error: a rank table {path} needs the columns ['head', 'relation', 'tail', 'side', "
        "'optimistic', 'pessimistic'], missing ['relation', 'side', 'optimistic', 'pessimistic']\n"
    )
    assert capsys.readouterr().err == message


def test_strat_error_on_a_missing_rank_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["strat", "--dataset", "nations", "--ranks", str(tmp_path / "none.csv")]) == 2
    assert capsys.readouterr().err.startswith("kgeval strat: error: ")


def test_strat_needs_a_checkpoint_or_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["strat", "--dataset", "nations"]) == 2
    assert capsys.readouterr().err == (
        "kgeval strat: error: give the ranks to stratify: --checkpoint PATH or --ranks PATH\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--ranks", "r.csv", "--beta-e", "2"], "argument --beta-e: expected a number in [-1, 1], got '2'"),
        (["--ranks", "r.csv", "--beta-r", "x"], "argument --beta-r: expected a number, got 'x'"),
        (["--ranks", "r.csv", "--checkpoint", "m.pt"], "argument --checkpoint: not allowed with argument --ranks"),
    ],
)
def test_strat_invalid_options(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["strat", *argv])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.endswith(f"kgeval strat: error: {message}\n")


def test_a_rank_table_is_read_with_the_dataset_it_ranks(tmp_path: Path, capsys) -> None:
    """strat / audit --ranks without --dataset used umls, the default, for a table of nations: other popularity
    counts (strat_mrr 0.4721 for 0.4689) or another dataset's audit. A table needs --dataset now, and one that cannot
    rank it -- ids beyond its counts, labels it numbers otherwise -- is refused in one line."""
    from kgeval.models import DistMult

    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=8, seed=3)
    results = RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False)
    path = results.save_ranks(tmp_path / "ranks.csv", data.entity_to_id, data.relation_to_id)
    for argv in (["strat"], ["audit", "--no-baseline"]):
        assert main([*argv, "--ranks", str(path)]) == 2
        assert "a rank table does not say which dataset it ranks: give --dataset" in capsys.readouterr().err
        assert main([*argv, "--ranks", str(path), "--dataset", "kinship"]) == 2
        assert "relation ids up to 54, but kinship has 25 relations" in capsys.readouterr().err
    frame = pd.read_csv(path)
    head = int(frame["head"].iloc[0])
    other_label = next(label for label, index in data.entity_to_id.items() if index != head)
    frame.loc[0, "head_label"] = other_label  # row 0's head id now carries another entity's label
    frame.to_csv(tmp_path / "relabelled.csv", index=False)
    assert main(["strat", "--ranks", str(tmp_path / "relabelled.csv"), "--dataset", "nations"]) == 2
    assert f"row 0: head {head} is labelled {other_label!r}, which nations numbers otherwise" in capsys.readouterr().err
    assert main(["strat", "--ranks", str(path), "--dataset", "nations"]) == 0
    assert main(["audit", "--no-baseline", "--ranks", str(path), "--dataset", "nations"]) == 0


def test_strat_buckets_and_relation_groups(nations_results, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--buckets prints frequency_buckets' table, --relation-groups relation_groups' (the functions' own numbers)."""
    import json
    import warnings

    from kgeval.analysis.buckets import frequency_buckets
    from kgeval.analysis.groups import relation_groups

    path = tmp_path / "ranks.csv"
    nations_results.ranks_df().to_csv(path, index=False)
    nations = load_shipped_dataset("nations")
    base = ["strat", "--dataset", "nations", "--ranks", str(path)]
    assert main([*base, "--buckets", "answer", "--bucket-scheme", "libkge"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Metrics per answer frequency bucket (libkge scheme; counted on the train triples)\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = frequency_buckets(nations_results, nations.train, by="answer", scheme="libkge")
    printed = pd.read_csv(io.StringIO(out.split("\n", 1)[1]), sep=r"\s+", skiprows=[1])
    assert list(printed["mrr"]) == pytest.approx(list(expected.to_frame(("mrr",))["mrr"]), abs=5e-5)
    groups = {"first": [0, 1, 2], "rest": list(range(3, nations.num_relations))}
    (tmp_path / "groups.json").write_text(json.dumps(groups))
    assert main([*base, "--relation-groups", str(tmp_path / "groups.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Relation groups (micro and macro)\n") and "first" in out and "rest" in out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert relation_groups(nations_results, groups).to_frame() is not None
    assert main([*base, "--buckets", "answer", "--relation-groups", str(tmp_path / "groups.json")]) == 2
    assert "not both" in capsys.readouterr().err


def test_evaluate_sampled_estimates(nations_results, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """kgeval evaluate --sampled N prints and --json holds results.sampled_metrics(N) (both methods)."""
    import json

    path = tmp_path / "ranks.csv"
    nations_results.ranks_df().to_csv(path, index=False)
    for method in ("hypergeometric", "ultra"):
        assert main(["evaluate", "--ranks", str(path), "--sampled", "12", "--sampled-method", method, "--json"]) == 0
        document = json.loads(capsys.readouterr().out)
        expected = nations_results.sampled_metrics(12, ks=(1, 3, 5, 10), method=method)
        assert sorted(document["sampled"]) == sorted(expected)
        for key, value in expected.items():
            assert document["sampled"][key] == (pytest.approx(value, abs=1e-12) if value == value else None), key
    assert main(["evaluate", "--ranks", str(path), "--sampled", "5"]) == 0
    out = capsys.readouterr().out
    assert "Among 5 sampled candidates (hypergeometric" in out and "both.realistic.hits_at_1_sampled_5" in out
