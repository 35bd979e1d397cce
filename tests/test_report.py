"""kgeval.report: the page's numbers equal the results', it is offline and escaped, and it renders in Chromium.

The browser tests need Playwright's Python package and Debian's Chromium at /usr/bin/chromium (``apt-get install
chromium``; no ``playwright install``); without them they are skipped with the reason. KGEVAL_UPDATE_SCREENSHOT=1
writes the screenshot to docs/report.png.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from kgeval import RankBasedEvaluator, RankBasedMetricResults
from kgeval.analysis import stats
from kgeval.analysis.stratified import strat_curve
from kgeval.audit import audit_dataset
from kgeval.cli.report import add_report_arguments, run_report
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from kgeval.records import RankRecords
from kgeval.report import labels_from_frames, report_html, write_report

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
NASTY = '<script>alert("x")</script> & "quoted"'
N_RESAMPLES = 500
SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "report.png"


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory: pytest.TempPathFactory):
    """Two DistMult models on nations' test split: one as results, one as the rank table it saved."""
    data = load_shipped_dataset("nations")
    evaluator = RankBasedEvaluator()
    first, second = (
        evaluator.evaluate(
            DistMult(data.num_entities, data.num_relations, dim=8, seed=seed),
            **data.evaluation_kwargs("test"),
            use_tqdm=False,
        )
        for seed in (3, 11)
    )
    frame = second.ranks_df(relation_labels=data.relation_to_id)
    baseline = RankBasedMetricResults.from_rank_table(frame, ks=(1, 3, 10))  # the second model as a rank table
    expected = {"DistMult": first, "Baseline": RankBasedMetricResults.from_records(RankRecords.from_frame(frame),
                                                                                  ks=(1, 3, 10))}  # fmt: skip
    audit = audit_dataset(data, rule_baseline=False)
    recorded = {
        "model": "DistMult",
        "dataset": "nations",
        "split": "test",
        "filtered_by": "train+valid+test",
        "setting": "filtered",
    }  # what a table of kgeval evaluate --save-ranks records (no date here)
    path = write_report({"DistMult": first, "Baseline": baseline}, tmp_path_factory.mktemp("report") / "report.html",
                        audit=audit, popularity_triples=data.train, relation_labels=labels_from_frames(frame),
                        n_resamples=N_RESAMPLES, about={"DistMult": recorded, "Baseline": recorded})  # fmt: skip
    return data, expected, path


