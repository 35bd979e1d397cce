"""The evaluation audit of a temporal dataset (``kgeval audit`` on a folder of quadruples): is a number on it worth
reporting, and which split is it?

- **Fingerprint**: the counts and a content hash of each split (SHA-256 of its sorted labelled quadruples), which
  tell apart datasets that share a name (ICEWS14's xERTE / TLogic split from RE-GCN's).
- **Time overlap**: the times each pair of splits shares -- none on a forecasting (extrapolation) split, nearly
  all on a completion (interpolation) one.
- **Duplicates**: quadruples repeated within a split, and test quadruples also in train or valid.
- **Recurrence**: the test quadruples whose (s, r, o) was true at an earlier time (in any split): what the
  recurrency baseline lives on.
- **Filter sizes**: the mean number of other known answers a test task's filter removes, time-aware and static.
- **Baselines**: the recurrency baseline's MRR (time-aware, single-step) and, given a model, the model's.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from kgeval._version import __version__
from kgeval.audit._strict import strict_document, strict_json
from kgeval.datasets import split_fingerprint
from kgeval.datasets.temporal import TemporalDataset
from kgeval.models.temporal import RecurrencyBaseline
from kgeval.variants.temporal import TemporalRankBasedEvaluator

__all__ = ["TemporalAuditReport", "audit_temporal_dataset", "split_fingerprint"]

SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class TemporalAuditReport:
    """The audit of one temporal dataset; :meth:`to_markdown` is the evaluation card, :meth:`to_json` strict
    JSON. Every count is of quadruples unless named otherwise."""

    dataset: str
    kgeval_version: str
    entities: int
    relations: int
    times: int
    sizes: dict[str, int]
    fingerprints: dict[str, str]  #: split -> first 16 hex digits of the SHA-256 of its sorted labelled quadruples
    shared_times: dict[str, int]  #: "train & test" etc. -> the number of times both splits hold
    setting: str  #: "forecasting" (every test time after every training time), "completion" or "mixed"
    duplicates: dict[str, int]  #: split -> repeated quadruples within it; "test in train", "test in valid"
    recurrence: float  #: share of test quadruples whose (s, r, o) was true at an earlier time
    recurrence_in_train: float  #: share of test quadruples whose (s, r, o) is in train at any time
    filter_sizes: dict[str, float]  #: "time-aware" / "static" -> mean other answers removed per test task
    recurrency_mrr: float | None = None  #: the recurrency baseline's realistic MRR (time-aware, single-step)
    model_mrr: dict[str, float] = field(default_factory=dict)  #: setting -> the model's realistic MRR

    def to_dict(self) -> dict[str, Any]:
        """Plain values only (NaN as None), with a format tag."""
        return strict_document("kgeval-temporal-audit-1", self)

    def to_json(self, indent: int | None = 2) -> str:
        """Strict JSON (no NaN)."""
        return strict_json(self.to_dict(), indent)

    def to_markdown(self) -> str:
        """The evaluation card."""
        lines = [f"## Temporal evaluation audit: {self.dataset}", "",
                 f"{self.entities:,} entities, {self.relations:,} relations, {self.times:,} times; quadruples: "
                 + ", ".join(f"{split} {count:,}" for split, count in self.sizes.items()) + ".",
                 "", "### Fingerprint", "", "| split | quadruples | content hash |", "|---|---|---|"]  # fmt: skip
        lines += [f"| {split} | {self.sizes[split]:,} | `{self.fingerprints[split]}` |" for split in SPLITS]
        lines += ["", "Datasets that share a name differ here (e.g. ICEWS14: 63,685 / 13,823 / 13,222 quadruples in "
                  "the xERTE / TLogic split, 74,845 / 8,514 / 7,371 in RE-GCN's); quote the counts with a result.",
                  "", "### Time overlap", "",
                  ", ".join(f"{pair}: {count:,} times" for pair, count in self.shared_times.items())
                  + f". Setting: **{self.setting}**"
                  + {"forecasting": " (every test time is later than every training time: a model learns no "
                                    "embedding of a test time).",
                     "completion": " (test times were seen in training).",
                     "mixed": " (some test times were seen in training, some not)."}[self.setting],
                  "", "### Duplicates", "",
                  ", ".join(f"{name}: {count:,}" for name, count in self.duplicates.items()) + ".",
                  "", "### Recurrence", "",
                  f"{self.recurrence:.1%} of the test quadruples repeat an (s, r, o) true at an earlier time; "
                  f"{self.recurrence_in_train:.1%} have their (s, r, o) in train.",
                  "", "### Filter sizes", "",
                  "Other known answers removed per test task (mean over head and tail tasks): "
                  + ", ".join(f"{name} {size:.2f}" for name, size in self.filter_sizes.items()) + "."]  # fmt: skip
        lines += ["", "### Baselines", ""]
        if self.recurrency_mrr is not None:
            lines.append(f"Recurrency baseline (kgeval.models.RecurrencyBaseline, time-aware filter, single-step): "
                         f"MRR {self.recurrency_mrr:.4f} -- a forecasting result should beat it.")  # fmt: skip
        else:
            lines.append("Recurrency baseline: not run.")
        if self.model_mrr:
            lines.append("The model: " + ", ".join(f"{name} MRR {value:.4f}" for name, value in self.model_mrr.items())
                         + ".")  # fmt: skip
        lines += ["", f"kgeval {self.kgeval_version}; definitions: docs/temporal.md."]
        return "\n".join(lines) + "\n"


def audit_temporal_dataset(dataset: TemporalDataset, *, baseline: bool = True, model: Any = None,
                           results: Any = None, use_tqdm: bool = False) -> TemporalAuditReport:  # fmt: skip
    """Audit ``dataset`` (see the module docstring).

    Parameters
    ----------
    dataset : TemporalDataset
    baseline : bool, default=True
        Rank the test split with the recurrency baseline (time-aware filter, single-step order; it observes train
        and valid first).
    model : optional
        A temporal model of the dataset: its test split is ranked under the three filter settings.
    results : TemporalRankBasedMetricResults, optional
        Instead of a model, the results of its test split (e.g. read from a rank table: ``kgeval audit --ranks``):
        their MRR in each setting they hold.
    use_tqdm : bool, default=False
    """
    frames = {split: _frame(getattr(dataset, split)) for split in SPLITS}
    times = {split: set(frame["time"].tolist()) for split, frame in frames.items()}
    shared = {f"{a} & {b}": len(times[a] & times[b]) for a, b in (("train", "valid"), ("train", "test"),
                                                                  ("valid", "test"))}  # fmt: skip
    report = TemporalAuditReport(
        dataset=dataset.name, kgeval_version=__version__, entities=dataset.num_entities,
        relations=dataset.num_relations, times=dataset.num_times,
        sizes={split: len(frame) for split, frame in frames.items()},
        fingerprints={split: split_fingerprint(dataset, split) for split in SPLITS},
        shared_times=shared, setting=_setting(times), duplicates=_duplicates(frames),
        recurrence=_recurrence(frames), recurrence_in_train=_in_train(frames), filter_sizes=_filter_sizes(frames),
    )  # fmt: skip
    if baseline and len(dataset.test):
        report = _with_recurrency(report, dataset, use_tqdm)
    if model is not None and results is not None:
        raise ValueError("give a model or its results, not both")
    if model is not None and len(dataset.test):
        results = TemporalRankBasedEvaluator(filtered="all").evaluate(
            model, **dataset.evaluation_kwargs("test"), use_tqdm=use_tqdm)  # fmt: skip
    if results is not None:
        settings = results.settings()
        model_mrr = {name: float(got["realistic.mrr"]) for name, got in settings.items() if got is not None}
        report = dataclasses.replace(report, model_mrr=model_mrr)
    return report


def _frame(quadruples: torch.Tensor) -> pd.DataFrame:
    return pd.DataFrame(quadruples.numpy().reshape(-1, 4), columns=["s", "r", "o", "time"])


def _setting(times: dict[str, set[int]]) -> str:
    """forecasting: every test time after every training time; completion: every test time a training time."""
    test, train = times["test"], times["train"]
    if not test or not train or min(test) > max(train):
        return "forecasting"
    return "completion" if test <= train else "mixed"


def _duplicates(frames: dict[str, pd.DataFrame]) -> dict[str, int]:
    counts = {split: int(frame.duplicated().sum()) for split, frame in frames.items()}
    test = frames["test"].drop_duplicates()
    for other in ("train", "valid"):
        counts[f"test in {other}"] = len(test.merge(frames[other].drop_duplicates(), how="inner"))
    return counts


def _recurrence(frames: dict[str, pd.DataFrame]) -> float:
    """Share of test quadruples whose (s, r, o) is true at some earlier time, in any split."""
    every = pd.concat(frames.values())
    first = every.groupby(["s", "r", "o"], as_index=False)["time"].min().rename(columns={"time": "first"})
    test = frames["test"].merge(first, on=["s", "r", "o"], how="left")
    return float((test["first"] < test["time"]).mean()) if len(test) else math.nan


def _in_train(frames: dict[str, pd.DataFrame]) -> float:
    train = frames["train"][["s", "r", "o"]].drop_duplicates()
    test = frames["test"][["s", "r", "o"]].merge(train.assign(found=True), how="left")
    return float(test["found"].fillna(False).astype(bool).mean()) if len(test) else math.nan


def _filter_sizes(frames: dict[str, pd.DataFrame]) -> dict[str, float]:
    """Mean other known answers per test task: the known quadruples (all splits, deduplicated) sharing the task's
    query at its time (time-aware) or at any time (static, distinct answers), less the answer itself."""
    known = pd.concat(frames.values()).drop_duplicates()
    test = frames["test"]
    sizes = {}
    for name, with_time in (("time-aware", True), ("static", False)):
        removed = []
        for query, answer in ((["s", "r"], "o"), (["r", "o"], "s")):
            keys = [*query, "time"] if with_time else query
            answers = known[[*keys, answer]].drop_duplicates().groupby(keys).size().rename("n").reset_index()
            removed.append(test.merge(answers, on=keys, how="left")["n"].to_numpy() - 1)
        sizes[name] = float(np.concatenate(removed).mean()) if len(test) else math.nan
    return sizes


def _with_recurrency(report: TemporalAuditReport, dataset: TemporalDataset, use_tqdm: bool) -> TemporalAuditReport:
    results = TemporalRankBasedEvaluator(keep_records=False).evaluate(
        RecurrencyBaseline.before(dataset, "test"), **dataset.evaluation_kwargs("test"), use_tqdm=use_tqdm)  # fmt: skip
    return dataclasses.replace(report, recurrency_mrr=float(results["realistic.mrr"]))
