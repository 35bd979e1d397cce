"""The commands of triple datasets: ``kgeval demo``, ``evaluate``, ``audit`` and ``strat`` (each a function that adds
its options to a sub-parser and one that runs it; :mod:`kgeval.cli` registers them). Temporal and inductive
datasets are handed on to :mod:`kgeval.cli.temporal` and :mod:`kgeval.cli.inductive`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict, cast

import pandas as pd
import torch

from kgeval._checks import check_num_entities, check_writable_file, model_num_relations
from kgeval._display import filter_order_note
from kgeval.adapters import scoring_view
from kgeval.analysis import stratified
from kgeval.analysis.buckets import frequency_buckets
from kgeval.analysis.groups import relation_groups
from kgeval.audit import audit_dataset
from kgeval.cli._common import (
    BUCKET_REFERENCES,
    check_ranks_fit,
    count_of,
    int_at_least,
    metrics_document,
    one_line,
    positive_float,
    provenance,
    read_groups,
    with_provenance,
)
from kgeval.cli.inductive import run_inductive_audit, run_inductive_demo, run_inductive_evaluate
from kgeval.cli.temporal import evaluate_temporal_table, run_temporal_audit, run_temporal_demo, run_temporal_evaluate
from kgeval.datasets import (
    SHIPPED_DATASETS,
    AnyDataset,
    FullyInductiveDataset,
    InductiveDataset,
    TemporalDataset,
    TriplesDataset,
    dataset_fingerprint,
    dataset_folder,
    inductive_folder,
    load_any_dataset,
    load_dataset,
    load_inductive_dataset,
    shared_data_dir,
    temporal_folder,
)
from kgeval.datasets.labelled import Duplicates, LabelNotInIdsError, Unseen
from kgeval.datasets.reading import train_relations
from kgeval.evaluator import RankBasedEvaluator
from kgeval.exceptions import UndefinedMetricWarning
from kgeval.keys import format_key
from kgeval.models import DistMult
from kgeval.models.checkpoint import READ_OPTIONS, LoadedModel, load_model_file, save_checkpoint
from kgeval.models.training import train_model
from kgeval.records import RankRecords, check_rank_path, read_ranks, settings_of, table_provenance, write_ranks
from kgeval.results import RankBasedMetricResults
from kgeval.typing import Target
from kgeval.variants.examples import EXAMPLE_SUFFIXES, rank_examples, write_examples
from kgeval.variants.temporal import TemporalRankBasedMetricResults

__all__ = [
    "add_audit_arguments",
    "add_demo_arguments",
    "add_evaluate_arguments",
    "add_strat_arguments",
    "run_audit",
    "run_demo",
    "run_evaluate",
    "run_strat",
]

#: the dataset the commands use when --dataset is not given (and a checkpoint names none)
DEFAULT_DATASET = "umls"


# -- demo ----------------------------------------------------------------------------------------------


def _add_unseen_argument(parser: argparse.ArgumentParser) -> None:
    """--unseen and --duplicates: how the dataset is read."""
    parser.add_argument("--unseen", choices=READ_OPTIONS["unseen"], default=None,
                        help="valid / test triples whose labels never occur in train: kept with a warning (default, "
                        "or what a checkpoint recorded), kept silently, or dropped as PyKEEN does")  # fmt: skip
    parser.add_argument("--duplicates", choices=READ_OPTIONS["duplicates"], default=None,
                        help="a triple (quadruple) repeating an earlier one of its split: kept, ranked as often as it "
                        "occurs (default, or what a checkpoint recorded), or merged into the first; either way "
                        "counted in a warning")  # fmt: skip


#: how a dataset is read where neither the command line nor a checkpoint says
READ_DEFAULTS = {"unseen": "warn", "duplicates": "keep"}


class Reading(TypedDict):
    """How a dataset is read (the loaders' ``unseen`` and ``duplicates``)."""

    unseen: Unseen
    duplicates: Duplicates


def _reading(args: argparse.Namespace, loaded: LoadedModel | None = None) -> Reading:
    """``unseen`` and ``duplicates`` to read a dataset with: as given (--unseen, --duplicates), else as the
    checkpoint recorded its data was read (a model trained with unseen triples dropped is evaluated so), else the
    defaults."""
    recorded = loaded.read_with if loaded is not None else {}
    chosen = {option: getattr(args, option, None) or recorded.get(option) or default
              for option, default in READ_DEFAULTS.items()}  # fmt: skip
    return Reading(unseen=cast(Unseen, chosen["unseen"]), duplicates=cast(Duplicates, chosen["duplicates"]))


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset",
        default=DEFAULT_DATASET,
        metavar="NAME_OR_PATH",
        help="shipped dataset (umls, kinship, nations), a folder of train/valid/test TSV files (of quadruples: a "
        "temporal demo), or a dataset "
        "name in the shared data folder (default: %(default)s)",
    )
    add = parser.add_argument
    add("--epochs", type=int_at_least(0), default=10, help="training epochs (default: %(default)s)")
    add("--dim", type=int_at_least(1), default=64, help="embedding dimension (default: %(default)s)")
    add("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    add("--batch-size", type=int_at_least(1), default=256, help="training batch size (default: %(default)s)")
    add("--lr", type=positive_float, default=0.01, help="Adam learning rate (default: %(default)s)")
    add("--no-progress", action="store_true", help="hide the progress bars")
    add("--save-checkpoint", metavar="PATH", help="save the trained model there, with what its data was (see "
        "kgeval.models.checkpoint): 'kgeval evaluate --checkpoint PATH' then finds the dataset itself")  # fmt: skip
    add("--full", action="store_true", help="print every metric after the headline")
    _add_unseen_argument(parser)


def _check_splits_hold_triples(dataset: AnyDataset, splits: tuple[str, ...], why: str) -> None:
    """A ValueError naming the file of the first of ``splits`` that holds no triple (before any work is done)."""
    for split in splits:
        if len(getattr(dataset, split)) == 0:
            where = dataset.sources.get(split)
            source = f" ({where} holds no triple)" if where else ""
            raise ValueError(f"the {split} split of {dataset.name} is empty{source}; {why}")


def _temporal_dataset(name: str | None, reading: Reading, **ids: Any) -> TemporalDataset | None:
    """The temporal dataset ``name`` names (:func:`kgeval.datasets.temporal_folder`: labelled quadruples or a
    RE-Net folder), read as ``reading`` says (:func:`_reading`) with ``ids`` where given, else None."""
    folder = temporal_folder(name) if name else None
    if folder is None:
        return None
    return load_any_dataset(folder, **reading, **ids)


def _special_datasets(
    args: argparse.Namespace, loaded: LoadedModel | None
) -> tuple[InductiveDataset | None, TemporalDataset | None]:
    """(the inductive dataset, the temporal dataset) that --dataset -- else the checkpoint's recorded dataset --
    names, at most one of them: a temporal one read with the checkpoint's label maps and checked against its
    fingerprint, so ``evaluate`` and ``audit`` rank a checkpoint's model with the ids it was trained on."""
    name = args.dataset or (loaded.dataset if loaded is not None else None)
    inductive = _inductive_dataset(name, _reading(args, loaded))
    if inductive is not None:
        return inductive, None
    ids = {"entity_to_id": loaded.entity_to_id, "relation_to_id": loaded.relation_to_id,
           "time_to_id": loaded.time_to_id} if loaded is not None and loaded.time_to_id is not None else {}  # fmt: skip
    temporal = _temporal_dataset(name, _reading(args, loaded), **ids)
    if temporal is not None and loaded is not None:
        _check_fingerprint(loaded, temporal, args.dataset is not None)
    return None, temporal


def _inductive_dataset(name: str | None, reading: Reading) -> InductiveDataset | None:
    """The inductive dataset ``name`` names (:func:`kgeval.datasets.inductive_folder`), read as ``reading`` says
    (its duplicates; an inductive folder drops unscoreable rows itself), else None."""
    folder = inductive_folder(name) if name else None
    if folder is None:
        return None
    return load_inductive_dataset(folder, duplicates=reading["duplicates"])


def run_demo(args: argparse.Namespace) -> int:
    """Train DistMult (TNTComplEx on temporal data), evaluate valid and test in the filtered setting, print the
    result tables."""
    dataset = load_any_dataset(args.dataset, **_reading(args))
    if isinstance(dataset, FullyInductiveDataset):
        raise ValueError(f"{dataset.name} is a fully inductive dataset (relations new at inference), which kgeval "
                         "demo does not train on: evaluate a graph-conditioned model on it in Python "
                         "(docs/inductive.md, 'Fully inductive')")  # fmt: skip
    _check_splits_hold_triples(dataset, ("train", "valid", "test"),
                               "the demo trains on train and evaluates valid and test")  # fmt: skip
    if args.save_checkpoint and not isinstance(dataset, InductiveDataset):  # (the inductive demo refuses it)
        check_writable_file(args.save_checkpoint, "--save-checkpoint", create_folder=True)  # before training
    if isinstance(dataset, TemporalDataset):
        return run_temporal_demo(args, dataset)
    if isinstance(dataset, InductiveDataset):
        return run_inductive_demo(args, dataset)
    progress = not args.no_progress
    print(
        f"Dataset {dataset.name}: {dataset.num_entities} entities, {dataset.num_relations} relations, "
        f"{len(dataset.train)} / {len(dataset.valid)} / {len(dataset.test)} train / valid / test triples"
    )

    model = DistMult(dataset.num_entities, dataset.num_relations, dim=args.dim, seed=args.seed)
    start = time.perf_counter()
    losses = train_model(
        model,
        dataset.train,
        num_epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
        use_tqdm=progress,
        threads="free" if args.threads is None else None,  # --threads, set by kgeval.cli.main, wins
    )
    loss_text = f", loss {losses[0]:.4f} -> {losses[-1]:.4f}" if losses else ""
    elapsed = time.perf_counter() - start
    print(f"Trained DistMult (dim={args.dim}) for {count_of(args.epochs, 'epoch')} in {elapsed:.1f} s{loss_text}")
    if args.save_checkpoint:
        save_checkpoint(model, args.save_checkpoint, dataset)
        print(f"Saved the model and what its data was ({dataset.name}) to {args.save_checkpoint}")

    evaluator = RankBasedEvaluator(filtered=True, ks=(1, 3, 5, 10))
    runs = (
        ("valid", dataset.valid, [dataset.train, dataset.valid], "train + valid"),
        ("test", dataset.test, [dataset.train, dataset.valid, dataset.test], "train + valid + test"),
    )
    mrrs = {}
    for split, triples, filter_triples, filter_text in runs:
        start = time.perf_counter()
        results = evaluator.evaluate(model, triples, additional_filter_triples=filter_triples, use_tqdm=progress)
        elapsed = time.perf_counter() - start
        print()
        print(f"== {split}: {len(triples)} triples, filtered by {filter_text}, evaluated in {elapsed:.2f} s ==")
        _print_results(results, args.full, json_option=False)
        mrrs[split] = float(results.get_metric("mrr"))
    note = filter_order_note(mrrs["valid"], mrrs["test"])
    if note:
        print(note)
    return 0


def _print_results(results: Any, full: bool, json_option: bool = True) -> None:
    """The headline, and with ``full`` the table of every metric; without, how many numbers ``--full`` would list
    (the cells of ``results.table("auto")``, which ``full_table`` prints) and, where the command has ``--json``
    (``json_option``), how many that writes (every key of ``to_flat_dict``)."""
    print(results.summary())
    if full:
        print()
        print(results.full_table())
        return
    more = f"; --json all {len(results.to_flat_dict())}" if json_option else ""
    print(f"(--full lists {results.table('auto').size} numbers{more})")


# -- strat ---------------------------------------------------------------------------------------------


def _beta(text: str) -> float:
    """An argparse ``type`` accepting numbers in [-1, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not -1 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in [-1, 1], got {text!r}")
    return value


#: --popularity choice -> the dataset splits it counts (None: the evaluated triples).
_POPULARITY: dict[str, tuple[str, ...] | None] = {
    "train": ("train",),
    "train+valid": ("train", "valid"),
    "all": ("train", "valid", "test"),
    "evaluated": None,
}


def _add_source_arguments(parser: argparse.ArgumentParser, columns: str) -> None:
    """--checkpoint PATH or --ranks PATH (one is needed: the command says so), --dataset and --split."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--checkpoint",
        metavar="PATH",
        help="a model saved by 'kgeval demo --save-checkpoint' (save_checkpoint); with --trust-checkpoint also a "
        "model saved by torch.save (PyKEEN, PyG, TorchKGE) or a PyKEEN results folder",
    )
    source.add_argument(
        "--ranks",
        metavar="PATH",
        help=f"a rank table (.csv, .csv.gz, .tsv, .parquet) with the columns {columns} (e.g. written by "
        "kgeval evaluate --save-ranks PATH, or results.save_ranks(PATH))",
    )
    add = parser.add_argument
    add("--dataset", metavar="NAME_OR_PATH", help=f"the dataset of the ids (default: the one a --checkpoint names -- "
        f"a kgeval checkpoint's data, a dicee folder's --, or the one whose labels a PyKEEN folder's maps hold; "
        f"else {DEFAULT_DATASET})")  # fmt: skip
    add("--split", choices=("test", "valid"), default="test", help="the split a checkpoint is evaluated on")
    _add_unseen_argument(parser)
    add(
        "--trust-checkpoint",
        action="store_true",
        help="read a pickled model (torch.save of a model object, a PyKEEN trained_model.pkl): unpickling runs code "
        "from the file, so only for files you made or trust",
    )


