"""One self-contained HTML report of one evaluation, or of several models side by side.

The page needs no network when it is viewed: all CSS is inline, every chart is an inline SVG drawn here (so it shows
with JavaScript off), and the only script is a few lines that make table columns sortable. Every number printed
carries ``data-key`` (what it is: a :meth:`kgeval.RankBasedMetricResults.to_flat_dict` key, or ``ci.`` / ``tie_gap.`` /
``hits_curve.`` / ``relation.<id>.`` / ``compare.`` / ``strat.`` / ``bucket.<label>.`` / ``group.<name>.`` /
``sampled.`` prefixed names), ``data-model`` and ``data-value`` (the ``repr`` of the float), so tests and scripts
read the page's numbers back exactly.
"""

from __future__ import annotations

import html
import itertools
import math
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from kgeval._checks import check_writable_file
from kgeval._display import HEADLINE_SIDES, headline_rows
from kgeval.analysis import plot, stats
from kgeval.analysis.buckets import BucketTable, frequency_buckets
from kgeval.analysis.groups import GroupTable
from kgeval.analysis.groups import relation_groups as group_table
from kgeval.analysis.readings import ReportedResults
from kgeval.analysis.sampled_estimates import ULTRA_MAX_SAMPLES, sampled_metrics
from kgeval.analysis.stratified import strat_curve
from kgeval.exceptions import UndefinedMetricWarning
from kgeval.keys import format_key, parse_key
from kgeval.typing import Side

__all__ = ["many_report_html", "report_html", "write_report"]

