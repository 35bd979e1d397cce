"""``kgeval classify``: triple classification of a checkpoint's model (:mod:`kgeval.variants.classification`) --
thresholds fitted on labelled validation triples, applied to labelled test triples -- as text, ``--json``, with
``--save`` a table of every test triple and with ``--report`` the HTML report (its curves and tables). ``--protocol
all-pairs`` runs PyKEEN's protocol instead: every (query, entity) pair of the test triples' queries classified
(:func:`~kgeval.variants.classification.classify_all_pairs`). The dataset and the checkpoint are read as ``kgeval
evaluate`` reads them (:mod:`kgeval.cli.triples`)."""

from __future__ import annotations

import argparse
import gzip
import json
import math
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast

import pandas as pd
import torch

from kgeval._checks import check_writable_file
from kgeval._files import replace_atomically
from kgeval.cli._common import count_of, int_at_least, version
from kgeval.cli.triples import DEFAULT_DATASET, _add_unseen_argument, _checkpoint_and_dataset
from kgeval.datasets import TriplesDataset
from kgeval.datasets.reading import unread_files
from kgeval.exceptions import ThresholdFallbackWarning, UndefinedMetricWarning, UnreadFilesWarning
from kgeval.variants.classification import (
    CONVENTIONS,
    AllPairsResults,
    LabelledTriples,
    TripleClassificationResults,
    classify_all_pairs,
    classify_triples,
    load_split_with_negatives,
    read_labelled_triples,
)
from kgeval.variants.classification.all_pairs import ALL_PAIRS_METRICS
from kgeval.variants.classification.report import write_classification_report

__all__ = ["SAVE_SUFFIXES", "add_classify_arguments", "classification_document", "run_classify"]

#: the endings --save takes: comma- or tab-separated, maybe gzipped
SAVE_SUFFIXES: tuple[str, ...] = (".csv", ".tsv", ".csv.gz", ".tsv.gz")
#: what the sweep of thresholds maximises
OBJECTIVES: tuple[str, ...] = ("accuracy", "f1")
#: the metrics the text output prints, micro and macro
SHOWN: tuple[str, ...] = ("accuracy", "f1", "roc_auc", "average_precision")
#: what is classified: labelled triples (thresholds per relation), or every (query, entity) pair (PyKEEN's protocol)
PROTOCOLS: tuple[str, ...] = ("labelled", "all-pairs")
#: how the all-pairs protocol calls a pair true (beside a number: true at score >= it)
THRESHOLD_RULES: tuple[str, ...] = ("validation", "top_p")
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
    add("--protocol", default="labelled", metavar="{" + ",".join(PROTOCOLS) + "}",
        help="labelled: labelled test triples at thresholds fitted on labelled valid ones (default); all-pairs: "
        "PyKEEN's protocol, every (query, entity) pair of the test triples' queries an instance, a known triple "
        "(test, train, valid) positive")  # fmt: skip
    add("--convention", default=None, metavar="{" + ",".join(CONVENTIONS) + "}",
        help="how thresholds are fitted (docs/classification.md; default: kgeval)")  # fmt: skip
    add("--objective", default="accuracy", metavar="{" + ",".join(OBJECTIVES) + "}",
        help="what the threshold sweep maximises (default: %(default)s)")  # fmt: skip
    add("--threshold", default=None, metavar="{validation,top_p,NUMBER}", help="all-pairs: how a pair is called "
        "true: at the score fitted on the valid triples' pairs (default), by PyKEEN's top-P rule (the P "
        "highest-scored pairs, P the positive ones: optimistic), or at score >= NUMBER")  # fmt: skip
    add("--exclude-train", action="store_true", help="all-pairs: leave the training triples out of both classes "
        "(PyKEEN counts them as positives)")  # fmt: skip
    add("--batch-size", type=int_at_least(1), default=None, help="triples per model call (all-pairs: queries per "
        "model call; default: as kgeval sizes them)")  # fmt: skip
    add("--json", action="store_true", help="print every number (micro, macro, per relation, thresholds; all-pairs: "
        "per side, with PyKEEN's 22) as one strict JSON object")  # fmt: skip
    add("--save", metavar="PATH", help="also write each test triple's head, relation, tail, score, label, threshold "
        "and prediction to PATH (" + ", ".join(SAVE_SUFFIXES) + "; labelled triples only)")  # fmt: skip
    add("--report", metavar="PATH", help="also write the HTML report to PATH: the ROC and precision-recall curves "
        "and the tables (one self-contained file)")  # fmt: skip


