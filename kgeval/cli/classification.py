"""``kgeval classify``: triple classification of a checkpoint's model (:mod:`kgeval.variants.classification`) --
thresholds fitted on labelled validation triples, applied to labelled test triples -- as text, ``--json``, and with
``--save`` a table of every test triple. The dataset and the checkpoint are read as ``kgeval evaluate`` reads them
(:mod:`kgeval.cli.triples`)."""

from __future__ import annotations

import argparse
import gzip
import json
import math
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pandas as pd

from kgeval._checks import check_writable_file
from kgeval._files import replace_atomically
from kgeval.cli._common import count_of, int_at_least, version
from kgeval.cli.triples import DEFAULT_DATASET, _add_unseen_argument, _checkpoint_and_dataset
from kgeval.datasets import TriplesDataset
from kgeval.datasets.reading import unread_files
from kgeval.exceptions import ThresholdFallbackWarning, UndefinedMetricWarning, UnreadFilesWarning
from kgeval.variants.classification import (
    CONVENTIONS,
    LabelledTriples,
    TripleClassificationResults,
    classify_triples,
    load_split_with_negatives,
    read_labelled_triples,
)

__all__ = ["SAVE_SUFFIXES", "add_classify_arguments", "classification_document", "run_classify"]

#: the endings --save takes: comma- or tab-separated, maybe gzipped
SAVE_SUFFIXES: tuple[str, ...] = (".csv", ".tsv", ".csv.gz", ".tsv.gz")
#: what the sweep of thresholds maximises
OBJECTIVES: tuple[str, ...] = ("accuracy", "f1")
#: the metrics the text output prints, micro and macro
SHOWN: tuple[str, ...] = ("accuracy", "f1", "roc_auc", "average_precision")
_SPLITS = ("valid", "test")


def add_classify_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--checkpoint", metavar="PATH", help="the model (as kgeval evaluate --checkpoint reads it)")
    add("--dataset", metavar="NAME_OR_PATH", help="the dataset of the ids and the known triples (default: the one "
        f"the checkpoint names, as kgeval evaluate chooses it; else {DEFAULT_DATASET})")  # fmt: skip
    add("--trust-checkpoint", action="store_true", help="read a pickled model (see kgeval evaluate --help)")
    _add_unseen_argument(parser)
    for split in _SPLITS:
        add(f"--negatives-{split}", metavar="FILE", help=f"false {split} triples, one head<TAB>relation<TAB>tail a "
            f"line (CoDEx's layout), beside the {split} split's true triples (default: {split}_negatives.txt or "
            f".txt.gz beside the {split} file)")  # fmt: skip
    for split in _SPLITS:
        add(f"--labelled-{split}", metavar="FILE", help=f"labelled {split} triples instead, one head relation tail "
            "label (1 / -1 or 1 / 0) a line, as WN11 and FB13 ship them")  # fmt: skip
    add("--convention", default="kgeval", metavar="{" + ",".join(CONVENTIONS) + "}",
        help="how thresholds are fitted (docs/classification.md; default: %(default)s)")  # fmt: skip
    add("--objective", default="accuracy", metavar="{" + ",".join(OBJECTIVES) + "}",
        help="what the threshold sweep maximises (default: %(default)s)")  # fmt: skip
    add("--batch-size", type=int_at_least(1), default=None, help="triples per model call (default: as "
        "kgeval.variants.score_triples sizes them)")  # fmt: skip
    add("--json", action="store_true", help="print every number (micro, macro, per relation, thresholds) as one "
        "strict JSON object")  # fmt: skip
    add("--save", metavar="PATH", help="also write each test triple's head, relation, tail, score, label, threshold "
        "and prediction to PATH (" + ", ".join(SAVE_SUFFIXES) + ")")  # fmt: skip


