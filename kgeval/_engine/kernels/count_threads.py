"""How many threads count each GEMM block of the CPU fast path -- every thread PyTorch uses, or the calling thread
alone -- chosen by measuring, on this machine, in the loop itself (kgeval._engine.kernels.block_counting).

Block counting alternates a PyTorch GEMM (torch's OpenMP threads) with a numba count of the block (numba's pool,
TBB by default). A call counts ~0.1 ms of work, less than the time the OpenMP workers keep spinning after a GEMM,
so on a small machine the two pools compete for the cores: on the developers' 2-core AMD EPYC, two count threads
count no faster than one inside the loop, although they count 1.8x faster in isolation, and their hand-off slows
the next GEMM (benchmarks/count_threads.py: 1.09 s per FB15k-237 evaluation with every thread, 0.99 s with one).
On a machine with many cores the count's share of the work would grow as the GEMM's shrinks, and one thread would
not do. No constant decides: the first calls of the process are timed -- GEMM and count together, per score, in
runs of :data:`RUN` calls with each choice in turn (a run's first call untimed: the other choice's threads may
still be spinning), until each choice has :data:`RUNS` runs -- and the faster median is kept for the process
(measured again if PyTorch's thread count changes). The choice covers every numba call of block counting (with one
thread, no worker of numba's pool is woken at all: a pool woken once per batch, to resolve the bands, spun into
the following GEMMs). Which one runs never changes a count: the kernel's result does not depend on its threads.
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass, field

__all__ = ["RUN", "RUNS", "CountThreads", "count_threads"]

#: calls timed in a row with one choice (one choice's spinning threads would otherwise slow the other's next GEMM)
RUN = 8
#: runs of each choice timed before the faster is kept
RUNS = 4


@dataclass
class CountThreads:
    """The choice between every thread and one, for a given number of PyTorch threads: measured, then kept."""

    timings: dict[int, dict[int, list[float]]] = field(default_factory=dict)  #: torch threads -> choice -> s/score
    chosen: dict[int, int] = field(default_factory=dict)  #: torch threads -> the choice kept
    _calls: dict[int, int] = field(default_factory=dict)  #: torch threads -> calls timed so far
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next(self, available: int) -> int:
        """How many threads the next call counts with, when ``available`` may (PyTorch's, as numba follows them):
        the kept choice, or during the measurement the choice whose run it is."""
        if available <= 1:
            return 1
        with self._lock:
            if available in self.chosen:
                return self.chosen[available]
            calls = self._calls.get(available, 0)
            return available if (calls // RUN) % 2 == 0 else 1

    def record(self, available: int, threads: int, seconds: float, scores: int) -> None:
        """The time of one call (its GEMMs and its count) made with ``threads`` of ``available``, over ``scores``
        scores; once both choices have :data:`RUNS` runs, the faster median per score is kept."""
        if available <= 1 or scores <= 0:
            return
        with self._lock:
            if available in self.chosen:
                return
            call = self._calls.get(available, 0)
            self._calls[available] = call + 1
            per_choice = self.timings.setdefault(available, {available: [], 1: []})
            if call % RUN == 0:  # a run's first call: the other choice's threads may still be spinning
                return
            per_choice[threads].append(seconds / scores)
            if all(len(times) >= (RUN - 1) * RUNS for times in per_choice.values()):
                medians = {choice: statistics.median(times) for choice, times in per_choice.items()}
                self.chosen[available] = min(medians, key=lambda choice: (medians[choice], -choice))


#: the process's choice (a property of the machine and of PyTorch's thread count, not of an evaluator)
_CHOICE = CountThreads()


def count_threads() -> CountThreads:
    """The process's :class:`CountThreads`."""
    return _CHOICE