class _Cells(HTMLParser):
    """Every element with a data-key (its attributes and text), every tag, every attribute value."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.cells: list[dict[str, str]] = []
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.open: list[dict[str, str] | None] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        self.tags.append((tag, attributes))
        if tag in ("td", "span"):
            cell = dict(attributes, text="") if "data-key" in attributes else None
            self.open.append(cell)
            if cell is not None:
                self.cells.append(cell)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "span") and self.open:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for cell in self.open:
            if cell is not None:
                cell["text"] += data


def _parse(text: str) -> _Cells:
    parser = _Cells()
    parser.feed(text)
    parser.close()
    return parser


def _expected_value(cell: dict[str, str], models: dict[str, RankBasedMetricResults], data, memo: dict) -> float:
    """What the cell must hold, recomputed from the results objects by kgeval's own public functions (each
    computation once, in ``memo``)."""
    key, name = cell["data-key"], cell["data-model"]

    def once(what: tuple, compute):
        if what not in memo:
            memo[what] = compute()
        return memo[what]

    if key.startswith("relation."):
        _, relation, column = key.split(".", 2)
        frames = {
            n: once(("relations", n), lambda n=n: models[n].per_relation(keys=("mrr", "hits@10"))) for n in models
        }
        if column == "count":
            return max(int(frame.at[int(relation), "count"]) for frame in frames.values()
                       if int(relation) in frame.index)  # fmt: skip
        return float(frames[name].at[int(relation), column])
    results = models[name]
    if key.startswith("ci."):
        side, end = key.split(".")[1], key.split(".")[-1]
        interval = once(
            ("ci", name, side), lambda: results.confidence_interval(f"{side}.mrr", n_resamples=N_RESAMPLES, seed=0)
        )
        return interval.low if end == "low" else interval.high
    if key.startswith("tie_gap."):
        side, metric = key.split(".")[1:]
        return results.data[(side, "optimistic", metric)] - results.data[(side, "pessimistic", metric)]
    if key.startswith("hits_curve."):
        k = int(key.rsplit("_", 1)[1])
        records = results.records
        ranks = records.ranks("realistic")[records.side != 2]
        return float(np.count_nonzero(ranks <= k) / ranks.size)
    if key.startswith("compare."):
        other = models[cell["data-other"]]
        comparison = once(("compare", name, cell["data-other"]),
                          lambda: stats.compare(results, other, "mrr", n_resamples=N_RESAMPLES, seed=0))  # fmt: skip
        return float(getattr(comparison, key.rsplit(".", 1)[1]))
    if key.startswith("strat."):
        curve = once(("strat", name), lambda: strat_curve(results, data.train, vary="entity"))
        return float(curve.loc[curve["beta_e"] == float(cell["data-beta"]), "strat_mrr"].iloc[0])
    return results.to_flat_dict()[key]


def _same(page_value: str, expected: float) -> bool:
    """The repr of the float (an integer's digits for counts), or nan for nan."""
    if page_value == "nan":
        return math.isnan(expected)
    return page_value == repr(float(expected)) or (page_value.isdigit() and int(page_value) == expected)


def _check_numbers(cells: list[dict[str, str]], models: dict[str, RankBasedMetricResults], data) -> set[str]:
    """Every data-value equals the recomputed number exactly and the printed text rounds it; the kinds checked."""
    assert cells
    memo: dict = {}
    for cell in cells:
        expected = _expected_value(cell, models, data, memo)
        assert _same(cell["data-value"], expected), (cell, expected)
        text = cell["text"].strip().replace(",", "")
        if not math.isnan(expected):
            digits = len(text.split(".")[1]) if "." in text else 0
            assert abs(float(text) - expected) <= 0.5 * 10**-digits + 1e-12, cell
    return {cell["data-key"].split(".")[0] for cell in cells}


# -- without a browser -------------------------------------------------------------------------------------------
def test_every_number_in_the_page_equals_the_results(evaluation) -> None:
    data, models, path = evaluation
    page = _parse(path.read_text(encoding="utf-8"))
    kinds = _check_numbers(page.cells, models, data)
    assert {"both", "head", "tail", "ci", "tie_gap", "hits_curve", "relation", "compare", "strat"} <= kinds
    keys = {(cell["data-model"], cell["data-key"]) for cell in page.cells}
    for name in models:  # the headline of each model, both sides and each side
        for side in ("both", "head", "tail"):
            assert (name, f"{side}.realistic.inverse_harmonic_mean_rank") in keys
            assert (name, f"ci.{side}.realistic.inverse_harmonic_mean_rank.low") in keys
    relations = {cell["data-relation"] for cell in page.cells if "data-relation" in cell}
    assert relations == {str(r) for r in np.unique(data.test[:, 1].numpy())}


def test_the_hits_curve_meets_the_reported_hits_at_k(evaluation) -> None:
    _, models, path = evaluation
    page = _parse(path.read_text(encoding="utf-8"))
    for cell in page.cells:
        if cell["data-key"].startswith("hits_curve."):
            k = int(cell["data-key"].rsplit("_", 1)[1])
            results = models[cell["data-model"]]
            if k in results.ks:
                assert math.isclose(float(cell["data-value"]), results[f"both.realistic.hits_at_{k}"], rel_tol=1e-12)


def test_the_page_is_offline_and_complete(evaluation) -> None:
    _, models, path = evaluation
    text = path.read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text and "//" not in re.sub(r"<script>.*?</script>", "", text,
                                                                                   flags=re.S)  # fmt: skip
    page = _parse(text)
    for tag, attributes in page.tags:
        assert not {"src", "href"} & set(attributes), (tag, attributes)  # nothing to fetch, not even a file
        assert tag not in ("link", "iframe", "img", "object", "embed")
    charts = [attributes["data-chart"] for tag, attributes in page.tags if "data-chart" in attributes]
    assert sorted(set(charts)) == ["hits-curve", "per-relation", "rank-histogram", "strat-curve"]
    assert charts.count("rank-histogram") == len(models)
    paths = [attributes["d"] for tag, attributes in page.tags if tag == "path"]
    assert len(paths) >= 2 * len(models) + len(models) and all(re.fullmatch(r"M[\d.,L]+", d) for d in paths)
    assert sum(tag == "rect" for tag, _ in page.tags) >= len(models)
    assert "Evaluation audit: nations" in "".join(page.text)


def test_labels_are_escaped() -> None:
    results = RankBasedMetricResults.create_random(random_state=0, num_tasks=50)
    text = report_html({NASTY: results}, title=NASTY, relation_labels={r: NASTY for r in range(10)},
                       audit=NASTY, n_resamples=20)  # fmt: skip
    assert NASTY not in text and "<script>alert" not in text
    page = _parse(text)
    assert sum(chunk.count(NASTY) for chunk in page.text) >= 3  # the title, the model, the labels: shown as text
    assert {cell["data-model"] for cell in page.cells} == {NASTY, "all"}
    assert sum(tag == "script" for tag, _ in page.tags) == 1


def test_write_report_refuses_a_bad_path_and_results_without_records(tmp_path: Path) -> None:
    results = RankBasedMetricResults.create_random(random_state=0, num_tasks=20)
    with pytest.raises(ValueError, match="the folder .* does not exist"):
        write_report(results, tmp_path / "missing" / "report.html", n_resamples=10)
    with pytest.raises(ValueError, match="is a folder; give a file name"):  # was a raw IsADirectoryError
        write_report(results, tmp_path, n_resamples=10)
    bare = RankBasedMetricResults(data=results.data, ks=results.ks)
    with pytest.raises(ValueError, match="model 'model': the report needs the per-task rank records"):
        report_html(bare)
    with pytest.raises(TypeError, match="model 'x': expected RankBasedMetricResults, got int"):
        report_html({"x": 3})
    with pytest.raises(TypeError, match=r"model 'model' is a rank table: pass RankBasedMetricResults.from_rank_table"):
        report_html(results.ranks_df())
    assert (
        write_report(results, tmp_path / "one.html", n_resamples=10)
        .read_text(encoding="utf-8")
        .startswith("<!DOCTYPE html>")
    )


# -- in Chromium -------------------------------------------------------------------------------------------------
def _browser():
    playwright_api = pytest.importorskip(
        "playwright.sync_api", reason="the browser tests need `pip install playwright`"
    )
    if not (os.path.exists(CHROMIUM) and shutil.which(CHROMIUM)):
        pytest.skip(f"the browser tests need Chromium at {CHROMIUM} (apt-get install chromium)")
    return playwright_api


READ_CELLS = """() => Array.from(document.querySelectorAll("[data-key]")).map(e => {
  const out = {text: e.textContent};
  for (const a of e.attributes) if (a.name.startsWith("data-")) out[a.name] = a.value;
  return out;
})"""
CHART_BOXES = """() => Array.from(document.querySelectorAll("figure[data-chart] svg")).map(svg => {
  const box = svg.getBoundingClientRect();
  const lengths = Array.from(svg.querySelectorAll("path")).map(p => p.getTotalLength());
  const bars = Array.from(svg.querySelectorAll("rect")).map(r => r.getBBox().width);
  return {chart: svg.parentElement.dataset.chart, width: box.width, height: box.height, lengths, bars};
})"""
COLUMN = """(i) => Array.from(document.querySelectorAll("#relation-table tbody tr")).map(r => r.cells[i].textContent)"""


@dataclass
class OfflinePage:
    """A Chromium page opened on a local file with every request beyond ``file://`` refused: the browser (for a
    second page), the page, the console / page errors and the refused requests, and the route that refuses them."""

    browser: Any
    page: Any
    errors: list[str]
    requests: list[str]

    def route(self, handle: Any, request: Any) -> None:
        if request.url.startswith("file://"):
            handle.continue_()
        else:
            self.requests.append(request.url)
            handle.abort()


@contextmanager
def offline_page(path: Path) -> Iterator[OfflinePage]:
    """:class:`OfflinePage` of ``path`` (1150 pixels wide), loaded; the browser closed after the block (skips
    without Playwright or Chromium)."""
    playwright_api = _browser()
    with playwright_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            opened = OfflinePage(browser, browser.new_page(viewport={"width": 1150, "height": 900}), [], [])
            opened.page.on(
                "console", lambda message: opened.errors.append(message.text) if message.type == "error" else None
            )
            opened.page.on("pageerror", lambda error: opened.errors.append(str(error)))
            opened.page.route("**/*", opened.route)
            opened.page.goto(path.as_uri(), wait_until="load")
            yield opened
        finally:
            browser.close()


def test_the_report_in_chromium(evaluation, tmp_path: Path) -> None:
    """Chromium opens the file offline: no console error, no request beyond the file, the numbers in the DOM equal
    the results', every chart drawn, a column sorts on click; the same page without JavaScript still has them."""
    data, models, path = evaluation
    with offline_page(path) as opened:
        page = opened.page
        cells = [{key: value for key, value in cell.items()} for cell in page.evaluate(READ_CELLS)]
        charts = page.evaluate(CHART_BOXES)
        header = page.locator("#relation-table thead th").nth(2)
        before = page.evaluate(COLUMN, 2)
        header.click()
        descending = page.evaluate(COLUMN, 2)
        header.click()
        ascending = page.evaluate(COLUMN, 2)
        aria = header.get_attribute("aria-sort")
        shot = SCREENSHOT if os.environ.get("KGEVAL_UPDATE_SCREENSHOT") == "1" else tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True, clip={"x": 0, "y": 0, "width": 1150, "height": 2000})

        quiet = opened.browser.new_page(java_script_enabled=False)
        quiet.route("**/*", opened.route)
        quiet.goto(path.as_uri(), wait_until="load")
        quiet_cells = quiet.locator("[data-key]").count()
        boxes = quiet.locator("figure[data-chart] svg").evaluate_all("(all) => all.map(s => s.getBoundingClientRect())")
        quiet_charts = [box["width"] * box["height"] for box in boxes]
    assert opened.errors == [] and opened.requests == []
    assert len(cells) == len(_parse(path.read_text(encoding="utf-8")).cells)
    _check_numbers(cells, models, data)
    assert {box["chart"] for box in charts} == {"hits-curve", "per-relation", "rank-histogram", "strat-curve"}
    for box in charts:
        assert box["width"] > 100 and box["height"] > 100, box
        assert all(length > 0 for length in box["lengths"]) and all(width >= 0 for width in box["bars"]), box
        assert box["lengths"] or any(width > 0 for width in box["bars"]), box
    values = [float(v) for v in descending]
    assert values == sorted(values, reverse=True) and [float(v) for v in ascending] == sorted(values)
    assert descending != before and aria == "ascending"
    assert quiet_cells == len(cells) and len(quiet_charts) == len(charts) and min(quiet_charts) > 0
    assert shot.stat().st_size > 10_000


