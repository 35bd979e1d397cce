"""Run PyKEEN's own evaluation tests with kgeval's evaluators in place of PyKEEN's, and with PyKEEN's, and print the
pass / fail / skip counts of both runs.

    git clone --branch v1.11.1 https://github.com/pykeen/pykeen /tmp/pykeen   # PyKEEN's tests are not in its wheel
    pip install unittest-templates                                            # what PyKEEN's test cases import
    python scripts/pykeen_suite.py /tmp/pykeen [--junit-dir DIR]

The swap is a pytest plugin (written to a temporary folder, nothing of PyKEEN's is copied): before PyKEEN's test
modules are imported, ``pykeen.evaluation``'s ``RankBasedEvaluator``, ``SampledRankBasedEvaluator``,
``MacroRankBasedEvaluator`` and ``RankBasedMetricResults`` are replaced by kgeval's PyKEEN-facing classes
(:mod:`kgeval.integrations.pykeen`; ``RankBasedMetricResults`` in ``pykeen.evaluation`` only: PyKEEN's
own evaluators such as ``OGBEvaluator`` keep building their results), so every test that names them runs kgeval.
The test files run are PyKEEN's ``tests/test_evaluation`` and ``tests/test_early_stopping.py``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PLUGIN = '''
"""Replace PyKEEN's evaluators and rank-based results by kgeval's before PyKEEN's tests import them."""
import pykeen.evaluation
import pykeen.evaluation.rank_based_evaluator

import kgeval
from kgeval.integrations import pykeen as integration

# a class this kgeval version lacks stays PyKEEN's (reported, so a run of an older kgeval says what it tested)
for name in ("RankBasedEvaluator", "SampledRankBasedEvaluator", "MacroRankBasedEvaluator"):
    replacement = getattr(integration, name, None)
    if replacement is None:
        print(f"kgeval_swap: kgeval has no {name}; PyKEEN's own is tested")
        continue
    for module in (pykeen.evaluation, pykeen.evaluation.rank_based_evaluator):
        setattr(module, name, replacement)
# the results class as the tests import it (PyKEEN's own evaluators, e.g. OGBEvaluator, keep building theirs)
RESULTS = getattr(integration, "RankBasedMetricResults", kgeval.RankBasedMetricResults)
pykeen.evaluation.RankBasedMetricResults = RESULTS
'''
TEST_PATHS = ("tests/test_evaluation", "tests/test_early_stopping.py")


def run(checkout: Path, swap: bool, junit: Path | None) -> str:
    """One pytest run over PyKEEN's evaluation tests; returns pytest's summary line."""
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ)
        arguments = [sys.executable, "-m", "pytest", *TEST_PATHS, "-q", "-p", "no:cacheprovider", "-rfE"]
        if swap:
            Path(folder, "kgeval_swap.py").write_text(PLUGIN)
            env["PYTHONPATH"] = os.pathsep.join([folder, env.get("PYTHONPATH", "")])
            arguments += ["-p", "kgeval_swap"]
        if junit is not None:
            arguments += [f"--junitxml={junit / ('kgeval.xml' if swap else 'pykeen.xml')}"]
        done = subprocess.run(arguments, cwd=checkout, env=env, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    failures = [line for line in lines if line.startswith(("FAILED", "ERROR", "kgeval_swap"))]
    summary = next((line for line in reversed(lines) if re.search(r"\d+ (passed|failed)", line)), done.stderr[-2000:])
    return "\n".join([*failures, str(summary)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a PyKEEN source checkout (its tests/ folder)")
    parser.add_argument("--junit-dir", type=Path, default=None, help="write each run's JUnit XML here")
    args = parser.parse_args()
    if not (args.checkout / "tests" / "test_evaluation").is_dir():
        parser.error(f"{args.checkout} has no tests/test_evaluation: give a PyKEEN source checkout")
    print("PyKEEN's evaluators:", run(args.checkout, swap=False, junit=args.junit_dir).splitlines()[-1])
    print("kgeval's evaluators:")
    print(run(args.checkout, swap=True, junit=args.junit_dir))


if __name__ == "__main__":
    main()