def _evaluate_checkpoint(
    args: argparse.Namespace,
    ks: Sequence[int],
    use_tqdm: bool,
    targets: Sequence[Target] = ("head", "tail"),
    about: dict[str, Any] | None = None,
    loaded: LoadedModel | None = None,
    also_filter: Sequence[str] = (),
) -> tuple[Any, Any]:
    """(results, dataset): the checkpoint evaluated on the split for ``targets``, filtered by every triple known to
    it (valid: train + valid; test: train + valid + test), and with ``also_filter`` (split names) by those splits as
    well at a second level (``results.also_filtered``). ``about``, if given, receives the model's class name;
    ``loaded``: the checkpoint, where the caller has read it already."""
    loaded, dataset = _checkpoint_and_dataset(args, loaded)
    model = loaded.model
    if about is not None:
        about["model"] = type(model).__name__
    evaluator = RankBasedEvaluator(ks=tuple(ks))
    kwargs = dataset.evaluation_kwargs(args.split)
    if also_filter:
        kwargs["also_filter_triples"] = [getattr(dataset, split) for split in also_filter]
    progress_file = getattr(args, "progress_file", None)
    if progress_file is not None:
        check_writable_file(progress_file, "--progress-file", create_folder=True)
        kwargs.update(progress_path=progress_file, save_every=args.save_every)
    return evaluator.evaluate(model, use_tqdm=use_tqdm, targets=tuple(targets), **kwargs), dataset