def test_a_rank_table_and_its_results_give_the_same_page(evaluation) -> None:
    _, models, _ = evaluation
    frame = models["Baseline"].ranks_df()
    from_table = RankBasedMetricResults.from_rank_table(frame, ks=(1, 3, 10))
    assert report_html(from_table, n_resamples=20) == report_html(models["Baseline"], n_resamples=20)
    assert isinstance(frame, pd.DataFrame)


# -- kgeval report -----------------------------------------------------------------------------------------------
def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kgeval report")
    add_report_arguments(parser)
    return run_report(parser.parse_args(argv))


def test_the_command_writes_the_page_of_saved_rank_tables(evaluation, tmp_path: Path, capsys) -> None:
    _, models, _ = evaluation
    for name, results in models.items():
        results.ranks_df().to_csv(tmp_path / f"{name}.csv", index=False)
    argv = ["--ranks", str(tmp_path / "DistMult.csv"), str(tmp_path / "Baseline.csv"), "--dataset", "nations",
            "--no-rule-baseline", "--resamples", "50", "--output", str(tmp_path / "report.html")]  # fmt: skip
    assert _cli(argv) == 0
    assert capsys.readouterr().out == f"Wrote the report of DistMult, Baseline to {tmp_path / 'report.html'}\n"
    page = _parse((tmp_path / "report.html").read_text(encoding="utf-8"))
    flat = {name: results.to_flat_dict() for name, results in models.items()}
    headline = [cell for cell in page.cells if cell["data-key"] in flat.get(cell["data-model"], {})]
    assert {cell["data-model"] for cell in headline} == set(models) and len(headline) >= 12
    assert all(_same(cell["data-value"], flat[cell["data-model"]][cell["data-key"]]) for cell in headline)
    text = "".join(page.text)
    assert "Evaluation audit: nations" in text and "Popularity-stratified MRR" in text and "embassy" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--names", "only-one"], "kgeval report: error: 2 rank tables but 1 --names\n"),
        (
            ["--names", "same", "same"],
            "kgeval report: error: model names must differ, got ['same', 'same'] (give --names)\n",
        ),
    ],
)
def test_the_command_refuses_names_that_do_not_fit(tmp_path: Path, capsys, extra: list[str], message: str) -> None:
    argv = ["--ranks", "a.csv", "b.csv", *extra, "--output", str(tmp_path / "r.html")]
    assert _cli(argv) == 2
    assert capsys.readouterr().err == message