def run_classify(args: argparse.Namespace) -> int:
    """Classify the test triples of the dataset with the checkpoint's model at thresholds fitted on validation;
    print the headline (or JSON) and, with --save, write the per-triple table."""
    _check_options(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnreadFilesWarning)  # shown below unless the command reads those files
        loaded, dataset = _checkpoint_and_dataset(args)
        warnings.simplefilter("always", ThresholdFallbackWarning)  # what the output says itself
        warnings.simplefilter("always", UndefinedMetricWarning)
        sources = {split: _labelled(args, dataset, split) for split in _SPLITS}
        results = classify_triples(loaded.model, sources["valid"][0], sources["test"][0],
                                   convention=args.convention, objective=args.objective,
                                   batch_size=args.batch_size)  # fmt: skip
    for warning in caught:  # the fallback is in the output; undefined metrics are NaN (text) or null (JSON)
        if issubclass(warning.category, ThresholdFallbackWarning):
            continue
        if issubclass(warning.category, UndefinedMetricWarning) and args.json:
            continue
        if issubclass(warning.category, UnreadFilesWarning) and not _unread(dataset, sources):
            continue
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    valid, test = sources["valid"][0], sources["test"][0]
    saved = _save(args.save, results, test, dataset) if args.save else None
    if args.json:
        inputs = {"checkpoint": args.checkpoint, "model": type(loaded.model).__name__, "dataset": dataset.name,
                  "valid": sources["valid"][1], "test": sources["test"][1], "valid_triples": len(valid),
                  "test_triples": len(test), "batch_size": args.batch_size}  # fmt: skip
        document = classification_document(results, inputs, {"known_negatives": {
            "valid": valid.known_negatives, "test": test.known_negatives}})  # fmt: skip
        if saved is not None:
            document["saved"] = saved
        print(json.dumps(document, allow_nan=False))
        return 0
    print(_text(results, dataset, valid, test))
    if saved is not None:
        print(f"(each test triple's score, threshold and prediction are in {saved})")
    return 0


def _unread(dataset: TriplesDataset, sources: Mapping[str, tuple[LabelledTriples, str]]) -> list[str]:
    """The data files of the dataset's folder that neither its splits nor this command's labelled triples were read
    from: the folder's :class:`UnreadFilesWarning` is shown only where there are some (CoDEx's negatives files are
    read here)."""
    train = dataset.sources.get("train")
    if not train:
        return []
    folder = Path(train).resolve().parent
    read = {Path(path).name for path in dataset.sources.values() if Path(path).resolve().parent == folder}
    for _labelled_triples, source in sources.values():
        path = Path(source.split(" + ", 1)[-1]).resolve()  # "valid + <negatives file>", or the labelled file
        if path.parent == folder:
            read.add(path.name)
    return list(unread_files(folder, read))


def _check_options(args: argparse.Namespace) -> None:
    """The options checked before any work: a checkpoint, a known convention and objective, one source per split,
    files that exist, a --save path kgeval writes (its folder made, with parents)."""
    if not args.checkpoint:
        raise ValueError("give the model to classify with: --checkpoint PATH")
    if args.convention not in CONVENTIONS:
        raise ValueError(f"--convention must be one of {', '.join(CONVENTIONS)}, got {args.convention!r}")
    if args.objective not in OBJECTIVES:
        raise ValueError(f"--objective must be one of {', '.join(OBJECTIVES)}, got {args.objective!r}")
    if args.convention == "torchkge" and args.objective != "accuracy":  # before scoring, not after it
        raise ValueError("--convention torchkge fits no objective (its thresholds are the highest validation "
                         "negatives): leave --objective out")  # fmt: skip
    if args.convention == "codex" and args.objective != "accuracy":
        raise ValueError("--convention codex fits accuracy, as CoDEx's scripts/tc.py does: leave --objective out "
                         "(or use --convention kgeval for F1)")  # fmt: skip
    if args.convention == "pykeen" and args.objective != "accuracy":
        raise ValueError("--convention pykeen fits no objective (it calls the top-P test scores true): leave "
                         "--objective out")  # fmt: skip
    for split in _SPLITS:
        negatives, labelled = getattr(args, f"negatives_{split}"), getattr(args, f"labelled_{split}")
        if negatives and labelled:
            raise ValueError(f"give --negatives-{split} or --labelled-{split}, not both")
        for option, path in ((f"--negatives-{split}", negatives), (f"--labelled-{split}", labelled)):
            if path and not Path(path).is_file():
                what = "is a folder, not a file" if Path(path).is_dir() else "no such file"
                raise FileNotFoundError(f"{option} {path!r}: {what}")
    if args.save:
        if not args.save.lower().endswith(SAVE_SUFFIXES):
            raise ValueError(f"--save {args.save!r}: the table is written as {', '.join(SAVE_SUFFIXES)}")
        check_writable_file(args.save, "--save", create_folder=True)