def _checkpoint_and_dataset(
    args: argparse.Namespace, loaded: LoadedModel | None = None
) -> tuple[LoadedModel, TriplesDataset]:
    """The checkpoint's model and the dataset with its ids: ``--dataset``, else the dataset the checkpoint names (a
    kgeval checkpoint's data description, a dicee experiment's ``dataset_dir``), else the dataset whose labels a
    PyKEEN results folder's label maps hold, else :data:`DEFAULT_DATASET`. A dataset the user did not name that the
    model does not fit, or that differs from the one the checkpoint recorded, is an error that says how it was
    chosen and what to pass. ``loaded``: the checkpoint, where the caller has read it already."""
    if loaded is None:
        loaded = load_model_file(args.checkpoint, trust=args.trust_checkpoint)
    name, chosen = _dataset_of(args, loaded)
    reading = _reading(args, loaded)
    if not args.dataset and loaded.dataset == name and Path(name).is_absolute() and not Path(name).is_dir():
        shared = shared_data_dir()
        looked = f"the shared data folder {shared}" if shared else "no shared data folder (KGEVAL_SHARED_DATA)"
        raise FileNotFoundError(f"the checkpoint's data was read from {name}, which is not here, and "
                                f"{Path(name).name} is no shipped dataset nor in {looked}: pass --dataset with the "
                                "data the checkpoint was trained on")  # fmt: skip
    try:
        try:
            dataset = load_dataset(name, kind="triples", entity_to_id=loaded.entity_to_id,
                                   relation_to_id=loaded.relation_to_id, **reading)  # fmt: skip
        except LabelNotInIdsError:  # the model's sizes, where they differ, say so more plainly
            _check_model_fits(
                loaded.model, load_dataset(name, kind="triples", unseen="keep", duplicates=reading["duplicates"])
            )
            raise
        _check_model_fits(loaded.model, dataset)
        _check_fingerprint(loaded, dataset, args.dataset is not None)
    except (ValueError, FileNotFoundError) as error:
        differing = [f"--{option} {value}" for option, value in loaded.read_with.items()
                     if not _same_rows(value, cast(dict, reading)[option])]  # fmt: skip
        if differing:
            raise type(error)(f"{error} -- the checkpoint's data was read with {', '.join(differing)}") from error
        if args.dataset:
            raise
        raise type(error)(f"{error} -- no --dataset was given, so the dataset was {chosen}: pass --dataset with the "
                          "data the checkpoint was trained on") from error  # fmt: skip
    return loaded, dataset


def _same_rows(recorded: str, used: str) -> bool:
    """Whether two values of a reading option keep the same rows (--unseen warn and keep differ only in a
    warning)."""
    return {"warn": "keep"}.get(recorded, recorded) == {"warn": "keep"}.get(used, used)


def _dataset_of(args: argparse.Namespace, loaded: LoadedModel) -> tuple[str, str]:
    """(the dataset to evaluate a checkpoint on, how it was chosen, for messages)."""
    if args.dataset:
        return args.dataset, "the one given"
    if loaded.dataset:
        return loaded.dataset, f"{loaded.dataset}, the one the checkpoint names"
    matched = _dataset_with_labels(loaded)
    if matched is not None:
        return matched, f"{matched}, the one whose labels the checkpoint's label maps hold"
    return DEFAULT_DATASET, f"the default, {DEFAULT_DATASET}"


