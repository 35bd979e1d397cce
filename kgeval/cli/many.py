"""``kgeval evaluate-many``: one model over many graphs in one run -- the built-in graph-conditioned baseline, a
model saved whole (``--checkpoint``) or a factory of a model per dataset (``--model MODULE:CALLABLE``) --, one row per
graph and the group averages as text, JSON, CSV or one HTML page, resumable graph by graph (``--results-dir``)
(:func:`kgeval.many.evaluate_many`; docs/inductive.md, "Many graphs in one run")."""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib
import json
import os
import shutil
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kgeval._checks import check_writable_file
from kgeval.datasets import shared_data_dir
from kgeval.many import evaluate_many
from kgeval.models.checkpoint import load_model_file
from kgeval.models.graph_baseline import NeighbourhoodBaseline

__all__ = ["DEFAULT_SETS", "add_many_arguments", "file_sha256", "import_factory", "run_many"]

#: the shared inductive sets evaluated when --datasets is not given (those present)
DEFAULT_SETS: tuple[str, ...] = ("ILPC2022-small", "ILPC2022-large", "InGram-NL-0", "InGram-NL-25", "InGram-NL-100",
                                 "InGram-WK-25")  # fmt: skip
#: the models the command builds without a checkpoint or a factory
MODELS = {"baseline": NeighbourhoodBaseline}
#: bytes read per step when hashing a checkpoint
CHUNK = 2**24
#: (columns, lines) of the terminal the text table is fitted to where the output is no terminal and $COLUMNS is unset
DEFAULT_TERMINAL = (100, 24)


def add_many_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--model", metavar="baseline|MODULE:CALLABLE", default=None,
        help="the model: 'baseline', the built-in graph-conditioned baseline (kgeval.models.NeighbourhoodBaseline, "
        "no training), evaluated zero-shot on each graph (the default); or MODULE:CALLABLE, a function imported "
        "from a module of the current folder or the Python path, called with each loaded dataset and returning its "
        "model (importing it runs its code)")  # fmt: skip
    add("--checkpoint", metavar="PATH",
        help="the model of every graph, read from PATH: a kgeval checkpoint, or with --trust-checkpoint a model "
        "saved whole with torch.save (an nn.Module with score_t / score_h, graph-conditioned or not; unpickling "
        "runs code from the file, so only files you made or trust)")  # fmt: skip
    add("--trust-checkpoint", action="store_true",
        help="read a pickled model (torch.load with weights_only=False): unpickling runs code from the file, so "
        "only for files you made or trust")  # fmt: skip
    add("--datasets", nargs="+", metavar="NAME_OR_PATH",
        help=f"the graphs (shipped or shared names, or folders; triples, inductive or fully inductive); default: "
        f"the shared sets {', '.join(DEFAULT_SETS)} that are present")  # fmt: skip
    add("--split", choices=("test", "valid"), default="test", help="the split of every graph (default: test)")
    add("--validation-filter", choices=("inference", "inference+test"), default="inference",
        help="inductive and fully inductive sets' validation filter: kgeval's and ILPC's (the inference graph) or "
        "InGram's / ULTRA's (with the test triples too)")  # fmt: skip
    add("--results-dir", metavar="PATH",
        help="make the run resumable: each graph's result is saved in this folder (made, with its parents, where "
        "missing) as it completes; a rerun with "
        "the same folder takes the graphs whose saved inputs match (the model, the data, the options) and "
        "evaluates the rest, again those whose inputs differ (a warning names what)")  # fmt: skip
    add("--json", action="store_true", help="print the table and the averages as one JSON object")
    add("--csv", metavar="PATH", help="also write the per-graph table to PATH (CSV)")
    add("--html", metavar="PATH", help="also write one self-contained HTML page (no network) of the per-graph "
        "table and the group averages to PATH")  # fmt: skip
    add("--no-progress", action="store_true", help="hide the progress bar over the graphs")