def _labelled(args: argparse.Namespace, dataset: TriplesDataset, split: str) -> tuple[LabelledTriples, str]:
    """(a split's labelled triples, where they came from): --labelled-SPLIT, else the split's triples beside
    --negatives-SPLIT, else beside the negatives file next to the split's file (CoDEx's layout)."""
    labelled = getattr(args, f"labelled_{split}")
    if labelled:
        known = [dataset.train, dataset.valid, dataset.test]
        read = read_labelled_triples(labelled, dataset.entity_to_id, dataset.relation_to_id, known_triples=known)
        return read, str(labelled)
    negatives = getattr(args, f"negatives_{split}")
    try:
        read = load_split_with_negatives(dataset, split, negatives=negatives)
    except ValueError as error:
        if negatives is not None or ("negatives file" not in str(error) and "knows no file" not in str(error)):
            raise
        raise ValueError(f"{dataset.name} has no negatives for its {split} split ({error}): give --negatives-valid "
                         "FILE --negatives-test FILE (false triples, CoDEx's layout) or --labelled-valid FILE "
                         "--labelled-test FILE (head relation tail label, WN11 / FB13's)") from error  # fmt: skip
    return read, read.source


def classification_document(results: TripleClassificationResults, inputs: Mapping[str, Any],
                            extra: Mapping[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """The ``--json`` document: ``kgeval_version``, ``source`` (the command's inputs), ``extra`` keys, then
    :meth:`TripleClassificationResults.to_dict` -- strict JSON: an undefined metric (NaN) is null, an infinite
    threshold (CoDEx's -inf) the string ``"-inf"`` / ``"inf"``."""
    document = {"kgeval_version": version(), "source": dict(inputs), **(extra or {}), **results.to_dict()}
    return cast(dict[str, Any], _strict(document))


def _strict(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(item) for item in value]
    return value


def _text(results: TripleClassificationResults, dataset: TriplesDataset, valid: LabelledTriples,
          test: LabelledTriples) -> str:  # fmt: skip
    """The headline: what was classified, the convention, accuracy / F1 / ROC-AUC / AP micro and macro, the
    fallback relations and their test triples."""
    comparison = ">" if results.strict else ">="
    lines = [
        f"== {dataset.name} test: {len(test):,} labelled triples ({test.num_positives:,} true, "
        f"{test.num_negatives:,} false); thresholds fitted on {len(valid):,} labelled valid triples ==",
        f"convention {results.convention}, objective {results.objective}: a triple is true when its score "
        f"{comparison} its relation's threshold",
        f"{'':<18}{'micro':>8}{'macro':>8}",
    ]
    lines += [f"{name:<18}{results.micro[name]:>8.4f}{results.macro[name]:>8.4f}" for name in SHOWN]
    relations = len(results.per_relation)
    if not results.fallback:
        own = "one global threshold" if results.convention == "global" else "a threshold of its own"
        lines.append(f"fallback: none -- each of the {count_of(relations, 'test relation')} got {own}")
    else:
        reasons: dict[str, list[str]] = {}
        for relation, why in results.fallback.items():
            reasons.setdefault(why, []).append(results.relation_name(relation))
        listed = "; ".join(f"{why}: {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}"
                           for why, names in reasons.items())  # fmt: skip
        lines.append(f"fallback: {len(results.fallback)} of {count_of(relations, 'test relation')}, "
                     f"{count_of(results.fallback_triples, 'test triple')} -- {listed}")  # fmt: skip
    lines.append("(--json has every metric, per relation too, and each threshold; --save PATH each test triple)")
    return "\n".join(lines)


def _save(path: str, results: TripleClassificationResults, test: LabelledTriples, dataset: TriplesDataset) -> str:
    """Write one row per test triple -- head, relation, tail (labels), score, label, threshold, prediction (1 / 0)
    -- to ``path`` whole or not at all (a temporary file beside it, renamed over it). Returns the path."""
    entities = _by_id(dataset.entity_to_id)
    relations = _by_id(dataset.relation_to_id)
    triples = test.triples.numpy()
    frame = pd.DataFrame({
        "head": [entities[i] for i in triples[:, 0]],
        "relation": [relations[i] for i in triples[:, 1]],
        "tail": [entities[i] for i in triples[:, 2]],
        "score": results.scores,
        "label": results.labels.astype(int),
        "threshold": [results.thresholds[int(r)] for r in results.relations],
        "prediction": results.predictions.astype(int),
    })  # fmt: skip
    lower = path.lower()
    text = frame.to_csv(sep="\t" if ".tsv" in lower[-7:] else ",", index=False, float_format="%.17g")
    data = text.encode("utf-8")
    if lower.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    replace_atomically(path, lambda handle: handle.write(data))
    return path


def _by_id(label_to_id: Mapping[str, int]) -> dict[int, str]:
    return {int(index): label for label, index in label_to_id.items()}
