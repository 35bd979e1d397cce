"""An evaluation on cores shared with other processes: default threads against one thread, idle and loaded.

    python benchmarks/shared_cores.py [--repeats 3] [--fb-triples 2000] [--loads idle spinner torch]

The script starts the competing processes itself, each bounded in time (they exit by themselves after
``--load-seconds`` and are stopped when the script is done with them): "spinner", one pure-Python busy loop; "torch",
two processes of 2 torch threads each multiplying 512 x 512 matrices. Under each load it times (median of
``--repeats`` calls after a first one, the evaluator reused) a UMLS validation evaluation and the first
``--fb-triples`` FB15k-237 test triples (skipped with a message when /work/shared/data or kgeval's datasets lack
it), both filtered by train + valid + test, both sides, with a seeded DistMult (d = 200), once with the process's
default torch threads and once with ``torch.set_num_threads(1)``; PyKEEN's evaluator of a seeded PyKEEN DistMult on
the same UMLS triples beside them when PyKEEN is installed. Timings on a machine others use too are noisy: quote
them with the load average printed above the table.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import format_table, load_average, machine, median_seconds

from kgeval import RankBasedEvaluator
from kgeval.datasets import load_dataset
from kgeval.models import DistMult

#: the competing processes, as Python programs that stop by themselves after {seconds} seconds
LOADS = {
    "spinner": ["import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"],
    "torch": ["import time, torch\ntorch.set_num_threads(2)\na = torch.randn(512, 512)\n"
              "end = time.time() + {seconds}\nwhile time.time() < end:\n    a @ a\n"] * 2,
}  # fmt: skip


@contextmanager
def competing(load: str, seconds: float) -> Iterator[None]:
    """The processes of ``load`` ("idle": none) running while the block runs; each exits by itself after ``seconds``
    and is terminated when the block ends."""
    programs = LOADS.get(load, [])
    processes = [subprocess.Popen([sys.executable, "-c", program.format(seconds=seconds)]) for program in programs]
    try:
        time.sleep(1.0 if processes else 0.0)  # let them start (torch's import) before timing
        yield
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=10)


def kgeval_case(name: str, triples_of: Callable[[object], torch.Tensor]) -> Callable[[], object] | None:
    """An evaluation of ``name``'s triples (``triples_of(dataset)``), the evaluator reused; None without the data."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = load_dataset(name)
    except Exception as error:  # a dataset not shipped nor found under the data folder
        print(f"skipping {name}: {error}")
        return None
    model = DistMult(data.num_entities, data.num_relations, dim=200, seed=0)
    known, triples, evaluator = [data.train, data.valid, data.test], triples_of(data), RankBasedEvaluator()
    return lambda: evaluator.evaluate(model, triples, additional_filter_triples=known, use_tqdm=False)


def pykeen_case() -> Callable[[], object] | None:
    """PyKEEN's evaluator on UMLS's validation triples (a seeded PyKEEN DistMult, d = 200); None without PyKEEN."""
    try:
        from pykeen import models
        from pykeen.evaluation import RankBasedEvaluator as PyKEENEvaluator
        from pykeen.triples import CoreTriplesFactory
    except ImportError:
        print("PyKEEN is not installed: no PyKEEN row")
        return None
    data = load_dataset("umls")
    factory = CoreTriplesFactory.create(data.train, num_entities=data.num_entities, num_relations=data.num_relations)
    model = models.DistMult(triples_factory=factory, embedding_dim=200, random_seed=0)
    evaluator, known = PyKEENEvaluator(filtered=True), [data.train, data.valid, data.test]
    return lambda: evaluator.evaluate(model, data.valid, additional_filter_triples=known, use_tqdm=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fb-triples", type=int, default=2000)
    parser.add_argument("--loads", nargs="+", default=["idle", "spinner", "torch"], choices=["idle", *LOADS])
    parser.add_argument("--load-seconds", type=float, default=300.0, help="the competing processes' time limit")
    args = parser.parse_args()
    print(machine())
    print(f"default torch threads: {torch.get_num_threads()}")
    cases = {
        "UMLS valid": kgeval_case("umls", lambda data: data.valid),
        f"FB15k-237 {args.fb_triples} test": kgeval_case("FB15k-237", lambda data: data.test[: args.fb_triples]),
        "PyKEEN UMLS valid": pykeen_case(),
    }
    rows = []
    for load in args.loads:
        with competing(load, args.load_seconds):
            print(f"{load}: {load_average()}")
            for name, run in cases.items():
                if run is None:
                    continue
                default = median_seconds(run, args.repeats, None)
                one = median_seconds(run, args.repeats, 1)
                rows.append([load, name, f"{default * 1e3:.0f} ms", f"{one * 1e3:.0f} ms", f"{default / one:.2f}x"])
    print(f"median of {args.repeats} calls after a first; filtered by train + valid + test; DistMult d=200")
    print(format_table(rows, ["load", "evaluation", "default threads", "1 thread", "default / 1 thread"]))


if __name__ == "__main__":
    main()