def run_many(args: argparse.Namespace) -> int:
    """Evaluate the chosen model over the graphs; print the per-graph table and the group averages."""
    for option, path in (("--csv", args.csv), ("--html", args.html)):
        if path:  # before the work; a missing folder is made, with its parents
            check_writable_file(path, option, create_folder=True)
    names = args.datasets or _present_default_sets()
    if not names:
        raise ValueError(f"no dataset to evaluate: none of the shared sets {', '.join(DEFAULT_SETS)} is present "
                         "(name the shared folder with KGEVAL_SHARED_DATA, or pass --datasets)")  # fmt: skip
    model_for, label, identity = _chosen_model(args)
    many = evaluate_many(model_for, names, split=args.split, validation_filter=args.validation_filter,
                         use_tqdm=not (args.no_progress or args.json), results_dir=args.results_dir,
                         model_id=identity)  # fmt: skip
    if args.csv:
        many.table.to_csv(args.csv, index=False, float_format="%.17g")
    if args.html:
        many.to_html(args.html, model=label)
    if args.json:
        print(json.dumps({"model": label, **many.to_dict(), "resumed": list(many.resumed)}, allow_nan=False))
        return 0
    width = shutil.get_terminal_size(DEFAULT_TERMINAL).columns
    say = functools.partial(_wrapped, width=width)
    say(f"== {label} on {len(many.table)} graph(s), {args.split} split, filtered ==")
    say("pess / real: pessimistic ranks (the field's code) beside realistic ones; tied: the share of tasks whose true "
        "answer ties another candidate; every number at full precision in --json and --csv")  # fmt: skip
    print(many.to_text(width))
    if many.resumed:
        say(f"({len(many.resumed)} graph(s) read back from {args.results_dir}, not evaluated again: "
            f"{', '.join(many.resumed)})")  # fmt: skip
    for option, path in (("per-graph table", args.csv), ("HTML page", args.html)):
        if path:
            print(f"(the {option} is in {path})")  # never wrapped: a path stays one line to copy, spaces and all
    return 0


def _wrapped(text: str, width: int) -> None:
    """Print ``text`` wrapped at spaces to lines of at most ``width`` characters (a path or name longer than a line
    is never cut)."""
    print(textwrap.fill(text, width, break_long_words=False, break_on_hyphens=False))


def _chosen_model(args: argparse.Namespace) -> tuple[Any, str, str]:
    """(the model of every graph or the function giving each graph's, its name, its identity in the resumable
    run's fingerprint: the baseline by name, a checkpoint by its file's SHA-256, a factory by its MODULE:CALLABLE
    and its module file's SHA-256)."""
    if args.checkpoint and args.model is not None:
        raise ValueError("give --checkpoint PATH or --model, not both")
    if args.checkpoint:
        model = load_model_file(args.checkpoint, trust=args.trust_checkpoint).model
        if not all(callable(getattr(model, name, None)) for name in ("score_t", "score_h")):
            raise ValueError(f"{args.checkpoint!r} holds a {type(model).__name__} without score_t / score_h: "
                             "evaluate-many scores each graph's queries through them")  # fmt: skip
        return model, f"{type(model).__name__} ({Path(args.checkpoint).name})", \
            f"checkpoint sha256 {file_sha256(args.checkpoint)}"  # fmt: skip
    spec = args.model or "baseline"
    if spec in MODELS:
        model_class = MODELS[spec]
        return (lambda dataset: model_class()), spec, f"{spec} {model_class.__qualname__}"
    factory, source = import_factory(spec)
    return factory, spec, f"{spec} sha256 {file_sha256(source) if source else '-'}"


def import_factory(spec: str) -> tuple[Callable[[Any], Any], str | None]:
    """(the callable that ``MODULE:CALLABLE`` names -- CALLABLE may be dotted, an attribute of an attribute --, the
    module's file or None), the current folder searched first (as ``python -m`` does). ValueError in one line for a
    bad form, a module that cannot be imported, or a name that is missing or not callable."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"--model {spec!r}: give 'baseline' or MODULE:CALLABLE (a function of the dataset that "
                         "returns its model)")  # fmt: skip
    added = os.getcwd() not in sys.path
    if added:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"--model {spec!r}: cannot import {module_name} ({error})") from error
    finally:
        if added:
            sys.path.remove(os.getcwd())
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ValueError(f"--model {spec!r}: {module_name} has no {attribute}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"--model {spec!r}: {attribute} is a {type(target).__name__}, not a function")
    return target, getattr(module, "__file__", None)


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file, or of a folder's files (each one's path inside it and SHA-256, in order)."""
    location = Path(os.fspath(path))
    if location.is_dir():
        digest = hashlib.sha256()
        for item in sorted(p for p in location.rglob("*") if p.is_file()):
            digest.update(f"{item.relative_to(location).as_posix()}:{file_sha256(item)};".encode())
        return digest.hexdigest()
    digest = hashlib.sha256()
    with open(location, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _present_default_sets() -> list[str]:
    """The default shared sets found (each absent one named on stderr)."""
    root = shared_data_dir()
    present = [name for name in DEFAULT_SETS if root is not None and (root / name).is_dir()]
    absent = [name for name in DEFAULT_SETS if name not in present]
    if absent and present:
        where = "no shared data folder" if root is None else f"not in {Path(root)}"
        print(f"kgeval evaluate-many: skipped {', '.join(absent)} ({where})", file=sys.stderr)
    return present
