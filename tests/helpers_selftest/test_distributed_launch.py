"""The process launcher of the distributed tests: a rank that hangs is killed at the deadline, and its threads'
stacks are printed first (where it hangs is what a timed-out CI run needs to show)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.support import distributed

pytestmark = pytest.mark.slow  # launches and kills rank processes


def _hanging_worker(rank: int) -> None:
    distributed._stacks_on_signal()
    time.sleep(120)


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="the stacks are asked for with SIGUSR1")
def test_a_hanging_rank_is_killed_after_printing_its_stacks(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="still alive"):
        distributed.launch(_hanging_worker, (), 1, tmp_path, deadline=2.0)
    assert time.monotonic() - started < 30
    assert "_hanging_worker" in capfd.readouterr().err  # the rank's stack, printed by faulthandler
