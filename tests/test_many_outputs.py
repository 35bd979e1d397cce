"""What kgeval evaluate-many writes and which models it takes: the HTML page of a many-graph run (every graph's row
and every group average as exact cell values, names escaped, nothing fetched), a model saved whole (--checkpoint,
--trust-checkpoint), a kgeval checkpoint, a factory (--model MODULE:CALLABLE) and --results-dir on the command line.
Expected numbers are each graph's own single-graph evaluation, run by the test."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from torch import nn

from kgeval import RankBasedEvaluator
from kgeval.adapters.graph import on_graphs
from kgeval.cli import main
from kgeval.datasets import FullyInductiveDataset, InductiveDataset, TriplesDataset, load_dataset
from kgeval.exceptions import ResumeWarning
from kgeval.graphs import Graph
from kgeval.many import METRIC_COLUMNS, evaluate_many
from kgeval.models import DistMult
from kgeval.models.checkpoint import save_checkpoint
from kgeval.models.graph_baseline import NeighbourhoodBaseline
from tests.support.many_graphs import TrainingGraphModel, expected_table, make_folders

NASTY = '<script>alert("x")</script> & "quoted"'
#: a folder name that is hostile HTML (a folder name holds no "/")
NASTY_FOLDER = '<img src=x onerror=alert(1)> & "q"'
#: the cells a row of the page prints, beside its tasks
PRINTED = ("tasks", *METRIC_COLUMNS)


@pytest.fixture
def folders(tmp_path: Path) -> list[Path]:
    return make_folders(tmp_path / "data")


class Page(HTMLParser):
    """Every element with a data-key (its attributes), every tag with its attributes, every text chunk."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.cells: list[dict[str, str]] = []
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        self.tags.append((tag, attributes))
        if "data-key" in attributes:
            self.cells.append(attributes)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def check_page(text: str, expected: pd.DataFrame, model: str) -> Page:
    """The page is offline and holds every graph's row and every group's mean of the expected rows (exact values
    for the rows, the plain mean for the averages)."""
    assert "http://" not in text and "https://" not in text
    assert "//" not in re.sub(r"<script>.*?</script>", "", text, flags=re.S)
    page = Page(text)
    assert all(not {"src", "href"} & set(attributes) for _, attributes in page.tags)
    assert not {"link", "iframe", "img", "object", "embed"} & {tag for tag, _ in page.tags}
    assert sum(tag == "script" for tag, _ in page.tags) == 1
    rows = {(cell["data-dataset"], cell["data-key"]): float(cell["data-value"]) for cell in page.cells
            if "data-dataset" in cell}  # fmt: skip
    assert len(rows) == len(expected) * len(PRINTED)
    for _, row in expected.iterrows():
        for column in PRINTED:
            assert rows[(row["dataset"], f"many.{column}")] == row[column], (row["dataset"], column)
    means = {(cell["data-group"], cell["data-key"]): float(cell["data-value"]) for cell in page.cells
             if "data-group" in cell}  # fmt: skip
    for group in [*dict.fromkeys(expected["group"]), "all"]:
        part = expected if group == "all" else expected[expected["group"] == group]
        assert means[(group, "many.graphs")] == len(part)
        for column in METRIC_COLUMNS:
            assert means[(group, f"many.{column}")] == pytest.approx(sum(part[column]) / len(part), abs=1e-12)
    assert {cell["data-model"] for cell in page.cells} == {model}
    return page


def test_the_page_holds_every_row_and_average_and_escapes_names(folders: list[Path], tmp_path: Path) -> None:
    datasets = [load_dataset(folder) for folder in folders]
    datasets[2] = dataclasses.replace(datasets[2], name=NASTY)
    expected = expected_table(folders, "test")
    expected.loc[2, "dataset"] = NASTY
    many = evaluate_many(lambda dataset: NeighbourhoodBaseline(), datasets, use_tqdm=False)
    path = tmp_path / "many.html"
    text = many.to_html(path, model=NASTY)
    assert path.read_text(encoding="utf-8") == text
    assert NASTY not in text and "<script>alert" not in text
    page = check_page(text, expected, NASTY)
    shown = "".join(page.text)
    assert shown.count(NASTY) >= 3  # the title, the note, the row: as text
    assert "(test split)" in shown and "Group averages" in shown
    with pytest.raises(ValueError, match="does not exist"):
        many.to_html(tmp_path / "missing" / "many.html")