def test_the_command_names_a_bad_rank_table(tmp_path: Path, capsys) -> None:
    pd.DataFrame({"head": [0], "relation": [0], "tail": [1]}).to_csv(tmp_path / "bad.csv", index=False)
    assert _cli(["--ranks", str(tmp_path / "bad.csv"), "--output", str(tmp_path / "r.html")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("kgeval report: error: a rank table of bad needs the columns") and error.count("\n") == 1
    assert not (tmp_path / "r.html").exists()


def test_results_to_html_is_the_report_of_those_results(tmp_path: Path) -> None:
    results = RankBasedMetricResults.create_random(random_state=1, num_tasks=30)
    text = results.to_html(tmp_path / "page.html", n_resamples=10)
    assert text == report_html(results, n_resamples=10)
    assert (tmp_path / "page.html").read_text(encoding="utf-8") == text


def test_results_to_html_names_a_bad_destination_before_the_work(tmp_path: Path, monkeypatch) -> None:
    results = RankBasedMetricResults.create_random(random_state=1, num_tasks=30)
    import kgeval.report

    def never(*args: object, **kwargs: object) -> str:
        raise AssertionError("the report was built before its destination was checked")

    monkeypatch.setattr(kgeval.report, "report_html", never)
    with pytest.raises(ValueError, match="is a folder; give a file name"):
        results.to_html(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        results.to_html(tmp_path / "missing" / "page.html")


def test_the_command_says_what_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    from kgeval.cli import main

    assert main(["report"]) == 2
    assert capsys.readouterr().err == "kgeval report: error: give --ranks PATH [PATH ...] and --output HTML\n"


def test_a_report_of_an_evaluation_without_triples_says_it_has_no_relations() -> None:
    """evaluate_scores knows no relation ids (-1): the report has its headline and no per-relation table grouped
    under a relation "-1" (as before), but a sentence saying why there is none."""
    from kgeval import evaluate_scores

    generator = torch.Generator().manual_seed(0)
    results = evaluate_scores(torch.rand(30, generator=generator), torch.rand(30, 8, generator=generator))
    page = report_html({"scores": results}, n_resamples=10)
    assert "Not available: the ranks of scores do not say which relation each task ranks" in page
    assert 'id="relation-table"' not in page
    assert f"{results.get_metric('tail.realistic.mrr'):.4f}" in page


def test_the_command_reads_the_table_of_an_evaluation_without_triples(tmp_path: Path, capsys) -> None:
    """Its -1 ids read back, and the metrics the page does not show (adjusted hits@10 of 9 candidates, undefined)
    raise no warning per metric and call on the terminal."""
    from kgeval import evaluate_scores

    generator = torch.Generator().manual_seed(0)
    evaluate_scores(torch.rand(30, generator=generator), torch.rand(30, 8, generator=generator)).save_ranks(
        tmp_path / "scores.csv"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _cli(["--ranks", str(tmp_path / "scores.csv"), "--output", str(tmp_path / "r.html")]) == 0
    assert capsys.readouterr().err == ""
    assert "Not available: the ranks of scores" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_the_stratified_curve_is_labelled_as_what_it_is_and_absent_entities_leave_it_out() -> None:
    """At beta_e = 0 the curve (beta_r = 0) is the relations' macro-average MRR, which the caption now says (it said
    "the plain MRR"); entities absent from the popularity triples (WN18RR's unseen test entities) left the whole
    report undrawable; now the section says so, and min_count draws it."""
    from kgeval.analysis.relations import macro_average

    dataset = load_shipped_dataset("nations")
    model = DistMult(dataset.num_entities, dataset.num_relations, dim=8, seed=0)
    results = RankBasedEvaluator().evaluate(model, use_tqdm=False, **dataset.evaluation_kwargs("test"))
    page = _parse(report_html(results, popularity_triples=dataset.train, n_resamples=10))
    at_zero = next(cell for cell in page.cells if cell["data-key"] == "strat.beta_e=0.0.strat_mrr")
    assert float(at_zero["data-value"]) == pytest.approx(macro_average(results.records, "mrr"), rel=1e-12, abs=0)
    assert "at \u03b2_e = 0 it is the MRR macro-averaged over relations, not the plain MRR" in " ".join(page.text)
    few = dataset.train[dataset.train[:, 0] != dataset.test[0, 0]]
    few = few[few[:, 2] != dataset.test[0, 0]]  # one test entity never in these triples
    text = report_html(results, popularity_triples=few, n_resamples=10)
    assert "Not drawn: 1 entity(s) of the evaluated triples do not occur in popularity_triples" in text
    assert "kgeval report --min-count" in text and 'data-chart="strat-curve"' not in text
    assert 'data-chart="strat-curve"' in report_html(results, popularity_triples=few, min_count=1, n_resamples=10)


# -- what the page says it shows (header, audit card, axes, ks, the dataset it fits) ---------------------------
@pytest.fixture(scope="module")
def cli_tables(tmp_path_factory: pytest.TempPathFactory):
    """A nations DistMult checkpoint evaluated by ``kgeval evaluate --save-ranks`` (the table with provenance), and
    the in-process results of the same evaluation."""
    from kgeval.cli import main
    from kgeval.models.checkpoint import save_checkpoint

    folder = tmp_path_factory.mktemp("cli-report")
    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=8, seed=5)
    save_checkpoint(model, folder / "nations.pt", data)
    assert main(["evaluate", "--checkpoint", str(folder / "nations.pt"), "--save-ranks",
                 str(folder / "nations_ranks.csv"), "--no-progress"]) == 0  # fmt: skip
    results = RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False)
    return folder, results


def _about(page: str) -> dict[str, str]:
    return dict(re.findall(r'<td class="label" data-about="(\w+)"[^>]*>([^<]*)</td>', page))


def test_the_header_says_model_dataset_split_filter_protocol_and_date(cli_tables, capsys) -> None:
    folder, _results = cli_tables
    out = folder / "page.html"
    assert _cli(["--ranks", str(folder / "nations_ranks.csv"), "--resamples", "20", "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    about = _about(page)
    assert {key: about[key] for key in ("model", "dataset", "split", "filtered_by", "setting")} == {
        "model": "DistMult", "dataset": "nations", "split": "test", "filtered_by": "train + valid + test",
        "setting": "filtered, realistic ranks"}  # fmt: skip
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", about["evaluated_at"])
    assert "<title>DistMult on nations test</title>" in page
    assert capsys.readouterr().out == f"Wrote the report of DistMult to {out}\n"  # named by the recorded model
    assert _cli(["--ranks", str(folder / "nations_ranks.csv"), "--resamples", "20", "-o", str(out),
                 "--title", "Mine", "--names", "DM-8"]) == 0  # fmt: skip
    page = out.read_text(encoding="utf-8")
    assert "<title>Mine</title>" in page and 'data-model="DM-8"' in page and 'data-model="DistMult"' not in page


def test_the_page_has_the_ks_of_the_command_line(cli_tables) -> None:
    """kgeval evaluate's headline has Hits@5; so has the page (it had 1, 3, 10), with the results' value."""
    folder, results = cli_tables
    out = folder / "ks.html"
    assert _cli(["--ranks", str(folder / "nations_ranks.csv"), "--resamples", "20", "-o", str(out)]) == 0
    cells = {cell["data-key"]: cell for cell in _parse(out.read_text(encoding="utf-8")).cells}
    for k in (1, 3, 5, 10):
        key = f"both.realistic.hits_at_{k}"
        assert _same(cells[key]["data-value"], results.to_flat_dict()[key]), key


def test_a_rank_table_is_refused_against_a_dataset_it_does_not_fit(cli_tables, tmp_path: Path, capsys) -> None:
    """Nations' ranks with --dataset umls: refused in one line by the recorded fingerprint; a table without it but
    with labels, by the first label umls numbers otherwise (it labelled Nations' relations with UMLS's names)."""
    folder, _results = cli_tables
    out = tmp_path / "r.html"
    assert _cli(["--ranks", str(folder / "nations_ranks.csv"), "--dataset", "umls", "-o", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("kgeval report: error: rank table ")
    assert "ranks nations (fingerprint " in error and "not umls (fingerprint " in error and not out.exists()
    frame = pd.read_csv(folder / "nations_ranks.csv")
    frame = frame[frame["relation"] < 46]  # inside umls' 46 relations: only the labels tell
    frame.drop(columns=["dataset", "dataset_fingerprint"]).to_csv(tmp_path / "unrecorded.csv", index=False)
    assert _cli(["--ranks", str(tmp_path / "unrecorded.csv"), "--dataset", "umls", "-o", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "which umls numbers otherwise or not at all" in error and not out.exists()


def test_the_audit_card_is_html_tables_with_its_findings_first(cli_tables) -> None:
    folder, _results = cli_tables
    data = load_shipped_dataset("nations")
    audit = audit_dataset(data)
    page = report_html(RankBasedMetricResults.from_rank_table(folder / "nations_ranks.csv"), audit=audit,
                       n_resamples=10)  # fmt: skip
    card = page[page.index('<section id="audit">') :]
    card = card[: card.index("</section>")]
    assert "<pre>" not in page and "|---|" not in card  # no raw Markdown
    findings = card.index('<ul class="findings">')
    assert findings < card.index("<table>")  # the findings above the tables
    first = re.search(r'<ul class="findings"><li>(.*?)</li>', card).group(1)
    assert first.startswith("<b>Rule-only baseline.</b>")
    assert f"MRR {audit.rule_baseline.mrr:.4f}, Hits@10 {audit.rule_baseline.hits_at_10:.4f}" in first
    rows = re.findall(r"<details><summary>([\d,]+) rows</summary>", card)
    assert rows == [f"{len(audit.relation_pairs):,}"]  # the 135 relation pairs folded, the small tables open
    assert card.count("<table>") == 3  # leakage, relation pairs, coverage


def _tick_labels(svg: str) -> list[str]:
    return re.findall(r'text-anchor="end">([^<]+)</text>', svg)


def test_y_axes_have_distinct_ticks_and_honest_ranges() -> None:
    """A narrow range (stratified MRR 0.59-0.62) printed 0.6 twice; the stratified curve's axis started at its
    smallest value. Now every label differs and the axis runs from 0 past the largest value."""
    from kgeval.report import _y_ticks

    labels = _tick_labels(_y_ticks(0.59, 0.62))
    assert len(labels) == len(set(labels)) >= 3
    dataset = load_shipped_dataset("nations")
    results = RankBasedEvaluator().evaluate(DistMult(dataset.num_entities, dataset.num_relations, dim=8, seed=0),
                                            **dataset.evaluation_kwargs("test"), use_tqdm=False)  # fmt: skip
    page = report_html(results, popularity_triples=dataset.train, n_resamples=10)
    svg = page[page.index('data-chart="strat-curve"') :]
    svg = svg[: svg.index("</svg>")]
    ticks = [float(label) for label in _tick_labels(svg)]
    curve = strat_curve(results, dataset.train, vary="entity")["strat_mrr"]
    assert ticks[0] == 0 and ticks[-1] >= curve.max() and len(set(ticks)) == len(ticks)


# -- a temporal evaluation: --save-ranks -> report ----------------------------------------------------------------
TEMPORAL_SCREENSHOT = SCREENSHOT.with_name("report_temporal.png")


@pytest.fixture(scope="module")
def temporal_report(tmp_path_factory: pytest.TempPathFactory):
    """TNTComplEx trained 20 epochs on a small temporal folder, evaluated by ``kgeval evaluate --save-ranks`` and
    reported by ``kgeval report --dataset``; the in-process time-aware and static results of the same model."""
    import types

    from kgeval import TemporalRankBasedEvaluator
    from kgeval.cli import main
    from kgeval.datasets import load_temporal_tsv
    from kgeval.models import TNTComplEx
    from kgeval.models.checkpoint import save_checkpoint
    from kgeval.models.training import train_model
    from tests.test_cli_temporal import write_tkg

    folder = tmp_path_factory.mktemp("temporal-report")
    write_tkg(folder / "tkg")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the folder's repeated quadruples, said in a warning
        data = load_temporal_tsv(folder / "tkg")
        model = TNTComplEx(data.num_entities, data.num_relations, data.num_times, dim=8, seed=0)
        train_model(model, data.train, num_epochs=20, batch_size=64, lr=0.05, seed=0, use_tqdm=False)
        model.eval()
        save_checkpoint(model, folder / "tnt.pt", data)
        assert main(["evaluate", "--checkpoint", str(folder / "tnt.pt"), "--save-ranks", str(folder / "tnt.csv"),
                     "--no-progress"]) == 0  # fmt: skip
        argv = ["--ranks", str(folder / "tnt.csv"), "--dataset", str(folder / "tkg"), "--resamples",
                str(N_RESAMPLES), "-o", str(folder / "tnt.html")]  # fmt: skip
        assert _cli(argv) == 0
        assert _cli([*argv[:-1], str(folder / "static.html"), "--setting", "static"]) == 0
        results = TemporalRankBasedEvaluator(filtered="all", ks=(1, 3, 5, 10)).evaluate(
            model, **data.evaluation_kwargs("test"), use_tqdm=False)  # fmt: skip
    popularity = types.SimpleNamespace(train=data.train[:, :3])  # what the page counts popularity on
    return folder, results, popularity


def test_a_temporal_evaluation_goes_from_save_ranks_to_the_report(temporal_report) -> None:
    """Every number of the page of the saved table equals the in-process time-aware results' (the static page,
    the static ones'); the header names the protocol and the temporal audit card is there."""
    folder, results, popularity = temporal_report
    page = (folder / "tnt.html").read_text(encoding="utf-8")
    kinds = _check_numbers(_parse(page).cells, {"TNTComplEx": results}, popularity)
    assert {"both", "ci", "relation", "strat", "hits_curve"} <= kinds
    assert _about(page)["setting"] == "time-aware, realistic ranks" and _about(page)["dataset"] == "tkg"
    assert "Temporal evaluation audit: tkg" in page and "Recurrency baseline" in page
    static = (folder / "static.html").read_text(encoding="utf-8")
    _check_numbers(_parse(static).cells, {"TNTComplEx": results.static}, popularity)
    assert _about(static)["setting"] == "static, realistic ranks"


def test_the_temporal_report_in_chromium(temporal_report, tmp_path: Path) -> None:
    """Chromium opens the temporal page offline: no error, no request, its DOM numbers equal the results', every
    chart drawn; a screenshot (docs/report_temporal.png with KGEVAL_UPDATE_SCREENSHOT=1)."""
    folder, results, popularity = temporal_report
    path = folder / "tnt.html"
    with offline_page(path) as opened:
        cells = [dict(cell) for cell in opened.page.evaluate(READ_CELLS)]
        charts = opened.page.evaluate(CHART_BOXES)
        shot = TEMPORAL_SCREENSHOT if os.environ.get("KGEVAL_UPDATE_SCREENSHOT") == "1" else tmp_path / "t.png"
        opened.page.screenshot(path=str(shot), full_page=True, clip={"x": 0, "y": 0, "width": 1150, "height": 2000})
    assert opened.errors == [] and opened.requests == []
    assert len(cells) == len(_parse(path.read_text(encoding="utf-8")).cells)
    _check_numbers(cells, {"TNTComplEx": results}, popularity)
    assert {box["chart"] for box in charts} == {"hits-curve", "per-relation", "rank-histogram", "strat-curve"}
    for box in charts:  # the per-relation chart of this folder's 3 relations: 93 pixels high
        assert box["width"] > 100 and box["height"] > (80 if box["chart"] == "per-relation" else 100), box
        assert all(length > 0 for length in box["lengths"]) and (box["lengths"] or max(box["bars"]) > 0), box
    assert shot.stat().st_size > 10_000