def _dataset_with_labels(loaded: LoadedModel) -> str | None:
    """The shipped or shared dataset whose entity and relation labels are exactly those of a checkpoint's label
    maps (a PyKEEN results folder's), or None: a shared folder's train file is first read for its relations alone
    (:func:`kgeval.datasets.reading.train_relations`), the whole dataset only where they match."""
    if loaded.entity_to_id is None or loaded.relation_to_id is None:
        return None
    shared = shared_data_dir()
    names = list(SHIPPED_DATASETS) + (sorted(path.name for path in shared.iterdir()) if shared else [])
    relations, entities = set(loaded.relation_to_id), set(loaded.entity_to_id)
    for name in names:
        folder = dataset_folder(name)
        if folder is not None and (temporal_folder(folder) is not None or not _may_hold(folder, relations)):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                candidate = load_dataset(name, kind="triples", unseen="keep")
        except (OSError, ValueError):
            continue
        if set(candidate.relation_to_id) == relations and set(candidate.entity_to_id) == entities:
            return name
    return None


def _may_hold(folder: Path, relations: set[str]) -> bool:
    """Whether the folder's train file names exactly these relations (one more: its header's), read alone."""
    try:
        found = train_relations(folder)
    except (OSError, ValueError):
        return False
    return relations <= found and len(found - relations) <= 1


def _check_fingerprint(loaded: LoadedModel, dataset: Any, named: bool) -> None:
    """The dataset is the data the checkpoint recorded (its fingerprint), or a ValueError (a warning when the user
    named the dataset: evaluating a model on other data on purpose is allowed)."""
    if loaded.fingerprint is None:
        return
    found = dataset_fingerprint(dataset)
    if found == loaded.fingerprint:
        return
    message = (f"the dataset {dataset.name} is not the data the checkpoint's model was trained on (fingerprint "
               f"{found}; the checkpoint recorded {loaded.dataset} with {loaded.fingerprint})")  # fmt: skip
    used = getattr(dataset, "read_with", {})
    differing = {option: value for option, value in loaded.read_with.items()
                 if not _same_rows(value, used.get(option, value))}  # fmt: skip
    if differing:
        message += (f"; its data was read with {', '.join(f'--{o} {v}' for o, v in differing.items())}, this "
                    f"dataset with {', '.join(f'--{o} {used[o]}' for o in differing)}")  # fmt: skip
    if not named:
        raise ValueError(message)
    warnings.warn(f"kgeval evaluate: {message}; evaluating on the dataset given", UserWarning, stacklevel=2)


def _check_model_fits(model: Any, dataset: TriplesDataset) -> None:
    """The model scores exactly the dataset's entities and relations (as its library counts them), or a
    ValueError naming both counts: a model of another dataset would be ranked against the wrong candidates."""
    view = scoring_view(model)
    expected = {"entities": dataset.num_entities, "relations": dataset.num_relations}
    try:
        entities: int | None = check_num_entities(view, None)
    except (TypeError, ValueError):  # the model declares no count: nothing to compare
        entities = None
    found = {"entities": entities, "relations": model_num_relations(view)}
    for name, count in found.items():
        if count is not None and count != expected[name]:
            raise ValueError(f"the checkpoint's model has {count} {name}, the dataset {dataset.name} "
                             f"{expected[name]}: it was trained on other data")  # fmt: skip


def add_strat_arguments(parser: argparse.ArgumentParser) -> None:
    _add_source_arguments(parser, "head, relation, tail, side, optimistic, pessimistic")
    add = parser.add_argument
    add(
        "--popularity",
        choices=tuple(_POPULARITY),
        default="train",
        help="the triples popularity is counted on (default: %(default)s)",
    )
    add("--beta-e", type=_beta, nargs="+", default=[0.0], help="entity exponents in [-1, 1] (default: 0)")
    add("--beta-r", type=_beta, nargs="+", default=[0.0], help="relation exponents in [-1, 1] (default: 0)")
    add("--ks", type=int_at_least(1), nargs="+", default=[1, 3, 10], help="k of hits@k (default: 1 3 10)")
    add("--rank-type", choices=("realistic", "optimistic", "pessimistic"), default="realistic")
    add("--min-count", type=positive_float, help="floor popularity count for items absent from the triples")
    add("--plot", metavar="PNG", help="write the β curve (-1 to 1) there instead of printing the table")
    add("--vary", choices=("entity", "relation"), default="entity", help="the β the curve varies")
    add("--buckets", choices=("answer", "query_entity", "relation"), help="instead: every bucket's MRR, Hits@1, "
        "Hits@10 and MRR interval by how often the answer / query entity / relation occurs in the --popularity "
        "triples (an unseen bucket first)")  # fmt: skip
    add("--bucket-scheme", choices=("kgeval", "libkge"), default="kgeval", help="kgeval: quantile buckets that "
        "never split equal counts; libkge: LibKGE's argument_frequency quartiles (default: %(default)s)")  # fmt: skip
    add("--relation-groups", metavar="JSON", help="instead: each named group's metrics side by side, micro and "
        'macro; JSON: {"group name": [relation labels or ids], ...}')  # fmt: skip
    add("--no-progress", action="store_true", help="hide the progress bar")


def _bucket_or_group_table(args: argparse.Namespace, ranks: pd.DataFrame, popularity: Any, dataset: Any) -> str:
    """The --buckets or --relation-groups table, printed instead of the stratified one."""
    if args.relation_groups:
        table = relation_groups(ranks, read_groups(args.relation_groups), relation_labels=dataset.relation_to_id)
        table = table.to_frame()
        return f"Relation groups (micro and macro)\n{table.to_string(float_format=lambda x: f'{x:.4f}')}"
    reference = popularity if isinstance(popularity, torch.Tensor) else torch.cat(list(popularity))
    buckets = frequency_buckets(ranks, reference, by=args.buckets, scheme=args.bucket_scheme,
                                num_entities=dataset.num_entities, num_relations=dataset.num_relations)  # fmt: skip
    table = buckets.to_frame(("mrr", "hits@1", "hits@10"))
    return (f"Metrics per {args.buckets} frequency bucket ({args.bucket_scheme} scheme; counted on the "
            f"{args.popularity} triples)\n{table.to_string(float_format=lambda x: f'{x:.4f}')}")  # fmt: skip