def test_the_page_in_chromium(folders: list[Path], tmp_path: Path) -> None:
    """Chromium opens the page offline: no console error, no request, every number in the DOM (skips without
    Playwright or Chromium)."""
    from tests.test_report import READ_CELLS, offline_page

    many = evaluate_many(lambda dataset: NeighbourhoodBaseline(), folders, use_tqdm=False)
    path = tmp_path / "many.html"
    many.to_html(path, model="baseline")
    with offline_page(path) as opened:
        cells = opened.page.evaluate(READ_CELLS)
    assert opened.errors == [] and opened.requests == []
    assert len(cells) == len(Page(path.read_text(encoding="utf-8")).cells)


class RelationDegree(nn.Module):
    """A tiny graph-conditioned model with one weight: the score of a tail candidate t of (h, r) in a graph is
    ``weight * (edges of r into t) + (edges between h and t)``; head candidates mirror it. Saved whole by the tests
    (``torch.save``)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.tensor(0.75))

    def counts(self, graph: Graph, column: int) -> torch.Tensor:
        """(R, N): the edges of each relation into (column 2) or out of (column 0) each node."""
        out = torch.zeros(graph.num_relations, graph.num_nodes)
        ones = torch.ones(len(graph.triples))
        return out.index_put((graph.triples[:, 1], graph.triples[:, column]), ones, accumulate=True)

    def links(self, graph: Graph) -> torch.Tensor:
        """(N, N): the edges between two nodes, either direction."""
        out = torch.zeros(graph.num_nodes, graph.num_nodes)
        ones = torch.ones(len(graph.triples))
        out = out.index_put((graph.triples[:, 0], graph.triples[:, 2]), ones, accumulate=True)
        return out + out.T

    def score_t(self, hr_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        return self.weight * self.counts(graph, 2)[hr_batch[:, 1]] + self.links(graph)[hr_batch[:, 0]]

    def score_h(self, rt_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        return self.weight * self.counts(graph, 0)[rt_batch[:, 0]] + self.links(graph)[rt_batch[:, 1]]


def own_evaluation(model: Any, dataset: Any) -> dict[str, float]:
    """The graph's row from its own single-graph evaluation: a graph-conditioned model bound by the test to the
    training graph (triples) or the inference graph (inductive), any other model evaluated as it is."""
    kwargs = dataset.evaluation_kwargs("test")
    if isinstance(dataset, TriplesDataset):
        wrapped = TrainingGraphModel(model, dataset) if hasattr(model, "links") else model
    else:
        assert isinstance(dataset, InductiveDataset | FullyInductiveDataset)
        wrapped = on_graphs(model, dataset)
    results = RankBasedEvaluator().evaluate(wrapped, **kwargs, use_tqdm=False)
    row = {f"{metric}_{rank_type}": results[f"both.{rank_type}.{metric}"]
           for metric in ("mrr", "hits@1", "hits@10") for rank_type in ("pessimistic", "realistic")}  # fmt: skip
    assert results.records is not None
    pessimistic, optimistic = results.records["pessimistic"], results.records["optimistic"]
    return {"dataset": dataset.name, "tasks": len(pessimistic), "tied": float((pessimistic > optimistic).mean()),
            **row}  # fmt: skip


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["evaluate-many", *argv, "--json", "--threads", "1"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def check_rows(document: dict[str, Any], expected: list[dict[str, float]]) -> None:
    printed = document["graphs"]
    assert [row["dataset"] for row in printed] == [row["dataset"] for row in expected]
    for row, own in zip(printed, expected, strict=True):
        for column in PRINTED:
            assert row[column] == own[column], (row["dataset"], column)


def test_a_model_saved_whole(folders: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--checkpoint with --trust-checkpoint: a graph-conditioned nn.Module saved with torch.save, over two shipped
    sets and an inductive and a fully inductive folder; its rows equal each graph's own evaluation and
    evaluate_many's in-process table; the HTML page holds them; without --trust-checkpoint it is refused."""
    model = RelationDegree()
    path = tmp_path / "relation_degree.pt"
    torch.save(model, path)
    names = ["nations", "kinship", str(folders[2]), str(folders[3])]
    datasets = [load_dataset(name) for name in names]
    expected = [own_evaluation(model, dataset) for dataset in datasets]
    assert max(row["tied"] for row in expected) > 0 and min(row["mrr_realistic"] for row in expected) > 0
    html = tmp_path / "many.html"
    document = run_json(capsys, "--checkpoint", str(path), "--trust-checkpoint", "--datasets", *names,
                        "--html", str(html))  # fmt: skip
    check_rows(document, expected)
    assert document["model"] == "RelationDegree (relation_degree.pt)" and document["resumed"] == []
    in_process = evaluate_many(model, datasets, use_tqdm=False)
    printed = pd.DataFrame(document["graphs"])
    for column in ["tasks", *METRIC_COLUMNS]:
        assert list(printed[column]) == list(in_process.table[column]), column
    check_page(html.read_text(encoding="utf-8"), in_process.table, "RelationDegree (relation_degree.pt)")

    assert main(["evaluate-many", "--checkpoint", str(path), "--datasets", "nations", "--json"]) == 2
    error = capsys.readouterr().err
    assert "runs code from the file" in error and "--trust-checkpoint" in error and len(error.splitlines()) == 1
    assert main(["evaluate-many", "--checkpoint", str(path), "--model", "baseline", "--datasets", "nations"]) == 2
    assert "give --checkpoint PATH or --model, not both" in capsys.readouterr().err