def run_classify(args: argparse.Namespace) -> int:
    """Classify the test triples of the dataset with the checkpoint's model at thresholds fitted on validation (or,
    ``--protocol all-pairs``, every pair of their queries); print the headline (or JSON) and, with --save, write the
    per-triple table, with --report the HTML report."""
    _check_options(args)
    if args.protocol == "all-pairs":
        return _run_all_pairs(args)
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
    title = (
        f"{type(loaded.model).__name__} on {dataset.name} test: triple classification ({len(test):,} labelled triples)"
    )
    report = _report(args.report, results, title)
    if args.json:
        inputs = {"checkpoint": args.checkpoint, "model": type(loaded.model).__name__, "dataset": dataset.name,
                  "valid": sources["valid"][1], "test": sources["test"][1], "valid_triples": len(valid),
                  "test_triples": len(test), "batch_size": args.batch_size}  # fmt: skip
        document = classification_document(results, inputs, {"protocol": "labelled", "known_negatives": {
            "valid": valid.known_negatives, "test": test.known_negatives}})  # fmt: skip
        if saved is not None:
            document["saved"] = saved
        if report is not None:
            document["report"] = report
        print(json.dumps(document, allow_nan=False))
        return 0
    print(_text(results, dataset, valid, test))
    if saved is not None:
        print(f"(each test triple's score, threshold and prediction are in {saved})")
    if report is not None:
        print(f"(the HTML report, curves and tables, is in {report})")
    return 0


def _run_all_pairs(args: argparse.Namespace) -> int:
    """PyKEEN's protocol on the dataset's test triples: every (query, entity) pair of their queries, the test, train
    and valid triples positive (train in neither class with --exclude-train), the threshold fitted on the valid
    triples' pairs (or --threshold's rule)."""
    threshold = _threshold(args.threshold)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnreadFilesWarning)  # shown below: this protocol reads no negatives file
        loaded, dataset = _checkpoint_and_dataset(args)
        known = [dataset.valid] if args.exclude_train else [dataset.train, dataset.valid]
        results = classify_all_pairs(loaded.model, dataset.test, known=known,
                                     exclude=dataset.train if args.exclude_train else None,
                                     validation=dataset.valid if threshold == "validation" else None,
                                     threshold=threshold, objective=args.objective,
                                     batch_size=args.batch_size)  # fmt: skip
    for warning in caught:
        if issubclass(warning.category, UnreadFilesWarning) and not _unread(dataset, {}):
            continue
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    model = type(loaded.model).__name__
    report = _report(args.report, results, f"{model} on {dataset.name} test: all-pairs triple classification")
    queries = {side: int(torch.unique(dataset.test[:, columns], dim=0).shape[0])
               for side, columns in (("head", [1, 2]), ("tail", [0, 1]))}  # fmt: skip
    if args.json:
        source = {"checkpoint": args.checkpoint, "model": model, "dataset": dataset.name, "split": "test",
                  "known": ["valid"] if args.exclude_train else ["train", "valid"],
                  "excluded": ["train"] if args.exclude_train else [],
                  "validation": "valid" if threshold == "validation" else None, "test_triples": len(dataset.test),
                  "valid_triples": len(dataset.valid), "queries": queries, "entities": dataset.num_entities,
                  "batch_size": args.batch_size}  # fmt: skip
        with warnings.catch_warnings():  # PyKEEN's 0 at a zero denominator is in the document as its code gives it
            warnings.filterwarnings("ignore", "Division by zero. Result set to 0 according to policy.", UserWarning)
            numbers = results.to_dict()
        document = {"kgeval_version": version(), "source": source, "protocol": "all-pairs", **numbers}
        if report is not None:
            document["report"] = report
        print(json.dumps(_strict(document), allow_nan=False))
        return 0
    print(_all_pairs_text(results, dataset, queries, args.exclude_train))
    if report is not None:
        print(f"(the HTML report, curves and tables, is in {report})")
    return 0


def _threshold(text: str | None) -> Literal["validation", "top_p"] | float:
    """--threshold as classify_all_pairs takes it: a rule's name, or a number."""
    if text is None or text == "validation":
        return "validation"
    if text == "top_p":
        return "top_p"
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isnan(value):
        raise ValueError(f"--threshold must be one of {', '.join(THRESHOLD_RULES)} or a number, got {text!r}")
    return value


def _report(path: str | None, results: TripleClassificationResults | AllPairsResults, title: str) -> str | None:
    """Write the HTML report to ``path`` (whole or not at all), if one is asked for; the path written."""
    if path is None:
        return None
    write_classification_report(results, path, title=title)
    return path


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
    """The options checked before any work: a checkpoint, a known protocol, convention and objective, one source
    per split, files that exist, no option of the other protocol, --save and --report paths kgeval writes (their
    folders made, with parents)."""
    if not args.checkpoint:
        raise ValueError("give the model to classify with: --checkpoint PATH")
    if args.protocol not in PROTOCOLS:
        raise ValueError(f"--protocol must be one of {', '.join(PROTOCOLS)}, got {args.protocol!r}")
    if args.protocol == "all-pairs":
        _check_all_pairs_options(args)
    else:
        _check_labelled_options(args)
    if args.report:
        check_writable_file(args.report, "--report", create_folder=True)


