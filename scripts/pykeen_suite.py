"""Run PyKEEN's own evaluation tests with kgeval's evaluators in place of PyKEEN's, and with PyKEEN's, and print the
pass / fail / skip counts of both runs -- and, of the swapped run, how many tests exercised kgeval's classes.

    git clone --branch v1.11.1 https://github.com/pykeen/pykeen /tmp/pykeen   # PyKEEN's tests are not in its wheel
    pip install unittest-templates                                            # what PyKEEN's test cases import
    python scripts/pykeen_suite.py /tmp/pykeen [--junit-dir DIR] [--list]

The swap is a pytest plugin (written to a temporary folder, nothing of PyKEEN's is copied): before PyKEEN's test
modules are imported, ``pykeen.evaluation``'s ``RankBasedEvaluator``, ``SampledRankBasedEvaluator``,
``MacroRankBasedEvaluator`` and ``RankBasedMetricResults`` are replaced by kgeval's PyKEEN-facing classes
(:mod:`kgeval.integrations.pykeen`; ``RankBasedMetricResults`` in ``pykeen.evaluation`` only: PyKEEN's own
evaluators such as ``OGBEvaluator`` keep building their results), and so are the classes PyKEEN's evaluator
resolver hands out by name and by default -- the resolver the pipeline, the early stopper, the evaluation loops
and the training callbacks make their evaluators with.

A test exercises kgeval when, while it runs, a method that evaluates or reports (``evaluate``, ``process_scores_``,
``finalize``, ``finalize_multi``, ``finalize_with_confidence``, ``get_metric``, ``to_flat_dict``, ``to_dict``,
``to_df``) is called on an instance of a kgeval class; it exercises PyKEEN when such a method runs on one of
PyKEEN's own classes. The plugin records both per test and the script counts them: a test that passes without
exercising kgeval says nothing about kgeval. The test files run are PyKEEN's ``tests/test_evaluation``,
``tests/test_early_stopping.py`` and ``tests/test_pipeline.py``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PLUGIN = '''
"""Replace PyKEEN's evaluators and rank-based results by kgeval's before PyKEEN's tests import them, and record
which library's classes each test exercises."""
import functools
import json
import os

import pykeen.evaluation
import pykeen.evaluation.evaluator
import pykeen.evaluation.rank_based_evaluator

SWAP = os.environ.get("KGEVAL_SWAP") == "1"  # else only record (kgeval is not imported: its classes stay unseen)
NAMES = ("RankBasedEvaluator", "SampledRankBasedEvaluator", "MacroRankBasedEvaluator")
METHODS = ("evaluate", "process_scores_", "finalize", "finalize_multi", "finalize_with_confidence", "get_metric",
           "to_flat_dict", "to_dict", "to_df")

_touched = set()
_record = {}


def _library(instance):
    return "kgeval" if type(instance).__module__.split(".")[0] == "kgeval" else "pykeen"


def _watch(cls):
    """Record the library of the instance whenever one of METHODS runs on ``cls`` (as defined on it)."""
    for name in METHODS:
        method = cls.__dict__.get(name)
        if method is None or not callable(method) or getattr(method, "_kgeval_watched", False):
            continue

        @functools.wraps(method)
        def watched(self, *args, __method=method, **kwargs):
            _touched.add(_library(self))
            return __method(self, *args, **kwargs)

        watched._kgeval_watched = True
        setattr(cls, name, watched)


