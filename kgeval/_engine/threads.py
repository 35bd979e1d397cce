"""How many threads an evaluation runs PyTorch's (and so numba's) parallel regions on: the caller's
``torch.get_num_threads()``, or fewer when other processes keep the cores busy, restored when the evaluation ends.

Each of the engine's operations opens a parallel region whose threads meet at a barrier; when another process holds
a core, the barrier waits for a thread the scheduler has put aside, and an evaluation made of many small operations
pays that wait at every one. Measured on this project's 2-core machine (``benchmarks/shared_cores.py``, FB15k-237
and UMLS, DistMult d = 200), with other processes on the cores the default two threads took 3.9-15.7x the time of
one thread. So at the start of an evaluation kgeval counts the threads of other processes runnable on its cores
(``kgeval._machine.others_running``: a few reads of ``/proc/stat`` well under a millisecond apart, reused for a
second by the evaluator's :class:`LoadSample`) and runs on the cores they leave idle, at least one; with the cores
idle, or where the load cannot be read (not Linux), the caller's count is kept. The caller's count is never
raised, and it is restored afterwards, also when the evaluation raises. PyTorch keeps the count per calling
thread under OpenMP, so evaluations running in several Python threads each restore their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from kgeval import _machine

__all__ = ["LoadSample", "evaluation_threads", "threads_for_the_machine"]

#: seconds a sample of the machine's load is reused for (an evaluation called time step by time step samples once a
#: second, not once per call)
LOAD_SAMPLE_TTL_S = 1.0


@dataclass
class LoadSample:
    """The last sample of other processes' runnable threads (``kgeval._machine.others_running``) and when it was
    taken (``time.monotonic()``), kept by the evaluator (kgeval._engine.loop.EngineState) from call to call."""

    taken: float | None = None
    others: float | None = None

    def recent(self) -> float | None:
        """The sample, taken again when it is older than :data:`LOAD_SAMPLE_TTL_S`."""
        now = time.monotonic()
        if self.taken is None or now - self.taken > LOAD_SAMPLE_TTL_S:
            self.taken, self.others = now, _machine.others_running()
        return self.others


def evaluation_threads(requested: int, others: float | None, cores: int) -> int:
    """The threads an evaluation runs on: ``requested`` (the caller's count) where ``others`` (runnable threads of
    other processes on the ``cores`` usable here) is unknown or leaves them idle, else the cores left idle, at
    least 1 and never more than ``requested``."""
    idle = _machine.idle_cores(others, cores)
    return requested if idle is None else max(1, min(requested, idle))


@contextmanager
def threads_for_the_machine(
    others: Callable[[], float | None] | None = None, cores: Callable[[], int] | None = None
) -> Iterator[int]:
    """Run the block on :func:`evaluation_threads` threads (yielded), then give the caller its count back, also on
    an error. ``others`` and ``cores`` read the machine (default a fresh :meth:`LoadSample.recent` and
    ``kgeval._machine.usable_cores``; the engine passes its evaluator's sample, tests their own)."""
    before = torch.get_num_threads()
    threads = before
    if before > 1:
        others, cores = others or LoadSample().recent, cores or _machine.usable_cores
        threads = evaluation_threads(before, others(), cores())
    if threads != before:
        torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        if threads != before or torch.get_num_threads() != before:
            torch.set_num_threads(before)
