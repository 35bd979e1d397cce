"""The "numba" counting kernel in a process's life: after a fork, and from several threads at once.

Its counts are tested with the other kernels (tests/test_counting.py, tests/test_ranking.py); this is about
numba's threading layer, which with GNU OpenMP would kill every fork()ed child that counts.
"""

from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest
import torch

from kgeval._engine.kernels import count_tile


def _tile(seed: int) -> tuple[torch.Tensor, torch.Tensor, list[int], list[int]]:
    """A tied random tile, true scores and the brute-force counts above / below them."""
    rng = np.random.default_rng(seed)
    tile = rng.integers(-4, 5, size=(33, 1000)).astype(np.float32)
    true = tile[:, 7].copy()
    above = [int(np.sum(row > t)) for row, t in zip(tile, true, strict=True)]
    below = [int(np.sum(row < t)) for row, t in zip(tile, true, strict=True)]
    return torch.from_numpy(tile), torch.from_numpy(true), above, below


def _count_in_child(queue) -> None:
    tile, true, _above, _below = _tile(1)
    greater, less, _nan = count_tile(tile, true, "numba")
    queue.put((greater.tolist(), less.tolist()))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork() here")
def test_a_forked_child_can_count_after_its_parent() -> None:
    tile, true, above, below = _tile(1)
    greater, less, _nan = count_tile(tile, true, "numba")  # the parent starts numba's threads
    assert (greater.tolist(), less.tolist()) == (above, below)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_count_in_child, args=(queue,))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == 0
    assert queue.get(timeout=5) == (above, below)


def test_threads_can_count_at_once() -> None:
    expected, got = {}, {}

    def work(seed: int) -> None:
        tile, true, above, below = _tile(seed)
        expected[seed] = (above, below)
        for _ in range(20):
            greater, less, _nan = count_tile(tile, true, "numba")
            got.setdefault(seed, []).append((greater.tolist(), less.tolist()))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(got) == [0, 1, 2, 3]
    assert all(result == expected[seed] for seed, results in got.items() for result in results)


def test_numba_runs_the_threading_layer_kgeval_asked_for() -> None:
    """In a fresh process (the layer is chosen once per process): with the tbb package installed, numba must run
    TBB -- the wheel puts libtbb outside the loader's path in a virtual environment, so kgeval preloads it."""
    import importlib.metadata
    import subprocess
    import sys

    try:
        importlib.metadata.distribution("tbb")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the tbb package is not installed here (a dependency on x86-64 only)")
    code = (
        "import numba, torch\n"
        "from kgeval._engine.kernels import count_tile\n"
        "count_tile(torch.zeros(3, 5), torch.zeros(3), 'numba')\n"
        "print(numba.config.THREADING_LAYER, numba.threading_layer())\n"
    )
    environment = {key: value for key, value in __import__("os").environ.items() if key != "NUMBA_THREADING_LAYER"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=environment)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["forksafe", "tbb"]