def _check_labelled_options(args: argparse.Namespace) -> None:
    """The labelled protocol's options (the all-pairs protocol's refused); the convention's default set."""
    for option, given in (("--threshold", args.threshold is not None), ("--exclude-train", args.exclude_train)):
        if given:
            raise ValueError(f"{option} is an option of --protocol all-pairs (labelled triples are classified at "
                             "thresholds their --convention fits)")  # fmt: skip
    args.convention = args.convention or "kgeval"
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


def _check_all_pairs_options(args: argparse.Namespace) -> None:
    """The options of the labelled protocol are refused with --protocol all-pairs, --save first (its table would
    hold a row per pair); a known threshold rule or a number; an objective only where a threshold is fitted."""
    if args.save:
        raise ValueError("--save writes a row per labelled test triple, and --protocol all-pairs classifies every "
                         "(query, entity) pair of the test triples' queries: queries x entities pairs, too many rows "
                         "for a table; use --json for its numbers, --report PATH.html for its curves")  # fmt: skip
    labelled = [f"--{kind}-{split}" for kind in ("negatives", "labelled") for split in _SPLITS
                if getattr(args, f"{kind}_{split}")]  # fmt: skip
    if args.convention is not None:
        labelled.append("--convention")
    if labelled:
        raise ValueError(f"{', '.join(labelled)}: options of the labelled protocol; --protocol all-pairs classifies "
                         "the pairs of the dataset's test triples, fitting one threshold on its valid triples' pairs "
                         "(--threshold)")  # fmt: skip
    threshold = _threshold(args.threshold)
    if args.objective not in OBJECTIVES:
        raise ValueError(f"--objective must be one of {', '.join(OBJECTIVES)}, got {args.objective!r}")
    if threshold != "validation" and args.objective != "accuracy":
        raise ValueError(f"--threshold {args.threshold} fits no objective (only the threshold fitted on validation "
                         "does): leave --objective out")  # fmt: skip


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
    lines.append(
        "(--json has every metric, per relation too, and each threshold; --save PATH each test triple; "
        "--report PATH.html the curves)"
    )
    return "\n".join(lines)


def _all_pairs_text(results: AllPairsResults, dataset: TriplesDataset, queries: Mapping[str, int],
                    exclude_train: bool) -> str:  # fmt: skip
    """The headline of the all-pairs protocol: what was classified, the threshold, and per side the pairs and
    kgeval's metrics."""
    sides = list(results.sides)
    both = results.sides["both"]
    rule = results.threshold_rule
    if rule == "top_p":
        how = ("PyKEEN's top-P rule: on each side the P highest-scored pairs are true, P its positive pairs (fitted "
               "on the evaluated labels: optimistic)")  # fmt: skip
    elif rule == "given":
        how = f"{both.threshold!r} (given): a pair is true when its score >= it"
    else:
        fitted = sum(result.num_pairs for side, result in results.validation.items() if side != "both")
        how = (f"{both.threshold!r}, {rule} over the {fitted:,} pairs of the valid triples' queries: a pair is true "
               "when its score >= it")  # fmt: skip
    positives = (
        "the test and valid triples (train in neither class)" if exclude_train else "the test, train and valid triples"
    )
    lines = [
        f"== {dataset.name} test: all-pairs classification (PyKEEN's protocol) of the {len(dataset.test):,} test "
        f"triples' queries ({queries['head']:,} head, {queries['tail']:,} tail) x {dataset.num_entities:,} "
        "entities ==",
        f"positive pairs: {positives}; every other pair negative",
        f"threshold: {how}",
        f"{'':<18}" + "".join(f"{side:>10}" for side in sides),
        f"{'pairs':<18}" + "".join(f"{results.sides[side].num_pairs:>10,}" for side in sides),
        f"{'positive pairs':<18}" + "".join(f"{results.sides[side].tally.num_positives:>10,}" for side in sides),
    ]
    values = {side: results.sides[side].metrics() for side in sides}
    lines += [f"{name:<18}" + "".join(f"{values[side][name]:>10.4f}" for side in sides) for name in ALL_PAIRS_METRICS]
    lines.append("(--json has the confusion counts and PyKEEN's 22 numbers per side; --report PATH.html the curves)")
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
