"""Session set-up: Triton kernels run on CPU tensors under Triton's interpreter where there is no GPU, and tests
marked ``cuda`` skip without one (``pytest -m cuda`` runs them on a GPU machine).

The suite runs on pytest-xdist workers (``-n auto --dist loadfile`` in pyproject.toml; ``-n0`` runs it in this
process): one worker per core this process may use, each test file on one worker (so a module-scoped fixture is
built once), and each worker's PyTorch on its share of the cores -- one thread per worker on a 2-core machine: a
parallel region waits at its barrier for every thread, and threads beyond the cores wait for each other's turn.
Tests that need more threads set them (and give the count back); process groups of several ranks start one at a
time (tests/support/distributed.py).
"""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton

from kgeval._machine import usable_cores  # after TRITON_INTERPRET is set

#: the number of xdist workers, in a worker (0 in a run without xdist)
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
if WORKERS > 1:
    torch.set_num_threads(max(1, usable_cores() // WORKERS))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker per core this process may run on (its affinity: taskset and cpusets count, which
    psutil's count, xdist's default, does not); PYTEST_XDIST_AUTO_NUM_WORKERS, where set, decides as in xdist."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return usable_cores()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