def test_a_kgeval_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A kgeval checkpoint (plain tensors: no trust needed) of an ordinary model of one graph."""
    dataset = load_dataset("nations")
    model = DistMult(dataset.num_entities, dataset.num_relations, dim=8, seed=3)
    path = tmp_path / "nations.pt"
    save_checkpoint(model, path, dataset=dataset)
    document = run_json(capsys, "--checkpoint", str(path), "--datasets", "nations")
    check_rows(document, [own_evaluation(model, dataset)])


FACTORY = '''
from kgeval.models import DistMult


def build(dataset):
    """A DistMult of the dataset's sizes, seeded by its entity count."""
    return DistMult(dataset.num_entities, dataset.num_relations, dim=8, seed=dataset.num_entities)
'''


def test_a_factory_and_a_resumed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """--model MODULE:CALLABLE imports a factory from the current folder and calls it with each dataset; with
    --results-dir a rerun reads both graphs back (the same rows); changing the factory's file evaluates them again."""
    (tmp_path / "many_factory_module.py").write_text(FACTORY, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "many_factory_module", raising=False)
    datasets = [load_dataset(name) for name in ("nations", "kinship")]
    expected = [own_evaluation(DistMult(d.num_entities, d.num_relations, dim=8, seed=d.num_entities), d)
                for d in datasets]  # fmt: skip
    argv = ["--model", "many_factory_module:build", "--datasets", "nations", "kinship", "--results-dir", "results"]
    first = run_json(capsys, *argv)
    check_rows(first, expected)
    assert first["resumed"] == [] and len(list((tmp_path / "results").glob("*.json"))) == 2
    second = run_json(capsys, *argv)
    assert second["resumed"] == ["nations", "kinship"]
    check_rows(second, expected)
    assert main(["evaluate-many", *argv, "--no-progress"]) == 0
    assert "2 graph(s) read back from results, not evaluated again: nations, kinship" in capsys.readouterr().out

    (tmp_path / "many_factory_module.py").write_text(FACTORY + "\n# edited\n", encoding="utf-8")
    with pytest.warns(ResumeWarning, match=r"\(model differ\)") as caught:
        assert run_json(capsys, *argv)["resumed"] == []
    assert len(caught) == 2


@pytest.mark.parametrize(("spec", "message"), [
    ("nocolon", "give 'baseline' or MODULE:CALLABLE"),
    ("no_such_module_here:build", "cannot import no_such_module_here"),
    ("kgeval.models:no_such_factory", "kgeval.models has no no_such_factory"),
    ("kgeval:__version__", "__version__ is a str, not a function"),
])  # fmt: skip
def test_a_bad_factory_is_one_line(spec: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate-many", "--model", spec, "--datasets", "nations", "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("kgeval evaluate-many: error:") and message in error and len(error.splitlines()) == 1


def test_the_command_writes_the_page_of_a_hostile_folder_name(folders: list[Path], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    nasty = folders[0].rename(folders[0].with_name(NASTY_FOLDER))
    html = tmp_path / "page.html"
    assert main(["evaluate-many", "--datasets", str(nasty), str(folders[3]), "--html", str(html),
                 "--no-progress"]) == 0  # fmt: skip
    assert f"(the HTML page is in {html})" in capsys.readouterr().out
    text = html.read_text(encoding="utf-8")
    assert NASTY_FOLDER not in text and "<img" not in text
    expected = expected_table([nasty, folders[3]], "test")
    assert expected.loc[0, "dataset"] == NASTY_FOLDER
    check_page(text, expected, "baseline")
    (tmp_path / "no").write_text("a file")  # in the way of the folder --html would make
    assert main(["evaluate-many", "--datasets", str(nasty), "--html", str(tmp_path / "no" / "p.html")]) == 2
    assert "--html" in capsys.readouterr().err