def _dataset_of_ranks(args: argparse.Namespace, command: str) -> str:
    """The dataset a rank table is read with: --dataset, which a rank table needs (it does not name its dataset;
    the default one would silently give other popularity counts and another audit)."""
    if not args.dataset:
        raise ValueError(f"a rank table does not say which dataset it ranks: give --dataset with --ranks "
                         f"(kgeval {command} --ranks {args.ranks} --dataset NAME_OR_FOLDER)")  # fmt: skip
    return str(args.dataset)


def run_strat(args: argparse.Namespace) -> int:
    """Print the stratified metrics for each (β_e, β_r), or plot their curve, from a checkpoint or rank file."""
    options = {"ks": args.ks, "rank_type": args.rank_type, "min_count": args.min_count}
    if not (args.checkpoint or args.ranks):
        print("kgeval strat: error: give the ranks to stratify: --checkpoint PATH or --ranks PATH", file=sys.stderr)
        return 2
    try:
        if args.plot:  # its folder made (with parents) before the work, a file in the way refused
            check_writable_file(args.plot, "--plot", create_folder=True)
        if args.ranks:
            dataset = load_dataset(_dataset_of_ranks(args, "strat"), kind="triples")
            ranks = read_ranks(args.ranks)
            check_ranks_fit(RankRecords.from_frame(ranks, f"rank table {args.ranks}"), ranks, dataset, args.ranks)
        else:
            ranks, dataset = _evaluate_checkpoint(args, args.ks, use_tqdm=not args.no_progress)
        splits = _POPULARITY[args.popularity]
        popularity = stratified.evaluated_triples(ranks) if splits is None else [getattr(dataset, s) for s in splits]
        if args.buckets or args.relation_groups:
            if args.buckets and args.relation_groups:
                raise ValueError("give --buckets or --relation-groups, not both")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UndefinedMetricWarning)  # a bucket's undefined adjusted metrics
                print(_bucket_or_group_table(args, ranks, popularity, dataset))
            return 0
        if args.plot:
            stratified.plot_strat_curve(ranks, popularity, vary=args.vary, path=args.plot, **options)
            print(f"Wrote the stratified metrics over β_{args.vary[0]} in [-1, 1] to {args.plot}")
            return 0
        rows = []
        for b_e in args.beta_e:
            for b_r in args.beta_r:
                values = stratified.stratified_metrics(ranks, popularity, beta_e=b_e, beta_r=b_r, **options)
                rows.append({"beta_e": b_e, "beta_r": b_r, **values})
        table = pd.DataFrame(rows)
    except (FileNotFoundError, ValueError, KeyError, ImportError) as error:
        print(f"kgeval strat: error: {one_line(error)}", file=sys.stderr)
        return 2
    print(f"Stratified metrics ({args.rank_type} ranks; popularity counted on the {args.popularity} triples)")
    betas = dict.fromkeys(("beta_e", "beta_r"), "{:g}".format)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}", formatters=betas))
    return 0


# -- evaluate ------------------------------------------------------------------------------------------


