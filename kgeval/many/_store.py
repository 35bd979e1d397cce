"""Resumable many-graph runs (:func:`kgeval.many.evaluate_many` with ``results_dir``): each graph's finished result
in its own JSON file, written atomically as the graph completes, with a fingerprint of everything its numbers
depend on; a later run with the same folder takes a graph whose file matches and evaluates again one whose file
does not (saying which entries differ), never mixing the two.

A file holds ``format``, ``fingerprint`` (:func:`graph_fingerprint`), ``row`` (the graph's row of the table, for
reading) and ``results`` (:meth:`RankBasedMetricResults.to_json`'s document, records included: the row and every
metric are rebuilt from it, checked by :meth:`RankBasedMetricResults.from_json`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import warnings
from pathlib import Path
from typing import Any

from kgeval._checks import make_folder
from kgeval._files import replace_atomically
from kgeval._fingerprints import (
    ScoreSignature,
    callable_fingerprint,
    dataset_content_fingerprint,
    model_fingerprint,
    settings_fingerprint,
    value_fingerprint,
)
from kgeval._version import __version__
from kgeval.datasets import FullyInductiveDataset, InductiveDataset
from kgeval.evaluator import RankBasedEvaluator
from kgeval.exceptions import ResumeWarning
from kgeval.results import RankBasedMetricResults

__all__ = ["FORMAT", "SCORES", "GraphStore", "graph_fingerprint", "model_identity"]

#: the per-graph result file format this module writes and reads
FORMAT = "kgeval-many-graph-1"
#: keywords of :meth:`RankBasedEvaluator.evaluate` that change how a graph is ranked, never its numbers (kgeval's
#: ranks are exact in any batch, slice, device and kernel); every other keyword counts in the fingerprint
#: the fingerprint's entry of what the graph's model scores (:class:`kgeval._fingerprints.ScoreSignature`), compared
#: within float rounding, not for equality
SCORES = "model scores"
NEUTRAL_KEYWORDS = frozenset({"batch_size", "slice_size", "device", "use_tqdm", "tqdm_kwargs", "progress_path",
                              "save_every", "do_time_consuming_checks", "distributed", "process_group"})  # fmt: skip


def model_identity(model_for: Any, is_model: bool) -> str:
    """What identifies the model of a run whose caller named none: a model object by its class, a hash of its
    weights and buffers and a hash of its plain settings (:func:`kgeval._fingerprints.model_fingerprint`,
    :func:`~kgeval._fingerprints.settings_fingerprint`); a function giving the model of each dataset by a hash of its
    code and of what its closure holds (:func:`~kgeval._fingerprints.callable_fingerprint`)."""
    if is_model:
        described = model_fingerprint(model_for)
        return f"model {described['class']} weights {described.get('weights', '-')} " \
               f"settings {settings_fingerprint(model_for)}"  # fmt: skip
    return f"function {callable_fingerprint(model_for)}"


def graph_fingerprint(dataset: Any, group: str, split: str, validation_filter: str, evaluator: RankBasedEvaluator,
                      evaluate_kwargs: dict[str, Any], model: str,
                      signature: ScoreSignature | None = None) -> dict[str, Any]:  # fmt: skip
    """Everything one graph's numbers depend on, as plain JSON values (compared entry by entry): the dataset's name,
    group and content (:func:`kgeval._fingerprints.dataset_content_fingerprint`), the split, the validation filter
    (where it applies: an inductive dataset's valid split), the evaluator's settings that change numbers
    (``filtered``, ``ks``, ``keep_records``, ``matmul_precision``), the keywords of ``evaluate`` other than
    :data:`NEUTRAL_KEYWORDS` (by a hash of their values), the model's identity, what the graph's model scores
    (``signature``, under :data:`SCORES`: compared within float rounding, see
    :class:`kgeval._fingerprints.ScoreSignature`) and kgeval's version."""
    inductive = isinstance(dataset, InductiveDataset | FullyInductiveDataset)
    kwargs = {key: value for key, value in sorted(evaluate_kwargs.items()) if key not in NEUTRAL_KEYWORDS}
    return {
        "dataset": dataset.name,
        "group": group,
        "dataset content": dataset_content_fingerprint(dataset),
        "split": split,
        "validation filter": validation_filter if inductive and split == "valid" else None,
        "evaluator": {"filtered": evaluator.filtered, "ks": list(evaluator.ks),
                      "keep_records": evaluator.keep_records, "matmul_precision": evaluator.matmul_precision},
        "evaluate keywords": {key: value_fingerprint(value) for key, value in kwargs.items()},
        "model": model,
        SCORES: None if signature is None else signature.to_plain(),
        "kgeval": __version__,
    }  # fmt: skip


class GraphStore:
    """The folder of a resumable run: one JSON file per graph (:meth:`path_of`), created where missing, with its
    missing parents (``runs/many`` where there is no ``runs/`` yet).

    Raises
    ------
    ValueError
        When ``folder`` is a file, a file is in the way of its parents, or it cannot be made (no permission).
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(os.fspath(folder))
        if self.folder.exists() and not self.folder.is_dir():
            raise ValueError(f"results_dir {str(self.folder)!r} is a file; give a folder")
        make_folder(self.folder, f"results_dir {str(self.folder)!r}")

    def path_of(self, name: str) -> Path:
        """The file of the graph named ``name``: its name made safe for a file name, and a hash of the whole name
        (two names that look alike once made safe keep two files)."""
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[:80] or "graph"
        return self.folder / f"{safe}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:10]}.json"

    def load(self, name: str, fingerprint: dict[str, Any]) -> tuple[RankBasedMetricResults, float] | None:
        """(results, seconds) of the graph's saved file when its fingerprint equals ``fingerprint``; None when there
        is no file, and -- with a :class:`ResumeWarning` naming the file and the entries that differ -- when the
        file belongs to other inputs or cannot be read (the graph is then evaluated again and its file replaced)."""
        path = self.path_of(name)
        if not path.is_file():
            return None
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(document, dict) or document.get("format") != FORMAT:
                raise ValueError(f"not a {FORMAT} file")
            saved = document["fingerprint"]
            differing = sorted(key for key in {*saved, *fingerprint} - {SCORES}
                               if saved.get(key) != fingerprint.get(key))  # fmt: skip
            scores = ScoreSignature.from_plain(fingerprint.get(SCORES))
            other = None if scores is None else scores.difference(ScoreSignature.from_plain(saved.get(SCORES)))
            if other is not None and not differing:
                _warn(f"{str(path)!r} holds {name} evaluated by a model that scores otherwise ({other}; retrained "
                      "since?): evaluating it again")  # fmt: skip
                return None
            if differing:
                _warn(f"{str(path)!r} holds {name} evaluated with other inputs ({', '.join(differing)} differ): "
                      "evaluating it again")  # fmt: skip
                return None
            results = RankBasedMetricResults.from_json(json.dumps(document["results"]))
            return results, float(document["row"]["seconds"])
        except (ValueError, KeyError, TypeError, AttributeError, OSError) as error:
            _warn(f"{str(path)!r} is no readable result of {name} ({type(error).__name__}: {error}): evaluating it "
                  "again")  # fmt: skip
            return None

    def save(self, name: str, fingerprint: dict[str, Any], row: dict[str, Any],
             results: RankBasedMetricResults) -> Path:  # fmt: skip
        """Write the graph's file: a temporary file beside it, renamed over it (``os.replace`` is atomic), so a
        run killed while saving leaves no half-written file."""
        path = self.path_of(name)
        document = {"format": FORMAT, "fingerprint": fingerprint, "row": row,
                    "results": json.loads(results.to_json())}  # fmt: skip
        text = json.dumps(document).encode("utf-8")
        replace_atomically(path, lambda handle: handle.write(text), sync=True)
        return path


def _warn(message: str) -> None:
    warnings.warn(message, ResumeWarning, stacklevel=4)
