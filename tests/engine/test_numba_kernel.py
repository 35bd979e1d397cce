"""The "numba" counting kernel in a process's life: after a fork, and from several threads at once; and its machine
code: the counting loops compare at the ISA's full width.

Its counts are tested with the other kernels (tests/test_counting.py, tests/test_ranking.py); this is about
numba's threading layer, which with GNU OpenMP would kill every fork()ed child that counts, and about the
compiled loops (read with numba's ``inspect_asm`` on a fresh, uncached compilation).
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import re
import subprocess
import sys
import threading
from pathlib import Path

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


@pytest.mark.slow
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


X86 = platform.machine().lower() in ("x86_64", "amd64")
#: machine code to read: numba compiling, with its optimiser (NUMBA_DISABLE_JIT=1 or NUMBA_OPT=0 leave none, or none
#: vectorised)
READABLE = X86 and os.environ.get("NUMBA_DISABLE_JIT", "0") == "0" and os.environ.get("NUMBA_OPT", "3") != "0"
#: instructions that widen a 32-bit compare's lanes to 64 bits: a mask register back to quadwords (AVX-512), a sign /
#: zero extension to quadwords (AVX2, SSE4), and quadword adds / subtracts of those lanes
WIDENING = re.compile(r"^\s*v?(pmovm2q|pmov[sz]x[bwd]q|paddq|psubq)\b", re.MULTILINE)
#: a packed compare of floats: the loop is vectorised at all
PACKED_COMPARE = re.compile(r"^\s*v?cmp\w*p[sd]\b", re.MULTILINE)


def _machine_code(name: str, dtype: type, *arguments: float) -> str:
    """The assembly of the counting loop ``name`` of kgeval._engine.kernels.numba_loop, compiled afresh (not from
    numba's cache, whose code cannot be read) for a 1-d ``dtype`` array."""
    numba = pytest.importorskip("numba")
    from kgeval._engine.kernels import numba_loop

    compiled = numba.njit(getattr(numba_loop, name).py_func)
    compiled(np.zeros(40, dtype=dtype), *(dtype(a) for a in arguments))
    (assembly,) = compiled.inspect_asm().values()
    return assembly


@pytest.mark.skipif(not READABLE, reason="reads x86 machine code numba compiled with its optimiser")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("loop", "arguments"), [("compare_row", (0.5,)), ("outside_band", (-0.5, 0.5))])
def test_the_counting_loops_compare_at_full_width(loop: str, arguments: tuple, dtype: type) -> None:
    """A sum written ``total += np.int32(score > t)`` is a 64-bit add to numba, and the compiler widens each
    compare's lanes to 64 bits to feed it: half the scores per instruction (0.22 against 0.146 ns per score on a
    Cascade Lake). Whatever this machine's ISA, the loops hold no widening instruction and do compare packed."""
    assembly = _machine_code(loop, dtype, *arguments)
    assert PACKED_COMPARE.search(assembly), "the loop is not vectorised"
    assert not WIDENING.findall(assembly), f"{loop} widens its lanes to 64 bits: {WIDENING.findall(assembly)}"


@pytest.mark.skipif(not READABLE, reason="reads x86 machine code numba compiled with its optimiser")
def test_the_check_sees_the_widening_it_looks_for() -> None:
    """The control: the old way of summing does widen, on AVX-512 and AVX2 alike."""
    numba = pytest.importorskip("numba")

    def widening(scores, high):  # pragma: no cover - runs compiled
        above = np.int32(0)
        for j in range(scores.shape[0]):
            above += np.int32(scores[j] > high)
        return above

    compiled = numba.njit(widening)
    compiled(np.zeros(40, dtype=np.float32), np.float32(0.5))
    (assembly,) = compiled.inspect_asm().values()
    assert WIDENING.search(assembly)


@pytest.mark.slow
@pytest.mark.skipif(not READABLE, reason="reads x86 machine code numba compiled with its optimiser")
def test_the_avx2_emulation_holds_numba_to_avx2() -> None:
    """benchmarks/as_avx2.py: with NUMBA_CPU_NAME=haswell alone numba still emitted AVX-512 (zmm) code on an AVX-512
    host; with its features held too, the counting loop uses no zmm register (on any host)."""
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "as_avx2.py"
    probe = (
        "import numba, numpy as np\n"
        "from kgeval._engine.kernels import numba_loop\n"
        "f = numba.njit(numba_loop.outside_band.py_func)\n"
        "f(np.zeros(40, np.float32), np.float32(0), np.float32(1))\n"
        "print('zmm' in list(f.inspect_asm().values())[0], numba.config.CPU_NAME)\n"
    )
    environment = {name: value for name, value in os.environ.items() if not name.startswith("NUMBA_CPU_")}
    done = subprocess.run([sys.executable, str(script), sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, env=environment)  # fmt: skip
    assert done.stdout.split() == ["False", "haswell"]