def add_evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    _add_source_arguments(parser, "head, relation, tail, side, optimistic, pessimistic, num_candidates")
    add = parser.add_argument
    add("--ks", type=int_at_least(1), nargs="+", default=[1, 3, 5, 10], help="k of hits@k (default: 1 3 5 10)")
    add(
        "--targets",
        choices=("head", "tail", "relation"),
        nargs="+",
        default=["head", "tail"],
        help="what a checkpoint's tasks rank (default: head tail; relation: relation prediction, its own side)",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--full", action="store_true", help="print every metric after the headline")
    output.add_argument("--json", action="store_true", help="print every metric as one JSON object")
    add("--no-progress", action="store_true", help="hide the progress bar")
    add(
        "--progress-file",
        metavar="PATH",
        help="make a checkpoint's evaluation resumable: its progress is saved to PATH, and a later run with the same "
        "arguments that finds PATH ranks only what was left (removed on success)",
    )
    add("--save-every", type=float, default=60.0, metavar="SECONDS",
        help="seconds between saves of --progress-file (default: %(default)s; 0: after every batch)")  # fmt: skip
    add("--save-ranks", metavar="PATH", help="also write a checkpoint's per-task ranks to PATH (.csv, .csv.gz, .tsv, "
        ".parquet): the rank table that evaluate / strat / audit --ranks read")  # fmt: skip
    add("--sampled", type=int_at_least(2), metavar="N", help="also Hits@k and MRR among N sampled candidates "
        "(the answer and N - 1 negatives), estimated from the full ranks without re-scoring "
        "(docs/conventions.md)")  # fmt: skip
    add("--sampled-method", choices=("hypergeometric", "ultra"), default="hypergeometric", help="the exact "
        "expectation of N - 1 distinct negatives, or ULTRA's / NBFNet's binomial hits@k_N "
        "(default: %(default)s)")  # fmt: skip
    add("--buckets", choices=("answer", "query_entity", "relation"), help="also every bucket's metrics (task "
        "count, every metric, MRR interval) by how often the answer / query entity / relation occurs in the "
        "--bucket-reference triples (an unseen bucket first); with --ranks, give --dataset")  # fmt: skip
    add("--bucket-scheme", choices=("kgeval", "libkge"), default="kgeval", help="kgeval: quantile buckets that "
        "never split equal counts; libkge: LibKGE's argument_frequency quartiles (default: %(default)s)")  # fmt: skip
    add("--bucket-reference", choices=("train", "train+valid", "all"), default="train", help="the dataset triples "
        "the bucket counts come from (default: %(default)s)")  # fmt: skip
    add("--relation-groups", metavar="JSON", help="also each named group's metrics side by side, micro and "
        'macro, with its MRR interval; JSON: {"group name": [relation labels or ids], ...} (labels: the '
        "dataset's)")  # fmt: skip
    add("--also-filter", type=_split_list, metavar="SPLIT[,SPLIT]", help="also the metrics under a second, wider "
        "filter level counted in the same pass: the split's ranks filtered by these splits as well (--split valid "
        "--also-filter test: valid filtered by train + valid and by train + valid + test, LibKGE's "
        "filter_with_test); a checkpoint's evaluation only")  # fmt: skip
    add("--examples", metavar="PATH", help="also write one row per evaluated (triple, side) to PATH (.jsonl or "
        ".csv): its filtered ranks and the model's filtered top-k predictions with labels "
        "(kgeval.variants.rank_examples); a checkpoint's evaluation only")  # fmt: skip
    add("--examples-k", type=int_at_least(1), metavar="K", help="predictions per --examples row (default: 10)")


def _split_list(text: str) -> list[str]:
    """An argparse ``type`` of --also-filter: split names (train, valid, test) separated by commas, each once."""
    names = [name.strip() for name in text.split(",")]
    wrong = [name for name in names if name not in ("train", "valid", "test")]
    if wrong:
        raise argparse.ArgumentTypeError(f"expected train, valid or test (comma-separated), got {text!r}")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a split is named twice in {text!r}")
    return names


def _known_splits(split: str) -> list[str]:
    """The splits a checkpoint's evaluation of ``split`` is filtered by: every triple known to it."""
    return ["train", "valid"] if split == "valid" else ["train", "valid", "test"]


def _check_model_options(args: argparse.Namespace) -> None:
    """--also-filter, --examples and --examples-k checked before any work: a checkpoint's options (a rank table has
    one filter level and no model), splits not in the filter already, a path that takes the rows."""
    also, examples = getattr(args, "also_filter", None), getattr(args, "examples", None)
    if args.ranks:
        if also:
            raise ValueError("--also-filter counts a second filter level while a model is ranked: give --checkpoint "
                             "(a rank table holds the ranks of one filter level)")  # fmt: skip
        if examples:
            raise ValueError("--examples writes a model's ranks and top-k predictions: give --checkpoint (a rank "
                             "table has ranks but no model to predict with)")  # fmt: skip
    if getattr(args, "examples_k", None) is not None and not examples:
        raise ValueError("--examples-k sets the predictions of each --examples row: give --examples PATH")
    if also:
        known = _known_splits(args.split)
        already = [split for split in also if split in known]
        if already:
            raise ValueError(f"--also-filter {','.join(also)}: a {args.split} evaluation is filtered by "
                             f"{' + '.join(known)} already ({', '.join(already)} included); the wider level adds "
                             "splits outside it (--split valid --also-filter test)")  # fmt: skip
    if examples:
        if tuple(args.targets) == ("relation",):
            raise ValueError("--examples writes rows of head and tail tasks: give --targets head and / or tail")
        if Path(examples).suffix.lower() not in EXAMPLE_SUFFIXES:
            raise ValueError(f"--examples {examples}: the suffix must be one of {', '.join(EXAMPLE_SUFFIXES)} (JSON "
                             "lines or CSV)")  # fmt: skip
        check_writable_file(examples, "--examples", create_folder=True)


def _refuse_model_options(args: argparse.Namespace, kind: str) -> None:
    """--also-filter and --examples are refused for temporal and inductive data (the evaluation of triples only)."""
    for option in ("also_filter", "examples"):
        if getattr(args, option, None):
            flag = "--" + option.replace("_", "-")
            raise ValueError(f"{flag} is not available for {kind} data yet: it takes a checkpoint of a triples dataset")


def _write_examples(args: argparse.Namespace, model: Any, dataset: TriplesDataset, use_tqdm: bool) -> str:
    """--examples: the rows of :func:`kgeval.variants.rank_examples` of the evaluated split, with the evaluation's
    filter and the dataset's labels, written to the path; the path written."""
    kwargs = dataset.evaluation_kwargs(args.split)
    targets = [target for target in args.targets if target != "relation"]
    rows = rank_examples(model, kwargs["mapped_triples"], filter_triples=kwargs["additional_filter_triples"],
                         k=args.examples_k or 10, targets=targets, entity_labels=dataset.entity_to_id,
                         relation_labels=dataset.relation_to_id, use_tqdm=use_tqdm)  # fmt: skip
    return str(write_examples(args.examples, rows))


def run_evaluate(args: argparse.Namespace) -> int:
    """Print the metrics of a checkpoint on a dataset split (filtered), or of a rank table."""
    if not (args.checkpoint or args.ranks):
        raise ValueError("give what to evaluate: --checkpoint PATH or --ranks PATH")
    _check_model_options(args)
    if args.save_ranks:
        if not args.checkpoint:
            raise ValueError(
                "--save-ranks writes the ranks of a --checkpoint's evaluation (a rank table is one already)"
            )
        _check_rank_output(args.save_ranks)  # before the evaluation, not after it
    loaded = None
    if args.checkpoint:
        loaded = load_model_file(args.checkpoint, trust=args.trust_checkpoint)
        inductive, temporal = _special_datasets(args, loaded)
        if inductive is not None or temporal is not None:
            _refuse_model_options(args, "inductive" if inductive is not None else "temporal")
        if inductive is not None:
            return run_inductive_evaluate(args, inductive, loaded.model)
        if temporal is not None:
            return run_temporal_evaluate(args, temporal, loaded.model)
    about: dict[str, Any] = {}
    dataset: Any = None  # the buckets' reference triples and the groups' relation labels, where there is one
    with warnings.catch_warnings(record=True) as undefined:
        warnings.simplefilter("always", UndefinedMetricWarning)  # collected: one line (text) or nulls (JSON)
        if args.ranks:
            frame = read_ranks(args.ranks)
            if "time" in frame.columns:  # a temporal table: its settings, as a checkpoint's evaluation prints them
                return evaluate_temporal_table(args, frame)
            records = RankRecords.from_frame(frame, f"rank table {args.ranks}")
            if "num_candidates" not in records:
                raise ValueError(f"rank table {args.ranks} needs a num_candidates column to compute every metric")
            results = RankBasedMetricResults.from_records(records, ks=tuple(args.ks))
            if args.buckets or args.relation_groups:  # their reference triples and relation labels
                if args.buckets and not args.dataset:
                    _dataset_of_ranks(args, "evaluate")  # the error that says to give --dataset
                if args.dataset:
                    dataset = load_dataset(args.dataset, kind="triples", **_reading(args))
                    check_ranks_fit(records, frame, dataset, args.ranks)
            title = f"== ranks of {args.ranks} =="
            about["source"] = {"ranks": args.ranks, **table_provenance(frame)}
        else:
            use_tqdm = not args.no_progress and not args.json
            also = args.also_filter or ()
            results, dataset = _evaluate_checkpoint(args, args.ks, use_tqdm, args.targets, about, loaded, also)
            known = _known_splits(args.split)
            title = f"== {dataset.name} {args.split}, filtered by {' + '.join(known)} =="
            about["source"] = {"checkpoint": args.checkpoint, "model": about.pop("model"), "dataset": dataset.name,
                               "split": args.split, "filtered_by": known, "targets": list(args.targets)}  # fmt: skip
            if args.save_ranks:
                recorded = provenance(about["source"]["model"], dataset, args.split, known, "filtered")
                frame = with_provenance(results.ranks_df(dataset.entity_to_id, dataset.relation_to_id), recorded)
                about["ranks_file"] = str(write_ranks(frame, args.save_ranks))
            if args.examples:
                assert loaded is not None  # a checkpoint's evaluation
                about["examples_file"] = _write_examples(args, loaded.model, dataset, use_tqdm)
    for caught in undefined:  # anything else caught is shown as it would have been
        if not issubclass(caught.category, UndefinedMetricWarning):
            warnings.warn_explicit(caught.message, caught.category, caught.filename, caught.lineno)
    sampled = _sampled(results, args)
    buckets, groups = _breakdowns(results, args, dataset)
    also_filtered = results.also_filtered if getattr(args, "also_filter", None) else None
    wider = [*about["source"]["filtered_by"], *args.also_filter] if also_filtered is not None else []
    if args.json:
        document = _json_document(results, about, args.ks)
        if also_filtered is not None:
            flat = also_filtered.to_flat_dict()
            document["also_filtered"] = {"filtered_by": wider,
                                         "metrics": {key: _finite(value) for key, value in flat.items()}}  # fmt: skip
        if sampled:
            document["sampled"] = {key: (None if value != value else value) for key, value in sampled.items()}
        if buckets is not None:
            document["frequency_buckets"] = _buckets_document(buckets, args.bucket_reference)
        if groups is not None:
            document["relation_groups"] = _groups_document(groups)
        print(json.dumps(document, allow_nan=False))
        return 0
    print(title)
    _print_results(results, args.full)
    if also_filtered is not None:  # the wider filter level, beside the headline
        print(f"\n== also filtered by {' + '.join(wider)} (the same pass) ==")
        print(also_filtered.summary())
        if args.full:
            print()
            print(also_filtered.full_table())
    if sampled:
        print(f"Among {args.sampled} sampled candidates ({args.sampled_method}, estimated from these ranks):")
        for key, value in sampled.items():
            if key.startswith("both.") and ".optimistic." not in key:
                print(f"  {key}: {value:.4f}")
    if buckets is not None:
        print(f"\nMetrics per {buckets.by} frequency bucket ({buckets.scheme} scheme; counted on the "
              f"{args.bucket_reference} triples; CI: {buckets.interval_key})")  # fmt: skip
        print(buckets.to_frame(("mrr", "hits@1", "hits@10")).to_string(float_format=_four))
    if groups is not None:
        print(f"\nRelation groups (micro and macro; CI: micro {groups.interval_key})")
        print(groups.to_frame(("mrr", "hits@1", "hits@10")).to_string(float_format=_four))
    if "ranks_file" in about:
        print(f"(the per-task ranks are in {about['ranks_file']})")
    if "examples_file" in about:
        print(f"(the per-example rows, ranks and top-{args.examples_k or 10} predictions, are in "
              f"{about['examples_file']})")  # fmt: skip
    names = sorted({str(caught.message).split(" ", 1)[0] for caught in undefined
                    if issubclass(caught.category, UndefinedMetricWarning)})  # fmt: skip
    if names:
        print(f"kgeval evaluate: {len(names)} metric(s) undefined on these ranks, reported as NaN: "
              f"{', '.join(names)}", file=sys.stderr)  # fmt: skip
    return 0


def _sampled(results: Any, args: argparse.Namespace) -> dict[str, float]:
    """--sampled's estimates (none without it); a rank table without num_candidates cannot give them."""
    if getattr(args, "sampled", None) is None:
        return {}
    return cast(dict[str, float], results.sampled_metrics(args.sampled, ks=tuple(args.ks), method=args.sampled_method))


def _four(value: float) -> str:
    return f"{value:.4f}"


def _breakdowns(results: Any, args: argparse.Namespace, dataset: Any) -> tuple[Any, Any]:
    """(--buckets' BucketTable, --relation-groups' GroupTable), None where not asked for; a bucket's or group's
    undefined metrics (adjusted hits@k of few candidates) are NaN without a warning."""
    buckets = groups = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        if getattr(args, "buckets", None):
            reference = torch.cat([getattr(dataset, split) for split in BUCKET_REFERENCES[args.bucket_reference]])
            sizes = {"num_entities": dataset.num_entities, "num_relations": dataset.num_relations}
            buckets = frequency_buckets(results, reference, by=args.buckets, scheme=args.bucket_scheme, **sizes)
        if getattr(args, "relation_groups", None):
            labels = dataset.relation_to_id if dataset is not None else None
            groups = relation_groups(results, read_groups(args.relation_groups), relation_labels=labels)
    return buckets, groups


def _finite(value: float) -> float | None:
    """A JSON number: None for NaN (strict JSON has none)."""
    return None if value != value else float(value)


def _interval_document(interval: Any) -> dict[str, Any] | None:
    if interval is None:
        return None
    return {"estimate": _finite(interval.estimate), "low": _finite(interval.low), "high": _finite(interval.high),
            "level": interval.level, "n": interval.n, "n_resamples": interval.n_resamples}  # fmt: skip


def _metrics_document(metrics: Any) -> dict[str, float | None]:
    return {format_key(key): _finite(value) for key, value in metrics.items()}


def _buckets_document(table: Any, reference: str) -> dict[str, Any]:
    """--json's ``frequency_buckets``: how the buckets were made, then per bucket its label, count range, task
    count, every metric (``side.rank_type.metric``) and the bootstrap interval of ``interval_key``."""
    return {"by": table.by, "scheme": table.scheme, "reference": reference, "interval_key": table.interval_key,
            "buckets": [{"label": b.label, "low": b.low, "high": b.high, "num_tasks": b.num_tasks,
                         "metrics": _metrics_document(b.metrics), "interval": _interval_document(b.interval)}
                        for b in table.buckets]}  # fmt: skip


def _groups_document(table: Any) -> dict[str, Any]:
    """--json's ``relation_groups``: per group its name, relation ids, evaluated relations, task count, every
    metric micro and macro, and the bootstrap interval of ``interval_key`` (micro)."""
    return {"interval_key": table.interval_key,
            "groups": [{"name": g.name, "relations": list(g.relations), "num_evaluated": g.num_evaluated,
                        "num_tasks": g.num_tasks, "micro": _metrics_document(g.micro),
                        "macro": _metrics_document(g.macro), "interval": _interval_document(g.interval)}
                       for g in table.groups]}  # fmt: skip


def _check_rank_output(path: str) -> None:
    """--save-ranks PATH checked before any work: a suffix a rank table is written with, and a folder that takes a
    new file -- made, with its missing parents, where it does not exist yet (not for a refused suffix)."""
    try:
        check_rank_path(path)
    except FileNotFoundError:  # the suffix is one a rank table takes; its folder is missing
        check_writable_file(path, "--save-ranks", create_folder=True)
        check_rank_path(path)


def _json_document(results: Any, about: dict[str, Any], ks: Sequence[int]) -> dict[str, Any]:
    """One strict JSON object in the shape of every protocol (:func:`kgeval.cli._common.metrics_document`): how the
    numbers were made (kgeval version, source, protocol: ``filtered`` for a checkpoint, the recorded setting of a
    rank table, else "as in the rank table") and every metric as ``"side.rank_type.metric"``, undefined ones
    null."""
    source = about["source"]
    setting = "filtered" if "checkpoint" in source else source.get("setting", "as in the rank table")
    extra = {key: value for key, value in about.items() if key != "source"}
    return metrics_document(source, setting, ks, results, **extra)


# -- audit -----------------------------------------------------------------------------------------------------


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--dataset", metavar="NAME_OR_PATH", help=f"the dataset to audit (default: the one a --checkpoint folder "
        f"names, if it names one that exists here; else {DEFAULT_DATASET})")  # fmt: skip
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--checkpoint", metavar="PATH", help="a model of the dataset: adds its ties and the "
                        "sampled-vs-full gap (as kgeval evaluate reads it)")  # fmt: skip
    source.add_argument("--ranks", metavar="PATH", help="a rank table of the test split: adds its ties")
    add("--trust-checkpoint", action="store_true", help="read a pickled model (see kgeval evaluate --help)")
    add("--sampled-k", type=int_at_least(1), default=50, help="negatives of the sampled comparison (default: 50)")
    add("--threshold", type=float, default=0.8, help="overlap from which relation pairs count (default: %(default)s)")
    add("--no-baseline", action="store_true", help="skip the rule-only baseline (one full filtered evaluation)")
    add("--json", action="store_true", help="print the report as one strict JSON object instead of Markdown")
    _add_unseen_argument(parser)