#: one colour per model (Okabe-Ito), repeated beyond eight
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
#: the sides of a rank histogram (apart from the model colours)
SIDE_COLOURS = {"head": "#1B9E77", "tail": "#7570B3", "relation": "#E7298A"}
MRR, MR = "inverse_harmonic_mean_rank", "arithmetic_mean_rank"
#: the largest k of the hits@k curve (fewer where every task has fewer candidates)
CURVE_K = 100
#: the relations drawn in the per-relation chart (the most evaluated ones)
CHART_RELATIONS = 20

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1100px;
padding:1rem 1.5rem;color:#222;background:#fff}
h1{font-size:1.6rem;margin:.4rem 0}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0;font-variant-numeric:tabular-nums}
th,td{padding:.2rem .6rem;border-bottom:1px solid #eee;text-align:right}
th{background:#f6f6f6;font-weight:600}td.label,th.label{text-align:left}
table.sortable th{cursor:pointer;user-select:none}table.sortable th[aria-sort=ascending]::after{content:" \\25B2"}
table.sortable th[aria-sort=descending]::after{content:" \\25BC"}
.charts{display:flex;flex-wrap:wrap;gap:1rem}figure{margin:.5rem 0}figcaption{font-size:.85rem;color:#555}
svg text{font:11px system-ui,sans-serif;fill:#333}.note{color:#555;font-size:.9rem}
#about table{margin-top:0}#about td{font-size:.9rem}td.missing{color:#999}
ul.findings li{margin:.3rem 0}#audit h3{font-size:1rem;margin:1.2rem 0 .3rem}details summary{cursor:pointer;color:#555}
.legend span{display:inline-block;margin-right:1rem}.legend i{display:inline-block;width:.9rem;height:.9rem;
margin-right:.3rem;vertical-align:-2px}
"""

SORT_SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, column) {
    th.tabIndex = 0;
    th.title = "sort by this column";
    function sort() {
      var descending = th.getAttribute("aria-sort") !== "descending";
      Array.prototype.forEach.call(heads, function (other) { other.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      function key(row) {
        var cell = row.cells[column], value = cell.getAttribute("data-value");
        return value === null ? cell.textContent.trim() : parseFloat(value);
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (typeof x === "number" && isNaN(x)) return 1;
        if (typeof y === "number" && isNaN(y)) return -1;
        var order = x < y ? -1 : x > y ? 1 : 0;
        return descending ? -order : order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    }
    th.addEventListener("click", sort);
    th.addEventListener("keydown", function (event) { if (event.key === "Enter") sort(); });
  });
});
"""


# -- public functions -------------------------------------------------------------------------------------------
def report_html(
    models: ReportedResults | Mapping[str, ReportedResults],
    *,
    title: str | None = None,
    relation_labels: Any = None,
    audit: Any = None,
    popularity_triples: Any = None,
    min_count: float | None = None,
    frequency_buckets: Any = None,
    bucket_options: Mapping[str, Any] | None = None,
    relation_groups: Any = None,
    group_options: Mapping[str, Any] | None = None,
    sampled: int | Sequence[int] | None = None,
    n_resamples: int = 1000,
    seed: int | None = 0,
    about: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """The report as one HTML document (a str).

    Parameters
    ----------
    models : RankBasedMetricResults, or mapping of str to RankBasedMetricResults
        One evaluation, or several by model name (shown side by side and compared pairwise). Results need their
        per-task records; a rank table (``results.ranks_df()``, ``kgeval evaluate --save-ranks``) becomes results
        with :meth:`kgeval.RankBasedMetricResults.from_rank_table`.
    title : str, optional
    relation_labels : mapping or sequence, optional
        Relation names (label -> id, id -> label or a sequence by id); default: the relation ids.
    audit : AuditReport, TemporalAuditReport or str, optional
        The audit card (:func:`kgeval.audit.audit_dataset`, :func:`kgeval.audit.temporal.audit_temporal_dataset`,
        or its Markdown), rendered as HTML: its findings (the card's sentences, baselines and ties first) above its
        tables, long tables folded.
    popularity_triples : LongTensor of shape (n, 3), optional
        The training triples: adds the popularity-stratified MRR curves
        (:func:`kgeval.analysis.stratified.strat_curve`).
    min_count : float, optional
        The floor popularity count of the curves for entities and relations absent from ``popularity_triples``
        (e.g. WN18RR's test entities unseen in train); without it, the section says which are absent instead.
    frequency_buckets : LongTensor of shape (n, 3), BucketTable, or mapping of str to BucketTable, optional
        Adds the frequency-bucket section: per bucket its count range, task count, MRR with its bootstrap interval,
        Hits@1 and Hits@10 (both sides, realistic ranks) and a bar chart of MRR per bucket. Reference triples
        (usually train) give each model's table by :func:`kgeval.analysis.buckets.frequency_buckets` with
        ``bucket_options``; a table (one model) or a table per model name is shown as it is.
    bucket_options : mapping, optional
        Keywords of :func:`kgeval.analysis.buckets.frequency_buckets` (``by``, ``scheme``, ``num_buckets``,
        ``edges``, ``num_entities``, ``num_relations``, ...); ``n_resamples`` and ``seed`` default to the report's.
    relation_groups : mapping of str to relation ids or labels, GroupTable, or mapping of str to GroupTable, optional
        Adds the relation-group section: per group its relations, task count, and MRR, Hits@1, Hits@10 micro and
        macro side by side, with the micro MRR's interval. Groups (name -> relation ids or labels, labels read
        with ``relation_labels``) give each model's table by :func:`kgeval.analysis.groups.relation_groups` with
        ``group_options``; a table (one model) or a table per model name is shown as it is.
    group_options : mapping, optional
        Keywords of :func:`kgeval.analysis.groups.relation_groups` (``other``, ``allow_overlap``,
        ``relation_labels``, ...); ``n_resamples`` and ``seed`` default to the report's.
    sampled : int or sequence of int, optional
        Adds the "full vs sampled" section: for each N, the full MRR and Hits@k (realistic and pessimistic) beside
        their estimates among N sampled candidates (the answer and N - 1 negatives) from the same ranks: the exact
        hypergeometric expectation and ULTRA's / NBFNet's binomial estimator
        (:func:`kgeval.analysis.sampled_estimates.sampled_metrics`, both sides pooled).
    n_resamples : int, default=1000
        Bootstrap resamples of the confidence intervals and the paired tests (:mod:`kgeval.analysis.stats`).
    seed : int or None, default=0
        Seed of the intervals and tests: the same seed gives the same page.
    about : mapping of str to mapping of str to str, optional
        What each model's evaluation was, by model name: ``model``, ``dataset``, ``dataset_fingerprint``, ``split``,
        ``filtered_by``, ``setting``, ``evaluated_at`` (:data:`kgeval.records.PROVENANCE_COLUMNS`, as a rank table
        written by ``kgeval evaluate --save-ranks`` records them: :func:`kgeval.records.table_provenance`). The
        header shows them, "not recorded" where absent; the default title names the models, dataset and split.
    """
    named = _named_models(models)
    labels = _relation_names(relation_labels)
    about = {name: dict((about or {}).get(name, {})) for name in named}
    title = title or _default_title(named, about)
    sections = [
        f"<h1>{_e(title)}</h1>",
        _about_section(named, about),
        f'<p class="note">{len(named)} model(s). Realistic ranks unless stated. '
        f"Intervals: {n_resamples:,} bootstrap resamples of the evaluation triples, seed {seed}.</p>",
        _legend(named),
        _headline_section(named, n_resamples, seed),
        _tie_section(named),
        _distribution_section(named),
        _relation_section(named, labels),
    ]
    if relation_groups is not None:
        resampling = {"n_resamples": n_resamples, "seed": seed}
        groups = _group_tables(named, relation_groups, group_options, labels, resampling)
        sections.append(_group_section(named, groups, labels))
    if frequency_buckets is not None:
        resampling = {"n_resamples": n_resamples, "seed": seed}
        sections.append(_bucket_section(named, _bucket_tables(named, frequency_buckets, bucket_options, resampling)))
    if popularity_triples is not None:
        sections.append(_strat_section(named, popularity_triples, min_count))
    if sampled is not None:
        sections.append(_sampled_section(named, _sample_sizes(sampled)))
    if len(named) > 1:
        sections.append(_compare_section(named, n_resamples, seed))
    if audit is not None:
        sections.append(_audit_section(audit if isinstance(audit, str) else audit.to_markdown()))
    return _page(title, "\n".join(sections))


def _page(title: str, body: str) -> str:
    """The whole document: ``body`` under the escaped ``title``, the inline style and the sorting script."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n"
        f"<script>{SORT_SCRIPT}</script>\n</body></html>\n"
    )


def write_report(
    models: ReportedResults | Mapping[str, ReportedResults], path: str | os.PathLike[str], **options: Any
) -> Path:
    """Write :func:`report_html` (same options) to ``path`` as UTF-8; the path written. ValueError before any work
    where no file can be written there (a folder, a missing folder)."""
    path = Path(check_writable_file(path, "the report's path"))
    path.write_text(report_html(models, **options), encoding="utf-8")
    return path


# -- many graphs (kgeval.many) ----------------------------------------------------------------------------------
#: (column of a many-graph table, heading): each metric pessimistic beside realistic, then the tie share
MANY_COLUMNS = (("mrr_pessimistic", "MRR pess."), ("mrr_realistic", "MRR real."), ("hits@1_pessimistic", "H@1 pess."),
                ("hits@1_realistic", "H@1 real."), ("hits@10_pessimistic", "H@10 pess."),
                ("hits@10_realistic", "H@10 real."), ("tied", "tied"))  # fmt: skip


def many_report_html(table: pd.DataFrame, averages: pd.DataFrame, *, model: str = "model", title: str | None = None,
                     split: str | None = None) -> str:  # fmt: skip
    """One self-contained HTML page of a many-graph run (:meth:`kgeval.many.ManyGraphs.to_html`): the per-graph
    table and the group averages, MRR, Hits@1 and Hits@10 pessimistic beside realistic and the tie share, every
    number a cell with ``data-key`` (``many.<column>``), ``data-model``, ``data-dataset`` (a graph's row) or
    ``data-group`` (an average) and the exact ``data-value``; names escaped, columns sortable, no network.

    Parameters
    ----------
    table, averages : DataFrame
        :attr:`kgeval.many.ManyGraphs.table` (``dataset``, ``group``, ``tasks`` and the metric columns) and
        :attr:`kgeval.many.ManyGraphs.averages` (indexed by group, ``graphs`` and the metric columns).
    model : str
        The model's name, shown and written in each cell's ``data-model``.
    title : str, optional
        Default: "<model> on <n> graphs (<split> split)".
    split : str, optional
        The split every graph was evaluated on, for the header.
    """
    on = f" ({split} split)" if split else ""
    title = title or f"{model} on {len(table)} graph{'s' if len(table) != 1 else ''}{on}"
    head = "".join(f"<th>{_e(heading)}</th>" for _, heading in MANY_COLUMNS)
    rows = []
    for _, row in table.iterrows():
        where = {"dataset": str(row["dataset"])}
        cells = [f'<td class="label">{_e(row["dataset"])}</td>', f'<td class="label">{_e(row["group"])}</td>',
                 _count_cell(row["tasks"], "many.tasks", model, where)]  # fmt: skip
        cells += [_cell(row[column], f"many.{column}", model, extra=where) for column, _ in MANY_COLUMNS]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    means = []
    for group, row in averages.iterrows():
        where = {"group": str(group)}
        cells = [f'<td class="label">{_e(group)}</td>', _count_cell(row["graphs"], "many.graphs", model, where)]
        cells += [_cell(row[column], f"many.{column}", model, extra=where) for column, _ in MANY_COLUMNS]
        means.append("<tr>" + "".join(cells) + "</tr>")
    sections = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="note">Model {_e(model)}{_e(on)}, filtered ranks. Pessimistic ranks (what the field\'s code '
        "reports) beside realistic ones (the mean of the optimistic and pessimistic rank); tied: the share of "
        "ranking tasks (head and tail) whose true answer ties another candidate. Hits@1 is the same for both rank "
        "types (a realistic rank of 1 needs no tie).</p>",
        '<section id="graphs"><h2>Graphs</h2><table class="sortable"><thead><tr><th class="label">dataset</th>'
        f'<th class="label">group</th><th>tasks</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        "</section>",
        '<section id="averages"><h2>Group averages</h2><table><thead><tr><th class="label">group</th>'
        f"<th>graphs</th>{head}</tr></thead><tbody>{''.join(means)}</tbody></table>"
        '<p class="note">The plain mean over each group\'s graphs (each graph counts once, whatever its size), as '
        "the field's tables average them.</p></section>",
    ]
    return _page(title, "\n".join(sections))


# -- inputs -----------------------------------------------------------------------------------------------------
def _named_models(models: Any) -> dict[str, ReportedResults]:
    items = models.items() if isinstance(models, Mapping) else [("model", models)]
    named = {str(name): _as_results(value, str(name)) for name, value in items}
    if not named:
        raise ValueError("the report needs at least one model")
    return named


def _as_results(value: Any, name: str) -> ReportedResults:
    """``value`` if it is a results object with records. Checked by its attributes: this module does not import
    kgeval.results, whose ``to_html`` imports this one (the import graph has no cycle)."""
    if isinstance(value, pd.DataFrame):
        raise TypeError(f"model {name!r} is a rank table: pass RankBasedMetricResults.from_rank_table(table)")
    if not all(hasattr(value, attribute) for attribute in ("data", "ks", "records", "to_flat_dict")):
        kind = type(value).__name__
        raise TypeError(f"model {name!r}: expected RankBasedMetricResults, got {kind}")
    if value.records is None:
        raise ValueError(f"model {name!r}: the report needs the per-task rank records (keep_records=True)")
    return value


def labels_from_frames(models: Any) -> dict[int, str] | None:
    """Relation id -> label from the first rank table (or mapping of them) with a ``relation_label`` column (as
    ``kgeval evaluate --save-ranks`` writes it); None when none has one."""
    frames = models.values() if isinstance(models, Mapping) else [models]
    for frame in frames:
        if isinstance(frame, pd.DataFrame) and "relation_label" in frame.columns:
            pairs = frame[["relation", "relation_label"]].drop_duplicates("relation")
            return {int(r): str(label) for r, label in zip(pairs["relation"], pairs["relation_label"], strict=True)}
    return None


def _relation_names(labels: Any) -> dict[int, str]:
    if labels is None:
        return {}
    if isinstance(labels, Mapping):
        first = next(iter(labels), None)
        if isinstance(first, str):
            return {int(i): str(label) for label, i in labels.items()}
        return {int(i): str(label) for i, label in labels.items()}
    return {i: str(label) for i, label in enumerate(labels)}


# -- cells ------------------------------------------------------------------------------------------------------
def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _cell(value: float, key: str, model: str, digits: int = 4, extra: Mapping[str, str] | None = None) -> str:
    """A table cell printing ``value`` with its data-key, data-model and exact data-value (``extra``: more
    ``data-`` attributes)."""
    value = float(value)
    shown = "\u2013" if math.isnan(value) else f"{value:.{digits}f}"
    attributes = "".join(f' data-{name}="{_e(text)}"' for name, text in (extra or {}).items())
    return f'<td data-key="{_e(key)}" data-model="{_e(model)}"{attributes} data-value="{value!r}">{shown}</td>'


def _count_cell(value: Any, key: str, model: str, extra: Mapping[str, str] | None = None) -> str:
    """A count as an integer cell with its data-key, data-model and exact data-value (``extra``: more ``data-``
    attributes); a dash where it is unknown (NaN: a many-graph row whose evaluation kept no records)."""
    if isinstance(value, float) and math.isnan(value):
        return _cell(math.nan, key, model, extra=extra)
    attributes = "".join(f' data-{name}="{_e(text)}"' for name, text in (extra or {}).items())
    count = int(value)
    return f'<td data-key="{_e(key)}" data-model="{_e(model)}"{attributes} data-value="{count!r}">{count:,}</td>'


def _colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _legend(named: Mapping[str, Any]) -> str:
    items = "".join(f'<span><i style="background:{_colour(i)}"></i>{_e(name)}</span>' for i, name in enumerate(named))
    return f'<p class="legend">{items}</p>'


def _value(results: ReportedResults, side: str, rank_type: str, key: str) -> float:
    data: Mapping[Any, float] = results.data
    return float(data.get((side, rank_type, key), math.nan))


def _sides(results: ReportedResults) -> list[str]:
    return [side for side in HEADLINE_SIDES if (side, "realistic", "count") in results.data]


# -- header -----------------------------------------------------------------------------------------------------
#: the header's columns: (provenance key, heading)
ABOUT_COLUMNS = (("model", "model"), ("dataset", "dataset"), ("split", "split"), ("filtered_by", "filtered by"),
                 ("setting", "protocol"), ("evaluated_at", "evaluated"))  # fmt: skip
NOT_RECORDED = "not recorded"


def _default_title(named: Mapping[str, Any], about: Mapping[str, Mapping[str, str]]) -> str:
    """ "<models> on <dataset> <split>" where every model's evaluation recorded the same dataset and split, else
    "Evaluation report: <models>"."""
    models = ", ".join(named)
    places = {(info.get("dataset"), info.get("split")) for info in about.values()}
    if len(places) == 1 and None not in next(iter(places)):
        dataset, split = next(iter(places))
        return f"{models} on {dataset} {split}"
    return f"Evaluation report: {models}"


def _about_section(named: Mapping[str, Any], about: Mapping[str, Mapping[str, str]]) -> str:
    """A row per model: its class, dataset (with its fingerprint as a tooltip), split, filter, protocol (setting
    and rank type) and date, as the rank table recorded them."""
    head = "".join(f'<th class="label">{heading}</th>' for _, heading in ABOUT_COLUMNS)
    rows = []
    for name in named:
        info = about.get(name, {})
        cells = [f'<td class="label">{_e(name)}</td>']
        for key, _ in ABOUT_COLUMNS:
            value = info.get(key)
            if value is None:
                cells.append(f'<td class="label missing">{NOT_RECORDED}</td>')
                continue
            fingerprint = info.get("dataset_fingerprint") if key == "dataset" else None
            tip = f' title="fingerprint {_e(fingerprint)}"' if fingerprint else ""
            cells.append(f'<td class="label" data-about="{key}"{tip}>{_e(_about_text(key, value))}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<section id="about"><table><thead><tr><th class="label">name</th>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></section>")  # fmt: skip


def _about_text(key: str, value: str) -> str:
    """A provenance value as the header shows it."""
    if key == "filtered_by":
        return value.replace("+", " + ")
    if key == "setting":
        return f"{value}, realistic ranks"
    if key == "evaluated_at":
        return value.replace("T", " ").replace("Z", " UTC")
    return value


# -- the audit card ---------------------------------------------------------------------------------------------
#: tables of more rows than this are folded (<details>) under their first rows' count
FOLD_ROWS = 12
#: sections whose sentences lead the findings (a baseline says what a number must beat; ties what decides it)
LEADING_SECTIONS = ("baseline", "ties", "protocol")


def _audit_section(markdown: str) -> str:
    """The audit card's Markdown as HTML: its title, its findings (every sentence and list of the card, those of
    the baselines, ties and protocol first), then each section's tables (real tables, long ones folded)."""
    card = _card_parts(markdown)
    findings: list[tuple[str, str]] = []
    tables: list[str] = []
    for heading, blocks in card.sections:
        prose = [block for kind, block in blocks if kind != "table"]
        if prose:
            findings.append((heading, " ".join(prose)))
        shown = [block for kind, block in blocks if kind == "table"]
        if shown:
            tables.append(f"<h3>{_inline(heading)}</h3>" + "".join(shown))
    order = sorted(range(len(findings)), key=lambda i: (not any(word in findings[i][0].lower()
                                                                for word in LEADING_SECTIONS), i))  # fmt: skip
    items = "".join(f"<li><b>{_inline(findings[i][0])}.</b> {findings[i][1]}</li>" for i in order)
    return (f'<section id="audit"><h2>{_inline(card.title or "Audit card")}</h2>'
            + "".join(f"<p>{block}</p>" for block in card.intro)
            + f'<h3>Findings</h3><ul class="findings">{items}</ul>{"".join(tables)}'
            + "".join(f'<p class="note">{block}</p>' for block in card.footer) + "</section>")  # fmt: skip


@dataclass
class _Card:
    """An audit card's Markdown, parsed: blocks are (kind, HTML), kind "table", "list" or "text"."""

    title: str = ""
    intro: list[str] = field(default_factory=list)  #: HTML of the lines before the first section
    sections: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)  #: (heading, blocks)
    footer: list[str] = field(default_factory=list)  #: HTML of the closing "kgeval <version>; ..." line

    def add(self, kind: str, block: str) -> None:
        if self.sections:
            self.sections[-1][1].append((kind, block))
        else:
            self.intro.append(block)


def _card_parts(markdown: str) -> _Card:
    """The title, intro, sections and footer of an audit card's Markdown (``##`` title, ``###`` sections, tables,
    ``- `` lists, lines of text)."""
    card = _Card()
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if line.startswith("## "):
            card.title = line[3:]
        elif line.startswith("### "):
            card.sections.append((line[4:], []))
        elif line.startswith(("|", "- ")):
            marker = line[0]
            block = []
            while i < len(lines) and lines[i].startswith(marker):
                block.append(lines[i])
                i += 1
            if marker == "|":
                card.add("table", _table_html(block))
            else:
                card.add("list", "<ul>" + "".join(f"<li>{_inline(item[2:])}</li>" for item in block) + "</ul>")
            continue
        elif line.startswith("kgeval "):
            card.footer.append(_inline(line))
        elif line.strip():
            card.add("text", _inline(line))
        i += 1
    return card


def _table_html(rows: list[str]) -> str:
    """A Markdown table as an HTML table (numbers right-aligned), folded when longer than :data:`FOLD_ROWS`."""
    cells = [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in rows]
    head, body = cells[0], [row for row in cells[1:] if not all(set(c) <= set("-: ") for c in row)]

    def cell(text: str, tag: str) -> str:
        numeric = bool(text) and (text[0].isdigit() or text[0] in "-+.") and tag == "td"
        return f"<{tag}{'' if numeric else ' class=label'}>{_inline(text)}</{tag}>"

    table = ("<table><thead><tr>" + "".join(cell(text, "th") for text in head) + "</tr></thead><tbody>"
             + "".join("<tr>" + "".join(cell(text, "td") for text in row) + "</tr>" for row in body)
             + "</tbody></table>")  # fmt: skip
    if len(body) <= FOLD_ROWS:
        return table
    return f"<details><summary>{len(body):,} rows</summary>{table}</details>"


def _inline(text: str) -> str:
    """Escaped text with the card's inline Markdown: **bold** and `code`."""
    out = _e(text)
    out = _BOLD.sub(r"<b>\1</b>", out)
    return _CODE.sub(r"<code>\1</code>", out)


_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")


# -- sections ---------------------------------------------------------------------------------------------------
def _headline_section(named: Mapping[str, ReportedResults], n_resamples: int, seed: int | None) -> str:
    ks = sorted(set().union(*(results.ks for results in named.values())))
    rows_spec = headline_rows(tuple(ks))
    head = "".join(f"<th>{label}</th>" for label, _ in rows_spec[:1]) + "<th>95% CI of MRR</th>"
    head += "".join(f"<th>{label}</th>" for label, _ in rows_spec[1:]) + "<th>tasks</th>"
    rows = []
    for name, results in named.items():
        for side in _sides(results):
            cells = [f'<td class="label">{_e(name)}</td>', f'<td class="label">{side}</td>']
            for index, (_label, key) in enumerate(rows_spec):
                flat = f"{side}.realistic.{key}"
                if (side, "realistic", key) not in results.data:  # a k this evaluation did not report
                    cells.append('<td title="not reported">\u2013</td>')
                    continue
                cells.append(_cell(_value(results, side, "realistic", key), flat, name, 2 if key == MR else 4))
                if index == 0:
                    interval = results.confidence_interval(f"{side}.mrr", n_resamples=n_resamples, seed=seed)
                    cells.append(_interval_cell(interval.low, interval.high, side, name))
            count = int(_value(results, side, "realistic", "count"))
            cells.append(_count_cell(count, f"{side}.realistic.count", name))
            rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<section id="headline"><h2>Headline</h2><table class="sortable"><thead><tr><th class="label">model</th>'
        f'<th class="label">side</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        '<p class="note">both = head and tail tasks pooled. The interval resamples evaluation triples (a triple\'s '
        "head and tail task together): kgeval.analysis.stats.confidence_interval.</p></section>"
    )


def _interval_cell(low: float, high: float, side: str, model: str) -> str:
    """One cell holding the interval's two ends, each a span with its own data-key and data-value."""
    spans = [
        f'<span data-key="ci.{side}.realistic.{MRR}.{end}" data-model="{_e(model)}" data-value="{float(v)!r}">'
        f"{float(v):.4f}</span>"
        for end, v in (("low", low), ("high", high))
    ]
    return f'<td data-value="{float(low)!r}">[{spans[0]}, {spans[1]}]</td>'


def _tie_section(named: Mapping[str, ReportedResults]) -> str:
    rows = []
    for name, results in named.items():
        for side in _sides(results):
            optimistic = _value(results, side, "optimistic", MRR)
            pessimistic = _value(results, side, "pessimistic", MRR)
            rows.append(
                f'<tr><td class="label">{_e(name)}</td><td class="label">{side}</td>'
                + _cell(optimistic, f"{side}.optimistic.{MRR}", name)
                + _cell(_value(results, side, "realistic", MRR), f"{side}.realistic.{MRR}", name)
                + _cell(pessimistic, f"{side}.pessimistic.{MRR}", name)
                + _cell(optimistic - pessimistic, f"tie_gap.{side}.{MRR}", name)
                + "</tr>"
            )
    return (
        '<section id="ties"><h2>Ties</h2><table class="sortable"><thead><tr><th class="label">model</th>'
        '<th class="label">side</th><th>optimistic MRR</th><th>realistic MRR</th><th>pessimistic MRR</th>'
        f"<th>tie gap</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        '<p class="note">tie gap = optimistic MRR \u2212 pessimistic MRR: zero when no candidate ties with a true '
        "answer; a large gap means the model's scores tie and the tie-breaking rule decides the number.</p></section>"
    )


def _hits_curve(results: ReportedResults) -> tuple[np.ndarray, np.ndarray]:
    """(k, hits@k of realistic ranks, head and tail pooled) for k = 1 .. min(100, most candidates)."""
    records = results.records
    assert records is not None
    entity = records.side != 2
    ranks = records.ranks("realistic")[entity] if entity.any() else records.ranks("realistic")
    candidates = records.num_candidates
    top = CURVE_K if candidates is None else int(max(1, min(CURVE_K, int(np.max(candidates)))))
    k = np.arange(1, top + 1)
    sorted_ranks = np.sort(ranks)
    return k, np.searchsorted(sorted_ranks, k, side="right") / len(ranks)


def curve_points(top: int) -> list[int]:
    """The k of the hits@k table under the curve: 1, 2, 3, 5, 10, 20, 50, 100 up to ``top``."""
    return [k for k in (1, 2, 3, 5, 10, 20, 50, 100) if k <= top]


def _distribution_section(named: Mapping[str, ReportedResults]) -> str:
    histograms = []
    for index, (name, results) in enumerate(named.items()):
        records = results.records
        assert records is not None
        ranks = records.ranks("realistic")
        _, edges = plot.rank_histogram(ranks)
        series = []
        for code, side in enumerate(("head", "tail", "relation")):
            mine = ranks[records.side == code]
            if mine.size:
                counts, _ = np.histogram(mine, bins=edges)
                series.append((side, counts / mine.size, SIDE_COLOURS[side]))
        svg = _histogram_svg(series, edges, f"rank histogram of {name}")
        legend = " ".join(f'<span style="color:{c}">\u25a0 {s}</span>' for s, _, c in series)
        histograms.append(
            f'<figure data-chart="rank-histogram" data-model="{_e(name)}">{svg}'
            f'<figcaption><b style="color:{_colour(index)}">{_e(name)}</b>: share of tasks per realistic rank '
            f"(log bins). {legend}</figcaption></figure>"
        )
    curves = {name: _hits_curve(results) for name, results in named.items()}
    lines = [(name, k, hits, _colour(i)) for i, (name, (k, hits)) in enumerate(curves.items())]
    curve_svg = _line_svg(lines, "k", "hits@k", "hits@k curve", y_range=(0.0, 1.0))
    top = min(len(k) for k, _ in curves.values())
    points = curve_points(top)
    head = "".join(f"<th>k = {k}</th>" for k in points)
    rows = "".join(
        f'<tr><td class="label">{_e(name)}</td>'
        + "".join(_cell(hits[k - 1], f"hits_curve.both.realistic.hits_at_{k}", name) for k in points)
        + "</tr>"
        for name, (_k, hits) in curves.items()
    )
    return (
        '<section id="ranks"><h2>Rank distribution</h2><div class="charts">' + "".join(histograms) + "</div>"
        f'<figure data-chart="hits-curve">{curve_svg}<figcaption>hits@k of realistic ranks, head and tail pooled, '
        f"k = 1 to {top}.</figcaption></figure>"
        f'<table><thead><tr><th class="label">model</th>{head}</tr></thead><tbody>{rows}</tbody></table></section>'
    )


def _unknown_relations(results: ReportedResults) -> bool:
    """Whether some task of ``results`` has no relation id (-1: an evaluation without triples)."""
    return results.records is not None and bool((results.records.relation < 0).any())


def _relation_section(named: Mapping[str, ReportedResults], labels: Mapping[int, str]) -> str:
    unknown = [name for name, results in named.items() if _unknown_relations(results)]
    if unknown:  # an evaluation without triples (evaluate_scores): no relation to group by
        return (
            '<section id="relations"><h2>Per relation</h2><p class="note">Not available: the ranks of '
            f"{_e(', '.join(unknown))} do not say which relation each task ranks (an evaluation without triples, "
            "such as evaluate_scores).</p></section>"
        )
    frames = {name: results.per_relation(keys=("mrr", "hits@10")) for name, results in named.items()}
    columns = {name: [c for c in frame.columns if c != "count"] for name, frame in frames.items()}
    relations = sorted(set().union(*(frame.index.tolist() for frame in frames.values())))
    counts = pd.concat([frame["count"] for frame in frames.values()], axis=1).max(axis=1)
    head = "".join(f"<th>{_e(name)} {_e(column.replace('.', ' '))}</th>" for name in frames for column in columns[name])
    rows = []
    for relation in relations:
        label = labels.get(int(relation), str(relation))
        cells = [f'<td class="label" title="relation id {int(relation)}">{_e(label)}</td>']
        cells.append(_count_cell(counts[relation], f"relation.{int(relation)}.count", "all"))
        for name, frame in frames.items():
            for column in columns[name]:
                value = frame.at[relation, column] if relation in frame.index else math.nan
                key = f"relation.{int(relation)}.{column}"
                cells.append(_cell(value, key, name, extra={"relation": str(int(relation))}))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    chosen = counts.sort_values(ascending=False, kind="stable").index[:CHART_RELATIONS]
    bars = (
        [
            (labels.get(int(r), str(r)), [(name, float(frames[name]["both.mrr"].get(r, math.nan))) for name in frames])
            for r in chosen
        ]
        if all("both.mrr" in frame.columns for frame in frames.values())
        else []
    )
    chart = (
        f'<figure data-chart="per-relation">{_bar_svg(bars, list(frames))}<figcaption>MRR (both sides) of the '
        f"{len(bars)} relations with the most evaluation triples.</figcaption></figure>"
        if bars
        else ""
    )
    return (
        f'<section id="relations"><h2>Per relation</h2>{chart}'
        '<p class="note">Click a column header to sort (the table reads the same without JavaScript).</p>'
        '<table class="sortable" id="relation-table"><thead><tr><th class="label">relation</th><th>triples</th>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def _strat_section(named: Mapping[str, ReportedResults], popularity_triples: Any, min_count: Any) -> str:
    try:
        curve = strat_curve(dict(named), popularity_triples, vary="entity", min_count=min_count)
    except ValueError as error:  # entities or relations absent from the triples, and no floor count given
        if "pass min_count" not in str(error):
            raise
        absent = str(error).split("; pass min_count")[0]
        return (
            '<section id="stratified"><h2>Popularity-stratified MRR</h2><p class="note">Not drawn: '
            f"{_e(absent)}; give them a floor count with min_count= (kgeval report --min-count).</p></section>"
        )
    series: list[tuple[str, np.ndarray, np.ndarray, str]] = []
    rows = []
    for index, (name, part) in enumerate(curve.groupby("model", sort=False)):
        series.append((str(name), part["beta_e"].to_numpy(), part["strat_mrr"].to_numpy(), _colour(index)))
        for beta, value in zip(part["beta_e"], part["strat_mrr"], strict=True):
            rows.append(
                f'<tr><td class="label">{_e(name)}</td><td>{beta:+.1f}</td>'
                + _cell(value, f"strat.beta_e={beta!r}.strat_mrr", str(name), extra={"beta": repr(float(beta))})
                + "</tr>"
            )
    svg = _line_svg(series, "\u03b2_e", "stratified MRR", "stratified MRR curve")
    return (
        '<section id="stratified"><h2>Popularity-stratified MRR</h2>'
        f'<figure data-chart="strat-curve">{svg}<figcaption>MRR with each task weighted by the popularity of its '
        "answer to the power \u2212\u03b2_e (Mohamed et al. 2020), relations weighted equally (\u03b2_r = 0): at "
        "\u03b2_e = 0 it is the MRR macro-averaged over relations, not the plain MRR; \u03b2_e &gt; 0 favours rare "
        "entities.</figcaption></figure><details><summary>the numbers</summary>"
        '<table class="sortable"><thead><tr><th class="label">model</th><th>\u03b2_e</th><th>strat MRR</th></tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table></details></section>"
    )


def _compare_section(named: Mapping[str, ReportedResults], n_resamples: int, seed: int | None) -> str:
    rows, notes = [], []
    for (a, results_a), (b, results_b) in itertools.combinations(named.items(), 2):
        try:
            comparison = stats.compare(results_a, results_b, "mrr", n_resamples=n_resamples, seed=seed)
        except ValueError as error:
            notes.append(f"<li>{_e(a)} vs {_e(b)}: not compared ({_e(error)})</li>")
            continue
        extra = {"other": b}  # the model compared with
        rows.append(
            f'<tr><td class="label">{_e(a)}</td><td class="label">{_e(b)}</td>'
            + _cell(comparison.difference, "compare.mrr.difference", a, extra=extra)
            + _cell(comparison.low, "compare.mrr.low", a, extra=extra)
            + _cell(comparison.high, "compare.mrr.high", a, extra=extra)
            + _cell(comparison.p_value, "compare.mrr.p_value", a, extra=extra)
            + _count_cell(comparison.n, "compare.mrr.n", a).replace("<td ", f'<td data-other="{_e(b)}" ', 1)
            + "</tr>"
        )
    missing = f"<ul>{''.join(notes)}</ul>" if notes else ""
    return (
        '<section id="significance"><h2>Paired significance</h2><table class="sortable"><thead><tr>'
        '<th class="label">A</th><th class="label">B</th><th>MRR(A) \u2212 MRR(B)</th><th>95% CI low</th>'
        f"<th>95% CI high</th><th>p</th><th>paired triples</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f'{missing}<p class="note">Paired permutation test (two-sided) and paired-bootstrap interval over the '
        "evaluation triples both models ranked: kgeval.analysis.stats.compare.</p></section>"
    )


# -- breakdowns: frequency buckets, relation groups, full vs sampled ---------------------------------------------
#: the metrics of a bucket or group row: (column heading, short key); hits@k only where the table has that k
BREAKDOWN_HITS = (1, 10)


def _tables_given(
    named: Mapping[str, ReportedResults], given: Any, kind: type, what: str, options: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The tables of ``kind`` given for the report's models (one table for one model, or a mapping of model name to
    table), or None where ``given`` is what to compute them from."""
    if isinstance(given, kind):
        tables: Mapping[str, Any] = {next(iter(named)): given}
        if len(named) > 1:
            raise ValueError(f"one {kind.__name__} for {len(named)} models: pass a mapping of model name to table, "
                             f"or the {what} to compute each model's")  # fmt: skip
    elif isinstance(given, Mapping) and given and all(isinstance(value, kind) for value in given.values()):
        tables = given
    else:
        return None
    if options:
        raise ValueError(f"{what} options apply where the report computes the tables, not to given {kind.__name__}s")
    missing = [name for name in named if name not in tables]
    if missing:
        raise ValueError(f"no {kind.__name__} for model(s) {', '.join(map(repr, missing))}; got {sorted(tables)}")
    return {name: tables[name] for name in named}


def _bucket_tables(named: Mapping[str, ReportedResults], given: Any, options: Mapping[str, Any] | None,
                   resampling: Mapping[str, Any]) -> dict[str, BucketTable]:  # fmt: skip
    """Each model's BucketTable: as given, or computed from the reference triples ``given``."""
    tables = _tables_given(named, given, BucketTable, "bucket", options)
    if tables is not None:
        return tables
    keywords = {**resampling, **(options or {})}
    with warnings.catch_warnings():  # a bucket's undefined metrics the page does not show (adjusted hits@k)
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        return {name: frequency_buckets(results, given, **keywords) for name, results in named.items()}


def _group_tables(named: Mapping[str, ReportedResults], given: Any, options: Mapping[str, Any] | None,
                  labels: Mapping[int, str], resampling: Mapping[str, Any]) -> dict[str, GroupTable]:  # fmt: skip
    """Each model's GroupTable: as given, or computed from the groups ``given`` (labels read with the report's
    ``relation_labels`` unless ``options`` names others)."""
    tables = _tables_given(named, given, GroupTable, "group", options)
    if tables is not None:
        return tables
    if not isinstance(given, Mapping):
        raise TypeError(f"relation_groups must map group names to relation ids or labels (or be GroupTables), got "
                        f"{type(given).__name__}")  # fmt: skip
    keywords = {**resampling, "relation_labels": labels or None, **(options or {})}
    with warnings.catch_warnings():  # a group's undefined metrics the page does not show (adjusted hits@k)
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        return {name: group_table(results, given, **keywords) for name, results in named.items()}


def _short_keys(ks: Sequence[int]) -> list[tuple[str, str]]:
    """(heading, short key) of a breakdown row: MRR, then Hits@1 and Hits@10 where the table has them (else its
    first two ks)."""
    shown = [k for k in BREAKDOWN_HITS if k in ks] or list(ks)[:2]
    return [("MRR", "both.realistic.mrr"), *((f"Hits@{k}", f"both.realistic.hits@{k}") for k in shown)]


def _metric(metrics: Mapping[Any, float], short: str) -> tuple[str, float]:
    """(flat key, value; NaN where the table has none) of a short key in a bucket's or group's metrics."""
    parsed = parse_key(short)
    return format_key(parsed), float(metrics.get(parsed, math.nan))


def _spans_cell(prefix: str, interval: Any, model: str, extra: Mapping[str, str]) -> str:
    """A cell of an interval's two ends (``prefix.low`` / ``prefix.high`` spans), a dash where there is none."""
    if interval is None:
        return '<td title="no interval: no task">\u2013</td>'
    attributes = "".join(f' data-{name}="{_e(text)}"' for name, text in extra.items())
    spans = [
        f'<span data-key="{_e(prefix)}.{end}" data-model="{_e(model)}"{attributes} data-value="{float(v)!r}">'
        f"{float(v):.4f}</span>"
        for end, v in (("low", interval.low), ("high", interval.high))
    ]
    return f'<td data-value="{float(interval.low)!r}">[{spans[0]}, {spans[1]}]</td>'


def _count_range(low: int | None, high: int | None, dash: str = "\u2013", comma: str = ",") -> str:
    """A bucket's counts as text: ``1\u201360``, ``12``, ``100+`` (``unseen``: 0; a LibKGE bucket of no id: a dash)."""
    if low is None:
        return "\u2013"
    if low == 0 and high == 0:
        return "unseen" if dash == "-" else "0"
    text = f"{low:,}+" if high is None else f"{low:,}" if low == high else f"{low:,}{dash}{high:,}"
    return text.replace(",", comma)


def _bucket_section(named: Mapping[str, ReportedResults], tables: Mapping[str, BucketTable]) -> str:
    first = next(iter(tables.values()))
    columns = _short_keys(first.ks)
    head = "".join(f"<th>{_e(heading)}</th>" + ("<th>95% CI of MRR</th>" if index == 0 else "")
                   for index, (heading, _) in enumerate(columns))  # fmt: skip
    # the count range where a label does not say it (LibKGE's "25%", ...; kgeval's labels are their ranges)
    ranged = any(_count_range(b.low, b.high, "-", "") != b.label for t in tables.values() for b in t.buckets)
    rows = []
    for name, table in tables.items():
        for bucket in table.buckets:
            where = {"bucket": bucket.label}
            prefix = f"bucket.{bucket.label}"
            cells = [f'<td class="label">{_e(name)}</td>', f'<td class="label">{_e(bucket.label)}</td>']
            if ranged:
                cells.append(f"<td>{_e(_count_range(bucket.low, bucket.high))}</td>")
            cells.append(_count_cell(bucket.num_tasks, f"{prefix}.num_tasks", name, where))
            for index, (_heading, short) in enumerate(columns):
                key, value = _metric(bucket.metrics, short)
                cells.append(_cell(value, f"{prefix}.{key}", name, extra=where))
                if index == 0:
                    interval_key = f"{prefix}.ci.{table.interval_key}"
                    cells.append(_spans_cell(interval_key, bucket.interval, name, where))
            rows.append("<tr>" + "".join(cells) + "</tr>")
    labels = list(dict.fromkeys(bucket.label for table in tables.values() for bucket in table.buckets))
    bars = [(label, [(name, _bucket_mrr(table, label)) for name, table in tables.items()]) for label in labels]
    chart = _bar_svg(bars, list(named), "MRR per frequency bucket", "MRR (both sides)", left=90)
    schemes = {(table.by, table.scheme) for table in tables.values()}
    how = "; ".join(f"tasks by how often their {by.replace('_', ' ')} occurs in the reference triples, "
                    f"{scheme} scheme" for by, scheme in sorted(schemes))  # fmt: skip
    libkge = any(table.scheme == "libkge" for table in tables.values())
    note = (" LibKGE's buckets hold quarters of the ids sorted by count (subject and object counted apart): "
            "a head task's bucket is its subject's, a tail task's its object's; both sides are pooled here."
            if libkge else "")  # fmt: skip
    return (
        f'<section id="buckets"><h2>Frequency buckets</h2><figure data-chart="buckets">{chart}<figcaption>MRR '
        f"(both sides, realistic ranks) per bucket: {_e(how)}.</figcaption></figure>"
        '<table class="sortable" id="bucket-table"><thead><tr><th class="label">model</th>'
        f'<th class="label">bucket</th>{"<th>count</th>" if ranged else ""}<th>tasks</th>{head}</tr></thead>'
        f'<tbody>{"".join(rows)}</tbody></table><p class="note">A bucket holds the tasks whose '
        f"{_e(_by_text(tables))} occurs that many times in the reference triples; unseen: never. The interval is "
        "a percentile bootstrap of the bucket's evaluation "
        f"triples (kgeval.analysis.buckets.frequency_buckets).{_e(note)}</p></section>"
    )


def _by_text(tables: Mapping[str, BucketTable]) -> str:
    return " / ".join(dict.fromkeys(table.by.replace("_", " ") for table in tables.values()))


def _bucket_mrr(table: BucketTable, label: str) -> float:
    for bucket in table.buckets:
        if bucket.label == label:
            return _metric(bucket.metrics, "both.realistic.mrr")[1]
    return math.nan


def _group_section(named: Mapping[str, ReportedResults], tables: Mapping[str, GroupTable],
                   labels: Mapping[int, str]) -> str:  # fmt: skip
    first = next(iter(tables.values()))
    columns = _short_keys(first.ks)
    head = "".join(f"<th>{_e(heading)} micro</th><th>{_e(heading)} macro</th>"
                   + ("<th>95% CI of MRR (micro)</th>" if index == 0 else "")
                   for index, (heading, _) in enumerate(columns))  # fmt: skip
    rows = []
    for name, table in tables.items():
        for group in table.groups:
            where = {"group": group.name}
            prefix = f"group.{group.name}"
            members = ", ".join(labels.get(r, str(r)) for r in group.relations)
            cells = [f'<td class="label">{_e(name)}</td>',
                     f'<td class="label" title="{_e(members)}">{_e(group.name)}</td>',
                     _count_cell(len(group.relations), f"{prefix}.num_relations", name, where),
                     _count_cell(group.num_evaluated, f"{prefix}.num_evaluated", name, where),
                     _count_cell(group.num_tasks, f"{prefix}.num_tasks", name, where)]  # fmt: skip
            for index, (_heading, short) in enumerate(columns):
                for average, metrics in (("micro", group.micro), ("macro", group.macro)):
                    key, value = _metric(metrics, short)
                    cells.append(_cell(value, f"{prefix}.{average}.{key}", name, extra=where))
                if index == 0:
                    cells.append(_spans_cell(f"{prefix}.ci.micro.{table.interval_key}", group.interval, name, where))
            rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<section id="groups"><h2>Relation groups</h2><table class="sortable" id="group-table"><thead><tr>'
        '<th class="label">model</th><th class="label">group</th><th>relations</th><th>evaluated</th>'
        f'<th>tasks</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table><p class="note">micro: every task '
        "of the group's relations pooled (what an evaluation restricted to them reports); macro: the unweighted "
        "mean over the group's evaluated relations. Both sides, realistic ranks; hover a group for its relations "
        "(kgeval.analysis.groups.relation_groups).</p></section>"
    )


def _sample_sizes(sampled: Any) -> list[int]:
    """The N of the sampled section: one int or a sequence of them, each at least 2."""
    sizes = [sampled] if isinstance(sampled, int | np.integer) else list(sampled)
    if not sizes or not all(isinstance(n, int | np.integer) and not isinstance(n, bool) and n >= 2 for n in sizes):
        raise ValueError(f"sampled must be an integer N >= 2 (the answer and N - 1 negatives), or a sequence of "
                         f"them; got {sampled!r}")  # fmt: skip
    return [int(n) for n in dict.fromkeys(sizes)]


def _sampled_section(named: Mapping[str, ReportedResults], sizes: Sequence[int]) -> str:
    rows, notes = [], []
    for name, results in named.items():
        side = cast(Side, "both" if "both" in _sides(results) else _sides(results)[0])
        records = results.records
        assert records is not None
        ks = tuple(results.ks)
        for n in sizes:
            exact = sampled_metrics(records, ks, n, rank_types=("realistic", "pessimistic"), sides=(side,))
            ultra_ks = tuple(k for k in ks if k <= n)
            ultra: dict[str, float] = {}
            if n <= ULTRA_MAX_SAMPLES and ultra_ks:
                ultra = sampled_metrics(records, ultra_ks, n, method="ultra", sides=(side,))
            elif n > ULTRA_MAX_SAMPLES:
                notes.append(n)
            where = {"samples": str(n)}
            for label, metric in (("MRR", "inverse_harmonic_mean_rank"), *((f"Hits@{k}", f"hits_at_{k}") for k in ks)):
                cells = [f'<td class="label">{_e(name)}</td>', f"<td>{n:,}</td>", f'<td class="label">{label}</td>']
                for rank_type in ("realistic", "pessimistic"):
                    key = f"{side}.{rank_type}.{metric}"
                    cells.append(_cell(_value(results, side, rank_type, metric), key, name, extra=where))
                for rank_type in ("realistic", "pessimistic"):
                    key = f"{side}.{rank_type}.{metric}_sampled_{n}"
                    cells.append(_cell(exact[key], f"sampled.{key}", name, extra=where))
                key = f"{side}.pessimistic.{metric}_sampled_{n}_ultra"
                if key in ultra:
                    cells.append(_cell(ultra[key], f"sampled.{key}", name, extra=where))
                else:
                    why = ("ULTRA estimates no sampled MRR (its MRR is the full ranking's)" if metric.startswith("inv")
                           else f"ULTRA's formula needs N <= {ULTRA_MAX_SAMPLES} and k <= N")  # fmt: skip
                    cells.append(f'<td title="{_e(why)}">\u2013</td>')
                rows.append("<tr>" + "".join(cells) + "</tr>")
    beyond = (f" ULTRA's formula divides factorials as floats and is not computed beyond N = {ULTRA_MAX_SAMPLES}."
              if notes else "")  # fmt: skip
    return (
        '<section id="sampled"><h2>Full vs sampled</h2><table class="sortable" id="sampled-table"><thead><tr>'
        '<th class="label">model</th><th>N</th><th class="label">metric</th><th>full realistic</th>'
        "<th>full pessimistic</th><th>sampled realistic</th><th>sampled pessimistic</th><th>sampled ULTRA</th>"
        f'</tr></thead><tbody>{"".join(rows)}</tbody></table><p class="note">What the same ranks give among N '
        "sampled candidates (the answer and N \u2212 1 negatives drawn from each task's filtered candidates), with "
        "no re-scoring: sampled realistic / pessimistic are the exact hypergeometric expectations (N \u2212 1 "
        "distinct negatives); sampled ULTRA is ULTRA's / NBFNet's binomial hits@k_N estimator (pessimistic ranks, "
        "with replacement, float32), the number their papers report (kgeval.analysis.sampled_estimates; "
        f"docs/conventions.md).{_e(beyond)}</p></section>"
    )


# -- SVG --------------------------------------------------------------------------------------------------------
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 480, 260, 48, 12, 12, 36


def _frame(label: str, body: str, x_ticks: str, y_ticks: str, x_label: str, y_label: str, height: int = HEIGHT) -> str:
    bottom = height - BOTTOM
    return (
        f'<svg viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{_e(label)}">'
        f"<title>{_e(label)}</title>"
        f'<line x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}" stroke="#999"/>'
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="#999"/>{x_ticks}{y_ticks}{body}'
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{height - 4}" text-anchor="middle">{_e(x_label)}</text>'
        f'<text x="12" y="{(TOP + bottom) / 2}" text-anchor="middle" transform="rotate(-90 12 {(TOP + bottom) / 2})">'
        f"{_e(y_label)}</text></svg>"
    )


def nice_axis(low: float, high: float, count: int = 5) -> tuple[list[float], int]:
    """(ticks, decimals) of an axis holding [low, high]: about ``count`` ticks a round step apart (1, 2, 2.5 or 5
    times a power of ten), the first at or below ``low`` and the last at or above ``high``, so the drawn range is
    the ticks' and no value lies outside it; ``decimals`` prints every tick distinct and exact."""
    if not high > low:
        high = low + 1.0
    raw = (high - low) / max(count - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    mantissa = next(m for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * power >= raw * (1 - 1e-9))
    step = mantissa * power
    first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    ticks = [round(i * step, 12) for i in range(first, last + 1)]
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) + (1 if mantissa == 2.5 else 0)
    return ticks, decimals


def _y_ticks(low: float, high: float, height: int = HEIGHT) -> str:
    """Grid lines and labels of a y axis whose range is exactly [low, high] (the ticks of :func:`nice_axis`)."""
    ticks, decimals = nice_axis(low, high)
    out = []
    for value in ticks:
        y = _scale(value, low, high, height - BOTTOM, TOP)
        out.append(
            f'<line x1="{LEFT - 3}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#eee"/>'
            f'<text x="{LEFT - 5}" y="{y + 4:.1f}" text-anchor="end">{value:.{decimals}f}</text>'
        )
    return "".join(out)


def _y_range(low: float, high: float) -> tuple[float, float]:
    """The drawn range of a y axis holding [low, high]: its outer ticks (:func:`nice_axis`)."""
    ticks, _ = nice_axis(low, high)
    return ticks[0], ticks[-1]


def _x_tick(x: float, text: str, height: int = HEIGHT) -> str:
    bottom = height - BOTTOM
    return (
        f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" stroke="#999"/>'
        f'<text x="{x:.1f}" y="{bottom + 15}" text-anchor="middle">{_e(text)}</text>'
    )


def _scale(value: float, low: float, high: float, start: float, stop: float) -> float:
    share = 0.5 if high == low else (value - low) / (high - low)
    return start + share * (stop - start)


def _nice(low: float, high: float) -> list[float]:
    """Five tick values from low to high, whole numbers when the axis is (k), else as they fall (β)."""
    ticks = np.linspace(low, high, 5)
    if float(low).is_integer() and float(high).is_integer() and high - low >= 4:
        ticks = np.unique(np.round(ticks))
    return [float(v) for v in ticks]


def _histogram_svg(series: list[tuple[str, np.ndarray, str]], edges: np.ndarray, label: str) -> str:
    """Step lines (one per side) of the share of tasks per bin, log-scaled rank axis."""
    low, high = 0.0, math.log10(float(edges[-1]))
    top = _y_range(0.0, max(float(np.max(share)) for _, share, _ in series) or 1.0)[1]

    def x(edge: float) -> float:
        return _scale(math.log10(edge), low, high, LEFT, WIDTH - RIGHT)

    body = []
    for side, share, colour in series:
        points = [f"M{x(edges[0]):.1f},{HEIGHT - BOTTOM}"]
        for i, value in enumerate(share):
            y = _scale(float(value), 0.0, top, HEIGHT - BOTTOM, TOP)
            points.append(f"L{x(edges[i]):.1f},{y:.1f}L{x(edges[i + 1]):.1f},{y:.1f}")
        points.append(f"L{x(edges[-1]):.1f},{HEIGHT - BOTTOM}")
        body.append(f'<path d="{"".join(points)}" fill="none" stroke="{colour}" stroke-width="1.8">'
                    f"<title>{side}</title></path>")  # fmt: skip
    decades = [10**d for d in range(int(high) + 1)]
    if len(decades) < 3:  # under a hundred ranks: 1, 2, 5, 10, 20, 50 where they fall
        decades = [m * 10**d for d in range(int(high) + 1) for m in (1, 2, 5) if m * 10**d <= float(edges[-1])]
    ticks = "".join(_x_tick(x(d), f"{d:,}") for d in decades)
    return _frame(label, "".join(body), ticks, _y_ticks(0.0, top), "realistic rank (log scale)", "share of tasks")


def _line_svg(
    series: list[tuple[str, np.ndarray, np.ndarray, str]], x_label: str, y_label: str, label: str,
    y_range: tuple[float, float] | None = None,
) -> str:  # fmt: skip
    """One line per series, with a circle (and a tooltip) at each point when there are few; the y axis from
    ``y_range`` (default: from 0 to the largest value), widened to round ticks."""
    xs = np.concatenate([x for _, x, _, _ in series]).astype(float)
    ys = np.concatenate([y for _, _, y, _ in series]).astype(float)
    finite = ys[np.isfinite(ys)]
    low, high = _y_range(*(y_range or (0.0, float(finite.max()) if finite.size else 1.0)))  # from 0: honest
    x_low, x_high = float(xs.min()), float(xs.max())
    body = []
    for name, x_values, y_values, colour in series:
        coords = [
            (_scale(float(a), x_low, x_high, LEFT, WIDTH - RIGHT), _scale(float(b), low, high, HEIGHT - BOTTOM, TOP))
            for a, b in zip(x_values, y_values, strict=True)
            if math.isfinite(float(b))
        ]
        path = "".join(f"{'M' if i == 0 else 'L'}{cx:.1f},{cy:.1f}" for i, (cx, cy) in enumerate(coords))
        body.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"><title>{_e(name)}</title></path>')
        if len(coords) <= 30:
            body += [
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2.5" fill="{colour}"><title>{_e(name)}: {x_label} = {a:g}, '
                f"{_e(y_label)} = {b:.4f}</title></circle>"
                for (cx, cy), a, b in zip(coords, x_values, y_values, strict=False)
            ]
    ticks = "".join(_x_tick(_scale(v, x_low, x_high, LEFT, WIDTH - RIGHT), f"{v:g}") for v in _nice(x_low, x_high))
    return _frame(label, "".join(body), ticks, _y_ticks(low, high), x_label, y_label)


def _bar_svg(bars: list[tuple[str, list[tuple[str, float]]]], models: list[str], label: str = "MRR per relation",
             axis: str = "MRR (both sides)", left: int = 170) -> str:  # fmt: skip
    """Horizontal bars: one group per row (a relation, a bucket), one bar per model, MRR in [0, 1]."""
    bar, gap = 9, 6
    group = bar * len(models) + gap
    height = TOP + group * len(bars) + BOTTOM
    body = []
    for row, (relation, values) in enumerate(bars):
        y0 = TOP + row * group
        text = relation if len(relation) <= 26 else relation[:25] + "\u2026"
        body.append(f'<text x="{left - 6}" y="{y0 + group / 2 + 2:.1f}" text-anchor="end">{_e(text)}'
                    f"<title>{_e(relation)}</title></text>")  # fmt: skip
        for index, (name, value) in enumerate(values):
            if math.isfinite(value):
                w = _scale(value, 0.0, 1.0, 0, WIDTH - RIGHT - left)
                body.append(
                    f'<rect x="{left}" y="{y0 + index * bar}" width="{w:.1f}" height="{bar - 1}" '
                    f'fill="{_colour(models.index(name))}"><title>{_e(name)} \u2013 {_e(relation)}: MRR '
                    f"{value:.4f}</title></rect>"
                )
    bottom = height - BOTTOM
    ticks = "".join(
        f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{bottom}" stroke="#eee"/>'
        f'<text x="{x:.1f}" y="{bottom + 15}" text-anchor="middle">{v:.2g}</text>'
        for v in np.linspace(0, 1, 5)
        for x in [_scale(v, 0.0, 1.0, left, WIDTH - RIGHT)]
    )
    return (
        f'<svg viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{_e(label)}">'
        f"<title>{_e(label)}</title>{ticks}"
        f'<line x1="{left}" y1="{TOP}" x2="{left}" y2="{bottom}" stroke="#999"/>{"".join(body)}'
        f'<text x="{(left + WIDTH - RIGHT) / 2}" y="{height - 4}" text-anchor="middle">{_e(axis)}</text></svg>'
    )