def _subclasses(cls):
    found, todo = set(), [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


watched = [pykeen.evaluation.evaluator.Evaluator, pykeen.evaluation.evaluator.MetricResults]
if SWAP:
    import kgeval
    from kgeval.integrations import pykeen as integration

    watched += [kgeval.RankBasedEvaluator, kgeval.SampledRankBasedEvaluator, kgeval.RankBasedMetricResults]
    # a class this kgeval version lacks stays PyKEEN's (reported, so a run of an older kgeval says what it tested)
    originals = {}
    for name in NAMES:
        replacement = getattr(integration, name, None)
        if replacement is None:
            print(f"kgeval_swap: kgeval has no {name}; PyKEEN's own is tested")
            continue
        originals[name] = getattr(pykeen.evaluation.rank_based_evaluator, name)
        for module in (pykeen.evaluation, pykeen.evaluation.rank_based_evaluator):
            setattr(module, name, replacement)
    # the results class as the tests import it (PyKEEN's own evaluators, e.g. OGBEvaluator, keep building theirs)
    pykeen.evaluation.RankBasedMetricResults = getattr(integration, "RankBasedMetricResults",
                                                       kgeval.RankBasedMetricResults)
    # the resolver the pipeline, stopper, evaluation loops and callbacks make evaluators with: by name and default
    resolver = pykeen.evaluation.evaluator_resolver
    for name, original in originals.items():
        for key, value in list(resolver.lookup_dict.items()):
            if value is original:
                resolver.lookup_dict[key] = getattr(integration, name)
        if resolver.default is original:
            resolver.default = getattr(integration, name)

for base in watched:
    for cls in (base, *_subclasses(base)):
        _watch(cls)


def pytest_runtest_setup(item):
    _touched.clear()


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _record[report.nodeid] = {"outcome": report.outcome, "libraries": sorted(_touched)}


def pytest_sessionfinish(session):
    path = os.environ.get("KGEVAL_SWAP_RECORD")
    if path:
        with open(path, "w") as handle:
            json.dump(_record, handle)
'''
TEST_PATHS = ("tests/test_evaluation", "tests/test_early_stopping.py", "tests/test_pipeline.py")


def run(checkout: Path, swap: bool, junit: Path | None) -> tuple[str, dict[str, dict]]:
    """One pytest run over PyKEEN's evaluation tests: (pytest's failures and summary line, {test: its outcome and
    the libraries whose classes it exercised})."""
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ)
        record = Path(folder, "record.json")
        Path(folder, "kgeval_swap.py").write_text(PLUGIN)
        env.update(PYTHONPATH=os.pathsep.join([folder, env.get("PYTHONPATH", "")]), KGEVAL_SWAP_RECORD=str(record),
                   KGEVAL_SWAP="1" if swap else "0")  # fmt: skip
        arguments = [sys.executable, "-m", "pytest", *TEST_PATHS, "-q", "-p", "no:cacheprovider", "-rfE",
                     "-p", "kgeval_swap"]  # fmt: skip
        if junit is not None:
            arguments += [f"--junitxml={junit / ('kgeval.xml' if swap else 'pykeen.xml')}"]
        done = subprocess.run(arguments, cwd=checkout, env=env, capture_output=True, text=True, check=False)
        recorded = json.loads(record.read_text()) if record.is_file() else {}
    lines = done.stdout.strip().splitlines()
    failures = [line for line in lines if line.startswith(("FAILED", "ERROR", "kgeval_swap"))]
    summary = next((line for line in reversed(lines) if re.search(r"\d+ (passed|failed)", line)), done.stderr[-2000:])
    return "\n".join([*failures, str(summary)]), recorded


def exercised(recorded: dict[str, dict]) -> dict[str, collections.Counter]:
    """{"kgeval" / "PyKEEN only" / "neither": Counter of outcomes}."""
    counts: dict[str, collections.Counter] = {name: collections.Counter() for name in ("kgeval", "PyKEEN only",
                                                                                       "neither")}  # fmt: skip
    for entry in recorded.values():
        libraries = entry["libraries"]
        kind = "kgeval" if "kgeval" in libraries else "PyKEEN only" if libraries else "neither"
        counts[kind][entry["outcome"]] += 1
    return counts


def describe(counts: collections.Counter) -> str:
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items())) or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a PyKEEN source checkout (its tests/ folder)")
    parser.add_argument("--junit-dir", type=Path, default=None, help="write each run's JUnit XML here")
    parser.add_argument("--list", action="store_true", help="list the tests that exercised kgeval's classes")
    args = parser.parse_args()
    if not (args.checkout / "tests" / "test_evaluation").is_dir():
        parser.error(f"{args.checkout} has no tests/test_evaluation: give a PyKEEN source checkout")
    summary, _ = run(args.checkout, swap=False, junit=args.junit_dir)
    print("PyKEEN's evaluators:", summary.splitlines()[-1])
    summary, recorded = run(args.checkout, swap=True, junit=args.junit_dir)
    print("kgeval's evaluators:")
    print(summary)
    print("Of the swapped run's tests (setup errors and skips included):")
    for kind, counts in exercised(recorded).items():
        print(f"  exercised {kind:<12} {sum(counts.values()):4d} tests: {describe(counts)}")
    if args.list:
        for test, entry in sorted(recorded.items()):
            if "kgeval" in entry["libraries"]:
                print(f"  {entry['outcome']:<8} {test}")


if __name__ == "__main__":
    main()