def run_audit(args: argparse.Namespace) -> int:
    """Print the evaluation card of a dataset (Markdown, or JSON)."""
    model = results = None
    loaded = load_model_file(args.checkpoint, trust=args.trust_checkpoint) if args.checkpoint else None
    inductive, temporal = _special_datasets(args, loaded)
    if inductive is not None or temporal is not None:  # their own cards, of a model or of the data alone
        model = loaded.model if loaded is not None else None
        if inductive is not None:
            if args.ranks:
                raise ValueError("a rank table is audited on triples (or quadruples); on inductive data pass "
                                 "--checkpoint (or nothing)")  # fmt: skip
            return run_inductive_audit(args, inductive, model)
        temporal = cast(TemporalDataset, temporal)
        return run_temporal_audit(args, temporal, model, _temporal_table(args.ranks, temporal) if args.ranks else None)
    if loaded is not None:
        loaded, dataset = _checkpoint_and_dataset(args, loaded)
        model = loaded.model
    else:
        dataset = load_dataset(_dataset_of_ranks(args, "audit") if args.ranks else args.dataset or DEFAULT_DATASET,
                               kind="triples", **_reading(args))  # fmt: skip
    if args.ranks:
        frame = read_ranks(args.ranks)
        records = check_ranks_fit(RankRecords.from_frame(frame, f"rank table {args.ranks}"), frame, dataset,
                                   args.ranks)  # fmt: skip
        with warnings.catch_warnings():  # the card reads the MRR of each rank type, never an undefined metric
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            results = RankBasedMetricResults.from_records(records)
    report = audit_dataset(dataset, threshold=args.threshold, rule_baseline=not args.no_baseline, model=model,
                           results=results, sampled_k=args.sampled_k)  # fmt: skip
    print(report.to_json() if args.json else report.to_markdown(), end="" if not args.json else "\n")
    return 0


def _temporal_table(path: str, dataset: TemporalDataset) -> TemporalRankBasedMetricResults:
    """The results of a temporal rank table checked against ``dataset`` (:func:`check_ranks_fit`, each setting's
    rows), or a ValueError saying why it is not one of its rankings."""
    frame = read_ranks(path)
    if "time" not in frame.columns:
        raise ValueError(f"rank table {path} has no time column: it ranks triples, not the quadruples of "
                         f"{dataset.name}")  # fmt: skip
    for setting, part in settings_of(frame).items():
        check_ranks_fit(RankRecords.from_frame(part, f"rank table {path} {setting}".strip()), part, dataset, path)
    with warnings.catch_warnings():  # the card reads the MRR of each setting, never an undefined metric
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        return TemporalRankBasedMetricResults.from_rank_table(frame, source=f"rank table {path}")
