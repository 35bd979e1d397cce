"""No process-wide state from one call's context: kgeval's caches outlive the call that fills them, so the first
evaluation of a process under ``torch.set_default_device("meta")`` (a stand-in for ``"cuda"`` on a CPU machine) or
``torch.set_default_dtype(torch.float64)`` must leave nothing behind that later calls, without them, read.

Each case runs in a fresh interpreter: the caches are empty at its start, so the call under the context is the one
that fills them (in this test process they were filled long before). What is checked after the context is left:

- no meta tensor is alive anywhere in the process (every tensor the garbage collector tracks -- the caches' among
  them -- once the evaluation's results are dropped);
- ``MetricAccumulator().compute()`` and merges with an empty accumulator work (before: ``NotImplementedError:
  Cannot copy out of meta tensor`` from ``accumulator._empty_sums``, filled with meta tensors);
- the sums a fresh accumulator starts from are CPU float64 / int64 tensors, whatever the first caller's defaults;
- a later plain evaluation reports exactly the metrics of a process that never set a default.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import gc, json, sys
import torch
from kgeval import RankBasedEvaluator
from kgeval.accumulator import MetricAccumulator
from kgeval.models import DistMult

context = sys.argv[1]
generator = torch.Generator().manual_seed(0)
columns = [torch.randint(0, n, (60,), generator=generator) for n in (30, 3, 30)]
triples = torch.stack(columns, dim=1)
model = DistMult(30, 3, dim=8, seed=1)


def evaluate():
    return RankBasedEvaluator().evaluate(model, triples, use_tqdm=False).to_flat_dict()


if "meta" in context:
    torch.set_default_device("meta")
if "float64" in context:
    torch.set_default_dtype(torch.float64)
if context != "plain":
    evaluate()  # the process's first evaluation, under the context: it fills the caches
torch.set_default_device(None)
torch.set_default_dtype(torch.float32)

problems = []
try:
    MetricAccumulator().compute()
    filled = MetricAccumulator(ks=(1, 3, 5, 10))
    filled.update(torch.tensor([1, 2]), torch.tensor([1, 3]), torch.tensor([5, 5]))
    filled.merge(MetricAccumulator()).compute()
    MetricAccumulator().merge(filled).compute()
except Exception as error:
    problems.append(f"{type(error).__name__}: {error}")
fresh = {name: [str(value.device), str(value.dtype)] for name, value in MetricAccumulator()._sums.items()}
metrics = {key: value for key, value in evaluate().items() if isinstance(value, float)}
gc.collect()
meta = [list(item.shape) for item in gc.get_objects() if isinstance(item, torch.Tensor) and item.is_meta]
print(json.dumps({"problems": problems, "meta": meta, "fresh": fresh, "metrics": metrics}))
"""


def run_fresh(context: str) -> dict[str, Any]:
    """SCRIPT's report from a fresh interpreter whose first evaluation ran under ``context``."""
    done = subprocess.run([sys.executable, "-c", SCRIPT, context], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def plain() -> dict[str, Any]:
    """The report of a process that never set a default device or dtype."""
    return run_fresh("plain")


def same_number(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("context", ["meta", "meta and float64"])
def test_the_first_evaluation_of_a_process_leaves_no_default_device_or_dtype_in_a_cache(
    plain: dict[str, Any], context: str
) -> None:
    """The process's first evaluation under a meta default device (and a float64 default dtype): afterwards no meta
    tensor is alive, empty accumulators compute and merge, their sums are the CPU float64 / int64 ones of a plain
    process, and a plain evaluation reports the plain process's metrics bit for bit."""
    report = run_fresh(context)
    assert report["problems"] == []
    assert report["meta"] == []
    assert report["fresh"] == plain["fresh"]
    assert {device for device, _dtype in plain["fresh"].values()} == {"cpu"}
    assert {dtype for _device, dtype in plain["fresh"].values()} == {"torch.float64", "torch.int64"}
    assert report["metrics"].keys() == plain["metrics"].keys()
    differing = [key for key, value in plain["metrics"].items() if not same_number(report["metrics"][key], value)]
    assert differing == []
